//! Ad-hoc retrieval collections: documents, queries and their judgements.
//!
//! Documents are `id<TAB>text` lines or JSONL (`{"id": .., "text": ..}`);
//! queries are `id<TAB>text` lines or TREC topics (`<top> <num> <title>
//! <desc> ...`, the query text being title and description).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::parallel::Splits;
use super::workspace::Workspace;
use crate::eval::Qrels;
use crate::text::io::read_lines;
use crate::{Error, Result};

/// Texts with unique ids, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collection {
    /// Text ids.
    pub ids: Vec<String>,
    /// Texts, `texts[i]` belonging to `ids[i]`.
    pub texts: Vec<String>,
}

impl Collection {
    /// Number of texts.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are no texts.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Map from id to position.
    pub fn index(&self) -> HashMap<&str, usize> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect()
    }

    /// Reads documents: JSONL when the name ends in `.jsonl`/`.json` or the
    /// first non-blank character is `{`, else `id<TAB>text`.
    pub fn read_docs(path: &Path) -> Result<Collection> {
        let lines = read_lines(path)?;
        let jsonl = path
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "json")
            || first_non_blank(&lines).is_some_and(|c| c == '{');
        if jsonl {
            read_jsonl(path, &lines)
        } else {
            read_tsv(path, &lines)
        }
    }

    /// Reads queries: TREC topics when the first non-blank text is `<top>`,
    /// else `id<TAB>text`.
    pub fn read_queries(path: &Path) -> Result<Collection> {
        let lines = read_lines(path)?;
        let trec = lines
            .iter()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_start().to_ascii_lowercase().starts_with("<top"));
        if trec {
            read_trec_topics(path, &lines)
        } else {
            read_tsv(path, &lines)
        }
    }
}

fn first_non_blank(lines: &[String]) -> Option<char> {
    lines.iter().find_map(|l| l.trim_start().chars().next())
}

/// Adds `(id, text)` seen at `line`, failing on an id seen before.
struct Builder<'a> {
    path: &'a Path,
    seen: HashMap<String, usize>,
    out: Collection,
}

impl<'a> Builder<'a> {
    fn new(path: &'a Path) -> Self {
        Builder {
            path,
            seen: HashMap::new(),
            out: Collection::default(),
        }
    }
    fn push(&mut self, line: usize, id: &str, text: String) -> Result<()> {
        let id = id.trim();
        if id.is_empty() {
            return Err(Error::parse(self.path, line, "empty id"));
        }
        if let Some(first) = self.seen.insert(id.to_string(), line) {
            return Err(Error::parse(
                self.path,
                line,
                format!("duplicate id {id:?} (first at line {first})"),
            ));
        }
        self.out.ids.push(id.to_string());
        self.out.texts.push(text);
        Ok(())
    }
}

fn read_tsv(path: &Path, lines: &[String]) -> Result<Collection> {
    let mut b = Builder::new(path);
    for (n, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (id, text) = line
            .split_once('\t')
            .ok_or_else(|| Error::parse(path, n + 1, "no tab: want id<TAB>text"))?;
        // a third column (e.g. a title) is joined to the text
        b.push(n + 1, id, text.replace('\t', " "))?;
    }
    Ok(b.out)
}

fn read_jsonl(path: &Path, lines: &[String]) -> Result<Collection> {
    let mut b = Builder::new(path);
    for (n, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::parse(path, n + 1, format!("bad JSON: {e}")))?;
        let id = match v.get("id").or_else(|| v.get("_id")) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(x)) => x.to_string(),
            _ => {
                return Err(Error::parse(
                    path,
                    n + 1,
                    "want an object with a string or number \"id\"",
                ))
            }
        };
        let field = |k: &str| v.get(k).and_then(|t| t.as_str());
        let text = match (field("title"), field("text").or(field("contents"))) {
            (Some(t), Some(x)) if !t.is_empty() => format!("{t} {x}"),
            (_, Some(x)) => x.to_string(),
            (Some(t), None) => t.to_string(),
            (None, None) => return Err(Error::parse(path, n + 1, "want a string \"text\" field")),
        };
        b.push(n + 1, &id, text)?;
    }
    Ok(b.out)
}

/// TREC topics: `<top>` ... `</top>` blocks with `<num>`, `<title>`,
/// `<desc>` (and `<narr>`, ignored) fields, closing tags optional.
fn read_trec_topics(path: &Path, lines: &[String]) -> Result<Collection> {
    let mut b = Builder::new(path);
    // (field, text, line where the field started)
    let mut cur: Option<(usize, Vec<(String, String)>)> = None;
    let mut field: Option<String> = None;
    for (n, line) in lines.iter().enumerate() {
        let mut rest = line.as_str();
        loop {
            // find the next tag on this line
            let Some(open) = rest.find('<') else {
                append(&mut cur, &field, rest);
                break;
            };
            let Some(close) = rest[open..].find('>') else {
                append(&mut cur, &field, rest);
                break;
            };
            append(&mut cur, &field, &rest[..open]);
            let tag = rest[open + 1..open + close].trim().to_ascii_lowercase();
            rest = &rest[open + close + 1..];
            match tag.as_str() {
                "top" => {
                    if cur.is_some() {
                        return Err(Error::parse(path, n + 1, "<top> inside <top>"));
                    }
                    cur = Some((n + 1, Vec::new()));
                    field = None;
                }
                "/top" => {
                    let Some((start, fields)) = cur.take() else {
                        return Err(Error::parse(path, n + 1, "</top> without <top>"));
                    };
                    finish_topic(path, start, fields, &mut b)?;
                    field = None;
                }
                t if t.starts_with('/') => field = None,
                t => {
                    if cur.is_none() {
                        return Err(Error::parse(path, n + 1, format!("<{t}> outside <top>")));
                    }
                    field = Some(t.to_string());
                    if let Some((_, f)) = cur.as_mut() {
                        f.push((t.to_string(), String::new()));
                    }
                }
            }
        }
        append(&mut cur, &field, " ");
    }
    if let Some((start, _)) = cur {
        return Err(Error::parse(path, start, "<top> never closed"));
    }
    Ok(b.out)
}

fn append(cur: &mut Option<(usize, Vec<(String, String)>)>, field: &Option<String>, text: &str) {
    if let (Some((_, f)), Some(_)) = (cur.as_mut(), field) {
        if let Some(last) = f.last_mut() {
            last.1.push_str(text);
        }
    }
}

fn finish_topic(
    path: &Path,
    start: usize,
    fields: Vec<(String, String)>,
    b: &mut Builder,
) -> Result<()> {
    let get = |name: &str| {
        fields
            .iter()
            .find(|f| f.0 == name)
            .map(|f| f.1.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let num = get("num").ok_or_else(|| Error::parse(path, start, "topic without <num>"))?;
    let num = num
        .strip_prefix("Number:")
        .unwrap_or(&num)
        .trim()
        .to_string();
    let title = get("title").unwrap_or_default();
    let title = title.strip_prefix("Topic:").unwrap_or(&title).trim();
    let desc = get("desc").unwrap_or_default();
    let desc = desc.strip_prefix("Description:").unwrap_or(&desc).trim();
    let text = match (title.is_empty(), desc.is_empty()) {
        (false, false) => format!("{title} {desc}"),
        (false, true) => title.to_string(),
        (true, _) => desc.to_string(),
    };
    b.push(start, &num, text)
}

/// An ad-hoc CLIR task: source-language queries against target-language documents.
#[derive(Debug, Clone, Default)]
pub struct AdhocTask {
    /// Target-language documents.
    pub docs: Collection,
    /// Source-language queries.
    pub queries: Collection,
    /// The queries in the target language, same ids (monolingual ceiling).
    pub target_queries: Option<Collection>,
    /// Relevance judgements.
    pub qrels: Qrels,
    /// Judgements naming documents not in `docs` (kept, but they can never be retrieved).
    pub unknown_doc_judgements: usize,
    /// Whether the task was derived from the parallel data (no `[adhoc]`).
    pub derived: bool,
    /// Display labels of the documents, in the collection's own terms (a
    /// verse reference for `train:12`), when the workspace has them
    /// (`[parallel] labels`, derived task only).
    pub doc_labels: Option<Vec<String>>,
    /// Display labels of the queries, likewise.
    pub query_labels: Option<Vec<String>>,
    /// Each document's aligned source-language text, where the collection
    /// has one (the derived task: the other side of the pair).
    pub doc_sources: Option<Vec<String>>,
}

impl AdhocTask {
    /// Checks qrels against the collections: a judged query missing from
    /// `queries` is an error; judged documents missing from `docs` are counted.
    fn check(&mut self, qrels_path: Option<&Path>) -> Result<()> {
        let qids: HashSet<&str> = self.queries.ids.iter().map(|s| s.as_str()).collect();
        let dids: HashSet<&str> = self.docs.ids.iter().map(|s| s.as_str()).collect();
        let mut unknown = 0;
        for (q, docs) in &self.qrels.judgements {
            if !qids.contains(q.as_str()) {
                let msg = format!("qrels name query {q:?}, which is not among the queries");
                return Err(match qrels_path {
                    Some(p) => Error::file(p, msg),
                    None => Error::invalid(msg),
                });
            }
            unknown += docs.keys().filter(|d| !dids.contains(d.as_str())).count();
        }
        self.unknown_doc_judgements = unknown;
        if let Some(tq) = &self.target_queries {
            if let Some(id) = tq.ids.iter().find(|i| !qids.contains(i.as_str())) {
                return Err(Error::invalid(format!(
                    "target query {id:?} is not among the source queries"
                )));
            }
        }
        Ok(())
    }

    /// The task of a workspace: its `[adhoc]` files, or when there are none,
    /// the task derived from the parallel data (see [`derived_task`]).
    pub fn load(ws: &Workspace) -> Result<AdhocTask> {
        match &ws.adhoc {
            Some(a) => {
                AdhocTask::from_files(&a.docs, &a.queries, a.target_queries.as_deref(), &a.qrels)
            }
            None => {
                let splits = Splits::read(ws)?;
                let pairs = splits.iter().iter().map(|(_, s)| s.len()).sum();
                let labels = ws.read_labels(pairs)?;
                Ok(derived_task_labelled(&splits, labels.as_deref()))
            }
        }
    }

    /// A task from its files (documents, source-language queries, optional
    /// target-language queries, qrels), checked against each other: a
    /// workspace's `[adhoc]` section, or `rosetta eval --adhoc`.
    pub fn from_files(
        docs: &Path,
        queries: &Path,
        target_queries: Option<&Path>,
        qrels: &Path,
    ) -> Result<AdhocTask> {
        let mut t = AdhocTask {
            docs: Collection::read_docs(docs)?,
            queries: Collection::read_queries(queries)?,
            target_queries: target_queries.map(Collection::read_queries).transpose()?,
            qrels: Qrels::read(qrels)?,
            unknown_doc_judgements: 0,
            derived: false,
            doc_labels: None,
            query_labels: None,
            doc_sources: None,
        };
        // a figure over nothing is an error, never a score of 0
        if t.docs.is_empty() {
            return Err(Error::file(
                docs,
                "no documents: nothing to retrieve, no figure to give",
            ));
        }
        if t.queries.is_empty() {
            return Err(Error::file(queries, "no queries: no figure to give"));
        }
        if t.qrels.is_empty() {
            return Err(Error::file(
                qrels,
                "no judgements: a figure over no judged query is meaningless",
            ));
        }
        t.check(Some(qrels))?;
        Ok(t)
    }
}

/// The task derived from parallel data: documents are the target side of
/// every pair of every split (ids `train:12`, `valid:3`, `test:7`, the pair's
/// 0-based position in its split), queries the source side of the test
/// split (ids `test:7`), each with its own translation as the one relevant
/// document. Pairs with an empty side are left out. Each document keeps its
/// pair's source side as its aligned text ([`AdhocTask::doc_sources`]).
pub fn derived_task(splits: &Splits) -> AdhocTask {
    derived_task_labelled(splits, None)
}

/// [`derived_task`], documents and queries labelled by `labels` (one per
/// pair of the whole corpus, indexed by [`super::ParallelText::origin`], as
/// [`Workspace::read_labels`] reads them for a fraction split).
pub fn derived_task_labelled(splits: &Splits, labels: Option<&[String]>) -> AdhocTask {
    let mut docs = Collection::default();
    let mut queries = Collection::default();
    let mut target_queries = Collection::default();
    let mut sources = Vec::new();
    let (mut doc_labels, mut query_labels) = (Vec::new(), Vec::new());
    for (name, s) in splits.iter() {
        for i in s.usable() {
            let id = format!("{name}:{i}");
            let label = labels.and_then(|l| l.get(s.origin[i]));
            if let Some(l) = label {
                doc_labels.push(l.clone());
            }
            docs.ids.push(id.clone());
            docs.texts.push(s.target[i].clone());
            sources.push(s.source[i].clone());
            if name == "test" {
                if let Some(l) = label {
                    query_labels.push(l.clone());
                }
                queries.ids.push(id.clone());
                queries.texts.push(s.source[i].clone());
                target_queries.ids.push(id);
                target_queries.texts.push(s.target[i].clone());
            }
        }
    }
    let qrels = Qrels::from_pairs(queries.ids.iter().map(|q| (q.as_str(), q.as_str())));
    // labels only when every document has one (a label file of the right
    // length always covers every pair)
    let complete = labels.is_some() && doc_labels.len() == docs.len();
    AdhocTask {
        docs,
        queries,
        target_queries: Some(target_queries),
        qrels,
        unknown_doc_judgements: 0,
        derived: true,
        doc_labels: complete.then_some(doc_labels),
        query_labels: complete.then_some(query_labels),
        doc_sources: Some(sources),
    }
}

impl Workspace {
    /// The workspace's ad-hoc task (declared or derived); see [`AdhocTask::load`].
    pub fn adhoc(&self) -> Result<AdhocTask> {
        AdhocTask::load(self)
    }

    /// The parallel data, split into train / valid / test.
    pub fn splits(&self) -> Result<Splits> {
        Splits::read(self)
    }

    /// The workspace's dictionary, if it names one, source → target: read
    /// swapped when `[dictionary] reverse = true`.
    pub fn read_dictionary(&self) -> Result<Option<super::Dictionary>> {
        let d = self
            .dictionary
            .as_deref()
            .map(super::Dictionary::read)
            .transpose()?;
        Ok(if self.dictionary_reverse {
            d.map(|d| d.reversed())
        } else {
            d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trec_topics() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.txt");
        std::fs::write(
            &p,
            "<top>\n<num> Number: 401\n<title> foreign minorities\n<desc> Description:\nWhat is known?\n<narr> Narrative: no\n</top>\n\n<top><num>402</num><title>genetics</title></top>\n",
        )
        .unwrap();
        let c = Collection::read_queries(&p).unwrap();
        assert_eq!(c.ids, vec!["401", "402"]);
        assert_eq!(
            c.texts,
            vec!["foreign minorities What is known?", "genetics"]
        );
    }

    #[test]
    fn jsonl_docs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        std::fs::write(
            &p,
            "{\"id\": \"a\", \"text\": \"x y\"}\n{\"id\": 7, \"title\": \"T\", \"text\": \"z\"}\n",
        )
        .unwrap();
        let c = Collection::read_docs(&p).unwrap();
        assert_eq!(c.ids, vec!["a", "7"]);
        assert_eq!(c.texts, vec!["x y", "T z"]);
        std::fs::write(
            &p,
            "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"a\", \"text\": \"y\"}\n",
        )
        .unwrap();
        let e = Collection::read_docs(&p).unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("line 1"), "{e}");
    }
}
