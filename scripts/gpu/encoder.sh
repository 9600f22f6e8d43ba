#!/usr/bin/env bash
# Issue 51's GPU rows in one run on the device machine (after scripts/gpu/encoder-prep.sh), from the
# repository root: bash .devrun/encoder.sh      (about 8 minutes on an H200; SECTIONS to run fewer)
#   kernels: the fused kernels' GPU tests (kit/fused.rs and kit/attention.rs gpu_tests) from the
#      carried engine test binary;
#   pair: `rosetta bench train --model encoder --encoder-ref encoder_ref.py`, paired in one call
#      each: f32 and bf16 (peer: --amp bf16), batch 32 and 128, with each process's peak GPU memory
#      (nvidia-smi's per-process figure, sampled every 100 ms);
#   attn: batch 128, f32 and bf16, attention=fused (the pair rows run attention=auto, which is the
#      composite path on a GPU until these kernels have run on one), paired with the peer too;
#   memory: batch 128, f32 and bf16, gradient_checkpointing=true (Rosetta alone): its GPU memory
#      against the pair rows' and the peer's;
#   profile (not run unless named in SECTIONS): one fine-tuning step's phases
#      (ROSETTA_STEP_PROFILE=1: forward, loss, backward, optimiser), precision=tf32 and nsys.
# Writes $OUT/log.txt and one JSON line a bench in $OUT/NAME.json.
set -u
cd "$(dirname "$0")"
O=${OUT:-/tmp/enc-out}
mkdir -p "$O"
exec > >(tee "$O/log.txt") 2>&1
SECTIONS=${SECTIONS:-"kernels pair attn memory"}
on() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
. ./lib.sh
uptime
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
# PyTorch's own cuDNN first (the cudnn build links libcudnn.so.9)
CUDNN=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$CUDNN:$LD_LIBRARY_PATH
[ -f enc/model.safetensors ] || python3 random_encoder.py enc
el "encoder folder ready"

if on kernels && [ -f engine-tests.xz ]; then
    xz -dc engine-tests.xz >/tmp/engine-tests && chmod +x /tmp/engine-tests
    ROSETTA_REQUIRE_GPU=1 timeout 180 /tmp/engine-tests --test-threads 1 fused:: attention:: >$O/kernels.txt 2>&1
    el "kernels rc=$?"
    grep -E "^test |test result|panicked|gpu \[|cpu " $O/kernels.txt | head -40
fi

# bench NAME TIMEOUT [ARGS...]: rosetta bench train on the encoder, with per-process GPU memory peaks
bench() {
    local name=$1 t=$2
    shift 2
    # by process name: in a container nvidia-smi reports the host's process ids
    nvidia-smi --query-compute-apps=process_name,used_memory --format=csv,noheader,nounits -lms 100 >$O/$name.smi 2>/dev/null &
    local smi=$!
    local t1=$(date +%s.%N)
    timeout "$t" $R bench train --workspace ws-enc.toml --model encoder --device cuda --threads 8 \
        --set weights=enc "$@" >$O/$name.json 2>$O/$name.err &
    local pid=$!
    wait $pid
    local rc=$?
    local t2=$(date +%s.%N)
    kill $smi 2>/dev/null
    local ours=$(awk -F', ' '$1 ~ /rosetta/ && $2>m {m=$2} END {print m+0}' $O/$name.smi)
    local theirs=$(awk -F', ' '$1 !~ /rosetta/ && $2>m {m=$2} END {print m+0}' $O/$name.smi)
    el "$name rc=$rc wall=$(awk "BEGIN{printf \"%.1f\", $t2 - $t1}")s gpu_mem_peak_MiB rosetta=$ours peer=$theirs"
    [ $rc = 0 ] || tail -5 $O/$name.err
    grep -h "profile" $O/$name.err
    python3 - "$O/$name.json" "$ours" "$theirs" <<'EOF'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception as e:
    print("  no JSON:", e); sys.exit(0)
p = r.get("encoder_ref", {})
s = r.get("settings", {})
print(f"  batch {s.get('batch')} {s.get('precision')} attention={s.get('attention')} checkpointing={s.get('gradient_checkpointing')} pairs {r.get('examples')}: rosetta {r.get('pairs_per_s')} pairs/s, "
      f"peer {p.get('pairs_per_s') and round(p['pairs_per_s'], 1)} pairs/s, ratio {r.get('pairs_per_s_over_encoder_ref')}; "
      f"test MRR rosetta {r.get('test_mrr')} (ties for {r.get('test_mrr_ties_for')}) peer {p.get('test_mrr_after')}; "
      f"peak GPU MiB rosetta {sys.argv[2]} peer {sys.argv[3]}")
EOF
}

# warm-up (not reported): the driver compiles candle's and Rosetta's PTX on first use and caches
# it; PyTorch's first process pays its own start-up
if on pair || on attn || on memory || on profile; then
    bench warm 90 --set epochs=1 --set batch=32 --set max_pairs=320 --set precision=bf16
    timeout 90 python3 encoder_ref.py --model enc --device cuda --max-len 128 finetune --train data/enhi/train.en data/enhi/train.hi \
        --test data/enhi/test.en data/enhi/test.hi --max-pairs 320 --amp bf16 >/dev/null 2>&1
    el "warm-up done"
fi
# two epochs over the 3,184 pairs: 200 steps at batch 32, 50 at batch 128
if on pair; then
    P="--encoder-ref encoder_ref.py --set epochs=2"
    [ -z "${ONLY128:-}" ] && bench f32-b32 150 --set batch=32 $P
    bench f32-b128 150 --set batch=128 $P
    [ -z "${ONLY128:-}" ] && bench bf16-b32 150 --set batch=32 --set precision=bf16 $P
    bench bf16-b128 150 --set batch=128 --set precision=bf16 $P
fi
if on attn; then
    P="--encoder-ref encoder_ref.py --set epochs=2 --set attention=fused"
    bench f32-b128-fused 150 --set batch=128 $P
    bench bf16-b128-fused 150 --set batch=128 --set precision=bf16 $P
fi
if on memory; then
    bench f32-b128-ckpt 90 --set epochs=2 --set batch=128 --set gradient_checkpointing=true
    bench bf16-b128-ckpt 90 --set epochs=2 --set batch=128 --set precision=bf16 --set gradient_checkpointing=true
fi
if on profile; then
    E="--set epochs=1 --set max_pairs=1280"
    ROSETTA_STEP_PROFILE=1 bench prof-b32 90 --set batch=32 $E
    ROSETTA_STEP_PROFILE=1 bench prof-b128 90 --set batch=128 $E
    ROSETTA_STEP_PROFILE=1 bench prof-b128-bf16 90 --set batch=128 --set precision=bf16 $E
    bench tf32-b128 90 --set epochs=2 --set batch=128 --set precision=tf32
    # the kernels of a step at batch 128 (f32), where Nsight Systems is installed
    if command -v nsys >/dev/null; then
        timeout 120 nsys profile -t cuda --stats=false -o /tmp/enc-f32 -f true $R bench train --workspace ws-enc.toml \
            --model encoder --device cuda --threads 8 --set weights=enc --set epochs=1 --set batch=128 --set max_pairs=1280 >/dev/null 2>&1
        timeout 60 nsys stats -r cuda_gpu_kern_sum -f csv -o $O/nsys-f32 /tmp/enc-f32.nsys-rep >/dev/null 2>&1
        el "nsys rc=$?"
        head -25 $O/nsys-f32*.csv 2>/dev/null | cut -c1-220
    else
        el "no nsys"
    fi
fi
uptime
el "done"
