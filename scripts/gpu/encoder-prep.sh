#!/usr/bin/env bash
# Fills .devrun/ (ignored by git) with what scripts/gpu/encoder.sh needs on a GPU machine (issue 51:
# the encoder's fine-tuning against PyTorch): the CUDA binary and the engine's CUDA unit-test
# binary (stripped, xz), an encoder folder's config.json and tokenizer.json (no weights: the device
# machine makes random ones of that shape with random_encoder.py), the enhi pairs, the peers.
#   scripts/gpu/encoder-prep.sh ENCODER_DIR [path/to/cuda/rosetta] [path/to/engine-test-binary]
# ENCODER_DIR: a trimmed encoder folder, e.g. models/e5-enhi from
#   rosetta setup --encoder
#   rosetta encoder trim --weights models/multilingual-e5-small --workspace assets/workspaces/enhi-xquad.toml --out models/e5-enhi
# Then `run` (the device tool) with carry [".devrun"]: bash .devrun/encoder.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
ENC=${1:?encoder folder (config.json, tokenizer.json)}
BIN=${2:-target/release/rosetta}
TESTBIN=${3:-}
SHARED=${SHARED:-$ROOT/../shared}
D=.devrun
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >>.git/info/exclude
rm -rf $D && mkdir -p $D/data/enhi $D/enc
cp scripts/gpu/encoder.sh scripts/gpu/lib.sh scripts/gpu/ws-enc.toml $D/
cp "$ENC"/config.json "$ENC"/tokenizer.json $D/enc/
S=$SHARED/data/enhi-nmt-sample-18k
for l in en hi; do
    head -3200 $S/train.$l >$D/data/enhi/train.$l
    head -200 $S/val.$l >$D/data/enhi/val.$l
    head -200 $S/test.$l >$D/data/enhi/test.$l
done
cp "$SHARED"/peers/encoder_ref.py "$SHARED"/peers/random_encoder.py $D/
readelf -d "$BIN" | grep -q 'libcuda.so' || { echo "encoder-prep: $BIN is not a CUDA build (scripts/build-cuda.sh)" >&2; exit 1; }
strip -o /tmp/rosetta-cuda.$$ "$BIN"
xz -T2 -6 -c /tmp/rosetta-cuda.$$ >$D/rosetta.xz
rm -f /tmp/rosetta-cuda.$$
if [ -n "$TESTBIN" ]; then
    strip -o /tmp/rosetta-tests.$$ "$TESTBIN"
    xz -T2 -6 -c /tmp/rosetta-tests.$$ >$D/engine-tests.xz
    rm -f /tmp/rosetta-tests.$$
fi
du -sh $D
