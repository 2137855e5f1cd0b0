#!/usr/bin/env bash
# kinreg set-up on Debian 12: installs what is missing, builds, then either
# runs the demo on the embedded synthetic scan or runs the whole test suite.
#
#   scripts/setup.sh demo    install + build + `kinreg demo`
#   scripts/setup.sh test    install + build + ctest (what CI runs)
#
# Environment: BUILD_DIR (default build), KINREG_CUDA=OFF to skip the CUDA
# backend even when nvcc is installed, JOBS (default: all cores), KINREG_DATA
# (the test data folder; default ../shared/data beside the checkout).
# Both modes configure with the same flags, so running one after the other
# builds once.
set -euo pipefail

mode=${1:-}
case "$mode" in
demo | test) ;;
*)
    echo "usage: scripts/setup.sh demo|test" >&2
    exit 2
    ;;
esac
shift

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

# ---- 1. Debian packages that are missing ------------------------------------
# libmicrohttpd-dev and libjs-three: the live view (kinreg view, run --view).
packages=(build-essential cmake pkg-config libpng-dev libzmq3-dev libfreenect-dev libfreenect-bin python3 python3-zmq
    libmicrohttpd-dev libjs-three)
# The live view's test loads its page in headless Chromium: a browser only
# where the tests run, not for using kinreg.
if [ "$mode" = test ]; then packages+=(chromium); fi
# Refinement: MPI ranks (mpirun kinreg refine) and CHOLMOD's sparse Cholesky.
packages+=(libopenmpi-dev openmpi-bin libsuitesparse-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "kinreg setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- 2. Build ---------------------------------------------------------------
# nvcc usually lives outside PATH on Debian CUDA installs.
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON \
    -DKINREG_CUDA="${KINREG_CUDA:-ON}" >/dev/null
cmake --build "$build" -j "$jobs"

# ---- 3. Run -------------------------------------------------------------------
if [ "$mode" = demo ]; then
    exec "$build/kinreg" demo --out "$build/demo" "$@"
else
    # ctest's own closing lines stay as they are; one line after them counts
    # test cases, skipped ones included, and names the skipped cases.
    status=0
    (cd "$build" && ctest --output-on-failure --timeout 900 "$@") || status=$?
    scripts/test_summary.sh "$build"
    exit "$status"
fi
