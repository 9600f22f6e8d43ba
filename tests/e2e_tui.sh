#!/usr/bin/env bash
# End-to-end test of the workbench in a real terminal (tmux):
#   open `rosetta` on the Bible-like fixture workspace, launch two tiny
#   training jobs with different settings from the new-job form, wait for their
#   loss curves and final MRR, tell them apart in the run table (the differing
#   setting as a column) and in overlaid curves on a log axis, run a query on the
#   Search screen and open a result's whole verse (reference and English text),
#   look up a term's neighbours, compare the two runs per query on the Compare
#   screen and open one query's two rankings side by side (also at 80x24), launch
#   a sweep `dim=2,4` from the form (its grid replaces the dim the form fills in)
#   and wait for it, quit, check that the terminal is sane again (canonical mode, echo,
#   main screen), and compare the two runs per query with `rosetta compare` as
#   docs/tour.md's quick tour does.
#
# Usage: tests/e2e_tui.sh [path/to/rosetta]   (default: target/debug/rosetta)
# E2E_DEVICE=cuda types that device into the form (default cpu; docs/gpu.md);
# E2E_SCREENS=DIR keeps each screen there (jobs, jobs-log, search, document,
# neighbours, compare, drill-down, rankings, rankings-80x24, jobs-sweep .txt); E2E_SIZE=COLSxROWS sets the terminal (default 100x32).
# Needs tmux. Exit status 0 on success; on failure prints the last screen.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${1:-$ROOT/target/debug/rosetta}"
FIXTURE="$ROOT/tests/fixtures/corpus/bible"   # copied, so that its cache stays out of the repository
MODEL="${E2E_MODEL:-s2net}"
TIMEOUT="${E2E_TIMEOUT:-180}"
DEVICE="${E2E_DEVICE:-cpu}"
SIZE="${E2E_SIZE:-100x32}"
COLS="${SIZE%x*}" ROWS="${SIZE#*x}"

command -v tmux >/dev/null || { echo "e2e_tui: tmux is not installed" >&2; exit 2; }
[ -x "$BIN" ] || { echo "e2e_tui: no binary at $BIN (cargo build first)" >&2; exit 2; }
[ -f "$FIXTURE/workspace.toml" ] || { echo "e2e_tui: fixture $FIXTURE is missing" >&2; exit 2; }

TMP="$(mktemp -d)"
SOCK="$TMP/tmux.sock"
S="rosetta-e2e"
t() { tmux -S "$SOCK" "$@"; }
cleanup() {
    t kill-server 2>/dev/null || true
    sleep 0.3
    rm -rf "$TMP" 2>/dev/null || { sleep 1; rm -rf "$TMP" 2>/dev/null || true; }
}
trap cleanup EXIT

screen() { t capture-pane -p -t "$S"; }
fail() {
    echo "e2e_tui: FAIL: $*" >&2
    echo "---- screen ----" >&2
    screen >&2 || true
    echo "---- log ----" >&2
    tail -n 20 "$TMP/state/rosetta/tui.log" >&2 2>/dev/null || true
    for f in "$TMP"/work/sessions/*/log.txt; do
        [ -f "$f" ] && { echo "---- $f ----" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}
# wait_for REGEX [SECONDS]: until the screen matches
wait_for() {
    local re="$1" secs="${2:-20}" i
    for ((i = 0; i < secs * 5; i++)); do
        if screen | grep -Eq -- "$re"; then return 0; fi
        sleep 0.2
    done
    fail "timed out waiting for /$re/"
}
keys() { t send-keys -t "$S" "$@"; sleep 0.15; }
# Press KEY until /RE/ shows (a loaded machine may draw a list after the key
# that needs it arrived); fails after TRIES presses two seconds apart.
press_until() {
    local key="$1" re="$2" tries="${3:-10}" i j
    for ((i = 0; i < tries; i++)); do
        keys "$key"
        for ((j = 0; j < 10; j++)); do
            if screen | grep -Eq -- "$re"; then return 0; fi
            sleep 0.2
        done
    done
    fail "timed out pressing $key for /$re/"
}
typed() { t send-keys -t "$S" -l -- "$1"; sleep 0.15; }
keep() { if [ -n "${E2E_SCREENS:-}" ]; then screen >"$E2E_SCREENS/$1.txt"; fi; }

mkdir -p "$TMP/work" "$TMP/cfg" "$TMP/state" "$TMP/bible"
cp "$FIXTURE"/* "$TMP/bible/"
WS="$TMP/bible/workspace.toml"
cd "$TMP/work"
# A plain shell in a COLSxROWS terminal; the workbench runs inside it so that
# the terminal can be checked after it exits. LD_LIBRARY_PATH is kept: a
# CUDA build needs it to start (docs/gpu.md).
t new-session -d -s "$S" -x "$COLS" -y "$ROWS" \
    "env -i HOME=$TMP PATH=$PATH ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH=$LD_LIBRARY_PATH} TERM=xterm-256color NO_COLOR=1 XDG_CONFIG_HOME=$TMP/cfg XDG_STATE_HOME=$TMP/state bash --norc --noprofile"
sleep 0.3
typed "stty -a | grep -o -- '-\\?icanon' > $TMP/stty.before; $BIN; echo \"EXIT=\$?\" > $TMP/exit"
keys Enter
wait_for "1 Jobs" 15
wait_for "no sessions yet" 10

# --- two jobs from the form, differing in dim
launch() {   # launch DIM [GRID]: an empty DIM keeps the dim the form fills in
    keys n
    wait_for "New training job"
    keys C-u
    typed "$WS"
    keys Tab C-u
    typed "$MODEL"
    keys Tab
    if [ -n "$1" ]; then
        keys C-u
        typed "$1"     # dim (at most the fixture's 6 training pairs)
    fi
    keys Tab C-u
    typed "5"          # epochs
    keys Tab Tab Tab C-u
    typed "$DEVICE"
    keys Tab Tab C-u
    typed "batch=2 log_every=1"   # several logged steps per epoch
    if [ -n "${2:-}" ]; then
        keys Tab Tab Tab Tab Tab Tab C-u
        typed "$2"     # the sweep grid
    fi
    keys Enter
    wait_for "started " 30
}
launch 4
wait_for "running|done" 30
# the loss curve and validation appear, then the job finishes with a best MRR
wait_for "step" 60
wait_for "done +$MODEL .*[0-9]\.[0-9]{4}" "$TIMEOUT"
screen | grep -q "no training steps yet" && fail "no loss curve for a finished job"
screen | grep -q "no validation yet" && fail "no validation curve for a finished job"
echo "e2e_tui: job finished: $(screen | grep -Eo "done +$MODEL .*" | head -1)"
sleep 1.1   # session folders are named by the second
launch 2
for ((i = 0; i < TIMEOUT * 5; i++)); do
    [ "$(screen | grep -Ec "done +$MODEL")" -ge 2 ] && break
    sleep 0.2
done
[ "$(screen | grep -Ec "done +$MODEL")" -ge 2 ] || fail "the second job did not finish"
# the differing setting is a column of the run table, one value per run
screen | grep -Eq "best MRR +dim" || fail "no dim column in the run table"
screen | grep -Eq "done +$MODEL .* 4 *│" || fail "the dim-4 run's row"
screen | grep -Eq "done +$MODEL .* 2 *│" || fail "the dim-2 run's row"
# both marked and overlaid, the loss on a log axis
keys g
keys Space
keys j
keys Space
keys L
wait_for "loss .*log" 10
echo "e2e_tui: two runs told apart: $(screen | grep -Eo "loss .*log[^│┐]*" | head -1)"
keep jobs
# the selected job's log beside the curves
keys o
wait_for "log\.txt · o hide" 10
wait_for "[0-9:]{8} train epoch 5/5" 10
keep jobs-log
keys o
wait_for "MRR ·" 10
echo "e2e_tui: log pane ok"

# --- search
keys 2
press_until s "Session to search with"
keys Enter
wait_for "[0-9]+ documents" 60
keys /
typed "the light of men"
keys Enter
wait_for "Results for" 30
wait_for " 1 .*[0-9]\.[0-9]{4}" 10
echo "e2e_tui: search ok: $(screen | grep -E 'RR|fusion' | head -1)"
keep search
# Enter opens the selected result's whole verse, by reference, with its
# English side; j scrolls it (not the query); Esc goes back to the results
keys Enter
wait_for "document \\(es\\)" 20
wait_for "John 1:[0-9]+" 5
wait_for "aligned source text \\(en\\)" 5
keys j
screen | grep -q "query: the light of men *j" && fail "j was typed into the query"
keep document
keys Escape
wait_for "Results for" 10
echo "e2e_tui: document view ok"

# --- neighbours
keys 3
press_until s "left pane"
keys Enter
keys /
typed "light"
keys Enter
wait_for "other language" 30
keep neighbours
echo "e2e_tui: neighbours ok"

# --- compare the two runs, then one run per query against the baseline
keys 4
wait_for "judged queries" 120
keys j
keys b             # the older run is the baseline
wait_for "W/T/L" 30
keep compare
keys k
keys Enter
wait_for "per query: .* against " 20
wait_for "│John 1:[0-9]+ " 5      # queries by their verse references
keep drill-down
# the top query's two rankings side by side, relevant verses marked
keys Enter
wait_for "first relevant at|none relevant ranked" 60
wait_for "│ +1 [✓·] " 5
keep rankings
# and at 80x24: the view still shows both rankings with their marks
t resize-window -t "$S" -x 80 -y 24
wait_for "│ +1 [✓·] .*│ +1 [✓·] " 10
wait_for "(first relevant at [0-9]+|none relevant ranked) ─.*(first relevant at [0-9]+|none relevant ranked) ─" 5
keep rankings-80x24
t resize-window -t "$S" -x "$COLS" -y "$ROWS"
keys Escape        # back to the per-query list
wait_for "per query: .* against " 10
keys Escape
echo "e2e_tui: compare ok"

# --- a sweep over dim from the form: the form fills in dim 128, the grid's
# values replace it (no "clear its fixed value first")
keys 1
wait_for "Sessions \\(2\\)" 10
launch "" "dim=2,4"   # at most the fixture's 6 training pairs
wait_for "started sweep .*: 2 sessions" 30
screen | grep -q "clear its fixed value" && fail "the sweep grid was refused"
wait_for "[▸▾] .*\\(2\\)" 20
for ((i = 0; i < TIMEOUT * 5; i++)); do
    screen | grep -Eq "\\(2\\) +2 done" && break
    sleep 0.2
done
screen | grep -Eq "\\(2\\) +2 done" || fail "the sweep did not finish"
# the sweep's row shows its dim values whole
screen | grep -Eq "\\(2\\) +2 done .* 2,4 *│" || fail "the sweep's dim values"
keep jobs-sweep
echo "e2e_tui: sweep from the form ok: $(screen | grep -Eo "[▸▾] .*\\(2\\).*" | head -1)"

# --- help, then quit
keys '?'
wait_for "Everywhere"
keys Escape
keys q
for ((i = 0; i < 50; i++)); do [ -f "$TMP/exit" ] && break; sleep 0.2; done
[ -f "$TMP/exit" ] || fail "the workbench did not exit on q"
grep -q "EXIT=0" "$TMP/exit" || fail "exit status: $(cat "$TMP/exit")"
typed "stty -a | grep -o -- '-\\?icanon' > $TMP/stty.after; echo SANE-\$(tput cols)"
keys Enter
wait_for "SANE-$COLS" 10
cmp -s "$TMP/stty.before" "$TMP/stty.after" || fail "terminal modes differ after quitting"
grep -qx "icanon" "$TMP/stty.after" || fail "terminal left in raw mode"

# --- the same two runs per query from the CLI, as in the quick tour
set --
for d in "$TMP"/work/sessions/*/; do
    case "$d" in *-sweep-*) ;; *) set -- "$@" "$d" ;; esac
done
[ $# -eq 2 ] || fail "expected 2 sessions besides the sweep's, found $#"
"$BIN" eval --session "$1" --task adhoc --run "$TMP/a.run" >/dev/null || fail "eval of $1"
"$BIN" eval --session "$2" --task adhoc --run "$TMP/b.run" >/dev/null || fail "eval of $2"
[ -f "$TMP/a.run.qrels" ] || fail "eval --run wrote no qrels for the derived task"
"$BIN" compare "$TMP/a.run" "$TMP/b.run" --qrels "$TMP/a.run.qrels" --per-query 3 >"$TMP/cmp.txt" 2>&1 ||
    { cat "$TMP/cmp.txt" >&2; fail "rosetta compare --per-query"; }
grep -q "win/tie/loss" "$TMP/cmp.txt" || { cat "$TMP/cmp.txt" >&2; fail "no wins/ties/losses"; }
echo "e2e_tui: rosetta compare per query ok"
echo "e2e_tui: PASS"
