//! Bilingual dictionaries: source word → its listed target translations.
//!
//! Formats, chosen by file name:
//! - `*.index` (dictd, with `*.dict.dz` or `*.dict` next to it): the index
//!   holds `headword<TAB>base64 offset<TAB>base64 length`; each entry's text is
//!   a headword line (`word /ipa/`) followed by translation lines, optionally
//!   numbered (`1. a, b`), translations separated by `,` or `;`. Limits: only
//!   that plain FreeDict layout is read; lines that look like notes, examples
//!   or cross references (`Note:`, `see:`, quotes, `=`) are skipped, and
//!   `<pos>`/`(...)`/`[...]` annotations are removed. Old FreeDict dictd files
//!   (eng-spa 0.3) mangle multi-word headwords: `a day /ədei/` is stored as
//!   headword `a` with translation `aldía`. Such entries are recognised by a
//!   pronunciation much longer than the headword (more than two symbols
//!   longer, stress and length marks not counted) and dropped.
//! - anything else: text lines, `source<TAB>target[<TAB>...]` (further
//!   columns such as a part of speech ignored), or without a tab
//!   `source target` (first whitespace-separated word, then the rest). Blank
//!   lines and `#` comments are skipped. A file ending in `.gz` is read
//!   gunzipped (errors still name its line).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::text::io::read_lines;
use crate::text::Analyzer;
use crate::{Error, Result};

/// Source word → target translations, in the order first listed, no repeats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dictionary {
    /// Entries by source headword (as written, multi-word ones included).
    pub entries: BTreeMap<String, Vec<String>>,
    /// dictd entries dropped as mangled multi-word headwords.
    pub dropped: usize,
}

/// The data file of a dictd index (`x.index` → `x.dict.dz` or `x.dict`),
/// when `index` is a dictd index and the data file exists.
pub fn dictd_data_file(index: &Path) -> Option<PathBuf> {
    if index.extension()? != "index" {
        return None;
    }
    let stem = index.with_extension("");
    ["dict.dz", "dict"]
        .iter()
        .map(|e| stem.with_extension(e))
        .find(|p| p.exists())
}

impl Dictionary {
    /// Reads a dictionary in any of the formats above.
    pub fn read(path: &Path) -> Result<Dictionary> {
        if path.extension().is_some_and(|e| e == "index") {
            Self::read_dictd(path)
        } else {
            Self::read_text(path)
        }
    }

    fn add(&mut self, src: &str, tgt: &str) {
        let (src, tgt) = (src.trim(), tgt.trim());
        if src.is_empty() || tgt.is_empty() {
            return;
        }
        let e = self.entries.entry(src.to_string()).or_default();
        if !e.iter().any(|t| t == tgt) {
            e.push(tgt.to_string());
        }
    }

    /// Reads `source<TAB>target` or `source target` lines.
    pub fn read_text(path: &Path) -> Result<Dictionary> {
        let mut d = Dictionary::default();
        for (n, line) in read_lines(path)?.iter().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (s, t) = match l.split_once('\t') {
                Some((s, rest)) => (s, rest.split('\t').next().unwrap_or("")),
                None => l.split_once(char::is_whitespace).ok_or_else(|| {
                    Error::parse(path, n + 1, "want source<TAB>target or 'source target'")
                })?,
            };
            d.add(s, t);
        }
        Ok(d)
    }

    /// Reads a dictd dictionary from its `.index` file.
    pub fn read_dictd(index: &Path) -> Result<Dictionary> {
        let data_path = dictd_data_file(index).ok_or_else(|| {
            Error::file(
                index,
                "dictd index without its data file (.dict.dz or .dict) next to it",
            )
        })?;
        let raw = crate::text::io::read_plain_bytes(&data_path)?;
        let data = if data_path.extension().is_some_and(|e| e == "dz") {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| Error::file(&data_path, format!("bad dictzip data: {e}")))?;
            out
        } else {
            raw
        };
        let mut d = Dictionary::default();
        for (n, line) in read_lines(index)?.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let bad = |m: &str| Error::parse(index, n + 1, m.to_string());
            if f.len() < 3 {
                return Err(bad("want headword<TAB>offset<TAB>length"));
            }
            let head = f[0];
            if head.starts_with("00database") || head.starts_with("00-database") {
                continue;
            }
            let off = b64(f[1]).ok_or_else(|| bad("bad base64 offset"))?;
            let len = b64(f[2]).ok_or_else(|| bad("bad base64 length"))?;
            let body = data.get(off..off.saturating_add(len)).ok_or_else(|| {
                bad(&format!(
                    "entry at bytes {off}..{} lies outside {} ({} bytes)",
                    off + len,
                    data_path.display(),
                    data.len()
                ))
            })?;
            let body =
                std::str::from_utf8(body).map_err(|e| bad(&format!("entry is not UTF-8: {e}")))?;
            d.add_dictd_entry(head, body);
        }
        Ok(d)
    }

    fn add_dictd_entry(&mut self, index_head: &str, body: &str) {
        let mut lines = body.lines();
        let first = lines.next().unwrap_or("").trim();
        let (head, ipa) = match first.find(" /") {
            Some(i) if first.ends_with('/') => (&first[..i], Some(&first[i + 2..first.len() - 1])),
            _ if first.is_empty() => (index_head, None),
            _ => (first, None),
        };
        if let Some(ipa) = ipa {
            let sounds = ipa
                .chars()
                .filter(|c| !matches!(c, 'ː' | 'ˈ' | 'ˌ' | ' ' | '.'))
                .count();
            let letters = head.chars().filter(|c| c.is_alphanumeric()).count();
            if sounds > letters + 2 {
                self.dropped += 1;
                return;
            }
        }
        for l in lines {
            let l = l.trim();
            let l = strip_number(l);
            if l.is_empty()
                || l.starts_with('"')
                || l.contains('=')
                || l.split(':')
                    .next()
                    .is_some_and(|p| l.contains(':') && p.len() < 12 && !p.contains(','))
            {
                continue;
            }
            let l = strip_brackets(l);
            for t in l.split([',', ';']) {
                let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
                self.add(head, &t);
            }
        }
    }

    /// The dictionary read the other way: each translation becomes a
    /// headword listing the headwords it translates, in headword order (as
    /// `entries` iterates them), no repeats. For a file that lists target →
    /// source (`[dictionary] reverse = true`). `dropped` is kept.
    pub fn reversed(&self) -> Dictionary {
        let mut d = Dictionary {
            entries: BTreeMap::new(),
            dropped: self.dropped,
        };
        for (s, ts) in &self.entries {
            for t in ts {
                d.add(t, s);
            }
        }
        d
    }

    /// Number of source headwords.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the dictionary is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Translations of a headword as written.
    pub fn get(&self, word: &str) -> Option<&[String]> {
        self.entries.get(word).map(|v| v.as_slice())
    }

    /// The dictionary as index terms: source term → target terms, keeping
    /// only entries whose headword and translation each analyse to exactly
    /// one term (multi-word and stop-word entries drop out). Headwords that
    /// analyse to the same term merge; targets in first-seen order, no repeats.
    pub fn analysed(&self, src: &Analyzer, tgt: &Analyzer) -> HashMap<String, Vec<String>> {
        self.analysed_by(|s| src.analyze(s), |t| tgt.analyze(t))
    }

    /// [`Dictionary::analysed`] at word level: headwords and translations
    /// analysed to word terms (stop words dropped, stems taken) before any
    /// subword units, so a subword workspace translates word by word and
    /// then cuts the translations into units. The same as `analysed` for
    /// `units = "words"`.
    pub fn analysed_words(&self, src: &Analyzer, tgt: &Analyzer) -> HashMap<String, Vec<String>> {
        self.analysed_by(|s| src.analyze_words(s), |t| tgt.analyze_words(t))
    }

    /// The translations as written, for target-language text: source word
    /// term (as [`Dictionary::analysed_words`] keys it) → one written
    /// translation per target word term that `analysed_words` lists for it
    /// (the first listed form of each), in the same order.
    pub fn surface_words(&self, src: &Analyzer, tgt: &Analyzer) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for (s, ts) in &self.entries {
            let s = src.analyze_words(s);
            if s.len() != 1 {
                continue;
            }
            let e = out.entry(s[0].clone()).or_default();
            for t in ts {
                let a = tgt.analyze_words(t);
                if a.len() == 1 && !e.iter().any(|(term, _)| *term == a[0]) {
                    e.push((a[0].clone(), t.trim().to_string()));
                }
            }
        }
        out.into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(s, v)| (s, v.into_iter().map(|(_, w)| w).collect()))
            .collect()
    }

    /// Each word term's form as the dictionary writes it, per side:
    /// source term → the first headword analysing to it, target term → the
    /// first translation analysing to it (one word each, analysed as
    /// [`Dictionary::analysed_words`] analyses them). What a dictionary
    /// word is shown as where a vocabulary has no surface form for its term
    /// (`acuarela`, not the stem `acuarel`).
    pub fn written_words(&self, src: &Analyzer, tgt: &Analyzer) -> WrittenWords {
        let mut out = WrittenWords::default();
        let one = |an: &Analyzer, w: &str| -> Option<String> {
            let t = an.analyze_words(w);
            (t.len() == 1).then(|| t[0].clone())
        };
        for (s, ts) in &self.entries {
            if let Some(t) = one(src, s) {
                out.source.entry(t).or_insert_with(|| s.trim().to_string());
            }
            for w in ts {
                if let Some(t) = one(tgt, w) {
                    out.target.entry(t).or_insert_with(|| w.trim().to_string());
                }
            }
        }
        out
    }

    fn analysed_by(
        &self,
        src: impl Fn(&str) -> Vec<String>,
        tgt: impl Fn(&str) -> Vec<String>,
    ) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for (s, ts) in &self.entries {
            let s = src(s);
            if s.len() != 1 {
                continue;
            }
            let mut terms: Vec<String> = Vec::new();
            for t in ts {
                let t = tgt(t);
                if t.len() == 1 && !terms.contains(&t[0]) {
                    terms.push(t[0].clone());
                }
            }
            if terms.is_empty() {
                continue;
            }
            let e = out.entry(s[0].clone()).or_default();
            for t in terms {
                if !e.contains(&t) {
                    e.push(t);
                }
            }
        }
        out
    }
}

/// A dictionary's words as it writes them, by analysed term, per side
/// ([`Dictionary::written_words`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WrittenWords {
    /// Source-language term → headword as written.
    pub source: HashMap<String, String>,
    /// Target-language term → translation as written.
    pub target: HashMap<String, String>,
}

/// Removes a leading list number (`1. `, `2) `).
fn strip_number(l: &str) -> &str {
    let digits = l.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        let rest = &l[digits..];
        if let Some(r) = rest.strip_prefix(". ").or(rest.strip_prefix(") ")) {
            return r.trim_start();
        }
    }
    l
}

/// Removes `<...>`, `(...)` and `[...]` annotations.
fn strip_brackets(l: &str) -> String {
    let mut out = String::with_capacity(l.len());
    let mut depth = 0usize;
    for c in l.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// dictd's base64 number (most significant digit first).
fn b64(s: &str) -> Option<usize> {
    let mut v: usize = 0;
    for c in s.trim().bytes() {
        let d = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        v = v.checked_mul(64)?.checked_add(d as usize)?;
    }
    Some(v)
}

/// A seeded train/test split of a dictionary by source word, as MUSE
/// evaluates lexicon induction (Conneau et al. 2018): every entry of a
/// source word is on one side, so a word tested is never one trained or
/// tuned on. A word is a test word when the BLAKE3 hash of the seed and
/// the word falls in the first [`BliSplit::TEST_SHARE`] of the hash range,
/// so its side depends on the seed and the word alone, not on the rest of
/// the dictionary or on a session's vocabulary: every session of a
/// workspace is tested on the same words.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BliSplit {
    /// The seed.
    pub seed: u64,
    /// The share of source words in the test part (of the hash range).
    pub test_share: f64,
    /// Source words (analysed terms) of the training part, sorted.
    pub train: Vec<String>,
    /// Source words (analysed terms) of the test part, sorted.
    pub test: Vec<String>,
}

impl BliSplit {
    /// The share of source words held out for testing.
    pub const TEST_SHARE: f64 = 0.2;

    /// Whether `word` is in the test part under `seed`.
    pub fn is_test(seed: u64, word: &str) -> bool {
        let mut h = blake3::Hasher::new();
        h.update(b"rosetta-bli-split");
        h.update(&seed.to_le_bytes());
        h.update(word.as_bytes());
        let b = h.finalize();
        let x = u64::from_le_bytes(b.as_bytes()[..8].try_into().expect("8 bytes"));
        (x as f64) < Self::TEST_SHARE * (u64::MAX as f64)
    }

    /// Splits the source words of `entries` (an analysed dictionary).
    pub fn of(entries: &HashMap<String, Vec<String>>, seed: u64) -> BliSplit {
        let mut words: Vec<&String> = entries.keys().collect();
        words.sort();
        let (test, train): (Vec<&String>, Vec<&String>) =
            words.into_iter().partition(|w| Self::is_test(seed, w));
        BliSplit {
            seed,
            test_share: Self::TEST_SHARE,
            train: train.into_iter().cloned().collect(),
            test: test.into_iter().cloned().collect(),
        }
    }

    /// The entries of `entries` whose source word is in the test part.
    pub fn test_part(
        &self,
        entries: &HashMap<String, Vec<String>>,
    ) -> HashMap<String, Vec<String>> {
        let test: std::collections::HashSet<&str> = self.test.iter().map(String::as_str).collect();
        entries
            .iter()
            .filter(|(w, _)| test.contains(w.as_str()))
            .map(|(w, t)| (w.clone(), t.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::TextConfig;

    #[test]
    fn base64_numbers() {
        assert_eq!(b64("A"), Some(0));
        assert_eq!(b64("BG"), Some(70));
        assert_eq!(b64("EFb"), Some(4 * 4096 + 5 * 64 + 27));
        assert_eq!(b64("!"), None);
    }

    #[test]
    fn written_words_keep_the_dictionarys_forms_by_term() {
        let mut d = Dictionary::default();
        d.add("watercolour", "acuarela");
        d.add("watercolours", "acuarelas");
        d.add("paint", "pintura");
        d.add("painting", "two words");
        let en = Analyzer::new("en", &TextConfig::default()).unwrap();
        let es = Analyzer::new("es", &TextConfig::default()).unwrap();
        let w = d.written_words(&en, &es);
        // the stem `acuarel` is shown as the first form analysing to it
        let stem = &es.analyze_words("acuarela")[0];
        assert_ne!(stem, "acuarela");
        assert_eq!(w.target[stem], "acuarela");
        assert_eq!(
            w.source[&en.analyze_words("watercolours")[0]],
            "watercolour"
        );
        // a translation of several words is no word term
        assert!(!w.target.values().any(|v| v == "two words"));
    }

    #[test]
    fn reversed_swaps_sides() {
        let mut d = Dictionary::default();
        d.add("fish", "pescado");
        d.add("fish", "pez");
        d.add("dog", "perro");
        d.add("hound", "perro");
        d.dropped = 2;
        let r = d.reversed();
        assert_eq!(r.get("perro").unwrap(), ["dog", "hound"]);
        assert_eq!(r.get("pez").unwrap(), ["fish"]);
        assert_eq!(r.get("pescado").unwrap(), ["fish"]);
        assert_eq!((r.len(), r.dropped), (3, 2));
        assert!(r.get("fish").is_none());
        assert_eq!(r.reversed(), d);
    }

    #[test]
    fn dictd_entries() {
        let mut d = Dictionary::default();
        d.add_dictd_entry("a", "a /ə/\n1. a, dentro de, en\n2. un, una\n");
        d.add_dictd_entry("a", "a /ədei/\naldía\n");
        d.add_dictd_entry(
            "ability",
            "ability /əbilitiː/\n1. capacidad (f), habilidad\n",
        );
        assert_eq!(d.get("a").unwrap(), ["a", "dentro de", "en", "un", "una"]);
        assert_eq!(d.get("ability").unwrap(), ["capacidad", "habilidad"]);
        assert_eq!(d.dropped, 1);
        let cfg = TextConfig {
            stopwords: false,
            ..Default::default()
        };
        let en = Analyzer::new("en", &cfg).unwrap();
        let es = Analyzer::new("es", &cfg).unwrap();
        let a = d.analysed(&en, &es);
        assert_eq!(a["abil"], vec!["capac", "habil"]);
        assert!(!a["a"].iter().any(|t| t.contains(' ')));
    }
}
