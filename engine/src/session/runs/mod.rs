//! Telling runs apart: a session's own name, tags and note (`meta.json`),
//! the settings that differ between runs ("diff only"), labels that never
//! cut names to ambiguity, filters by setting or figure, a run's details,
//! and deleting a session. `rosetta jobs` and the workbench's Jobs screen
//! both go through these functions. One file each: `meta.rs` (name, tags,
//! note), `delete.rs`, `labels.rs` (names, labels, differing settings),
//! `filter.rs` (the filter language) and `detail.rs` (a run's details and
//! its log).

mod delete;
mod detail;
mod filter;
mod labels;
mod meta;

pub use delete::{delete, session_folder_path};
pub use detail::{detail, log_since, log_tail, tail_lines, CheckpointFile, RunDetail};
pub use filter::{Filterable, Run, RunFilter, RunIndex};
pub use labels::{
    best_figures, differing_keys, differing_labels, differing_settings, distinct_labels,
    elide_middle, session_labels, setting, settings_map, sort_by_column, typed_value, unique_names,
    workspace_label,
};
pub use meta::{
    edit_tags, folder_name, is_session_dir, rename, set_note, set_tags, RunMeta, META_FILE,
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::session::{MetricRecord, Session, SessionConfig, LOG_FILE, METRICS_FILE};

    fn cfg(params: &[(&str, &str)], seed: u64) -> SessionConfig {
        SessionConfig {
            rosetta_version: "0".into(),
            model: "test".into(),
            workspace: PathBuf::from("/w/tiny/workspace.toml"),
            workspace_hash: "h".into(),
            seed,
            device_request: crate::models::DeviceSpec::Cpu,
            device: String::new(),
            given: BTreeMap::new(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            created: "2026-01-01T00:00:00Z".into(),
            text: None,
        }
    }

    #[test]
    fn only_differing_settings_are_columns() {
        let a = cfg(&[("dim", "128"), ("lr", "0.01"), ("epochs", "5")], 1);
        let b = cfg(&[("dim", "128"), ("lr", "0.02"), ("epochs", "5")], 1);
        let c = cfg(
            &[
                ("dim", "128"),
                ("lr", "0.01"),
                ("epochs", "5"),
                ("tau", "1"),
            ],
            2,
        );
        assert_eq!(differing_settings(&[&a, &b]), vec!["lr"]);
        assert_eq!(differing_settings(&[&a, &b, &c]), vec!["seed", "lr", "tau"]);
        assert!(differing_settings(&[&a, &a.clone()]).is_empty());
        assert!(differing_settings(&[&a]).is_empty());
        // two models: a setting only one model has is no difference; one
        // varied within a model is, and so is the model
        let mut s1 = cfg(&[("dim", "128"), ("gamma", "10")], 1);
        s1.model = "s2net".into();
        let mut s2 = s1.clone();
        s2.params.insert("gamma".into(), "20".into());
        let mut c1 = cfg(&[("dim", "64"), ("reg", "0.1")], 1);
        c1.model = "cca".into();
        let c2 = c1.clone();
        assert_eq!(
            differing_settings(&[&s1, &s2, &c1, &c2]),
            vec!["model", "gamma"]
        );
        assert_eq!(differing_settings(&[&s1, &c1]), vec!["model"]);
        // what sets each run apart, less the model a table shows anyway:
        // the CCA runs are not labelled with S2Net's gamma
        let maps: Vec<BTreeMap<String, String>> = [&s1, &s2, &c1, &c2]
            .iter()
            .map(|c| settings_map(c))
            .collect();
        let refs: Vec<&BTreeMap<String, String>> = maps.iter().collect();
        assert_eq!(
            differing_labels(&refs, &["model"]),
            vec!["gamma=10", "gamma=20", "", ""]
        );
        let maps: Vec<BTreeMap<String, String>> =
            [&a, &c].iter().map(|c| settings_map(c)).collect();
        let refs: Vec<&BTreeMap<String, String>> = maps.iter().collect();
        assert_eq!(
            differing_labels(&refs, &[]),
            vec!["seed=1", "tau=1 seed=2"],
            "a run lacking a setting is not labelled with it"
        );
        assert_eq!(differing_labels(&refs[..1], &[]), vec![""]);
        assert_eq!(setting(&c, "tau").as_deref(), Some("1"));
        // typed JSON values
        use serde_json::json;
        assert_eq!(typed_value("128"), json!(128));
        assert_eq!(typed_value("0.001"), json!(0.001));
        assert_eq!(typed_value("1e-3"), json!(0.001));
        assert_eq!(typed_value("-2"), json!(-2));
        assert_eq!(typed_value("001"), json!("001"));
        assert_eq!(typed_value("true"), json!(true));
        assert_eq!(typed_value("adam"), json!("adam"));
        assert_eq!(typed_value("nan"), json!("nan"));
        assert_eq!(typed_value("inf"), json!("inf"));
        assert_eq!(typed_value("cuda:0"), json!("cuda:0"));
        assert_eq!(setting(&a, "tau"), None);
        assert_eq!(setting(&a, "workspace").as_deref(), Some("tiny"));
    }

    #[test]
    fn common_prefix_is_elided_not_the_end() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            distinct_labels(&n(&["s2net-20261122-190301", "s2net-20261122-190455"])),
            n(&["…190301", "…190455"])
        );
        assert_eq!(
            distinct_labels(&n(&["s2net-20261122-190301", "s2net-20261122-190301-2"])),
            n(&["…190301", "…190301-2"]),
            "a suffix run stays distinct"
        );
        // a prefix shared by chance (no word boundary) is not cut mid-word
        assert_eq!(
            distinct_labels(&n(&["alpha", "alpine"])),
            n(&["alpha", "alpine"])
        );
        assert_eq!(
            distinct_labels(&n(&["s2net-a", "cl-lsi-a"])),
            n(&["s2net-a", "cl-lsi-a"])
        );
        assert_eq!(distinct_labels(&n(&["only"])), n(&["only"]));
        let labels = distinct_labels(&n(&["run-x", "run-x"]));
        assert_eq!(labels, n(&["run-x", "run-x"]), "no empty label");
        assert_eq!(elide_middle("s2net-20261122-190301", 11), "s2net…90301");
        assert_eq!(elide_middle("short", 11), "short");
    }

    #[test]
    fn meta_round_trips_and_names_fall_back_to_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s2net-1");
        Session::create(&dir, cfg(&[], 1)).unwrap();
        assert_eq!(RunMeta::read(&dir).unwrap(), RunMeta::default());
        assert_eq!(RunMeta::read(&dir).unwrap().display_name(&dir), "s2net-1");
        rename(&dir, "  baseline lr 0.01 ").unwrap();
        edit_tags(&dir, &["good".into(), "lr".into(), "good".into()], &[]).unwrap();
        set_note(&dir, "first try\nsecond line").unwrap();
        let m = RunMeta::read(&dir).unwrap();
        assert_eq!(m.name, "baseline lr 0.01");
        assert_eq!(m.tags, vec!["good", "lr"]);
        assert_eq!(m.note, "first try\nsecond line");
        assert_eq!(m.display_name(&dir), "baseline lr 0.01");
        let m = edit_tags(&dir, &[], &["lr".into()]).unwrap();
        assert_eq!(m.tags, vec!["good"]);
        let m = set_tags(&dir, "a, b c").unwrap();
        assert_eq!(m.tags, vec!["a", "b", "c"]);
        assert!(rename(&dir, "two\nlines").is_err());
        assert!(edit_tags(&dir, &["has space".into()], &[]).is_err());
        rename(&dir, "").unwrap();
        assert_eq!(RunMeta::read(&dir).unwrap().display_name(&dir), "s2net-1");
        // no stray temporary files
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
        std::fs::write(dir.join(META_FILE), "{\"name\": 3}").unwrap();
        let e = RunMeta::read(&dir).unwrap_err().to_string();
        assert!(e.contains("meta.json:1"), "{e}");
        assert!(rename(&root.path().join("nope"), "x").is_err());
    }

    #[test]
    fn delete_refuses_a_running_job_and_removes_a_finished_one() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        let mut s = Session::create(&dir, cfg(&[], 1)).unwrap();
        // this test process plays the job
        let running = |l: &mut crate::session::JobLife| l.running("cpu", &Default::default());
        s.transition(running).unwrap();
        let e = delete(&dir).unwrap_err().to_string();
        assert!(e.contains("cancel it"), "{e}");
        assert!(dir.exists());
        s.transition(|l| l.done(&Default::default())).unwrap();
        delete(&dir).unwrap();
        assert!(!dir.exists());
        // not a session: refused, nothing removed
        let other = root.path().join("data");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("x.txt"), "keep").unwrap();
        assert!(delete(&other).is_err());
        assert!(other.join("x.txt").exists());
    }

    #[test]
    fn delete_removes_an_index_build_and_refuses_what_it_did_not_write() {
        let root = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let dir = root.path().join(name);
            let mut s = Session::create(&dir, cfg(&[], 1)).unwrap();
            s.transition(|l| {
                l.running("cpu", &Default::default())?;
                l.done(&Default::default())
            })
            .unwrap();
            let chunks = dir.join("index/chunks-target");
            std::fs::create_dir_all(&chunks).unwrap();
            for f in [
                "index/status.json",
                "index/log.txt",
                "index/.status.json.tmp.1.2",
            ] {
                std::fs::write(dir.join(f), "{}").unwrap();
            }
            for f in ["chunks.json", "chunk-000000.npy", "chunk-000000.npy.blake3"] {
                std::fs::write(chunks.join(f), "x").unwrap();
            }
            for f in [
                "doc-embeddings.target.lock",
                "doc-embeddings.target.estimate.json",
                "checkpoint.blake3.json",
            ] {
                std::fs::write(dir.join(f), "{}").unwrap();
            }
            dir
        };
        let dir = make("built");
        delete(&dir).unwrap();
        assert!(!dir.exists());
        // a file the build does not write, in a chunk folder: nothing removed
        let dir = make("foreign");
        std::fs::write(dir.join("index/chunks-target/notes.txt"), "mine").unwrap();
        let e = delete(&dir).unwrap_err().to_string();
        assert!(
            e.contains("notes.txt") && e.contains("nothing deleted"),
            "{e}"
        );
        assert!(dir.join("index/chunks-target/chunk-000000.npy").exists());
        std::fs::remove_file(dir.join("index/chunks-target/notes.txt")).unwrap();
        // a build encoding the collection holds its lock: refused
        let lock = crate::session::collection::CacheLock::acquire(&dir, crate::text::Side::Target)
            .unwrap();
        let e = delete(&dir).unwrap_err().to_string();
        assert!(e.contains("index cancel"), "{e}");
        assert!(dir.join("index/status.json").exists());
        drop(lock);
        delete(&dir).unwrap();
        assert!(!dir.exists());
    }

    struct Row(BTreeMap<String, String>, f64, Vec<String>);
    impl Filterable for Row {
        fn haystack(&self) -> String {
            "s2net-1 done".into()
        }
        fn setting(&self, k: &str) -> Option<String> {
            self.0.get(k).cloned()
        }
        fn tags(&self) -> Vec<String> {
            self.2.clone()
        }
        fn state(&self) -> String {
            "done".into()
        }
        fn figure(&self, n: &str) -> Option<f64> {
            n.eq_ignore_ascii_case("mrr").then_some(self.1)
        }
    }

    #[test]
    fn filters_by_setting_figure_tag_and_text() {
        let r = Row(
            [
                ("lr".to_string(), "0.01".to_string()),
                ("dim".into(), "256".into()),
            ]
            .into(),
            0.62,
            vec!["good".into()],
        );
        let f = |s: &str| s.parse::<RunFilter>().unwrap().matches(&r);
        assert!(f("lr=0.01") && f("lr=1e-2") && f("mrr>0.5") && f("MRR>=0.62"));
        assert!(!f("lr=0.02") && !f("mrr>0.7") && !f("mrr<0.5"));
        assert!(f("dim>=256") && !f("dim>256") && f("lr!=0.1"));
        assert!(f("tag=good") && !f("tag=bad") && f("state=done") && f("s2net"));
        assert!(f("s2net lr=0.01 mrr>0.5") && !f("s2net lr=0.02"));
        assert!(!f("tau=1") && f("tau!=1") && !f("p@1>0"));
        assert!(f(""));
        assert!("mrr>abc".parse::<RunFilter>().is_err());
        assert!("=3".parse::<RunFilter>().is_err());
    }

    #[test]
    fn best_figures_and_detail_of_a_session() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("r");
        Session::create(&dir, cfg(&[("lr", "0.1")], 1)).unwrap();
        let mut lines = String::new();
        for (e, mrr) in [(1, 0.5), (2, 0.7), (3, 0.6)] {
            let r = MetricRecord::Valid {
                phase: "train".into(),
                epoch: e,
                step: e * 10,
                scores: [("MRR".to_string(), mrr), ("queries".to_string(), 9.0)].into(),
            };
            lines.push_str(&serde_json::to_string(&r).unwrap());
            lines.push('\n');
        }
        std::fs::write(dir.join(METRICS_FILE), lines).unwrap();
        let log: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join(LOG_FILE), log).unwrap();
        std::fs::write(dir.join("checkpoints/best.safetensors"), b"1234").unwrap();
        let d = detail(&dir, 5).unwrap();
        assert_eq!(d.best["MRR"], (0.7, 2.0));
        assert!(!d.best.contains_key("queries"));
        assert_eq!(
            d.log_tail,
            vec!["line 46", "line 47", "line 48", "line 49", "line 50"]
        );
        assert_eq!(d.checkpoints.len(), 1);
        assert_eq!(d.checkpoints[0].bytes, 4);
        assert!(d.config.contains("lr = \"0.1\""), "{}", d.config);
        assert_eq!(d.state, "queued");
        let mut idx = RunIndex::default();
        let runs = idx.scan(root.path()).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].figure("mrr"), Some(0.7));
        assert!("mrr>0.65".parse::<RunFilter>().unwrap().matches(&runs[0]));
        assert!("lr=0.1".parse::<RunFilter>().unwrap().matches(&runs[0]));
    }

    #[test]
    fn log_since_reads_complete_lines_and_follows_appends() {
        use std::io::Write;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("r");
        Session::create(&dir, cfg(&[], 1)).unwrap();
        assert_eq!(log_since(&dir, 0, false).unwrap(), (vec![], 0));
        std::fs::write(dir.join(LOG_FILE), "one\nbar 10%\rbar 100%\r\nhalf").unwrap();
        let (lines, off) = log_since(&dir, 0, false).unwrap();
        assert_eq!(lines, vec!["one", "bar 100%"]);
        // a job that is over: its unterminated last line too
        let all = "one\nbar 10%\rbar 100%\r\nhalf".len() as u64;
        assert_eq!(
            log_since(&dir, off, true).unwrap(),
            (vec!["half".to_string()], all)
        );
        assert_eq!(off, "one\nbar 10%\rbar 100%\r\n".len() as u64);
        // the unfinished line comes once it ends
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(LOG_FILE))
            .unwrap();
        f.write_all(b" done\nnext\n").unwrap();
        let (lines, off2) = log_since(&dir, off, false).unwrap();
        assert_eq!(lines, vec!["half done", "next"]);
        assert_eq!(log_since(&dir, off2, false).unwrap(), (vec![], off2));
        assert_eq!(log_since(&dir, off2, true).unwrap(), (vec![], off2));
        // a log started anew is read from its start
        std::fs::write(dir.join(LOG_FILE), "fresh\n").unwrap();
        assert_eq!(
            log_since(&dir, off2, false).unwrap(),
            (vec!["fresh".into()], 6)
        );
        assert_eq!(log_tail(&dir, 5).unwrap(), vec!["fresh"]);
        // not a session folder: an error naming it
        let e = log_since(root.path(), 0, false).unwrap_err().to_string();
        assert!(e.contains("not a session folder"), "{e}");
    }
}
