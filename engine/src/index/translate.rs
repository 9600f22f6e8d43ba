//! Query translation for BM25: dictionary-based structured queries (Pirkola
//! 1998) and machine translation with Apertium.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::Query;
use crate::text::Analyzer;
use crate::{Error, Result};

/// A query translated through a bilingual dictionary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DictTranslation {
    /// The structured query: one synonym set per distinct translatable source
    /// term, weighted by how often the term occurs.
    pub query: Query,
    /// Source tokens that had a translation.
    pub translated: usize,
    /// Source tokens without one (left out of the query).
    pub dropped: usize,
    /// The distinct source terms left out, in order of first occurrence.
    pub dropped_terms: Vec<String>,
}

/// Translates analysed source tokens through `dict` (analysed source term →
/// analysed target terms) into a Pirkola structured query: every translation
/// of a source term joins one synonym set (tf summed, df of the union, all
/// translations weighted alike); a repeated source term adds weight to its
/// set. Terms the dictionary lacks (or maps to nothing) are dropped and
/// counted.
pub fn translate_dict<S: AsRef<str>>(
    tokens: &[S],
    dict: &HashMap<String, Vec<String>>,
) -> DictTranslation {
    translate_dict_with(tokens, dict, false)
}

/// [`translate_dict`], optionally keeping untranslatable terms as they are
/// (still counted as dropped): names, numbers and cognates then match
/// documents that spell them the same way, as is common practice with
/// Pirkola queries.
pub fn translate_dict_with<S: AsRef<str>>(
    tokens: &[S],
    dict: &HashMap<String, Vec<String>>,
    keep_untranslated: bool,
) -> DictTranslation {
    let mut out = DictTranslation::default();
    for t in tokens {
        let t = t.as_ref();
        match dict.get(t).filter(|tr| !tr.is_empty()) {
            Some(tr) => {
                out.query.add(tr.clone(), 1.0);
                out.translated += 1;
            }
            None => {
                out.dropped += 1;
                if keep_untranslated {
                    out.query.add(vec![t.to_string()], 1.0);
                }
                if !out.dropped_terms.iter().any(|d| d == t) {
                    out.dropped_terms.push(t.to_string());
                }
            }
        }
    }
    out
}

/// A word-level dictionary (source term → target word terms, as
/// [`crate::corpus::Dictionary::analysed_words`] gives it) with each entry's
/// translations cut into the target analyser's units: one synonym set per
/// source word holding every unit of every translation, first-seen order, no
/// repeats. The dictionary itself for `units = "words"`.
pub fn unit_dictionary(
    dict: HashMap<String, Vec<String>>,
    tgt: &Analyzer,
) -> HashMap<String, Vec<String>> {
    if !tgt.units().subword() {
        return dict;
    }
    dict.into_iter()
        .map(|(s, ts)| {
            let mut units: Vec<String> = Vec::new();
            for u in tgt.segment(ts) {
                if !units.contains(&u) {
                    units.push(u);
                }
            }
            (s, units)
        })
        .collect()
}

/// [`translate_dict_with`] for word-level source tokens over a
/// [`unit_dictionary`]: the same for `units = "words"`; with subword units an
/// untranslated word that is kept is cut into the target's units (each its
/// own set), so that a name spelt alike in both languages still matches.
pub fn translate_dict_units<S: AsRef<str>>(
    tokens: &[S],
    dict: &HashMap<String, Vec<String>>,
    keep_untranslated: bool,
    tgt: &Analyzer,
) -> DictTranslation {
    if !keep_untranslated || !tgt.units().subword() {
        return translate_dict_with(tokens, dict, keep_untranslated);
    }
    let mut out = translate_dict_with(tokens, dict, false);
    for t in tokens {
        let t = t.as_ref();
        if dict.get(t).is_none_or(|tr| tr.is_empty()) {
            for u in tgt.segment(vec![t.to_string()]) {
                out.query.add(vec![u], 1.0);
            }
        }
    }
    out
}

/// Apertium's three-letter code of an ISO 639-1 language (`en` → `eng`);
/// codes of three letters or more are passed through.
pub fn apertium_code(lang: &str) -> String {
    let l = lang.trim().to_lowercase();
    let code = match l.as_str() {
        "en" => "eng",
        "es" => "spa",
        "hi" => "hin",
        "ur" => "urd",
        "de" => "deu",
        "fr" => "fra",
        "it" => "ita",
        "pt" => "por",
        "ca" => "cat",
        "gl" => "glg",
        "nl" => "nld",
        "ro" => "ron",
        "eo" => "epo",
        "oc" => "oci",
        "eu" => "eus",
        "ar" => "ara",
        _ => return l,
    };
    code.to_string()
}

/// The Apertium pairs installed (`apertium -l`), or an error when Apertium
/// is not installed.
pub fn apertium_pairs() -> Result<Vec<String>> {
    let out = Command::new("apertium").arg("-l").output().map_err(|e| {
        Error::invalid(format!(
            "cannot run apertium ({e}); install it (e.g. `apt-get install apertium apertium-eng-spa`) for --translate mt"
        ))
    })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Translates raw texts from `src` to `tgt` (ISO 639-1 or Apertium codes)
/// with one `apertium -u` run over all of them, one output per input. Line
/// breaks inside a text become spaces. If Apertium's output does not keep one
/// line per input, each text is translated on its own instead.
pub fn apertium_translate<S: AsRef<str>>(texts: &[S], src: &str, tgt: &str) -> Result<Vec<String>> {
    let pair = format!("{}-{}", apertium_code(src), apertium_code(tgt));
    let pairs = apertium_pairs()?;
    if !pairs.contains(&pair) {
        return Err(Error::invalid(format!(
            "apertium has no {pair} pair (installed: {}); install apertium-{pair} or use --translate dict",
            if pairs.is_empty() {
                "none".to_string()
            } else {
                pairs.join(", ")
            }
        )));
    }
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let lines: Vec<String> = texts
        .iter()
        .map(|t| t.as_ref().replace(['\n', '\r'], " "))
        .collect();
    let mut input = lines.join("\n");
    input.push('\n');
    let out = run_apertium(&pair, &input)?;
    let got: Vec<&str> = out.lines().collect();
    if got.len() == lines.len() {
        return Ok(got.into_iter().map(|s| s.trim().to_string()).collect());
    }
    // line alignment lost: one text at a time
    lines
        .iter()
        .map(|l| {
            Ok(run_apertium(&pair, &format!("{l}\n"))?
                .trim()
                .replace('\n', " "))
        })
        .collect()
}

fn run_apertium(pair: &str, input: &str) -> Result<String> {
    let mut child = Command::new("apertium")
        .args(["-u", pair])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::invalid(format!("cannot run apertium: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let data = input.as_bytes().to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child
        .wait_with_output()
        .map_err(|e| Error::invalid(format!("apertium failed: {e}")))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(Error::invalid(format!(
            "apertium -u {pair} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|e| Error::invalid(format!("apertium wrote invalid UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_queries_pool_translations() {
        let mut dict = HashMap::new();
        dict.insert(
            "dog".to_string(),
            vec!["perro".to_string(), "can".to_string()],
        );
        dict.insert("run".to_string(), vec!["corr".to_string()]);
        let t = translate_dict(&["dog", "the", "run", "dog", "xyz"], &dict);
        assert_eq!(t.translated, 3);
        assert_eq!(t.dropped, 2);
        assert_eq!(t.dropped_terms, vec!["the", "xyz"]);
        assert_eq!(t.query.clauses.len(), 2);
        assert_eq!(t.query.clauses[0].terms, vec!["can", "perro"]);
        assert_eq!(t.query.clauses[0].weight, 2.0);
        let k = translate_dict_with(&["dog", "xyz"], &dict, true);
        assert_eq!(k.dropped, 1);
        assert_eq!(k.query.clauses[1].terms, vec!["xyz"]);
    }
}
