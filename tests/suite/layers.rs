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

/// The families of `engine/src/models`: one folder each, importing only the
/// contract (the files at the top of `models/`) and the kit (`models/kit/`).
const FAMILIES: &[&str] = &["encoder", "lexical", "linear", "neural", "topic"];

/// The folder (`""` for the contract at the top, `kit`, or a family) and
/// the file of that folder a `crate::models::` path starting at `path`
/// names (`kit::nn::X`, an alias re-exported by `models/mod.rs` such as
/// `s2net::X`, a contract file such as `registry::X` (one of `top_files`),
/// or a contract item such as `Params`).
fn models_target(
    path: &str,
    aliases: &BTreeMap<String, String>,
    top_files: &BTreeSet<String>,
) -> (String, Option<String>) {
    let segs: Vec<&str> = path.split("::").map(str::trim).collect();
    let first = segs[0];
    if top_files.contains(first) {
        return (String::new(), Some(first.to_string()));
    }
    if first == "kit" || FAMILIES.contains(&first) {
        return (first.to_string(), segs.get(1).map(|s| s.to_string()));
    }
    match aliases.get(first) {
        Some(folder) => (folder.clone(), Some(first.to_string())),
        None => (String::new(), None),
    }
}

/// The paths that follow `prefix` in `code`: `prefix a::b` gives `a::b`,
/// `prefix {a::b, c}` gives `a::b` and `c`.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        if let Some(group) = after.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            for p in inner.split(',') {
                let p: String = p.trim().chars().take_while(|c| ident(*c)).collect();
                if !p.is_empty() {
                    out.push(p);
                }
            }
        } else {
            let p: String = after.chars().take_while(|c| ident(*c)).collect();
            let p = p.trim_end_matches(':').to_string();
            if !p.is_empty() {
                out.push(p);
            }
        }
        rest = after;
    }
    out
}

/// The code of a Rust file that can import: comments cut, and the file's
/// own unit tests (`#[cfg(test)] mod tests`, at its end) left out.
fn import_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    let code: Vec<&str> = lines[..end]
        .iter()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    code.join("\n")
}

/// Every breach of the models' layering under `root` (an
/// `engine/src/models` folder): a family importing another family, the kit
/// importing a family, and a file importing a sibling (a file of its
/// folder) that imports it back, directly or through other siblings.
/// Comments are not imports, nor is a file's own `#[cfg(test)] mod tests`.
fn models_layering(root: &Path) -> Vec<String> {
    // the aliases `models/mod.rs` re-exports: `pub use kit::{nn, ...};`
    let mut aliases = BTreeMap::new();
    let top = std::fs::read_to_string(root.join("mod.rs")).unwrap_or_default();
    for line in top.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let folder = rest.split("::").next().unwrap_or("");
        if folder == "kit" || FAMILIES.contains(&folder) {
            for p in paths_after(rest, &format!("{folder}::")) {
                aliases.insert(p, folder.to_string());
            }
        }
    }
    let top_files: BTreeSet<String> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let stem = p.file_stem()?.to_string_lossy().to_string();
            (p.extension().is_some_and(|x| x == "rs") && stem != "mod").then_some(stem)
        })
        .collect();
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut bad = Vec::new();
    // sibling imports per folder: file -> files it names
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap();
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        let me = parts.pop().unwrap().trim_end_matches(".rs").to_string();
        let folder = parts.first().cloned().unwrap_or_default();
        let siblings: BTreeSet<String> = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                let stem = p.file_stem()?.to_string_lossy().to_string();
                (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(stem)
            })
            .filter(|s| s != "mod")
            .collect();
        // a file's unit tests may compare it with a sibling (the fused BCE
        // kernel with `nn`'s plain ops): test code, not an import
        let code = import_code(&std::fs::read_to_string(f).unwrap());
        let mut targets = Vec::new();
        for p in paths_after(&code, "crate::models::") {
            targets.push(models_target(&p, &aliases, &top_files));
        }
        if !folder.is_empty() {
            // `super::` at a file's top names its folder's module
            for p in paths_after(&code, "super::") {
                let first = p.split("::").next().unwrap_or("");
                if siblings.contains(first) {
                    targets.push((folder.clone(), Some(first.to_string())));
                }
            }
        }
        for (to, file) in targets {
            if to == folder {
                if let Some(file) = file.filter(|x| *x != me && siblings.contains(x)) {
                    if me != "mod" {
                        edges
                            .entry(folder.clone())
                            .or_default()
                            .entry(me.clone())
                            .or_default()
                            .insert(file);
                    }
                }
            } else if to.is_empty() || to == "kit" {
                // the contract and the kit: any folder may import them
            } else if folder == "kit" {
                bad.push(format!(
                    "{}: the kit imports the family `{to}`",
                    rel.display()
                ));
            } else if !folder.is_empty() {
                bad.push(format!(
                    "{}: the family `{folder}` imports the family `{to}`",
                    rel.display()
                ));
            }
        }
    }
    // a cycle among a folder's files: one reachable from itself
    for (folder, graph) in &edges {
        for start in graph.keys() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&String> = graph[start].iter().collect();
            while let Some(n) = stack.pop() {
                if n == start {
                    bad.push(format!(
                        "models/{folder}: `{start}` imports a sibling that imports it back"
                    ));
                    break;
                }
                if seen.insert(n) {
                    stack.extend(graph.get(n).into_iter().flatten());
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn model_families_import_only_the_contract_and_the_kit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/src/models");
    assert!(root.join("kit").is_dir() && root.join("linear").is_dir());
    let bad = models_layering(&root);
    assert!(bad.is_empty(), "models layering:\n{}", bad.join("\n"));
}

/// The check itself finds each breach, on a small tree written here.
#[test]
fn the_models_layering_check_finds_each_breach() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "mod.rs",
        "pub mod kit;\npub mod linear;\npub mod neural;\npub use linear::{cca, s2net};\n",
    );
    write(
        "trainer.rs",
        "use crate::models::s2net::X; use super::Model;\n",
    );
    write(
        "registry.rs",
        "use crate::models::trainer::T; use crate::models::kit::nn;\n",
    );
    write("kit/mod.rs", "pub mod nn;\n");
    write(
        "kit/nn.rs",
        "use crate::models::Params;\n// crate::models::neural::xcnn in a comment\n",
    );
    write("linear/mod.rs", "pub mod cca;\npub mod s2net;\n");
    write(
        "linear/cca.rs",
        "use crate::models::kit::nn::unit_rows;\nuse super::s2net::A;\n",
    );
    write("linear/s2net.rs", "use crate::models::linear::cca::B;\n");
    write("neural/mod.rs", "pub mod xcnn;\n");
    write(
        "neural/xcnn.rs",
        "use crate::models::{kit::nn, Params};\n#[cfg(test)]\nmod tests {\n    use crate::models::s2net::A;\n}\n",
    );
    assert_eq!(
        models_layering(root),
        [
            "models/linear: `cca` imports a sibling that imports it back",
            "models/linear: `s2net` imports a sibling that imports it back",
        ]
    );
    write("kit/nn.rs", "fn f() { crate::models::neural::xcnn::g() }\n");
    write("trainer.rs", "use crate::models::registry::R;\n");
    write("linear/s2net.rs", "use crate::models::{cca::B as _};\n");
    write("neural/xcnn.rs", "use crate::models::s2net::batch;\n");
    let bad = models_layering(root);
    assert_eq!(
        bad,
        [
            "kit/nn.rs: the kit imports the family `neural`",
            "models/: `registry` imports a sibling that imports it back",
            "models/: `trainer` imports a sibling that imports it back",
            "models/linear: `cca` imports a sibling that imports it back",
            "models/linear: `s2net` imports a sibling that imports it back",
            "neural/xcnn.rs: the family `neural` imports the family `linear`",
        ],
        "{bad:?}"
    );
}

/// Every import cycle between sibling files of one folder under `root`
/// (`engine/src` or the binary's `src`): a file naming a sibling (through
/// `crate::PATH::sibling` or `super::sibling`) that names it back, directly
/// or through other siblings. `mod.rs` (which declares its siblings), comments
/// and a file's own `#[cfg(test)] mod tests` are not imports.
fn sibling_cycles(root: &Path) -> Vec<String> {
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p.clone());
                stack.push(p);
            }
        }
    }
    let mut bad = Vec::new();
    for dir in dirs {
        let module = dir
            .strip_prefix(root)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect::<Vec<_>>()
            .join("::");
        let mut files = BTreeMap::new();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            if p.extension().is_some_and(|x| x == "rs") && stem != "mod" {
                files.insert(stem, std::fs::read_to_string(&p).unwrap());
            }
        }
        let mut graph: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (me, text) in &files {
            let code = import_code(text);
            let mut named = paths_after(&code, &format!("crate::{module}::"));
            named.extend(paths_after(&code, "super::"));
            for p in named {
                let first = p.split("::").next().unwrap_or("").to_string();
                if first != *me && files.contains_key(&first) {
                    graph.entry(me.as_str()).or_default().insert(first);
                }
            }
        }
        for start in graph.keys() {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = graph[start].iter().collect();
            while let Some(n) = todo.pop() {
                if n == start {
                    bad.push(format!(
                        "{}: `{start}` imports a sibling that imports it back",
                        dir.display()
                    ));
                    break;
                }
                if seen.insert(n) {
                    todo.extend(graph.get(n.as_str()).into_iter().flatten());
                }
            }
        }
    }
    bad.sort();
    bad
}

/// No file of any folder, in the engine or the binary, imports a sibling
/// that imports it back.
#[test]
fn no_folder_has_an_import_cycle_between_its_files() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for root in [here.join("engine/src"), here.join("src")] {
        let bad = sibling_cycles(&root);
        assert!(bad.is_empty(), "import cycles:\n{}", bad.join("\n"));
    }
    // the check finds a cycle through a third file, and only that one
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("text");
    std::fs::create_dir_all(&f).unwrap();
    let write = |name: &str, text: &str| std::fs::write(f.join(name), text).unwrap();
    write("mod.rs", "pub mod a; pub mod b; pub mod c; pub mod d;\n");
    write("a.rs", "use super::b::X;\n");
    write("b.rs", "use crate::text::c::Y; // not super::d\n");
    write("c.rs", "use super::{a, d};\n");
    write(
        "d.rs",
        "#[cfg(test)]\nmod tests {\n    use super::super::a;\n}\n",
    );
    let bad = sibling_cycles(dir.path());
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(bad.iter().all(|b| !b.contains("`d`")), "{bad:?}");
}
