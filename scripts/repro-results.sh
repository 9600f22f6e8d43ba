#!/bin/bash
# Re-runs the linear models and XCNN/BAE sessions of docs/results.md once
# (the "Re-run after the engine restructuring" table): trains each session,
# evaluates it with `rosetta eval --task all --json` into $OUT, and appends
# wall time and peak RSS to $OUT/summary.txt. Needs ../shared/data, the Bible
# workspace (`rosetta setup`) and a release build (R=path/to/rosetta).
set -u
cd "$(dirname "$0")/.."
OUT=$OUT
mkdir -p "$OUT"
R=${R:-./target/release/rosetta}
# enhi-xquad with the text settings the tables were made with (before the
# defaults changed in issue 15), data paths made absolute
D=$(realpath ../shared/data)
mkdir -p "$OUT"
W=$(realpath "$OUT")/enhi-xquad-issue13.toml
sed -e "s#\.\./\.\./\.\./shared/data#$D#g" assets/workspaces/enhi-xquad.toml | sed '/^\[text\]/,$d' > $W
printf '[text]\nvocab_per_language = 10000\nmin_df = 1\nstopwords = true\nstem = true\noov_ngrams = 0\n' >> $W
# the Bible workspace as `rosetta setup` wrote it before issue 15
B=$(realpath "$OUT")/bible-issue13.toml
BD=$(realpath workspaces/bible-en-es)
sed -e "s#\"kjv.en\"#\"$BD/kjv.en\"#; s#\"sparv.es\"#\"$BD/sparv.es\"#" $BD/workspace.toml | sed '/^\[text\]/,$d' > $B
printf '[text]\nvocab_per_language = 10000\nmin_df = 2\nstopwords = true\nstem = true\noov_ngrams = 0\n' >> $B
S=${S:-sessions/repro}
mkdir -p $S
t() { local name=$1; shift; local t0=$(date +%s); /usr/bin/time -f "%M KB" -o $OUT/$name.rss "$@" > $OUT/$name.train.log 2>&1; echo "$name train rc=$? $(( $(date +%s) - t0 )) s $(cat $OUT/$name.rss)" >> $OUT/summary.txt; }
e() { local name=$1; $R eval --session $S/$name --task all --split test --json > $OUT/$name.eval.json 2>$OUT/$name.eval.err; echo "$name eval rc=$?" >> $OUT/summary.txt; }
uptime >> $OUT/summary.txt
for m in cl-lsi opca cca; do t enhi-$m $R train --workspace $W --model $m --session $S/enhi-$m; e enhi-$m; done
t enhi-s2net $R train --workspace $W --model s2net --epochs 10 --set init=$S/enhi-opca --session $S/enhi-s2net; e enhi-s2net
t enhi-xcnn $R train --workspace $W --model xcnn --set mono_epochs=3 --epochs 10 --set negatives=in-batch --session $S/enhi-xcnn; e enhi-xcnn
t enhi-bae $R train --workspace $W --model bae --epochs 15 --lr 0.01 --set recon=sampled:500 --session $S/enhi-bae; e enhi-bae
for m in cl-lsi opca cca; do t bible-$m $R train --workspace $B --model $m --session $S/bible-$m; e bible-$m; done
t bible-s2net $R train --workspace $B --model s2net --epochs 10 --set init=$S/bible-opca --session $S/bible-s2net; e bible-s2net
uptime >> $OUT/summary.txt
echo REPRO_DONE >> $OUT/summary.txt
