//! Pre-trained word vectors in the word2vec / fastText text format (`.vec`,
//! optionally gzipped as `.vec.gz`), looked up for a [`Vocabulary`]'s terms.
//!
//! The format: an optional header line `N DIM`, then one line per word,
//! `word v1 … vDIM`, fields separated by spaces (or tabs; a trailing space,
//! as fastText writes, is allowed). A first line of exactly two whole
//! numbers is the header. The file is streamed, never held whole.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use ndarray::Array2;

use super::Vocabulary;
use crate::{Error, Result};

/// Word vectors of a vocabulary's terms.
#[derive(Debug, Clone)]
pub struct VecTable {
    /// Dimension of the vectors.
    pub dim: usize,
    /// `vocab.len() × dim`: the vector of each term by id, zeros where the
    /// file has none.
    pub rows: Array2<f32>,
    /// Whether the file gave term `id` a vector.
    pub found: Vec<bool>,
    /// Number of terms with a vector (the coverage: `hits / vocab.len()`).
    pub hits: usize,
}

/// Reads the word vectors of `vocab`'s terms from the text-format file
/// `path` (gunzipped when it ends in `.gz`).
///
/// A term takes the vector of the file word equal to it; failing that, of
/// a file word whose lower-cased form equals it (the first such word in the
/// file). The match is literal: a stemmed vocabulary matches only the file
/// words identical to a stem, so check `hits` for the coverage. Only word
/// units match; a vocabulary's character n-gram fallback units never do.
///
/// Every line is checked: a wrong number of values, a value that is not a
/// number or not finite in `f32` (NaN, inf), a header `N DIM` that the
/// lines disagree with, or a file with no vectors is an error naming the file
/// and, where one is to blame, the line.
pub fn read_vec(path: &Path, vocab: &Vocabulary) -> Result<VecTable> {
    let file = crate::util::open_regular(path, crate::util::Links::Follow)?;
    let gz = path.extension().is_some_and(|e| e == "gz");
    let reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(file)
    };
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let words = vocab.words();
    // per term: 0 no vector yet, 1 from a lower-cased word, 2 exact
    let mut how = vec![0u8; vocab.len()];
    let mut rows: Option<Array2<f32>> = None;
    let mut header: Option<(usize, usize)> = None;
    let mut dim: Option<usize> = None;
    let mut vectors = 0usize;
    let mut buf = Vec::new();
    let mut values: Vec<f32> = Vec::new();
    for n in 1.. {
        buf.clear();
        let read = reader.read_until(b'\n', &mut buf).map_err(|e| {
            let what = if gz { "bad gzip data" } else { "read error" };
            Error::parse(path, n, format!("{what}: {e}"))
        })?;
        if read == 0 {
            break;
        }
        let mut bytes = &buf[..];
        if n == 1 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let line = std::str::from_utf8(bytes).map_err(|e| {
            Error::parse(
                path,
                n,
                format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
            )
        })?;
        let line = line.trim_end_matches(['\n', '\r']);
        let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
        let Some(word) = fields.next() else {
            continue; // a blank line
        };
        if n == 1 {
            let rest: Vec<&str> = fields.clone().collect();
            if let (Ok(count), [d]) = (word.parse::<usize>(), &rest[..]) {
                if let Ok(d) = d.parse::<usize>() {
                    if d == 0 {
                        return Err(Error::parse(path, n, "header gives dimension 0"));
                    }
                    header = Some((count, d));
                    dim = Some(d);
                    continue;
                }
            }
        }
        values.clear();
        for (k, f) in fields.enumerate() {
            let v: f32 = f.parse().map_err(|_| {
                Error::parse(
                    path,
                    n,
                    format!("value {} of `{word}` is not a number: {f:?}", k + 1),
                )
            })?;
            if !v.is_finite() {
                return Err(Error::parse(
                    path,
                    n,
                    format!("value {} of `{word}` is not finite in f32: {f:?}", k + 1),
                ));
            }
            values.push(v);
        }
        let d = match dim {
            Some(d) => d,
            None if values.is_empty() => {
                return Err(Error::parse(path, n, format!("`{word}` has no values")))
            }
            None => {
                dim = Some(values.len());
                values.len()
            }
        };
        if values.len() != d {
            let whence = if header.is_some() {
                "the header's dimension"
            } else {
                "the dimension of the first vector"
            };
            return Err(Error::parse(
                path,
                n,
                format!(
                    "`{word}` has {} values, expected {d} ({whence})",
                    values.len()
                ),
            ));
        }
        vectors += 1;
        let (id, rank) = match vocab.id(word) {
            Some(id) => (Some(id), 2),
            None if word.chars().any(char::is_uppercase) => (vocab.id(&word.to_lowercase()), 1),
            None => (None, 0),
        };
        let Some(id) = id.map(|i| i as usize).filter(|&i| i < words) else {
            continue;
        };
        if how[id] < rank {
            how[id] = rank;
            let rows = rows.get_or_insert_with(|| Array2::zeros((vocab.len(), d)));
            rows.row_mut(id)
                .assign(&ndarray::ArrayView1::from(&values[..]));
        }
    }
    let Some(dim) = dim else {
        return Err(Error::file(path, "no word vectors in the file"));
    };
    if vectors == 0 {
        return Err(Error::file(
            path,
            "no word vectors in the file (a header only)",
        ));
    }
    if let Some((count, _)) = header {
        if count != vectors {
            return Err(Error::file(
                path,
                format!("the header promises {count} vectors, the file has {vectors}"),
            ));
        }
    }
    let found: Vec<bool> = how.iter().map(|&h| h > 0).collect();
    Ok(VecTable {
        dim,
        rows: rows.unwrap_or_else(|| Array2::zeros((vocab.len(), dim))),
        hits: found.iter().filter(|&&f| f).count(),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn vocab(terms: &[&str]) -> Vocabulary {
        let terms: Vec<String> = terms.iter().map(|s| s.to_string()).collect();
        let df = vec![1; terms.len()];
        Vocabulary::from_parts("xx", terms, df, 1)
    }

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_with_and_without_header_and_gzipped() {
        let dir = tempfile::tempdir().unwrap();
        let v = vocab(&["the", "cat", "paris", "dog", "unseen"]);
        // fastText style: header, trailing spaces, CRLF; `Paris` before `paris`
        let text = "5 3\r\nthe 0.1 0.2 0.3 \r\nParis 9 9 9 \r\ncat -1 0 1e-2 \r\n\
                    paris 1 2 3 \r\nDOG 4 5 6 \r\n";
        let p = write(&dir, "a.vec", text);
        let t = read_vec(&p, &v).unwrap();
        assert_eq!((t.dim, t.hits), (3, 4));
        assert_eq!(t.found, [true, true, true, true, false]);
        assert_eq!(t.rows.row(0).to_vec(), [0.1, 0.2, 0.3]);
        assert_eq!(t.rows.row(1).to_vec(), [-1.0, 0.0, 0.01]);
        // the exact word wins over an earlier lower-cased one
        assert_eq!(t.rows.row(2).to_vec(), [1.0, 2.0, 3.0]);
        // a lower-cased match when there is no exact one
        assert_eq!(t.rows.row(3).to_vec(), [4.0, 5.0, 6.0]);
        assert_eq!(t.rows.row(4).to_vec(), [0.0, 0.0, 0.0]);
        assert_eq!(t.rows.dim(), (5, 3));

        // GloVe style: no header, tabs allowed, blank lines skipped
        let p = write(&dir, "b.txt", "cat\t1 2\n\nthe 3 4\n");
        let t = read_vec(&p, &v).unwrap();
        assert_eq!((t.dim, t.hits), (2, 2));
        assert_eq!(t.rows.row(1).to_vec(), [1.0, 2.0]);

        // gzipped, and no term found: an all-zero table, not an error
        let p = dir.path().join("c.vec.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"2 2\nfoo 1 2\nbar 3 4\n").unwrap();
        std::fs::write(&p, enc.finish().unwrap()).unwrap();
        let t = read_vec(&p, &v).unwrap();
        assert_eq!((t.dim, t.hits, t.rows.dim()), (2, 0, (5, 2)));
        assert!(t.rows.iter().all(|&x| x == 0.0));
        let t = read_vec(&p, &vocab(&["bar"])).unwrap();
        assert_eq!(t.rows.row(0).to_vec(), [3.0, 4.0]);
    }

    #[test]
    fn ngram_units_never_match() {
        let dir = tempfile::tempdir().unwrap();
        let docs = vec![vec!["walking", "talking"], vec!["talking"]];
        let mut v = Vocabulary::build("xx", &docs, 1, 1);
        v.add_fallback(&docs, 100, 1, 3, 3);
        let gram = (v.words()..v.len())
            .map(|i| v.term(i as u32).to_string())
            .next()
            .expect("an n-gram unit");
        let p = write(&dir, "a.vec", &format!("{gram} 1\ntalking 2\n"));
        let t = read_vec(&p, &v).unwrap();
        assert_eq!(t.hits, 1);
        assert!(t.found[0]);
    }

    #[test]
    fn bad_input_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let v = vocab(&["a", "b"]);
        let err = |name: &str, text: &str| -> String {
            let p = write(&dir, name, text);
            let e = read_vec(&p, &v).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            e
        };
        let e = err("count.vec", "2 3\na 1 2 3\nb 1 2\n");
        assert!(
            e.contains(":3:") && e.contains("2 values, expected 3"),
            "{e}"
        );
        let e = err("first.vec", "a 1 2 3\nzzz 1 2 3 4\n");
        assert!(e.contains(":2:") && e.contains("first vector"), "{e}");
        let e = err("nan.vec", "a 1 nan\n");
        assert!(e.contains(":1:") && e.contains("not finite"), "{e}");
        let e = err("inf.vec", "a 1 2\nb inf 2\n");
        assert!(e.contains(":2:") && e.contains("not finite"), "{e}");
        let e = err("big.vec", "a 1 1e40\n");
        assert!(e.contains(":1:") && e.contains("not finite"), "{e}");
        let e = err("word.vec", "1 2\nb 1 x2\n");
        assert!(e.contains(":2:") && e.contains("not a number"), "{e}");
        let e = err("unmatched.vec", "a 1 2\nzz 1 ,\n");
        assert!(e.contains(":2:") && e.contains("not a number"), "{e}");
        let e = err("dim0.vec", "3 0\n");
        assert!(e.contains(":1:") && e.contains("dimension 0"), "{e}");
        let e = err("novals.vec", "a\n");
        assert!(e.contains(":1:") && e.contains("no values"), "{e}");
        let e = err("empty.vec", "");
        assert!(e.contains("no word vectors"), "{e}");
        let e = err("header.vec", "5 3\n");
        assert!(e.contains("no word vectors"), "{e}");
        let e = err("short.vec", "3 2\na 1 2\nb 3 4\n");
        assert!(
            e.contains("promises 3 vectors") && e.contains("has 2"),
            "{e}"
        );
        let p = dir.path().join("utf.vec");
        std::fs::write(&p, b"a 1\n\xFF 2\n").unwrap();
        let e = read_vec(&p, &v).unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("UTF-8"), "{e}");
        let p = dir.path().join("bad.vec.gz");
        std::fs::write(&p, b"not gzip at all").unwrap();
        let e = read_vec(&p, &v).unwrap_err().to_string();
        assert!(e.contains("bad.vec.gz") && e.contains("gzip"), "{e}");
        let e = read_vec(&dir.path().join("missing.vec"), &v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.vec"), "{e}");
    }
}
