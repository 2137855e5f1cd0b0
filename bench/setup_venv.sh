#!/bin/sh
# Creates ./.venv-bench (git-ignored) with Open3D (CPU build) and NumPy from
# PyPI for bench/open3d_compare.py. Run from anywhere; about 600 MB on disk.
#   bench/setup_venv.sh            # create or update
# Debian 12 also packages Open3D 0.16 (apt-get install python3-open3d, for
# /usr/bin/python3); the script works with either, but the numbers in
# docs/BENCHMARKS.md come from the PyPI build installed here.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
venv="$repo/.venv-bench"
python=${PYTHON:-python3}
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "setup_venv: $python cannot create virtual environments; on Debian: sudo apt-get install python3-venv" >&2
    exit 1
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --upgrade --quiet pip
"$venv/bin/python" -m pip install --quiet open3d-cpu numpy
"$venv/bin/python" -c 'import open3d, numpy; print("open3d", open3d.__version__, "numpy", numpy.__version__, "in '"$venv"'")'
