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
/// own unit tests (`#[cfg(test)] mod tests` or any other inline
/// `#[cfg(test)] mod NAME {`, at its end) left out.
fn import_code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines.get(i + 1).is_some_and(|l| {
                    let l = l.trim();
                    l.starts_with("mod tests") || (l.starts_with("mod ") && l.ends_with('{'))
                })
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

/// One parsed path of a `use` tree or an expression: its segments and the
/// name it binds (the last segment, or the alias after `as`).
type UsePath = (Vec<String>, String);

/// The paths of the use tree (or plain path) starting at byte `i` of `s`:
/// `a::{b, c::d as e, f::*}` gives `a::b`, `a::c::d` (bound as `e`) and
/// `a::f::*`.
fn use_tree(s: &[u8], i: &mut usize) -> Vec<UsePath> {
    let ws = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(i);
    if *i < s.len() && s[*i] == b'{' {
        *i += 1;
        let mut out = Vec::new();
        loop {
            ws(i);
            if *i >= s.len() {
                break;
            }
            if s[*i] == b'}' {
                *i += 1;
                break;
            }
            let before = *i;
            out.extend(use_tree(s, i));
            ws(i);
            if *i < s.len() && s[*i] == b',' {
                *i += 1;
            } else if *i < s.len() && s[*i] == b'}' {
                *i += 1;
                break;
            } else if *i == before {
                break;
            }
        }
        return out;
    }
    let start = *i;
    if *i < s.len() && s[*i] == b'*' {
        *i += 1;
    } else {
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
            *i += 1;
        }
    }
    let seg = String::from_utf8_lossy(&s[start..*i]).to_string();
    if seg.is_empty() {
        return Vec::new();
    }
    if s[*i..].starts_with(b"::") {
        *i += 2;
        let subs = use_tree(s, i);
        if subs.is_empty() {
            return vec![(vec![seg.clone()], seg)];
        }
        return subs
            .into_iter()
            .map(|(mut p, b)| {
                p.insert(0, seg.clone());
                (p, b)
            })
            .collect();
    }
    let mut bind = seg.clone();
    let mut j = *i;
    while j < s.len() && s[j].is_ascii_whitespace() {
        j += 1;
    }
    if s[j..].starts_with(b"as ") {
        j += 3;
        let a = j;
        while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
            j += 1;
        }
        bind = String::from_utf8_lossy(&s[a..j]).to_string();
        *i = j;
    }
    vec![(vec![seg], bind)]
}

/// A crate's files by module path (`a/b.rs` and `a/b/mod.rs` are `a::b`,
/// the root file is the empty path) with their import code (see
/// [`import_code`]).
struct CrateFiles {
    root: PathBuf,
    files: BTreeMap<Vec<String>, (PathBuf, String)>,
}

impl CrateFiles {
    fn read(root: &Path, root_file: &str) -> CrateFiles {
        let mut paths = Vec::new();
        rust_files(root, &mut paths);
        let mut files = BTreeMap::new();
        for p in paths {
            let rel = p.strip_prefix(root).unwrap();
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            let last = module.pop().unwrap();
            let stem = last.trim_end_matches(".rs");
            if stem != "mod" && !(module.is_empty() && stem == root_file) {
                module.push(stem.to_string());
            }
            let code = import_code(&std::fs::read_to_string(&p).unwrap());
            files.insert(module, (rel.to_path_buf(), code));
        }
        CrateFiles {
            root: root.to_path_buf(),
            files,
        }
    }

    /// The first segment's base module for a path written in module `m`:
    /// `crate`, `super` (repeated), `self` or a child module of `m`; `None`
    /// for another crate's path.
    fn base(&self, m: &[String], path: &[String]) -> Option<(Vec<String>, usize)> {
        let mut at = m.to_vec();
        let mut k = 0;
        match path.first().map(String::as_str) {
            Some("crate") => {
                at.clear();
                k = 1;
            }
            Some("self") => k = 1,
            Some("super") => {
                while path.get(k).is_some_and(|s| s == "super") {
                    at.pop()?;
                    k += 1;
                }
            }
            Some(first) => {
                let mut child = m.to_vec();
                child.push(first.to_string());
                if !self.files.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        Some((at, k))
    }

    /// The file (module path) that defines what `path`, written in module
    /// `m`, names: the deepest file module on the path, through the named
    /// re-exports (`pub use x::Y`) of the file it ends in.
    fn resolve(&self, m: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
        let (mut at, mut k) = self.base(m, path)?;
        while k < path.len() {
            let mut next = at.clone();
            next.push(path[k].clone());
            if !self.files.contains_key(&next) {
                break;
            }
            at = next;
            k += 1;
        }
        if let Some(name) = path.get(k).filter(|_| depth < 8) {
            let code = &self.files.get(&at)?.1;
            for (p, bind) in reexports(code) {
                if &bind == name {
                    if let Some(t) = self.resolve(&at, &p, depth + 1) {
                        return Some(t);
                    }
                }
            }
        }
        Some(at)
    }

    /// The files each file imports (by module path), itself left out.
    fn imports(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut out: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (m, (_, code)) in &self.files {
            let children: Vec<String> = self
                .files
                .keys()
                .filter(|c| c.len() == m.len() + 1 && c.starts_with(m))
                .map(|c| c.last().unwrap().clone())
                .collect();
            // a named re-export passes its item through: whoever names the
            // item imports the file that defines it, the re-exporting file
            // only when its own code uses the name
            let mut code = code.clone();
            for (start, end) in reexport_spans(&code.clone()) {
                let p = &code[start..end];
                if !p.contains('*') {
                    code.replace_range(start..end, &" ".repeat(end - start));
                }
            }
            // a module's declaration (`pub mod x;`) names the module, not a
            // re-exported item of the same name (`pub use x::x;`)
            for (start, end) in mod_declarations(&code.clone()) {
                code.replace_range(start..end, &" ".repeat(end - start));
            }
            let b = code.as_bytes();
            let mut targets = BTreeSet::new();
            let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
            for (p, bind) in reexports(&self.files[m].1) {
                let used = code.match_indices(bind.as_str()).any(|(i, _)| {
                    (i == 0 || !word(b[i - 1])) && b.get(i + bind.len()).is_none_or(|c| !word(*c))
                });
                if let Some(t) = used.then(|| self.resolve(m, &p, 0)).flatten() {
                    if &t != m {
                        targets.insert(t);
                    }
                }
            }
            let mut i = 0;
            while i < b.len() {
                let boundary = i == 0
                    || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
                let rest = &b[i..];
                let starts = boundary
                    && (["crate::", "super::", "self::"]
                        .iter()
                        .any(|t| rest.starts_with(t.as_bytes()))
                        || children
                            .iter()
                            .any(|c| rest.starts_with(format!("{c}::").as_bytes())));
                if !starts {
                    i += 1;
                    continue;
                }
                let mut j = i;
                for (p, _) in use_tree(b, &mut j) {
                    if let Some(t) = self.resolve(m, &p, 0) {
                        if &t != m {
                            targets.insert(t);
                        }
                    }
                }
                i = j.max(i + 1);
            }
            out.insert(m.clone(), targets);
        }
        out
    }

    /// Every import cycle: each group of files that import one another,
    /// directly or through others (a strongly connected set of two or more
    /// files), as `root: a.rs -> b.rs -> a.rs` with one cycle through its
    /// first file, and the group's other files.
    fn cycles(&self) -> Vec<String> {
        let graph = self.imports();
        let reach = |from: &Vec<String>| {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&Vec<String>> = graph[from].iter().collect();
            while let Some(n) = todo.pop() {
                if seen.insert(n.clone()) {
                    todo.extend(graph.get(n).into_iter().flatten());
                }
            }
            seen
        };
        let reaches: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
            graph.keys().map(|m| (m, reach(m))).collect();
        let name = |m: &Vec<String>| self.files[m].0.display().to_string();
        let mut done = BTreeSet::new();
        let mut bad = Vec::new();
        for (m, r) in &reaches {
            if done.contains(*m) || !r.contains(*m) {
                continue;
            }
            let group: BTreeSet<Vec<String>> = r
                .iter()
                .filter(|n| reaches[n].contains(*m))
                .cloned()
                .collect();
            // one shortest cycle from `m` back to itself, inside the group
            let mut prev: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([(*m).clone()]);
            'bfs: while let Some(n) = queue.pop_front() {
                for t in &graph[&n] {
                    if !group.contains(t) || prev.contains_key(t) {
                        continue;
                    }
                    prev.insert(t.clone(), n.clone());
                    if t == *m {
                        break 'bfs;
                    }
                    queue.push_back(t.clone());
                }
            }
            let mut path = vec![(*m).clone()];
            let mut at = prev[*m].clone();
            while &at != *m {
                path.push(at.clone());
                at = prev[&at].clone();
            }
            path.push((*m).clone());
            path.reverse();
            let shown: Vec<String> = path.iter().map(name).collect();
            let others: Vec<String> = group
                .iter()
                .filter(|g| !path.contains(g))
                .map(name)
                .collect();
            bad.push(format!(
                "{}: {}{}",
                self.root.display(),
                shown.join(" -> "),
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" (with {})", others.join(", "))
                }
            ));
            done.extend(group);
        }
        bad
    }
}

/// The byte spans of a file's module declarations (`mod x;`, `pub mod x;`,
/// `pub(crate) mod x;`), each from `mod` to the `;`.
fn mod_declarations(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    for (i, _) in code.match_indices("mod ") {
        if i > 0 && word(b[i - 1]) {
            continue;
        }
        let mut j = i + 4;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let name = j;
        while j < b.len() && word(b[j]) {
            j += 1;
        }
        if j > name && b.get(j) == Some(&b';') {
            out.push((i, j + 1));
        }
    }
    out
}

/// The byte spans of a file's re-exports (`pub use ...;`,
/// `pub(crate) use ...;`), each from the path after `use` to the `;`.
fn reexport_spans(code: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for p in ["pub use ", "pub(crate) use ", "pub(super) use "] {
        let mut from = 0;
        while let Some(i) = code[from..].find(p) {
            let start = from + i + p.len();
            let end = code[start..].find(';').map_or(code.len(), |e| start + e);
            out.push((start, end));
            from = end;
        }
    }
    out
}

/// The named re-exports of a file's code: `pub use a::{B, c::D as E};`
/// gives `a::B` bound as `B` and `a::c::D` bound as `E`.
fn reexports(code: &str) -> Vec<UsePath> {
    let mut out = Vec::new();
    for (start, end) in reexport_spans(code) {
        let mut i = 0;
        out.extend(
            use_tree(&code.as_bytes()[start..end], &mut i)
                .into_iter()
                .filter(|(p, _)| p.last().is_some_and(|l| l != "*")),
        );
    }
    out
}

/// No file of the engine (`engine/src`) or of the binary (`src`) imports a
/// file that imports it back, directly or through others, in one folder or
/// across folders, `mod.rs` included. An import
/// is a `crate::`, `super::`, `self::` or child-module path (in a `use` or
/// in code) and goes to the file that defines what it names (through named
/// `pub use` re-exports, which import nothing themselves); declaring a
/// module (`mod x;`), comments and a file's own `#[cfg(test)] mod tests`
/// are not imports.
#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (root, root_file) in [(here.join("src"), "main"), (here.join("engine/src"), "lib")] {
        let files = CrateFiles::read(&root, root_file);
        assert!(files.files.len() > 20, "{} files read", files.files.len());
        let cycles = files.cycles();
        assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    }
}

/// The cycle check finds a cycle through a third file across folders and
/// through `mod.rs`, follows re-exports to the file that defines an item, and
/// counts neither module declarations nor test code.
#[test]
fn the_cycle_check_finds_cycles_across_folders() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let cycles = || CrateFiles::read(dir.path(), "main").cycles();
    write("main.rs", "mod app; mod screens; mod ui;\nuse app::App;\n");
    write("app.rs", "use crate::screens::{jobs::Jobs, Screen};\n");
    write(
        "screens/mod.rs",
        "pub mod jobs;\npub use jobs::Jobs as J;\n// use crate::app::App;\npub trait Screen {}\n",
    );
    write(
        "screens/jobs.rs",
        "use super::Screen;\nfn f() { crate::ui::draw() }\n#[cfg(test)]\nmod tests {\n    use crate::app::App;\n}\n",
    );
    write("ui.rs", "use crate::screens::J;\npub fn draw() {}\n");
    // jobs -> ui -> (J re-exported from) jobs; mod.rs only declares jobs and
    // passes it through: not part of the cycle
    assert_eq!(
        cycles(),
        [format!(
            "{}: screens/jobs.rs -> ui.rs -> screens/jobs.rs",
            dir.path().display()
        )]
    );
    write("ui.rs", "pub fn draw() {}\n");
    assert_eq!(cycles(), Vec::<String>::new());
    // mod.rs using the item it re-exports imports its file
    write(
        "screens/mod.rs",
        "pub mod jobs;\npub use jobs::Jobs as J;\npub trait Screen {}\nfn f(_: J) {}\n",
    );
    assert_eq!(
        cycles(),
        [format!(
            "{}: screens/mod.rs -> screens/jobs.rs -> screens/mod.rs",
            dir.path().display()
        )]
    );
    // a module declared under the name of the item it re-exports
    // (`pub mod jobs; pub use jobs::jobs;`) does not use the item
    write("screens/jobs.rs", "use super::Screen;\npub fn jobs() {}\n");
    write(
        "screens/mod.rs",
        "pub mod jobs;\npub use jobs::jobs;\npub trait Screen {}\n",
    );
    assert_eq!(cycles(), Vec::<String>::new());
    write(
        "screens/mod.rs",
        "pub mod jobs;\npub use jobs::jobs;\npub trait Screen {}\nfn f() { jobs() }\n",
    );
    assert_eq!(
        cycles(),
        [format!(
            "{}: screens/mod.rs -> screens/jobs.rs -> screens/mod.rs",
            dir.path().display()
        )]
    );
    // a screen naming the shell, through `super::super`, closes a circle of
    // three across folders with mod.rs in it
    write("screens/jobs.rs", "use super::super::app::App;\n");
    write("app.rs", "use crate::screens::{Screen};\n");
    write(
        "screens/mod.rs",
        "pub mod jobs;\nuse jobs::Jobs;\npub trait Screen {}\n",
    );
    assert_eq!(
        cycles(),
        [format!(
            "{}: app.rs -> screens/mod.rs -> screens/jobs.rs -> app.rs",
            dir.path().display()
        )]
    );
}
