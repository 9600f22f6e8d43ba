#!/usr/bin/env bash
# Responsiveness benchmark of the workbench (not a test: figures, no pass/fail
# beyond "it ran"). Starts JOBS real training jobs (`rosetta train --detach`),
# opens `rosetta` in tmux on their sessions folder, presses KEYS keys through
# tmux (move the selection, switch screens) and reports
#   - key-to-draw latency (median / p95 / max), as the workbench measures it
#     in-process (input event read -> frame written) and logs at exit;
#   - the workbench's CPU use while idle (no keys) for IDLE_S seconds with the
#     jobs still training, from /proc/PID/stat (utime + stime ticks);
#   - the machine's load while it ran.
# Every process it starts (jobs, workbench, tmux) is stopped at the end.
#
# Usage: tests/bench_tui_latency.sh [path/to/rosetta]   (default target/debug/rosetta)
# Environment (defaults in brackets):
#   WS        workspace to train on [tests/fixtures/corpus/tiny/workspace.toml]
#             (assets/workspaces/enhi-xquad.toml for the real enhi data)
#   MODEL     [s2net]  JOBS [4]  KEYS [60]  KEY_GAP_S [0.25]  IDLE_S [10]
#   DIM [16]  BATCH [4]  TRAIN_SET  extra --set flags for the jobs
#             [step_delay_ms=0 patience=1000000 log_every=1]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$(realpath "${1:-$ROOT/target/debug/rosetta}")"
WS="$(realpath "${WS:-$ROOT/tests/fixtures/corpus/tiny/workspace.toml}")"
MODEL="${MODEL:-s2net}"
JOBS="${JOBS:-4}"
KEYS="${KEYS:-60}"
KEY_GAP_S="${KEY_GAP_S:-0.25}"
IDLE_S="${IDLE_S:-10}"
DIM="${DIM:-16}"
BATCH="${BATCH:-4}"
TRAIN_SET="${TRAIN_SET:-step_delay_ms=0 patience=1000000 log_every=1}"

command -v tmux >/dev/null || { echo "bench: tmux is not installed" >&2; exit 2; }
[ -x "$BIN" ] || { echo "bench: no binary at $BIN" >&2; exit 2; }

TMP="$(mktemp -d)"
SOCK="$TMP/tmux.sock"
S="rosetta-bench"
t() { tmux -S "$SOCK" "$@"; }
TUI_PID=""
job_pids() {
    for f in "$TMP"/work/sessions/*/status.json; do
        [ -f "$f" ] && grep -o '"pid": *[0-9]*' "$f" | grep -o '[0-9]*$'
    done
    return 0
}
cleanup() {
    # the jobs: SIGTERM (they cancel cleanly), then SIGKILL stragglers
    local p
    for p in $(job_pids); do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 1 25); do
        local alive=0
        for p in $(job_pids); do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.2
    done
    for p in $(job_pids); do kill -KILL "$p" 2>/dev/null || true; done
    [ -n "$TUI_PID" ] && kill -TERM "$TUI_PID" 2>/dev/null || true
    t kill-server 2>/dev/null || true
    sleep 0.3
    rm -rf "$TMP" 2>/dev/null || true
}
trap cleanup EXIT
die() { echo "bench: $*" >&2; t capture-pane -p -t "$S" >&2 2>/dev/null || true; exit 1; }

mkdir -p "$TMP/work/sessions" "$TMP/cfg" "$TMP/state"
cd "$TMP/work"

# --- the jobs
sets=()
for kv in $TRAIN_SET; do sets+=(--set "$kv"); done
for i in $(seq 1 "$JOBS"); do
    "$BIN" train --workspace "$WS" --model "$MODEL" --dim "$DIM" --batch "$BATCH" \
        --epochs 1000000 --device cpu --seed "$i" "${sets[@]}" \
        --session "$TMP/work/sessions/$MODEL-bench-$i" --detach >/dev/null 2>&1 ||
        die "could not start job $i"
done
# all running (data loaded, first steps written)
for _ in $(seq 1 300); do
    n=0
    for f in "$TMP"/work/sessions/*/metrics.jsonl; do
        [ -s "$f" ] && n=$((n + 1))
    done
    [ "$n" -ge "$JOBS" ] && break
    sleep 0.2
done
[ "$n" -ge "$JOBS" ] || die "only $n of $JOBS jobs wrote metrics"

# --- the workbench
t new-session -d -s "$S" -x 120 -y 36 \
    "env -i HOME=$TMP PATH=$PATH TERM=xterm-256color NO_COLOR=1 XDG_CONFIG_HOME=$TMP/cfg XDG_STATE_HOME=$TMP/state $BIN"
for _ in $(seq 1 100); do
    TUI_PID="$(t display -p -t "$S" '#{pane_pid}' 2>/dev/null || true)"
    [ -n "$TUI_PID" ] && break
    sleep 0.1
done
[ -n "$TUI_PID" ] || die "no workbench process"
for _ in $(seq 1 100); do
    [ "$(t capture-pane -p -t "$S" | grep -cE "running +$MODEL")" -ge "$JOBS" ] && break
    sleep 0.2
done
[ "$(t capture-pane -p -t "$S" | grep -cE "running +$MODEL")" -ge "$JOBS" ] ||
    die "the jobs table does not show $JOBS running jobs"

ticks() { awk '{print $14 + $15}' "/proc/$TUI_PID/stat"; }
hz="$(getconf CLK_TCK)"

# --- keys: move through the jobs (curves of another job each time), and
# now and then another screen and back
seq_keys=(j j j k k k)
c0="$(ticks)"
s0="$(date +%s.%N)"
for i in $(seq 0 $((KEYS - 1))); do
    case $((i % 20)) in
        10) k=2 ;; 11) k=3 ;; 12) k=1 ;;
        *) k="${seq_keys[$((i % 6))]}" ;;
    esac
    t send-keys -t "$S" "$k"
    sleep "$KEY_GAP_S"
done
c1="$(ticks)"
s1="$(date +%s.%N)"

# --- idle: no keys, jobs still training, the selected job's curve live
sleep 1
c2="$(ticks)"
sleep "$IDLE_S"
c3="$(ticks)"
load="$(cut -d' ' -f1-3 /proc/loadavg)"
running="$(t capture-pane -p -t "$S" | grep -cE "running +$MODEL" || true)"

# --- quit; the workbench logs its latency figures on the way out
t send-keys -t "$S" q
for _ in $(seq 1 50); do kill -0 "$TUI_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$TUI_PID" 2>/dev/null && die "the workbench did not quit on q"
TUI_PID=""
lat="$(grep -o 'input-to-draw latency.*' "$TMP/state/rosetta/tui.log" | tail -1)"
[ -n "$lat" ] || die "no latency line in the workbench log"
slow="$(grep -c 'slow frame' "$TMP/state/rosetta/tui.log" || true)"

echo "bench: $JOBS x $MODEL jobs training on $(basename "$WS") ($running shown running at the end), $(nproc) cores, binary $BIN"
echo "bench: $KEYS keys ${KEY_GAP_S}s apart: $lat"
awk -v a="$c0" -v b="$c1" -v s="$s0" -v e="$s1" -v hz="$hz" 'BEGIN {
    printf "bench: CPU while typing: %d ticks in %.1f s = %.1f%% of one core\n", b - a, e - s, 100 * (b - a) / hz / (e - s) }'
awk -v a="$c2" -v b="$c3" -v d="$IDLE_S" -v hz="$hz" 'BEGIN {
    printf "bench: CPU idle: %d ticks in %d s = %.1f%% of one core\n", b - a, d, 100 * (b - a) / hz / d }'
echo "bench: slow frames (>50 ms to draw) logged: $slow; load average at the end: $load"
