//! The default workspace: the Bible in English (KJV) and Spanish (Reina-Valera
//! 1909), verse-aligned, exported from the SWORD modules with `diatheke`.
//!
//! Both modules use the KJV versification, so a verse key names the same
//! verse in both. Each module is exported in one `diatheke` call for the
//! whole Bible (seconds; per-verse calls would take minutes). The plain
//! output is `Book C:V: text` per verse; lines that are not verses (section
//! and psalm headings, which diatheke also repeats before later verses) are
//! dropped, and leftover markup is stripped: Strong's tags such as `<G5547>`
//! that the RV1909 module prints even with the option filter off, USFM
//! markers such as `\nd`, and the KJV's paragraph sign `¶`. The Spanish
//! module is read in its own markup (`-f internal`) instead: its words and
//! the translators' additions (`<transChange>`) often meet with no space
//! between the elements, which `-f plain` fuses (`Aquélera`, John 1:9);
//! [`unmark`] keeps them apart.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Result};

/// Debian packages that provide the modules, `diatheke` and the dictionary.
pub const APT_PACKAGES: [&str; 5] = [
    "sword-text-kjv",
    "sword-text-sparv",
    "diatheke",
    "dict-freedict-eng-spa",
    "apertium-eng-spa",
];

/// Module names tried for each side, in order of preference.
const EN_MODULES: [&str; 3] = ["engKJV2006eb", "KJV", "engWEB2015eb"];
const ES_MODULES: [&str; 3] = ["spaRV1909eb", "SpaRV", "SpaRV1909"];

/// The FreeDict English-Spanish dictd files of `dict-freedict-eng-spa`.
pub const FREEDICT_ENG_SPA: &str = "/usr/share/dictd/freedict-eng-spa.index";

/// What [`setup`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SetupReport {
    /// The workspace file.
    pub workspace: PathBuf,
    /// Whether the files were already there (nothing was exported).
    pub already_present: bool,
    /// Verse pairs written.
    pub verses: usize,
    /// Verses left out because one module lacks them or has them empty.
    pub skipped: usize,
    /// The SWORD modules used (English, Spanish).
    pub modules: (String, String),
    /// Whether the workspace names the FreeDict dictionary.
    pub dictionary: bool,
    /// Joins of the Spanish markup read as two words, over the verses written.
    pub joins_split: usize,
    /// Joins kept as one word (an added enclitic pronoun: `sácalo`).
    pub joins_kept: usize,
    /// Spanish verses written with at least one join read apart: the verses
    /// whose text differs from `diatheke -f plain`'s.
    pub verses_split: usize,
    /// Whether an existing workspace got its `[parallel] labels =
    /// "verses.txt"` line added (set up before verse references were shown).
    pub labels_added: bool,
}

/// One exported verse: key (`Genesis 1:1`) and cleaned text.
pub type Verse = (String, String);

/// Parses `diatheke -f plain` output into verses, in order; non-verse lines
/// are skipped, text cleaned by [`clean_verse`].
pub fn parse_plain(output: &str) -> Vec<Verse> {
    output.lines().filter_map(parse_plain_line).collect()
}

/// Parses `diatheke -f internal` output (the module's own markup) into
/// verses, in order, each read by [`unmark`] so that words the markup keeps
/// apart stay apart, with what [`unmark`] did to it.
pub fn parse_internal(output: &str) -> Vec<(Verse, Joins)> {
    output
        .lines()
        .filter_map(|line| {
            let (text, joins) = unmark(line);
            parse_plain_line(&text).map(|v| (v, joins))
        })
        .collect()
}

/// One line of `diatheke -f plain` output as a verse (`Book C:V: text`);
/// `None` for a line that is not one (a heading, the module's name).
fn parse_plain_line(line: &str) -> Option<Verse> {
    // a trailing space so that an empty verse (`Job 38:39:`) still parses
    let owned = format!("{} ", line.trim_start());
    let l = owned.as_str();
    let mut from = 0;
    while let Some(pos) = l[from..].find(": ") {
        let i = from + pos;
        if let Some((book, cv)) = l[..i].rsplit_once(' ') {
            if let Some((c, v)) = cv.split_once(':') {
                let num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                if !book.trim().is_empty() && num(c) && num(v) {
                    return Some((format!("{} {c}:{v}", book.trim()), clean_verse(&l[i + 2..])));
                }
            }
        }
        from = i + 2;
    }
    None
}

/// Spanish object pronouns that the RV1909 module's translators add as a
/// `<transChange>` right after a verb's `<w>`, written as one word with it
/// (`sáca</w><transChange>lo` is `sácalo`, `díjo</w><transChange>le` is
/// `díjole`): the one join of elements that the markup means.
const ENCLITICS: [&str; 11] = [
    "lo", "la", "le", "los", "las", "les", "me", "te", "se", "nos", "os",
];

/// Words that never carry an enclitic pronoun (`no lo`, `que lo`, `como
/// lo`): a pronoun added after one of them is its own word.
const NO_ENCLITIC: [&str; 52] = [
    "no", "que", "como", "y", "e", "o", "u", "ni", "si", "ya", "mas", "más", "pues", "porque",
    "cuando", "donde", "cual", "cuál", "cuanto", "cuánto", "quien", "quién", "yo", "tú", "él",
    "ella", "ellos", "ellas", "nosotros", "vosotros", "lo", "la", "le", "los", "las", "les", "me",
    "te", "se", "nos", "os", "también", "aun", "aún", "así", "de", "á", "a", "en", "con", "por",
    "para",
];

/// What [`unmark`] did to one line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Joins {
    /// Element boundaries with no space between two words, read as two
    /// words (a space written).
    pub split: usize,
    /// Boundaries read as one word: an added enclitic pronoun after its verb.
    pub kept: usize,
}

/// One line of `diatheke -f internal` output (the module's own OSIS markup:
/// `<w>`, `<transChange>`, milestones) as text, its tags removed. Where one
/// element ends and the next begins with no space between them
/// (`Aquél</transChange><w>era`, `Abram</w><transChange>de allí`) the
/// markup says two words meet, and a space is written; `-f plain` drops the
/// tags and fuses them (`Aquélera`). The one exception is an added
/// enclitic pronoun right after a verb's `<w>` ([`ENCLITICS`]: `sácalo`),
/// kept joined unless the word before it cannot carry one (a function word,
/// or a capitalised name inside a sentence: `Josué los circuncidó`). Text
/// outside tags is kept as it is; an unclosed `<` is kept as text.
pub fn unmark(line: &str) -> (String, Joins) {
    let mut out = String::with_capacity(line.len());
    let mut joins = Joins::default();
    // the element that just closed (`w`, `transChange`) with only tags since
    let mut closed: Option<String> = None;
    let mut rest = line;
    while let Some(lt) = rest.find('<') {
        let text = &rest[..lt];
        if !text.is_empty() {
            out.push_str(text);
            closed = None;
        }
        let Some(gt) = rest[lt..].find('>') else {
            rest = &rest[lt..];
            break;
        };
        let tag = &rest[lt + 1..lt + gt];
        rest = &rest[lt + gt + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        if tag.starts_with('/') {
            closed = Some(name);
            continue;
        }
        if tag.ends_with('/') {
            continue; // a milestone (`<chapter eID=.../>`, `<div .../>`)
        }
        let next = rest.split('<').next().unwrap_or("");
        if next.is_empty() {
            continue; // another tag first (`</w><transChange><w>son`): decide at the text
        }
        let Some(before) = closed.take() else {
            continue;
        };
        let (Some(a), Some(b)) = (out.chars().last(), next.chars().next()) else {
            continue;
        };
        if !a.is_alphanumeric() || !b.is_alphanumeric() {
            continue;
        }
        let enclitic = before == "w"
            && name == "transChange"
            && ENCLITICS.contains(&next)
            && can_carry_enclitic(&out);
        if enclitic {
            joins.kept += 1;
        } else {
            out.push(' ');
            joins.split += 1;
        }
    }
    out.push_str(rest);
    (out, joins)
}

/// Whether the last word of `text` can carry an enclitic pronoun: not a
/// word of [`NO_ENCLITIC`], and not capitalised unless it starts a sentence
/// (a name: `Dios lo permitiere`; `Dad`, `Júrame` after `:` or `.` are verbs).
fn can_carry_enclitic(text: &str) -> bool {
    let start = text
        .char_indices()
        .rev()
        .find(|(_, c)| !c.is_alphanumeric())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &text[start..];
    if NO_ENCLITIC.contains(&word.to_lowercase().as_str()) {
        return false;
    }
    if !word.chars().next().is_some_and(char::is_uppercase) {
        return true;
    }
    let before = text[..start].trim_end();
    before.is_empty() || before.ends_with(['.', ':', ';', '?', '!', '¿', '¡'])
}

/// Removes markup left in diatheke's plain output (`<...>` tags, USFM
/// `\xx` markers, `¶`) and collapses white space.
pub fn clean_verse(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => {
                // drop up to the closing '>' (if there is none, keep the '<')
                let rest: String = chars.clone().collect();
                match rest.find('>') {
                    Some(end) => {
                        for _ in 0..rest[..=end].chars().count() {
                            chars.next();
                        }
                        s.push(' ');
                    }
                    None => s.push(c),
                }
            }
            '\\' if chars.peek().is_some_and(|n| n.is_ascii_alphabetic()) => {
                while chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '*')
                {
                    chars.next();
                }
                s.push(' ');
            }
            '¶' => s.push(' '),
            _ => s.push(c),
        }
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn diatheke(args: &[&str]) -> Result<String> {
    let out = Command::new("diatheke")
        .args(args)
        .output()
        .map_err(|e| Error::invalid(format!("cannot run diatheke: {e}")))?;
    if !out.status.success() {
        return Err(Error::invalid(format!(
            "diatheke {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The installed SWORD modules for English and Spanish, if both are there.
fn find_modules() -> Option<(String, String)> {
    let list = diatheke(&["-b", "system", "-k", "modulelistnames"]).ok()?;
    let have: Vec<&str> = list.lines().map(|l| l.trim()).collect();
    let pick = |names: &[&str]| {
        names
            .iter()
            .find(|n| have.contains(n))
            .map(|s| s.to_string())
    };
    Some((pick(&EN_MODULES)?, pick(&ES_MODULES)?))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn have_program(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// Makes sure `diatheke` and the modules are installed: installs the
/// Debian packages when running as root with apt-get, else fails with the
/// exact command to run.
pub fn ensure_tools(log: &mut dyn FnMut(&str)) -> Result<(String, String)> {
    if have_program("diatheke") {
        if let Some(m) = find_modules() {
            return Ok(m);
        }
    }
    let cmd = format!("apt-get install -y {}", APT_PACKAGES.join(" "));
    if !have_program("apt-get") {
        return Err(Error::invalid(format!(
            "diatheke or the KJV / RV1909 SWORD modules are missing and there is no apt-get; install the SWORD tools and modules ({}) by hand",
            APT_PACKAGES.join(", ")
        )));
    }
    if !is_root() {
        return Err(Error::invalid(format!(
            "diatheke or the KJV / RV1909 SWORD modules are missing; install them with:\n  sudo {cmd}"
        )));
    }
    log(&format!("installing: {cmd}"));
    let run = |args: &[&str]| -> Result<bool> {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .map_err(|e| Error::invalid(format!("cannot run apt-get: {e}")))
    };
    let mut args = vec!["install", "-y"];
    args.extend(APT_PACKAGES);
    if !run(&args)? {
        run(&["update"])?;
        if !run(&args)? {
            return Err(Error::invalid(format!("`{cmd}` failed")));
        }
    }
    find_modules().ok_or_else(|| {
        Error::invalid("packages installed but diatheke still lists no KJV / RV1909 module")
    })
}

/// Exports the verse-aligned Bible into `dir` and writes its
/// `workspace.toml` (80/10/10 split by verse, seed 1; the FreeDict
/// dictionary when installed; no `[adhoc]`, so every Spanish verse is
/// searchable and the test verses' English is the query). Does nothing
/// heavy when the files are already there.
pub fn setup(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<SetupReport> {
    let ws = dir.join("workspace.toml");
    let files = ["kjv.en", "sparv.es", "verses.txt"].map(|f| dir.join(f));
    if ws.exists() && files.iter().all(|f| f.exists()) {
        let n = crate::text::io::read_lines(&files[2])?.len();
        let labels_added = add_verse_labels(&ws)?;
        if labels_added {
            log("added `labels = \"verses.txt\"` to [parallel]: search shows verse references");
        }
        return Ok(SetupReport {
            labels_added,
            workspace: ws,
            already_present: true,
            verses: n,
            skipped: 0,
            joins_split: 0,
            joins_kept: 0,
            verses_split: 0,
            modules: (String::new(), String::new()),
            dictionary: std::fs::read_to_string(dir.join("workspace.toml"))
                .is_ok_and(|t| t.contains("[dictionary]")),
        });
    }
    let (en_mod, es_mod) = ensure_tools(log)?;
    log(&format!("exporting {en_mod} and {es_mod} with diatheke"));
    let range = "Gen 1:1-Rev 22:21";
    // both exports at once: each is one long single-threaded diatheke run
    let (en, es) = std::thread::scope(|s| {
        let es = s.spawn(|| diatheke(&["-b", &es_mod, "-f", "internal", "-k", range]));
        let en = diatheke(&["-b", &en_mod, "-f", "plain", "-k", range]);
        let es = es
            .join()
            .unwrap_or_else(|_| Err(Error::invalid("diatheke export thread failed")));
        (en, es)
    });
    let (en, es) = (parse_plain(&en?), parse_internal(&es?));
    let es_by_key: HashMap<&str, (&str, Joins)> = es
        .iter()
        .map(|((k, t), j)| (k.as_str(), (t.as_str(), *j)))
        .collect();
    let (mut joins_split, mut joins_kept, mut verses_split) = (0, 0, 0);
    let (mut ids, mut en_out, mut es_out) = (String::new(), String::new(), String::new());
    let mut n = 0;
    let mut seen = std::collections::HashSet::new();
    for (k, t) in &en {
        if !seen.insert(k.as_str()) {
            continue;
        }
        match es_by_key.get(k.as_str()) {
            Some(&(s, j)) if !s.is_empty() && !t.is_empty() => {
                joins_split += j.split;
                joins_kept += j.kept;
                verses_split += usize::from(j.split > 0);
                ids.push_str(k);
                ids.push('\n');
                en_out.push_str(t);
                en_out.push('\n');
                es_out.push_str(s);
                es_out.push('\n');
                n += 1;
            }
            _ => {}
        }
    }
    if n == 0 {
        return Err(Error::invalid(format!(
            "diatheke exported no verse pairs from {en_mod} and {es_mod}"
        )));
    }
    let skipped = en.len().max(es.len()) - n;
    crate::util::write_atomic(&files[0], en_out.as_bytes())?;
    crate::util::write_atomic(&files[1], es_out.as_bytes())?;
    crate::util::write_atomic(&files[2], ids.as_bytes())?;
    let dict = Path::new(FREEDICT_ENG_SPA);
    let has_dict = dict.exists() && super::dictionary::dictd_data_file(dict).is_some();
    let mut toml = format!(
        "# The Bible, verse-aligned: English ({en_mod}) and Spanish ({es_mod}) from the\n\
         # SWORD modules (written by `rosetta setup`). Line i of kjv.en, sparv.es and\n\
         # verses.txt is one verse. No [adhoc]: the derived task searches every\n\
         # Spanish verse with the English test verses as queries.\n\
         name = \"bible-en-es\"\n\n[source]\nlang = \"en\"\n\n[target]\nlang = \"es\"\n\n\
         [parallel]\nfiles = [\"kjv.en\", \"sparv.es\"]\nsplit = [0.8, 0.1, 0.1]\nseed = 1\n\
         # line i of verses.txt is the verse reference of pair i (shown by search)\n\
         labels = \"verses.txt\"\n"
    );
    if has_dict {
        toml.push_str(&format!("\n[dictionary]\npath = \"{FREEDICT_ENG_SPA}\"\n"));
    }
    // the other [text] keys take the defaults (docs/workspaces.md)
    toml.push_str("\n[text]\nvocab_per_language = 10000\n");
    crate::util::write_atomic(&ws, toml.as_bytes())?;
    Ok(SetupReport {
        workspace: ws,
        already_present: false,
        verses: n,
        skipped,
        modules: (en_mod, es_mod),
        dictionary: has_dict,
        joins_split,
        joins_kept,
        verses_split,
        labels_added: false,
    })
}

/// Adds `labels = "verses.txt"` to the `[parallel]` table of the setup
/// workspace `ws` when it has no `labels` key (a workspace written before
/// setup wrote one); `true` when it did. The labels are display only, so
/// the workspace's content hash, and its sessions, stay valid.
fn add_verse_labels(ws: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(ws).map_err(|e| Error::io(ws, e))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Error::file(ws, format!("bad workspace TOML: {e}")))?;
    let parallel = table.get("parallel").and_then(|p| p.as_table());
    if parallel.is_none_or(|p| p.contains_key("labels") || !p.contains_key("files")) {
        return Ok(false);
    }
    let Some(at) = text.lines().position(|l| l.trim() == "[parallel]") else {
        return Ok(false);
    };
    let mut out = String::with_capacity(text.len() + 24);
    for (i, l) in text.lines().enumerate() {
        out.push_str(l);
        out.push('\n');
        if i == at {
            out.push_str("labels = \"verses.txt\"\n");
        }
    }
    crate::util::write_atomic(ws, out.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_setup_workspace_gets_its_verse_labels() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("workspace.toml");
        let old = "name = \"bible-en-es\"\n\n[source]\nlang = \"en\"\n\n[target]\nlang = \"es\"\n\n\
                   [parallel]\nfiles = [\"kjv.en\", \"sparv.es\"]\nsplit = [0.5, 0.5, 0.0]\nseed = 1\n";
        std::fs::write(&ws, old).unwrap();
        for (f, t) in [
            ("kjv.en", "In the beginning\nAnd the earth\n"),
            ("sparv.es", "En el principio\nY la tierra\n"),
            ("verses.txt", "Genesis 1:1\nGenesis 1:2\n"),
        ] {
            std::fs::write(dir.path().join(f), t).unwrap();
        }
        let before = crate::corpus::Workspace::load(&ws).unwrap();
        let mut said = Vec::new();
        let r = setup(dir.path(), &mut |m| said.push(m.to_string())).unwrap();
        assert!(r.already_present && r.labels_added, "{said:?}");
        let after = crate::corpus::Workspace::load(&ws).unwrap();
        assert_eq!(after.labels, Some(dir.path().join("verses.txt")));
        assert_eq!(
            after.content_hash().unwrap(),
            before.content_hash().unwrap()
        );
        let task = after.adhoc().unwrap();
        let labels = task.doc_labels.unwrap();
        assert_eq!(labels.len(), 2);
        for (id, l) in task.docs.ids.iter().zip(&labels) {
            let text = &task.docs.texts[task.docs.index()[id.as_str()]];
            assert_eq!(
                l == "Genesis 1:1",
                text == "En el principio",
                "{id} {l} {text}"
            );
        }
        // a second run changes nothing
        assert!(!setup(dir.path(), &mut |_| {}).unwrap().labels_added);
        assert_eq!(
            std::fs::read_to_string(&ws)
                .unwrap()
                .matches("labels")
                .count(),
            1
        );
    }

    #[test]
    fn a_transchange_join_of_the_spanish_markup_is_read_apart() {
        // the RV1909 module's markup of John 1:9, Genesis 13:3 and three
        // enclitic joins (as `diatheke -f internal` prints them): `-f plain`
        // fuses `Aquélera`, `Abramde`, `díjoleDios`
        let out = "John 1:9: <transChange type=\"added\">Aquél</transChange><w savlm=\"strong:G5457\">era la luz</w> <w savlm=\"strong:G0228\">verdadera</w>, <w>que</w> <w>alumbra</w>.\n\
                   Genesis 13:3: <w savlm=\"strong:H0087\">Y volvió Abram</w><transChange type=\"added\">de allí</transChange> <w>por sus jornadas</w><chapter eID=\"Gen.13\"/>\n\
                   Genesis 25:33: <w>Y dijo Jacob:</w> <w savlm=\"strong:H7650\">Júrame</w><transChange type=\"added\">lo</transChange> <w>aquí por Dios</w>\n\
                   Mark 2:3: <w>y</w> <w>díjo</w><transChange type=\"added\">le</transChange><w>Dios</w>: <w>sáca</w><transChange type=\"added\">lo</transChange>.\n\
                   II Chronicles 3:3: <w>Estas</w><transChange type=\"added\"><w>son las medidas</w> <w>de que</w></transChange><w>Salomón</w> <w>fundó</w>\n\
                   Joshua 5:7: <w>á los cuales</w> <w>Josué</w><transChange type=\"added\">los</transChange> <w>circuncidó</w>; <w>que no</w><transChange type=\"added\">lo</transChange><w>sabía</w>\n\
                   (spaRV1909eb)\n";
        let v = parse_internal(out);
        let texts: Vec<(&str, &str, Joins)> = v
            .iter()
            .map(|((k, t), j)| (k.as_str(), t.as_str(), *j))
            .collect();
        let j = |split, kept| Joins { split, kept };
        assert_eq!(
            texts,
            vec![
                (
                    "John 1:9",
                    "Aquél era la luz verdadera, que alumbra.",
                    j(1, 0)
                ),
                (
                    "Genesis 13:3",
                    "Y volvió Abram de allí por sus jornadas",
                    j(1, 0)
                ),
                (
                    "Genesis 25:33",
                    "Y dijo Jacob: Júramelo aquí por Dios",
                    j(0, 1)
                ),
                ("Mark 2:3", "y díjole Dios: sácalo.", j(1, 2)),
                (
                    "II Chronicles 3:3",
                    "Estas son las medidas de que Salomón fundó",
                    j(2, 0)
                ),
                (
                    "Joshua 5:7",
                    "á los cuales Josué los circuncidó; que no lo sabía",
                    j(3, 0)
                ),
            ]
        );
        // a space already there, text between elements and an unclosed `<`
        // are kept as they are
        assert_eq!(
            unmark("<w>a</w> <w>b</w>, <w>c</w>x<w>d</w> 1 < 2"),
            ("a b, cxd 1 < 2".to_string(), j(0, 0))
        );
    }

    #[test]
    fn plain_output_parsing_and_cleaning() {
        let out = "Genesis 1:1: In the beginning God created the heaven and the earth.\n\
                   A Psalm of David.\n   Psalms 3:1: LORD, how are they increased that trouble me! \n\n\
                   I Samuel 23:29: \n\
                   Revelation of John 22:21: The grace of our Lord <G2962> Jesus: be with you.\n\
                   Exodus 6:3: ¶ by my name \\nd JEHOVAH was I not known\n\
                   (engKJV2006eb)\n";
        let v = parse_plain(out);
        assert_eq!(v.len(), 5);
        assert_eq!(
            v[1],
            (
                "Psalms 3:1".into(),
                "LORD, how are they increased that trouble me!".into()
            )
        );
        assert_eq!(v[2], ("I Samuel 23:29".into(), String::new()));
        assert_eq!(v[3].0, "Revelation of John 22:21");
        assert_eq!(v[3].1, "The grace of our Lord Jesus: be with you.");
        assert_eq!(v[4].1, "by my name JEHOVAH was I not known");
    }
}
