#!/usr/bin/env bash
# End-to-end test of the workbench with Slurm jobs in a real terminal (tmux),
# against the one-node cluster of scripts/slurm-test-cluster.sh:
#   submit a held job (`rosetta train --on slurm --sbatch-arg=--hold`: pending,
#   reason JobHeldUser) from the command line, open `rosetta`, launch a long
#   job (running) on Slurm from the new-job form, then a sweep (dim 2,4 ×
#   seeds 1,2) from the form, which starts from the remembered launcher,
#   wait until its four sessions are done, check that the Jobs table
#   shows the pending reason, the running job and the sweep as one row with
#   its MRR as mean ± sd, open the sweep (its points and sessions), check that
#   the form's launcher was remembered under the sessions root, then cancel
#   the two jobs.
#
# Usage: tests/e2e_slurm_jobs.sh [path/to/rosetta]   (default: target/debug/rosetta)
# E2E_SIZE=COLSxROWS sets the terminal (default 100x32); E2E_SCREENS=DIR keeps
# the Jobs screen there (jobs-slurm.txt, jobs-slurm-sweep.txt: docs/slurm.md's
# captures). Needs tmux and Slurm's tools with a cluster that has partition
# `debug` (SLURM_CONF is passed on; default /tmp/rosetta-slurm/slurm.conf).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/target/debug/rosetta}"
FIXTURE="$ROOT/tests/fixtures/corpus/bible"
TIMEOUT="${E2E_TIMEOUT:-180}"
SIZE="${E2E_SIZE:-100x32}"
COLS="${SIZE%x*}" ROWS="${SIZE#*x}"
export SLURM_CONF="${SLURM_CONF:-/tmp/rosetta-slurm/slurm.conf}"

command -v tmux >/dev/null || { echo "e2e_slurm_jobs: tmux is not installed" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "e2e_slurm_jobs: Slurm's tools are not installed" >&2; exit 2; }
[ -f "$SLURM_CONF" ] || { echo "e2e_slurm_jobs: no $SLURM_CONF (scripts/slurm-test-cluster.sh start)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "e2e_slurm_jobs: no binary at $BIN (cargo build first)" >&2; exit 2; }

TMP="$(mktemp -d)"
SOCK="$TMP/tmux.sock"
S="rosetta-slurm-e2e"
t() { tmux -S "$SOCK" "$@"; }
# the Slurm jobs this script started (job ids from the sessions' slurm.json)
our_jobs() {
    cat "$TMP"/work/sessions/*/slurm.json 2>/dev/null |
        grep -o '"job_id": *"[0-9_]*"' | grep -o '[0-9]*' | sort -u || true
}
cleanup() {
    t kill-server 2>/dev/null || true
    for j in $(our_jobs); do scancel "$j" 2>/dev/null || true; done
    sleep 0.3
    rm -rf "$TMP" 2>/dev/null || { sleep 2; rm -rf "$TMP" 2>/dev/null || true; }
}
trap cleanup EXIT

screen() { t capture-pane -p -t "$S"; }
fail() {
    echo "e2e_slurm_jobs: FAIL: $*" >&2
    echo "---- screen ----" >&2
    screen >&2 || true
    squeue -a >&2 || true
    exit 1
}
wait_for() {   # wait_for REGEX [SECONDS]
    local re="$1" secs="${2:-20}" i
    for ((i = 0; i < secs * 5; i++)); do
        if screen | grep -Eq -- "$re"; then return 0; fi
        sleep 0.2
    done
    fail "timed out waiting for /$re/"
}
keys() { t send-keys -t "$S" "$@"; sleep 0.15; }
typed() { t send-keys -t "$S" -l -- "$1"; sleep 0.15; }
keep() { if [ -n "${E2E_SCREENS:-}" ]; then screen >"$E2E_SCREENS/$1.txt"; fi; }

mkdir -p "$TMP/work" "$TMP/cfg" "$TMP/state" "$TMP/bible"
cp "$FIXTURE"/* "$TMP/bible/"
WS="$TMP/bible/workspace.toml"
cd "$TMP/work"
train() {   # train SESSION EPOCHS [ARGS...]: `train --on slurm` of s2net
    local s="$1" e="$2"
    shift 2
    "$BIN" train --workspace "$WS" --model s2net --device cpu --dim 4 --epochs "$e" \
        --session "sessions/$s" --on slurm --partition debug "$@" >/dev/null
}
train s2net-held 2 --sbatch-arg=--hold

t new-session -d -s "$S" -x "$COLS" -y "$ROWS" \
    "env -i HOME=$TMP PATH=$PATH SLURM_CONF=$SLURM_CONF TERM=xterm-256color NO_COLOR=1 XDG_CONFIG_HOME=$TMP/cfg XDG_STATE_HOME=$TMP/state $BIN"
wait_for "1 Jobs" 15
wait_for "pending \(JobHeldUser\)" 20

# --- a long job on Slurm from the form (partition debug): it runs
keys n
wait_for "New training job"
wait_for "run on +local" 5     # nothing remembered yet
keys C-u
typed "$WS"
keys Tab C-u
typed "s2net"
keys Tab C-u
typed "4"          # dim
keys Tab C-u
typed "100000"     # epochs
keys Tab Tab Tab C-u
typed "cpu"
keys Tab Tab C-u
typed "patience=100000 step_delay_ms=100"
keys Tab C-u
typed "slurm"      # run on
keys Tab C-u
typed "debug"      # partition
keys Enter
wait_for "started s2net-[0-9-]+ on Slurm \(job [0-9]+\)" 30
wait_for "running" 30

# --- a sweep on Slurm from the form, which starts from the remembered
# launcher: dim 2,4 × seeds 1,2, 3 epochs
sleep 1.1   # session folders are named by the second
keys n
wait_for "New training job"
wait_for "run on +slurm" 5
wait_for "partition +debug" 5
keys C-u
typed "$WS"
keys Tab C-u
typed "s2net"
keys Tab C-u       # dim: the grid gives it
keys Tab C-u
typed "3"          # epochs
keys Tab Tab Tab C-u
typed "cpu"
keys Tab Tab C-u
typed "batch=2"
keys Tab Tab Tab Tab C-u
typed "10:00"      # time limit
keys Tab Tab C-u
typed "dim=2,4"    # sweep grid
keys Tab C-u
typed "1,2"        # seeds
keys Enter
wait_for "started sweep s2net-sweep-" 30
wait_for "▸ s2net-.*\(4\)" 20
wait_for "▸ s2net-.*\(4\) +4 done .*[0-9]\.[0-9]{3} ± [0-9]\.[0-9]{3}" "$TIMEOUT"
screen | grep -q "pending (JobHeldUser)" || fail "the held job's reason"
screen | grep -Eq "running" || fail "the running job"
grep -q '"slurm": true' sessions/.rosetta-launcher.json || fail "the launcher was not remembered"
grep -q '"partition": "debug"' sessions/.rosetta-launcher.json || fail "the partition was not remembered"
keep jobs-slurm
echo "e2e_slurm_jobs: $(screen | grep -Eo "▸ s2net-.*±[^│]*" | head -1)"
# the sweep opened: its points (dim=2, dim=4), each with its two sessions
keys g
keys Enter
wait_for "▾ s2net-" 10
wait_for "  dim=4" 10
keep jobs-slurm-sweep
keys Enter
wait_for "▸ s2net-" 10

# --- the two jobs cancelled through the CLI (scancel), the workbench closed
long="$(grep -l '100000' sessions/*/config.toml | head -1)"
[ -n "$long" ] || fail "no session of the long job"
"$BIN" cancel "$(dirname "$long")" --timeout 60 >/dev/null
"$BIN" cancel sessions/s2net-held --timeout 60 >/dev/null
wait_for "cancelled" 20
keys q
sleep 0.5
echo "e2e_slurm_jobs: ok ($SIZE)"
