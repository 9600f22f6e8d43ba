//! Runs `tests/e2e_tui.sh` (the workbench in a real terminal under tmux:
//! launch a job from the form, watch its curve, search, neighbours, quit)
//! against the binary cargo just built. Needs tmux (`.ci/run` installs it).

use std::process::Command;

#[test]
fn workbench_in_a_real_terminal() {
    let have_tmux = Command::new("tmux").arg("-V").output().is_ok();
    assert!(
        have_tmux,
        "the end-to-end workbench test needs tmux: apt-get install tmux"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e_tui.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_rosetta"))
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "e2e_tui.sh failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
