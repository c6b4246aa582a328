#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the repository root (the device tool's working copy), e.g.
#   run(command="bash bench/mjx_gpu.sh", carry=["wheels312"], timeout_s=600)
# after `bash bench/mjx_gpu_wheels.sh` here. Installs the carried wheels offline, builds the
# Cython extensions in place, and runs `python -m visgym.bench mjx-gpu` (JSON to $OUT/mjx_gpu.json,
# table printed last). Extra arguments go to the benchmark (default: B = 1,024, 4,096, 8,192 with
# a time budget that leaves the 10-minute call room to spare).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-wheels312}
if [ -d "$WHEELS" ]; then
  "$PY" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
fi
"$PY" setup.py -q build_ext --inplace >/dev/null
# The repository root is the package: import it as `visgym` through a link.
LINKDIR=$(mktemp -d)
ln -s "$PWD" "$LINKDIR/visgym"
export PYTHONPATH="$LINKDIR${PYTHONPATH:+:$PYTHONPATH}"
if [ -d "$WHEELS/site" ]; then   # the Fetch model files of gymnasium-robotics (see the wheels script)
  export PYTHONPATH="$PYTHONPATH:$PWD/$WHEELS/site"
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false   # device memory as used, not 75 % up front
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())"
exec "$PY" -m visgym.bench mjx-gpu --time-budget-s "${TIME_BUDGET_S:-420}" "$@"
