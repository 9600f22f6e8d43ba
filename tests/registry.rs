//! The README's model table is the registry's: a model added to the
//! registry shows up in the README (and `rosetta train --help`) or this fails.

#[test]
fn readme_model_table_is_the_registry() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = rosetta::models::registry::markdown_table();
    assert!(
        readme.contains(&table),
        "README.md's model table differs from the registry; paste this:\n{table}"
    );
}

#[test]
fn train_help_lists_every_model_setting_with_its_default() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(["train", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    for m in rosetta::models::MODELS {
        assert!(help.contains(&format!("{}: ", m.name)), "{}", m.name);
        for s in m.settings {
            let default = s.default.unwrap_or("unset");
            assert!(
                help.contains(&format!("{:<18} [{default}]", s.key)),
                "{} {}",
                m.name,
                s.key
            );
        }
    }
}
