# The agreement runs: one line per model, "NAME WORKSPACE ARGS...". gpu.sh runs them
# with --device cuda; the same lines with --device cpu give the CPU side.
s2net --workspace ws-enhi.toml --model s2net --epochs 3 --seed 1 --set log_every=1
xcnn --workspace ws-enhi.toml --model xcnn --set mono_epochs=1 --epochs 2 --seed 1 --set log_every=1
bae --workspace ws-enhi.toml --model bae --epochs 2 --seed 1 --set log_every=1
dbn-cca --workspace ws-enhi.toml --model dbn-cca --set epochs=1 --set finetune_epochs=1 --seed 1 --set log_every=1
adv-bilstm --workspace ws-enhi2k.toml --model adv-bilstm --batch 20 --epochs 1 --seed 1 --set log_every=1
