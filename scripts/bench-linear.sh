#!/usr/bin/env bash
# The closed-form linear models' fit time and peak memory against the
# vocabulary size (issue 20): `rosetta bench fit` on synthetic parallel
# corpora of 5k-50k terms per language, one fit per process, one JSON line
# each. Usage: scripts/bench-linear.sh [OUT.jsonl] (release binary needed).
set -euo pipefail
cd "$(dirname "$0")/.."
R=${R:-./target/release/rosetta}
OUT=${1:-/dev/stdout}
PAIRS=${PAIRS:-100000}
SIZES=${SIZES:-"5000 10000 20000 35000 50000"}
DENSE_SIZES=${DENSE_SIZES:-"5000 10000"}
uptime >&2
for v in $SIZES; do
  for m in cl-lsi cca opca; do
    "$R" bench fit --model "$m" --terms "$v" --pairs "$PAIRS" --threads 2 >>"$OUT"
  done
done
for v in $DENSE_SIZES; do
  for m in cca opca; do
    "$R" bench fit --model "$m" --terms "$v" --pairs "$PAIRS" --threads 2 --set solver=dense >>"$OUT"
  done
done
uptime >&2
