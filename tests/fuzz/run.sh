#!/usr/bin/env bash
# Runs the libFuzzer harnesses of a KINREG_FUZZ build on their corpora.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]     (default: all)
#
# Each harness fuzz_NAME runs SECONDS on BUILD_DIR/fuzz-corpus/NAME, which is
# seeded (once) from tests/fuzz/corpus/NAME and from the shared data
# (KINREG_DATA, default ../shared/data beside the checkout; copied, never
# committed). The corpus folder keeps what the fuzzer found, so later runs
# start where earlier ones stopped. Prints one line per harness with its
# executions; exits non-zero on the first finding (the crash input and the
# fuzzer's log are kept under BUILD_DIR/fuzz-findings). Environment: JOBS
# harnesses at once (default 1), WORKERS libFuzzer processes per harness
# sharing its corpus (default 1; the executions printed are their sum, as
# OSS-Fuzz counts them), FUZZ_ARGS extra libFuzzer flags, TMPDIR where
# inputs are written (default /dev/shm).
set -euo pipefail

build=${1:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
seconds=${2:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
data=${KINREG_DATA:-$here/../../../shared/data}
build=$(cd "$build" && pwd)
jobs=${JOBS:-1}
workers=${WORKERS:-1}
# The harnesses write each input to a file: on tmpfs that costs microseconds,
# on the VM's disk milliseconds (100× fewer executions).
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
    for f in "$build"/tests/fuzz/fuzz_*; do
        [ -x "$f" ] && harnesses+=("$(basename "$f" | sed 's/^fuzz_//')")
    done
fi
[ ${#harnesses[@]} -gt 0 ] || { echo "fuzz: no harnesses in $build/tests/fuzz (configure with -DKINREG_FUZZ=ON, CC=clang-14)" >&2; exit 2; }

# copy_first N DIR FILE...: the first N files that exist. (Not `ls | head`:
# head closing the pipe early kills ls with SIGPIPE, which pipefail and
# set -e turn into a silent exit of the whole harness run.)
copy_first() {
    local n=$1 dir=$2
    shift 2
    local f
    for f in "$@"; do
        [ "$n" -gt 0 ] && [ -f "$f" ] || continue
        cp "$f" "$dir/"
        n=$((n - 1))
    done
    return 0
}

# Small samples of the real inputs each parser sees.
seed_shared() {
    local name=$1 dir=$2
    [ -d "$data" ] || return 0
    case $name in
    png_depth) copy_first 3 "$dir" "$data"/tum/fr1_xyz_head/depth/*.png ;;
    pgm_depth) copy_first 2 "$dir" "$data"/fakenect/planes/d-*.pgm ;;
    fakenect_index) [ -f "$data/fakenect/planes/INDEX.txt" ] && head -c 8192 "$data/fakenect/planes/INDEX.txt" > "$dir/planes_INDEX.txt" ;;
    tum_depth_txt) [ -f "$data/tum/fr1_xyz_head/depth.txt" ] && head -c 8192 "$data/tum/fr1_xyz_head/depth.txt" > "$dir/fr1_depth.txt" ;;
    trajectory) [ -f "$data/tum/fr1_xyz_head/groundtruth.txt" ] && head -c 8192 "$data/tum/fr1_xyz_head/groundtruth.txt" > "$dir/fr1_groundtruth.txt" ;;
    scan_conf) [ -f "$data/bunny/bun.conf" ] && cp "$data/bunny/bun.conf" "$dir/" ;;
    ply)
        # The Stanford scan's header with its first 40 vertices (2 MB whole
        # is too slow to mutate).
        [ -f "$data/bunny/bun000.ply" ] &&
            awk '/^element vertex/ {print "element vertex 40"; next} {print} /^end_header/ {n=NR} n && NR > n + 39 {exit}' \
                "$data/bunny/bun000.ply" > "$dir/bun000_head.ply"
        ;;
    esac
    return 0
}

total_status=0
run_one() {
    local name=$1 bin="$build/tests/fuzz/fuzz_$1"
    local corpus="$build/fuzz-corpus/$name" findings="$build/fuzz-findings/$name"
    [ -x "$bin" ] || { echo "fuzz: no harness $bin" >&2; return 2; }
    if [ ! -d "$corpus" ]; then
        mkdir -p "$corpus"
        cp "$here/corpus/$name"/* "$corpus/" 2>/dev/null || true
        seed_shared "$name" "$corpus"
    fi
    mkdir -p "$findings"
    # -rss_limit_mb: an allocation driven by a header claim shows up as an
    # out-of-memory finding instead of swapping the machine. Workers share
    # the corpus folder: each picks up what the others add (-reload).
    local w pids=() rc=0 runs=0 n log
    for ((w = 1; w <= workers; w++)); do
        ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1} \
            "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
            -artifact_prefix="$findings/" ${FUZZ_ARGS:-} "$corpus" > "$findings/fuzz.$w.log" 2>&1 &
        pids+=($!)
    done
    for ((w = 1; w <= workers; w++)); do
        log="$findings/fuzz.$w.log"
        wait "${pids[w - 1]}" || {
            rc=$?
            echo "fuzz_$name: FINDING in worker $w (exit $rc); see $log and $findings/" >&2
            tail -30 "$log" >&2
        }
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        runs=$((runs + ${n:-0}))
    done
    [ "$rc" -eq 0 ] || return 1
    printf 'fuzz_%-16s %12s executions in %ss (%s worker%s), corpus %s files\n' "$name" "$runs" \
        "$seconds" "$workers" "$([ "$workers" -eq 1 ] || echo s)" "$(ls "$corpus" | wc -l)"
}

if [ "$jobs" -le 1 ]; then
    for h in "${harnesses[@]}"; do run_one "$h" || total_status=1; done
else
    # A few at a time (each libFuzzer process is single-threaded).
    pids=()
    for h in "${harnesses[@]}"; do
        run_one "$h" &
        pids+=($!)
        if [ ${#pids[@]} -ge "$jobs" ]; then
            wait "${pids[0]}" || total_status=1
            pids=("${pids[@]:1}")
        fi
    done
    for p in "${pids[@]}"; do wait "$p" || total_status=1; done
fi
exit "$total_status"
