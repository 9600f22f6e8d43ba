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
rounds=$1 a=$2 b=$3
shift 3
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--workspace assets/workspaces/enhi-bench.toml --model bae
    --set epochs=2 --set lr=0.01 --threads 2)
ratios=()
for i in $(seq "$rounds"); do
    rate=()
    for bin in "$a" "$b"; do
        out=$("$bin" bench train "${args[@]}" 2>/dev/null | tail -1)
        r=$(grep -o '"pairs_per_s":[0-9.]*' <<<"$out" | cut -d: -f2)
        mrr=$(grep -o '"test_mrr":[0-9.]*' <<<"$out" | head -1 | cut -d: -f2)
        echo "$i $bin $r mrr=$mrr load=$(cut -d' ' -f1 /proc/loadavg)"
        rate+=("$r")
    done
    ratios+=("$(awk -v a="${rate[0]}" -v b="${rate[1]}" 'BEGIN { printf "%.3f", b / a }')")
done
echo "B/A per round: ${ratios[*]}"
