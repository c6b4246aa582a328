#!/usr/bin/env bash
# Run HERE (a machine with PyPI access), before a device call: downloads the Python 3.12 wheels
# that bench/mjx_gpu.sh installs offline on the GPU machine (which has Python 3.12 with JAX+CUDA,
# numpy, numba, Cython and pytest, and no network). Wheels only, no dependencies resolved: the
# list below is what `visgym.make("fetch_*", backend="mjx")` imports beyond that machine's
# packages (MuJoCo + MJX of one release, gymnasium, Pillow), and of gymnasium-robotics only the
# Fetch model files (its wheel is 26 MB; visgym reads nothing else of it and never imports it):
# they go to <dest>/site/gymnasium_robotics, which bench/mjx_gpu.sh puts on PYTHONPATH. About
# 46 MB in all: pass the folder in the device call's `carry` (64 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-wheels312}
PY=${PYTHON:-.venv/bin/python}
MUJOCO=${MUJOCO_VERSION:-3.17.0}
rm -rf "$DEST" && mkdir -p "$DEST"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DEST" "mujoco==$MUJOCO" "mujoco-mjx==$MUJOCO" etils absl-py glfw pyopengl trimesh \
  "gymnasium>=1.0" cloudpickle farama-notifications typing-extensions "gymnasium-robotics>=1.2" \
  "pillow>=10.1"
ROBOTICS=$(ls "$DEST"/gymnasium_robotics-*.whl)
"$PY" - "$ROBOTICS" "$DEST/site" <<'PYEOF'
import sys, zipfile
wheel, site = sys.argv[1], sys.argv[2]
keep = ("gymnasium_robotics/__init__.py", "gymnasium_robotics/envs/assets/fetch/",
        "gymnasium_robotics/envs/assets/stls/fetch/", "gymnasium_robotics/envs/assets/textures/")
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(keep)]
    z.extractall(site, names)
print(f"gymnasium-robotics: kept {len(names)} Fetch model files of {wheel}")
PYEOF
rm "$ROBOTICS"
du -sh "$DEST"
