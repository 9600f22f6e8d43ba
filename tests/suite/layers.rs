//! The engine's layering, checked on the source: every `crate::X` path in a
//! module of the engine crate (`engine/src/`; doc comments and comments
//! aside) names a module of a lower or equal layer, so there is no import
//! cycle and `text/`, `corpus/`, `index/` and `eval/` import nothing above
//! them; the engine's manifest names no terminal, argument-parsing or
//! progress-bar crate (so the compiler refuses them there), and the terminal
//! crates appear only under `src/tui/`, which with `src/cli/` belongs to the
//! binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level engine module: a module may use its own layer's
/// and lower layers' modules only.
const LAYERS: &[(&str, usize)] = &[
    ("error", 0),
    ("util", 0),
    ("text", 1),
    ("space", 1),
    ("eval", 2),
    ("corpus", 3),
    ("index", 4),
    ("models", 5),
    ("session", 6),
    ("train", 7),
    ("plot", 7),
    ("jobs", 8),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level engine modules named by `crate::X` in code lines of `text`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
            rest = after;
        }
    }
    out
}

#[test]
fn engine_modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/src");
    let layer: BTreeMap<&str, usize> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" {
            continue;
        }
        let Some(&mine) = layer.get(top.as_str()) else {
            bad.push(format!(
                "{}: module `{top}` has no layer in LAYERS",
                rel.display()
            ));
            continue;
        };
        for used in uses(&std::fs::read_to_string(f).unwrap()) {
            if used == top || ["Error", "Result"].contains(&used.as_str()) {
                continue;
            }
            match layer.get(used.as_str()) {
                Some(&l) if l <= mine => {}
                Some(&l) => bad.push(format!(
                    "{}: `{top}` (layer {mine}) uses `crate::{used}` (layer {l})",
                    rel.display()
                )),
                None => bad.push(format!(
                    "{}: `{top}` uses `crate::{used}`, not an engine module",
                    rel.display()
                )),
            }
        }
    }
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

/// The engine crate's `[dependencies]` (and its dev- and build-
/// dependencies) name none of the front-ends' crates.
#[test]
fn engine_manifest_names_no_terminal_crate() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = manifest.get(table).and_then(|d| d.as_table()) else {
            continue;
        };
        for name in ["ratatui", "crossterm", "clap", "indicatif"] {
            assert!(
                !deps.contains_key(name),
                "engine/Cargo.toml [{table}] names {name}: only the binary crate may"
            );
        }
    }
}

#[test]
fn terminal_crates_only_in_the_tui() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("engine/src"), &mut files);
    rust_files(&root.join("src"), &mut files);
    for f in files {
        let rel = f.strip_prefix(root).unwrap();
        if rel.starts_with("src/tui") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for word in ["ratatui", "crossterm"] {
            assert!(
                !uses_crate(&text, word),
                "{} uses {word}: only src/tui/ may",
                rel.display()
            );
        }
    }
}

fn uses_crate(text: &str, name: &str) -> bool {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|code| code.contains(&format!("{name}::")))
}
