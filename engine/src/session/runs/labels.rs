//! Names and labels that tell runs apart (never cut to ambiguity), and the
//! settings that differ between runs ("diff only").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::session::metrics::Curves;
use crate::session::SessionConfig;

use super::meta::{folder_name, RunMeta};

/// Names that tell runs apart: `names[i]` (a display name) as it is when
/// no other run has it, else `NAME (ID)` with the run's folder name
/// `ids[i]` (a name that is its folder name is kept as it is).
pub fn unique_names(names: &[String], ids: &[String]) -> Vec<String> {
    names
        .iter()
        .zip(ids)
        .map(|(n, id)| {
            if n != id && names.iter().filter(|m| *m == n).count() > 1 {
                format!("{n} ({id})")
            } else {
                n.clone()
            }
        })
        .collect()
}

/// Labels of session folders `dirs` in tables and legends: each one's
/// name (`meta.json`; its folder name when it has none, or when its
/// `meta.json` cannot be read), `NAME (FOLDER)` for a name several share
/// ([`unique_names`]), and, where two are still alike (the same folder
/// name under different roots), their paths as given.
pub fn session_labels(dirs: &[PathBuf]) -> Vec<String> {
    let ids: Vec<String> = dirs.iter().map(|d| folder_name(d)).collect();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| {
            RunMeta::read(d)
                .map(|m| m.display_name(d))
                .unwrap_or_else(|_| folder_name(d))
        })
        .collect();
    let labels = unique_names(&names, &ids);
    let clash = labels
        .iter()
        .enumerate()
        .any(|(i, n)| labels[..i].contains(n));
    if clash {
        labels
            .iter()
            .zip(dirs)
            .map(|(l, d)| {
                let p = d.display().to_string();
                if *l == folder_name(d) {
                    p
                } else {
                    format!("{l} ({p})")
                }
            })
            .collect()
    } else {
        labels
    }
}

/// Labels for `names` that are never cut to ambiguity: the prefix all of
/// them share is elided (`…`) up to a word boundary (`-`, `_`, `.`, `/`,
/// space), so `s2net-20261122-190301` and `s2net-20261122-190455` become
/// `…190301` and `…190455`. With fewer than two names, names all alike,
/// or no shared prefix worth eliding, the names are returned as they are.
pub fn distinct_labels(names: &[String]) -> Vec<String> {
    if names.len() < 2 || names.iter().all(|n| *n == names[0]) {
        return names.to_vec();
    }
    let first: Vec<char> = names[0].chars().collect();
    let mut lcp = first.len();
    for n in &names[1..] {
        lcp = lcp.min(
            n.chars()
                .zip(first.iter())
                .take_while(|(a, b)| a == *b)
                .count(),
        );
    }
    let shortest = names.iter().map(|n| n.chars().count()).min().unwrap_or(0);
    // the cut: right after a separator, leaving every label non-empty
    let cut = (1..=lcp.min(shortest.saturating_sub(1)))
        .rev()
        .find(|&i| matches!(first[i - 1], '-' | '_' | '.' | '/' | ' '))
        .unwrap_or(0);
    if cut < 3 {
        return names.to_vec();
    }
    names
        .iter()
        .map(|n| format!("…{}", n.chars().skip(cut).collect::<String>()))
        .collect()
}

/// `s` in at most `n` characters, cut in the middle (`ab…yz`) so both its
/// start and its distinguishing end stay visible.
pub fn elide_middle(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= n || n < 3 {
        return s.to_string();
    }
    let tail = (n - 1) / 2;
    let head = n - 1 - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// The value of setting `key` in a session's config: `model`, `seed`,
/// `device` (as asked for), `workspace` (its folder or file stem), or a
/// hyper-parameter (resolved value, else the given one).
pub fn setting(cfg: &SessionConfig, key: &str) -> Option<String> {
    match key {
        "model" => Some(cfg.model.clone()),
        "seed" => Some(cfg.seed.to_string()),
        "device" => Some(cfg.device_request.to_string()),
        "workspace" => Some(workspace_label(&cfg.workspace)),
        k => cfg.params.get(k).or_else(|| cfg.given.get(k)).cloned(),
    }
}

/// A short name for a workspace file: its folder for `…/NAME/workspace.toml`,
/// else the file's stem.
pub fn workspace_label(p: &Path) -> String {
    let named = if p.file_name().is_some_and(|n| n == "workspace.toml") {
        p.parent().and_then(|d| d.file_name())
    } else {
        p.file_stem()
    };
    named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Every setting of a session's config by name: `model`, `workspace`,
/// `seed`, `device` and each hyper-parameter ([`setting`]).
pub fn settings_map(cfg: &SessionConfig) -> BTreeMap<String, String> {
    let mut keys: Vec<&str> = FIXED_SETTINGS.to_vec();
    keys.extend(cfg.params.keys().map(String::as_str));
    keys.extend(cfg.given.keys().map(String::as_str));
    keys.into_iter()
        .filter_map(|k| Some((k.to_string(), setting(cfg, k)?)))
        .collect()
}

/// A setting's value as JSON: an integer or a finite number as a number
/// (when it reads back as written, so `001` and `1e-3` stay as typed only
/// where a number cannot hold them: `001` is a string, `1e-3` the number
/// 0.001), `true`/`false` as a boolean, anything else as a string.
pub fn typed_value(v: &str) -> serde_json::Value {
    let t = v.trim();
    let numeric = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && t.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '.');
    if numeric {
        if let Ok(i) = t.parse::<i64>() {
            if i.to_string() == t {
                return serde_json::Value::from(i);
            }
        } else if let Ok(x) = t.parse::<f64>() {
            if x.is_finite() {
                return serde_json::Value::from(x);
            }
        }
    }
    match t {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        _ => serde_json::Value::String(v.to_string()),
    }
}

/// The settings every session has, shown first among differing settings.
const FIXED_SETTINGS: [&str; 4] = ["model", "workspace", "seed", "device"];

/// Sorts `items` by a column whose text `value` gives for each item (the
/// run tables' sort, CLI and workbench alike): values that parse as numbers
/// compare as numbers, others as text; items without a value go last
/// whatever the direction; equal items keep their order.
pub fn sort_by_column<T>(items: &mut [T], desc: bool, value: impl Fn(&T) -> Option<String>) {
    items.sort_by(|a, b| match (value(a), value(b)) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => {
            let o = match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => p.total_cmp(&q),
                _ => x.cmp(&y),
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        }
    });
}

/// The keys whose values differ between the settings maps
/// ([`settings_map`]) of several runs ("diff only"): `model`, `workspace`,
/// `seed`, `device` first, then hyper-parameters by name. A
/// hyper-parameter is compared within each model's own runs (those with
/// the same `model` value): it differs when two runs of one model differ
/// on it (one lacking it included), never merely because another model
/// has no such setting. Fewer than two runs: none.
pub fn differing_keys(maps: &[&BTreeMap<String, String>]) -> Vec<String> {
    if maps.len() < 2 {
        return Vec::new();
    }
    let mut all: std::collections::BTreeSet<&str> = Default::default();
    for m in maps {
        all.extend(m.keys().map(String::as_str));
    }
    let mut keys: Vec<&str> = FIXED_SETTINGS
        .iter()
        .copied()
        .filter(|k| all.contains(k))
        .collect();
    keys.extend(all.iter().filter(|k| !FIXED_SETTINGS.contains(k)));
    let differ = |group: &[&&BTreeMap<String, String>], k: &str| {
        group.len() > 1 && group[1..].iter().any(|m| m.get(k) != group[0].get(k))
    };
    let mut models: Vec<Option<&String>> = maps.iter().map(|m| m.get("model")).collect();
    models.sort();
    models.dedup();
    let groups: Vec<Vec<&&BTreeMap<String, String>>> = models
        .iter()
        .map(|model| maps.iter().filter(|m| m.get("model") == *model).collect())
        .collect();
    let all_runs: Vec<&&BTreeMap<String, String>> = maps.iter().collect();
    keys.into_iter()
        .filter(|k| {
            if FIXED_SETTINGS.contains(k) {
                differ(&all_runs, k)
            } else {
                groups.iter().any(|g| differ(g, k))
            }
        })
        .map(str::to_string)
        .collect()
}

/// What sets each of several runs apart from the other runs of its model:
/// for each of `maps` ([`settings_map`]s) its `KEY=VALUE` for the settings
/// that differ among the runs with its `model` ([`differing_keys`]; the
/// hyper-parameters first, then `workspace`, `seed`, `device`),
/// space-separated (`dim=16 seed=2`), less the keys in `skip` (a
/// table's own columns) and those the run lacks. The model itself tells
/// runs of different models apart: a lone CCA run among S2Net runs gets no
/// label, nor the `dim` they differ on. Empty for a run nothing sets apart.
/// The workbench's picker and Compare table show these beside the model.
pub fn differing_labels(maps: &[&BTreeMap<String, String>], skip: &[&str]) -> Vec<String> {
    let mut by_model: BTreeMap<Option<&String>, Vec<String>> = BTreeMap::new();
    maps.iter()
        .map(|m| {
            let model = m.get("model");
            let keys = by_model.entry(model).or_insert_with(|| {
                let group: Vec<&BTreeMap<String, String>> = maps
                    .iter()
                    .copied()
                    .filter(|x| x.get("model") == model)
                    .collect();
                let mut keys = differing_keys(&group);
                // what the model's own settings say first
                keys.sort_by_key(|k| FIXED_SETTINGS.contains(&k.as_str()));
                keys
            });
            keys.iter()
                .filter(|k| !skip.contains(&k.as_str()))
                .filter_map(|k| Some(format!("{k}={}", m.get(k)?)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The settings whose values differ between the sessions of `configs`
/// ([`differing_keys`] of their [`settings_map`]s).
pub fn differing_settings(configs: &[&SessionConfig]) -> Vec<String> {
    let maps: Vec<BTreeMap<String, String>> = configs.iter().map(|c| settings_map(c)).collect();
    differing_keys(&maps.iter().collect::<Vec<_>>())
}

/// Best value of each figure in a session's curves: the highest of each
/// validation figure (`MRR`, `P@1`, ad-hoc figures) with its epoch, and
/// the lowest loss. Names as recorded.
pub fn best_figures(curves: &Curves) -> BTreeMap<String, (f64, f64)> {
    let mut best: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for v in &curves.valid {
        for (k, &y) in &v.scores {
            if k == "queries" || !y.is_finite() {
                continue;
            }
            let e = best.entry(k.clone()).or_insert((y, v.x));
            if y > e.0 {
                *e = (y, v.x);
            }
        }
    }
    if let Some(&(s, y)) = curves.loss.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        best.insert("loss".into(), (y, s));
    }
    best
}
