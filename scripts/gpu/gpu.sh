#!/usr/bin/env bash
# Issue 18's GPU checks, in one run on the device machine (after scripts/gpu/prepare.sh), from the repo root:
#   bash .devrun/gpu.sh            (R=path/to/rosetta DEV=cpu for a dry run here)
# Writes $OUT/log.txt and $OUT/results.tgz (metrics, status, configs, bench JSON,
# nvidia-smi samples, the workbench screen).
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/gpu-out}; mkdir -p "$O"; W=/tmp/gpurun; rm -rf $W; mkdir -p $W/r $W/s
exec > >(tee "$O/log.txt") 2>&1
BUDGET=${BUDGET:-440}; TH=${TH:-8}
SECTIONS=${SECTIONS:-"kernels agree tp big e2e"}   # also: long (issue 16/17 runs)
on() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }
. ./lib.sh
[ "$DEV" = cuda ] && python3 -c "import torch,scipy,numpy;print('torch',torch.__version__,torch.cuda.is_available())"
# run NAME TIMEOUT CMD...: runs CMD, samples GPU memory every 100 ms, keeps the peak
run() {
  local name=$1 t=$2; shift 2
  [ -n "${TMAX:-}" ] && [ "$t" -gt "$TMAX" ] && t=$TMAX   # dry runs: TMAX=6
  local smi=""
  if [ "$DEV" = cuda ]; then
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 100 > $W/r/$name.smi 2>/dev/null & smi=$!
  fi
  local t1=$(date +%s.%N)
  timeout "$t" "$@" > $W/r/$name.out 2> $W/r/$name.err; local rc=$?
  local t2=$(date +%s.%N)
  [ -n "$smi" ] && kill $smi 2>/dev/null
  local peak=$( [ -f $W/r/$name.smi ] && sort -t, -k1 -n $W/r/$name.smi | tail -1 | cut -d, -f1 )
  el "$name rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $t2 - $t1}") s gpu_mem_peak=${peak:-?} MiB"
  [ $rc = 0 ] || tail -3 $W/r/$name.err
  tail -1 $W/r/$name.out | cut -c1-600
}
[ -d data/syn ] || python3 gen_syn.py data/syn 50000 100000
el "syn data ready"
# 0. smoke
run smoke 60 $R train --workspace ../tests/fixtures/corpus/tiny/workspace.toml --model s2net --dim 8 --epochs 2 --device $DEV --session $W/s/smoke
# 0b. issue 41: the GPU-only unit tests of the carried test binary (prepare.sh's TESTBIN): BAE's
# fused decoder loss against the CPU's, cuDNN's recurrence against the CPU's (a cudnn build)
if on kernels && [ -f engine-tests.xz ]; then
  xz -dc engine-tests.xz > /tmp/engine-tests && chmod +x /tmp/engine-tests
  export ROSETTA_REQUIRE_GPU=1
  run kernels 120 /tmp/engine-tests --test-threads 1 logit_bce cudnn_tests
  grep -E "^test |test result" $W/r/kernels.out
fi
# 1. agreement: the CPU side of each line is run on the developer machine
on agree && grep -v '^#' agree-cmds.sh | while read name rest; do
  left $((BUDGET - 300)) || { el "skip agree $name"; continue; }
  run agree-$name 100 $R train $rest --device $DEV --session $W/s/$name
  run eval-$name 60 $R eval --session $W/s/$name --task sentence --json
done
# 2. throughput against torch_ref on the same device, same batch
B="--threads $TH --torch-ref torch_ref.py --device $DEV"
BIL="--set nn_hidden=256 --set hidden=128 --set max_query_len=50 --set share_target=true --set gamma_matc=0 --set gamma_matm=0 --set gamma_inbatch=1 --set adversarial=false --set clip=0 --set reg=0"
if on tp; then
left $((BUDGET - 240)) && run tp-s2net 90 $R bench train --workspace ws-bench.toml --model s2net --set epochs=3 $B
left $((BUDGET - 200)) && run tp-bilstm 120 $R bench train --workspace ws-bench2k.toml --model adv-bilstm --set epochs=3 $BIL $B
# issue 41 item 1: cuDNN's recurrence (a build with the cudnn feature; refused otherwise)
left $((BUDGET - 180)) && run tp-bilstm-cudnn 120 $R bench train --workspace ws-bench2k.toml --model adv-bilstm --set epochs=3 --set recurrence=cudnn $BIL $B
left $((BUDGET - 160)) && run tp-xcnn 90 $R bench train --workspace ws-bench.toml --model xcnn --set mono_epochs=1 --set epochs=3 $B
left $((BUDGET - 130)) && run tp-bae 90 $R bench train --workspace ws-bench.toml --model bae --set epochs=1 --set lr=0.01 $B
fi
# 3. large batch: 50k terms per language (synthetic), batch 1000, k = 512
if on big; then
left $((BUDGET - 100)) && run big-s2net 90 $R bench train --workspace ws-syn50k.toml --model s2net --set epochs=2 --set batch=1000 --set dim=512 $B
left $((BUDGET - 70)) && run big-bae 60 $R bench train --workspace ws-syn50k.toml --model bae --set epochs=1 --set batch=1000 --set dim=512 --set lr=0.01 $B
fi
# 3b. issue 16/17: longer runs on the GPU, evaluated on every task
if on long; then
left $((BUDGET - 60)) && run long-adv-bilstm 100 $R train --workspace ws-enhi.toml --model adv-bilstm --epochs 3 --seed 1 --device $DEV --session $W/s/long-adv-bilstm
left $((BUDGET - 50)) && run eval-long-adv-bilstm 40 $R eval --session $W/s/long-adv-bilstm --json
left $((BUDGET - 40)) && run long-dbn-cca 90 $R train --workspace ws-enhi.toml --model dbn-cca --set epochs=10 --set finetune_epochs=5 --seed 1 --device $DEV --session $W/s/long-dbn-cca
left $((BUDGET - 20)) && run eval-long-dbn-cca 40 $R eval --session $W/s/long-dbn-cca --json
fi
# 4. a workbench job launched from the form on the GPU
if on e2e && left $((BUDGET - 40)) && [ -d debs ]; then
  mkdir -p /tmp/tmuxroot && for f in debs/*.deb; do dpkg -x $f /tmp/tmuxroot; done
  PATH=/tmp/tmuxroot/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/tmuxroot/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH \
    E2E_DEVICE=$DEV E2E_SCREENS=$W/r E2E_TIMEOUT=40 run e2e-tui 60 bash ../tests/e2e_tui.sh $R
fi
el "packing"
for d in $W/s/*/; do n=$(basename $d); mkdir -p $W/r/$n; cp $d/metrics.jsonl $d/status.json $d/config.toml $d/log.txt $W/r/$n/ 2>/dev/null; done
tar czf "$O/results.tgz" -C $W r
el "done"
