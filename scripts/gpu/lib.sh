# Shared set-up of the device-machine scripts (sourced by gpu.sh and long.sh, from .devrun/):
# unpacks the CUDA binary into $R unless R is set, and finds the CUDA libraries for DEV=cuda.
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }   # before second $1 of the run?
DEV=${DEV:-cuda}
if [ -z "${R:-}" ]; then xz -dc rosetta.xz > /tmp/rosetta && chmod +x /tmp/rosetta; R=/tmp/rosetta; fi
if [ "$DEV" = cuda ]; then
  libs=""
  # libcudnn.so.9: a build with the cudnn feature (PyTorch ships it)
  for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcudnn.so.9; do
    f=$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name "$l" -print 2>/dev/null | grep -v '\.cuda/stubs' | head -1)
    [ -n "$f" ] && libs="$libs:$(dirname "$f")"
  done
  export LD_LIBRARY_PATH="${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  el "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  ldd $R | grep -E "not found|libcuda|cublas|curand|cudart"
fi
