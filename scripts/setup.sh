#!/usr/bin/env bash
# kinreg set-up on Debian 12: installs what is missing, builds, then either
# runs the demo on the embedded synthetic scan or runs the whole test suite.
#
#   scripts/setup.sh demo    install + build + `kinreg demo`
#   scripts/setup.sh test    install + build + ctest, then the CPU-only
#                            sanitizer and fuzzing passes (scripts/sanitize.sh:
#                            ASan+UBSan suite, TSan threaded modules, 10 s of
#                            each fuzz harness); what CI runs
#
# Environment: BUILD_DIR (default build), KINREG_CUDA=OFF to skip the CUDA
# backend even when nvcc is installed, JOBS (default: all cores), KINREG_DATA
# (the test data folder; default ../shared/data beside the checkout),
# SANITIZE (test mode: the passes to run after the suite, default
# "asan tsan fuzz"; "none" for none).
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
# libmicrohttpd-dev and libjs-three: the live view (kinreg view, run --view);
# librsvg2-dev: PNG plots (eval --plot x.png) drawn from their SVG.
packages=(build-essential cmake pkg-config libpng-dev libzmq3-dev libfreenect-dev libfreenect-bin python3 python3-zmq
    libmicrohttpd-dev libjs-three librsvg2-dev)
# The live view's test loads its page in headless Chromium: a browser only
# where the tests run, not for using kinreg.
if [ "$mode" = test ]; then packages+=(chromium); fi
# numpy for the Python package's kinreg.arrays and its test (the package
# itself needs only pyzmq), python3-venv for the pip install and wheel tests.
if [ "$mode" = test ]; then packages+=(python3-numpy python3-venv); fi
# Refinement: MPI ranks (mpirun kinreg refine) and CHOLMOD's sparse Cholesky.
# OpenBLAS (libopenblas0-openmp) makes CHOLMOD's factorisations faster and
# kinreg runs it on one thread, but it is not installed here: the TSan build
# of `kinreg sub` crashed with SIGBUS at start under a file-size limit with
# it (transport kinreg_sub_stops_at_the_first_failed_write).
packages+=(libopenmpi-dev openmpi-bin libsuitesparse-dev)
# The sanitizer and fuzzing passes: clang with its runtimes (libFuzzer, ASan,
# UBSan, TSan: libclang-rt-14-dev) and OpenMP (libomp-14-dev); ccache.
if [ "$mode" = test ]; then packages+=(clang-14 libclang-rt-14-dev libomp-14-dev ccache); fi
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
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON \
    -DKINREG_CUDA="${KINREG_CUDA:-ON}" "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs"

# ---- 3. Run -------------------------------------------------------------------
if [ "$mode" = demo ]; then
    exec "$build/kinreg" demo --output "$build/demo" "$@"
else
    # ctest's own closing lines stay as they are; one line after them counts
    # test cases, skipped ones included, and names the skipped cases.
    status=0
    t0=$(date +%s)
    # $jobs modules at a time: many wait on sockets, replays at sensor rate
    # and subprocesses; a module with a case that asserts a deadline runs
    # alone, and the slowest start first (tests/CMakeLists.txt).
    (cd "$build" && ctest -j "$jobs" --output-on-failure --timeout 900 "$@") || status=$?
    echo "== suite took $(($(date +%s) - t0)) s"
    sanitize=${SANITIZE:-asan tsan fuzz}
    if [ "$sanitize" != none ]; then
        # shellcheck disable=SC2086 # a list of pass names
        BUILD_DIR="$build" JOBS="$jobs" scripts/sanitize.sh $sanitize || status=1
    fi
    # The case count stays the last line (CI reads it).
    scripts/test_summary.sh "$build"
    exit "$status"
fi
