#!/usr/bin/env bash
# Alternates `rosetta bench train` between binaries, to compare two builds on one
# machine whose speed drifts between runs (the paired rounds are what to compare).
#
#   scripts/ab-bench.sh ROUNDS BIN_A BIN_B [-- bench-train args]
#
# Default args: the BAE bench of docs/results.md (enhi-bench workspace, 2 epochs,
# lr 0.01, 2 threads). Prints one line per run: round, binary, pairs/s, test MRR,
# load average; then each round's B/A ratio.
set -euo pipefail
usage="usage: scripts/ab-bench.sh ROUNDS BIN_A BIN_B [-- bench-train args]"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
rounds=$1 a=$2 b=$3
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ab-bench: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
for bin in "$a" "$b"; do
    [ -x "$bin" ] || { echo "ab-bench: $bin is not an executable" >&2; exit 2; }
done
shift 3
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workspace assets/workspaces/enhi-bench.toml --model bae
    --set epochs=2 --set lr=0.01 --threads 2)
ratios=()
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for i in $(seq "$rounds"); do
    rate=()
    for bin in "$a" "$b"; do
        if ! out=$("$bin" bench train "${args[@]}" 2>"$err"); then
            echo "ab-bench: $bin bench train failed:" >&2
            tail -5 "$err" >&2
            exit 1
        fi
        out=$(tail -1 <<<"$out")
        r=$(grep -o '"pairs_per_s":[0-9.]*' <<<"$out" | cut -d: -f2 || true)
        [ -n "$r" ] || { echo "ab-bench: no pairs_per_s in $bin's output: $out" >&2; exit 1; }
        mrr=$(grep -o '"test_mrr":[0-9.]*' <<<"$out" | head -1 | cut -d: -f2)
        echo "$i $bin $r mrr=$mrr load=$(cut -d' ' -f1 /proc/loadavg)"
        rate+=("$r")
    done
    ratios+=("$(awk -v a="${rate[0]}" -v b="${rate[1]}" 'BEGIN { printf "%.3f", b / a }')")
done
echo "B/A per round: ${ratios[*]}"
