#!/usr/bin/env bash
# Fills .devrun/ (ignored by git) with what scripts/gpu/gpu.sh needs on a GPU machine that has no
# Rust and no ../shared: the CUDA binary (stripped, xz), the data it reads (copied from
# ../shared/data, never committed), torch_ref.py, tmux for the workbench check, the workspaces.
#   scripts/gpu/prepare.sh [path/to/cuda/rosetta]     (default: target/release/rosetta)
#   TESTBIN=target/release/deps/rosetta-HASH scripts/gpu/prepare.sh ...   also carries the engine's
#     unit-test binary of a CUDA build, for gpu.sh's `kernels` section: `ROSETTA_CUDNN=1
#     scripts/build-cuda.sh test -p rosetta-engine --lib --no-run` prints its path
# Then, on the GPU machine, from the repository root:
#   SECTIONS="agree tp big long e2e" bash .devrun/gpu.sh        ($OUT gets log.txt, results.tgz)
#   TRAIN_S=400 bash .devrun/long.sh                         (issues 16 and 17: long runs)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BIN=${1:-target/release/rosetta}
SHARED=${SHARED:-$ROOT/../shared}
D=.devrun
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >>.git/info/exclude
mkdir -p $D/data/enhi $D/data/ende $D/data/xquad $D/data/bible $D/debs
cp scripts/gpu/gpu.sh scripts/gpu/long.sh scripts/gpu/lib.sh scripts/gpu/agree-cmds.sh scripts/gpu/gen_syn.py scripts/gpu/ws-*.toml scripts/gpu/jobs-*.txt $D/
cp "$SHARED"/data/enhi-nmt-sample-18k/{train,val,test}.{en,hi} $D/data/enhi/
head -2000 $D/data/enhi/train.en >$D/data/enhi/train2k.en
head -2000 $D/data/enhi/train.hi >$D/data/enhi/train2k.hi
cp "$SHARED"/data/xquad/clir/{docs.hi.tsv,docs.en.tsv,docs.de.tsv,queries.en.tsv,queries.hi.tsv,queries.de.tsv,queries.es.tsv,qrels.tsv} $D/data/xquad/
cp "$SHARED"/data/freedict/{eng-hin.tsv,eng-deu.tsv.gz,deu-eng.tsv.gz,spa-eng.tsv} $D/data/
# the Bible: `rosetta setup` writes it (Debian's sword-text-kjv, sword-text-sparv, diatheke)
if [ -f workspaces/bible-en-es/kjv.en ]; then
    cp workspaces/bible-en-es/{kjv.en,sparv.es,verses.txt} $D/data/bible/
    cp /usr/share/dictd/freedict-eng-spa.{index,dict.dz} $D/data/
else
    echo "prepare: no workspaces/bible-en-es (run rosetta setup): the Bible jobs will fail" >&2
fi
M=$SHARED/data/multi30k/task1 N=$SHARED/data/opennmt-ende-sample
for l in en de; do
  cp $M/train.$l $D/data/ende/m30k.train.$l; cp $M/val.$l $D/data/ende/m30k.val.$l
  cp $M/test_2016_flickr.$l $D/data/ende/m30k.test.$l
done
cp $N/src-train.txt $D/data/ende/onmt.train.en; cp $N/tgt-train.txt $D/data/ende/onmt.train.de
cp $N/src-val.txt $D/data/ende/onmt.val.en; cp $N/tgt-val.txt $D/data/ende/onmt.val.de
cp "$SHARED"/peers/torch_ref.py $D/
(cd $D/debs && apt-get download tmux libevent-core-2.1-7 libutempter0 >/dev/null 2>&1) ||
    echo "prepare: no tmux packages (the e2e section is skipped)" >&2
readelf -d "$BIN" | grep -q 'libcuda.so' || { echo "prepare: $BIN is not a CUDA build (scripts/build-cuda.sh)" >&2; exit 1; }
strip -o /tmp/rosetta-cuda.$$ "$BIN"
xz -T2 -6 -c /tmp/rosetta-cuda.$$ >$D/rosetta.xz
rm -f /tmp/rosetta-cuda.$$
if [ -n "${TESTBIN:-}" ]; then
    strip -o /tmp/rosetta-tests.$$ "$TESTBIN"
    xz -T2 -6 -c /tmp/rosetta-tests.$$ >$D/engine-tests.xz
    rm -f /tmp/rosetta-tests.$$
fi
du -sh $D
