#!/bin/bash
# The text-settings grid of docs/results.md ("Text defaults"): for each
# workspace template (a workspace TOML without [text]) and each setting of
# [text] (stop words removed/kept, stemming on/off, min_df 1/2, vocabulary
# size, out-of-vocabulary n-gram units, index units), trains MODELS and evaluates them (`rosetta eval --task all --json`).
# One line per run in $OUT/grid.tsv. Needs ../shared/data (enhi) and the
# Bible workspace (`rosetta setup`).
#   R=target/release/rosetta OUT=/tmp/grid MODELS="cl-lsi cca" VOCABS="10000" scripts/text-grid.sh
set -u
cd "$(dirname "$0")/.."
R=$(realpath "${R:-./target/release/rosetta}")
OUT=${OUT:-/tmp/text-grid}
MODELS=${MODELS:-"cl-lsi cca"}
VOCABS=${VOCABS:-10000}
WORKSPACES=${WORKSPACES:-"enhi bible"}
STOPS=${STOPS:-"true false"}
STEMS=${STEMS:-"true false"}
DFS=${DFS:-"1 2"}
OOVS=${OOVS:-0}
UNITS=${UNITS:-words}
mkdir -p "$OUT"
D=$(realpath ../shared/data)
B=$(realpath workspaces/bible-en-es)
template() {
  case $1 in
  enhi) sed -e "s#\.\./\.\./\.\./shared/data#$D#g" assets/workspaces/enhi-xquad.toml | sed '/^\[text\]/,$d' ;;
  bible) sed -e "s#\"kjv.en\"#\"$B/kjv.en\"#; s#\"sparv.es\"#\"$B/sparv.es\"#" "$B/workspace.toml" | sed '/^\[text\]/,$d' ;;
  esac
}
[ -f "$OUT/grid.tsv" ] || printf 'workspace\tmodel\tstopwords\tstem\tmin_df\tvocab\toov_ngrams\tunits\tterms_src\tterms_tgt\tempty_test_pairs\tsentence_MRR\tMRR_ties_for\tadhoc_MAP\tBLI_P@1\tfit_s\n' > "$OUT/grid.tsv"
echo "# $(uptime)" >> "$OUT/grid.tsv"
for ws in $WORKSPACES; do for v in $VOCABS; do for st in $STOPS; do for sm in $STEMS; do for df in $DFS; do for oov in $OOVS; do for u in $UNITS; do
  name=$ws-stop$st-stem$sm-df$df-v$v-oov$oov-$u
  W=$OUT/$name.toml
  # a value "-" leaves the key out: the default (a model's own, else the global one)
  { template $ws | sed "s/^name = .*/name = \"$name\"/"; printf '\n[text]\nvocab_per_language = %s\n' $v
    [ "$df" = - ] || echo "min_df = $df"; [ "$st" = - ] || echo "stopwords = $st"; [ "$sm" = - ] || echo "stem = $sm"
    [ "$oov" = - ] || echo "oov_ngrams = $oov"; [ "$u" = - ] || echo "units = \"$u\""; } > $W
  for m in $MODELS; do
    S=$OUT/sess/$name-$m
    [ -f "$OUT/$name-$m.eval.json" ] && continue
    rm -rf "$S"
    t0=$(date +%s)
    # the settings of docs/results.md's session tables
    case $m in
      s2net) init="--epochs 10 --set init=$OUT/sess/$name-opca" ;;
      xcnn) init="--set mono_epochs=3 --epochs 10 --set negatives=in-batch" ;;
      bae) init="--epochs 15 --lr 0.01 --set recon=sampled:500" ;;
      *) init="" ;;
    esac
    "$R" train --workspace $W --model $m $init --session $S > $OUT/$name-$m.train.log 2>&1 || { echo "train failed: $name $m" >> $OUT/errors.txt; continue; }
    fit=$(( $(date +%s) - t0 ))
    "$R" eval --session $S --task all --split test --json > $OUT/$name-$m.eval.json 2>> $OUT/errors.txt || { echo "eval failed: $name $m" >> $OUT/errors.txt; continue; }
    # the settings the session recorded (defaults resolved)
    rec=$(python3 -c "import tomllib,sys; t=tomllib.load(open('$S/config.toml','rb')).get('text',{}); print(t.get('stopwords'), t.get('stem'), t.get('min_df'), t.get('oov_ngrams', 0), t.get('units', 'words'))")
    python3 - "$OUT/$name-$m.eval.json" "$S" $ws $m $rec $v $fit >> $OUT/grid.tsv <<'PY'
import json, sys
e = json.load(open(sys.argv[1])); s = sys.argv[2]
terms = [len(json.load(open(f"{s}/vocab.{x}.json"))["terms"]) for x in ("source", "target")]
sent = e.get("sentence") or {}; ad = e.get("adhoc") or {}; bli = (e.get("bli") or {}).get("cosine") or {}
f = lambda x: "" if x is None else f"{x:.4f}"
a = sys.argv
print("\t".join(map(str, a[3:5] + [a[5].lower(), a[6].lower(), a[7], a[10], a[8], a[9]] + terms + [sent.get("pairs_without_known_terms", ""), f(sent.get("MRR")), f(sent.get("MRR_ties_for")), f(ad.get("MAP")), f(bli.get("P@1")), a[11]])))
PY
  done
done; done; done; done; done; done; done
echo "# done $(uptime)" >> "$OUT/grid.tsv"
