#!/usr/bin/env bash
# Long training runs on one GPU (issues 16 and 17): the jobs of a list (JOBS, default
# jobs-enhi.txt: seed 003's M and M_adv, XCNN beside them, seed 004's DBN-CCA at the paper's
# settings and at the recipe of docs/results.md), all trained side by side until a deadline
# (SIGTERM: each job finishes its step, keeps its checkpoints, ends `cancelled`), then each session
# evaluated on every task, alone and fused with BM25.
#   scripts/gpu/prepare.sh path/to/cuda/rosetta; then on the device machine, from the repo root:
#   TRAIN_S=400 bash .devrun/long.sh           (R=path/to/rosetta DEV=cpu TRAIN_S=30 for a dry run)
#   MPS=1 JOBS=jobs-xen.txt TRAIN_S=420 bash .devrun/long.sh   (session 14's runs)
# MPS=1 shares the GPU through NVIDIA's Multi-Process Service when it starts and a smoke job
# trains under it: without it the processes take turns on the GPU in time slices, and a job of
# many short steps (DBN-CCA) waits a slice at every step; lines of the list marked "?" run only then.
# Writes $OUT/log.txt, $OUT/sessions.tgz (metrics, status, config, log of each session, eval JSON,
# nvidia-smi samples) and $OUT/runs-WS.tar.xz (the ad-hoc runs, for `rosetta compare` elsewhere).
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/long-out}; mkdir -p "$O"; W=/tmp/longrun; rm -rf $W; mkdir -p $W/r $W/s $W/runs
exec > >(tee "$O/log.txt") 2>&1
. ./lib.sh
TRAIN_S=${TRAIN_S:-400}; EVAL_S=${EVAL_S:-110}; JOBS=${JOBS:-jobs-enhi.txt}; MPS=${MPS:-0}
REC="--set lr=0.01 --set lr_rsm=0.001 --set upper_data=states"   # docs/results.md, "DBN-CCA"
mps=0
if [ "$DEV" = cuda ] && [ "$MPS" = 1 ]; then
  if command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d && timeout -k 5 30 $R train --workspace ../tests/fixtures/corpus/tiny/workspace.toml \
        --model s2net --dim 8 --epochs 1 --device cuda --session $W/mps-smoke > $W/r/mps-smoke.out 2>&1; then
      mps=1; el "MPS on: the smoke job trained under it"
    else
      el "MPS off: the daemon or the smoke job under it failed"; tail -3 $W/r/mps-smoke.out 2>/dev/null
      echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  else
    el "MPS off: no nvidia-cuda-mps-control"
  fi
fi
if [ "$DEV" = cuda ]; then
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -l 1 > $W/r/gpu.smi 2>/dev/null &
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -l 2 > $W/r/apps.smi 2>/dev/null &
fi
# job NAME WORKSPACE MODEL ARGS...: trains in the background until the deadline (second
# TRAIN_S of the run, or STOP when set: a list's "@S NAME ..." stops that job at second S)
job() {
  local name=$1 ws=$2 model=$3; shift 3
  timeout -k 30 -s TERM $(( ${STOP:-$TRAIN_S} - ($(date +%s) - T0) )) \
    $R train --workspace $ws --model $model --seed 1 --device $DEV --session $W/s/$name "$@" \
    > $W/r/$name.train.out 2>&1 &
}
n=0
while read -r line; do
  case "$line" in ''|'#'*) continue;; '?'*) [ $mps = 1 ] || continue; line=${line#\?};; esac
  STOP=; case "$line" in @*) STOP=${line%% *}; STOP=${STOP#@}; line=${line#* };; esac
  eval "job $line"; echo "$!:${line%% *}:${STOP:-$TRAIN_S}" >> $W/r/pids.txt; n=$((n + 1))
done < "$JOBS"
el "$n jobs started ($JOBS, MPS $mps)"
# ev NAME ARGS...: one evaluation in the background, with the time left for evaluations
ev() {
  local name=$1; shift
  timeout -k 10 $(( TRAIN_S + EVAL_S - ($(date +%s) - T0) )) $R eval "$@" --json > $W/r/$name.json 2> $W/r/$name.err &
  pids+=($!)
}
# evaluate NAME: the session's state, then its evaluations (as soon as its job has ended)
evaluate() {
  local n=$1 d=$W/s/$1
  echo "$n: $(python3 -c "import json,sys;s=json.load(open(sys.argv[1]));print(s.get('state'),s.get('phase'),s.get('epoch'),s.get('best_mrr'),s.get('pairs_per_s'),(s.get('error') or '')[:200])" $d/status.json 2>/dev/null)"
  ls $d/checkpoints/*.safetensors >/dev/null 2>&1 || { el "$n: no checkpoint"; return; }
  el "$n: evaluating"
  case $n in
    bible*) ev $n.eval --session $d --task all   # a run of the derived task is 3,108 x 1,000 lines: none
           ev $n.fused --session $d --task adhoc --fuse bm25:auto --fuse-translate dict ;;
    *dbn*) ev $n.eval --session $d --task all --run $W/runs/$n.run
           ev $n.fused --session $d --task adhoc --fuse bm25:auto --beta auto --fuse-translate dict --fuse-run $W/runs/$n-fused.run
           ev $n.fusedbo1 --session $d --task adhoc --fuse bm25:auto --beta auto --fuse-translate dict --fuse-expand bo1 --fuse-run $W/runs/$n-fusedbo1.run ;;
    *)     ev $n.eval --session $d --task all --run $W/runs/$n.run
           ev $n.fused --session $d --task adhoc --fuse bm25:auto --fuse-translate dict --fuse-run $W/runs/$n-fused.run ;;
  esac
}
pids=(); done_jobs=" "
while :; do
  left=0
  while IFS=: read -r pid name stop; do
    case "$done_jobs" in *" $name "*) continue;; esac
    if kill -0 "$pid" 2>/dev/null; then left=$((left + 1)); else done_jobs="$done_jobs$name "; evaluate "$name"; fi
  done < $W/r/pids.txt
  [ $left = 0 ] && break
  sleep 3
done
el "training ended"
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"   # not a bare wait: it would wait for the tee of exec too
pkill nvidia-smi 2>/dev/null
[ $mps = 1 ] && echo quit | nvidia-cuda-mps-control
el "evaluations ended"
for f in $W/r/*.json; do echo "$(basename $f): $(head -c 400 $f | tr '\n' ' ')"; done
for f in $W/r/*.err; do [ -s $f ] && { echo "$(basename $f):"; tail -2 $f; }; done
for d in $W/s/*/; do n=$(basename $d); mkdir -p $W/r/$n; cp $d/metrics.jsonl $d/status.json $d/config.toml $d/log.txt $W/r/$n/ 2>/dev/null; done
tar czf "$O/sessions.tgz" -C $W r
for ws in enhi hien ende deen esen; do   # one archive per workspace: each file back is at most 16 MiB
  (cd $W/runs && ls $ws-* >/dev/null 2>&1 && tar cf - $ws-* | xz -T0 -3 > "$O/runs-$ws.tar.xz")
done
ls -la "$O"
el "done"
