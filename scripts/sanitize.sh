#!/usr/bin/env bash
# The sanitizer and fuzzing passes of `scripts/setup.sh test` (what CI runs),
# CPU-only, built with clang-14 from Debian:
#
#   1. ASan+UBSan: every module that runs kinreg's code once (build folder
#      ${BUILD_DIR}-asan), pipeline and recovery without their long accuracy
#      runs, and the tests built with KINREG_SANITIZED on smaller inputs; the
#      same build carries the libFuzzer harnesses (tests/fuzz).
#   2. TSan: the threaded modules (queue, transport, pipeline, live; the
#      last two without their long accuracy runs) in ${BUILD_DIR}-tsan.
#   3. Fuzz smoke: every harness FUZZ_SECONDS (default 10) on its corpus.
#
#   scripts/sanitize.sh [asan|tsan|fuzz]...      (default: all three)
#
# Each pass prints its wall time; the exit status is non-zero when any pass
# failed. Environment: BUILD_DIR (default build), JOBS, FUZZ_SECONDS,
# KINREG_DATA. ccache is used when installed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
passes=("$@")
[ ${#passes[@]} -gt 0 ] || passes=(asan tsan fuzz)
cc=${SANITIZE_CC:-clang-14}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
status=0
now() { date +%s; }

# One test case, COMMAND... with its output in LOG; its tail is shown when
# it fails. A skip (77: its data is absent, as ctest counts it) is no
# failure.
run_case() { # LOG COMMAND...
    local log=$1 rc=0
    shift
    "$@" > "$log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || {
        tail -40 "$log"
        return 1
    }
}

configure() { # DIR SANITIZERS [extra cmake args]
    local dir=$1 san=$2
    shift 2
    CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINREG_WERROR=ON -DKINREG_CUDA=OFF \
        -DKINREG_SANITIZE="$san" "${launcher[@]}" "$@" > /dev/null
}

# Suppressions and options: kinreg's own code runs with the strict checks;
# libfreenect's fakenect (a third-party library loaded in place of
# libfreenect by the modules that replay fakenect dumps: live, tools,
# lifecycle) passes non-terminated buffers to strchr/strtol-like calls, which
# strict_string_checks reports, so those modules run without that one check.
# Everything else is reported and fails the test.
asan_strict="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:abort_on_error=0"
asan_fakenect="detect_leaks=1:strict_string_checks=0:detect_stack_use_after_return=1:check_initialization_order=1"
asan_mpi="detect_leaks=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Idle OpenMP threads spinning on 2 cores would starve the sanitized threads.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

for pass in "${passes[@]}"; do
    t0=$(now)
    case $pass in
    asan)
        dir="$build-asan"
        echo "== sanitize: ASan+UBSan build in $dir"
        if configure "$dir" address,undefined -DKINREG_FUZZ=ON && cmake --build "$dir" -j "$jobs" > "$dir/sanitize-build.log" 2>&1; then
            rc=0
            # Every module once; the fakenect replays without strict string
            # checks, refine_mpi without leak detection (Open MPI's runtime
            # keeps its own allocations past MPI_Finalize), and pipeline and
            # recovery by their shorter cases: their long accuracy runs (900
            # synthetic frames, 400 fr1 frames, 850 frames with jumps, and
            # recovery_search's 300 frames with jumps: 51 s) drive the same
            # code as the short ones and took 12 of the pass's minutes under
            # ASan on 2 cores; the plain suite runs them.
            # `layers` checks the source tree with a script and compiles
            # planted files: nothing of kinreg's runs under the sanitizer.
            # These modules run $jobs at a time: what they time has bounds
            # of seconds (the replays at sensor rate and the MPI run below
            # stay one at a time); on 2 cores the group took 272 s instead
            # of 466 (752e036).
            (cd "$dir" && ASAN_OPTIONS=$asan_strict ctest -j "$jobs" --output-on-failure --timeout 1800 \
                -E '^(live|tools|lifecycle|refine_mpi|pipeline|recovery|recovery_search|layers)$') || rc=1
            (cd "$dir" && ASAN_OPTIONS=$asan_fakenect ctest --output-on-failure --timeout 1800 \
                -R '^(live|tools|lifecycle)$') || rc=1
            (cd "$dir" && ASAN_OPTIONS=$asan_mpi ctest --output-on-failure --timeout 1800 \
                -R '^refine_mpi$') || rc=1
            for t in "pipeline fusion_thread_tracks_as_well" "pipeline stop_flushes_every_computed_pose" \
                "pipeline subscriber_receives_every_pose" "pipeline bad_endpoint_and_source_fail_before_starting" \
                "pipeline corrupt_frame_stops_with_poses_kept" "recovery synthetic_jumps_in_ground_truth_and_stride" \
                "recovery_search finds_jumps_in_one_attempt"; do
                log="$(cd "$dir" && pwd)/asan-${t// /.}.log"
                # shellcheck disable=SC2086 # module and test name
                (cd "$dir/tests" && run_case "$log" env ASAN_OPTIONS="$asan_strict" ./kinreg_tests $t) || rc=1
                echo "ASan $t: $(tail -1 "$log")"
            done
            [ $rc -eq 0 ] || status=1
            echo "== sanitize: ASan+UBSan suite $([ $rc -eq 0 ] && echo passed || echo FAILED)"
        else
            tail -30 "$dir/sanitize-build.log"
            echo "== sanitize: ASan+UBSan build FAILED"
            status=1
        fi
        ;;
    tsan)
        dir="$build-tsan"
        echo "== sanitize: TSan build in $dir (threaded modules)"
        # OpenMP's runtime is not instrumented: its own barriers would read
        # as races, so TSan runs the OpenMP parts on one thread and watches
        # kinreg's own threads (capture, tracker, fuser, publisher, snapshot).
        if configure "$dir" thread && cmake --build "$dir" -j "$jobs" --target kinreg_tests > "$dir/sanitize-build.log" 2>&1; then
            rc=0
            # The threaded modules, without the long accuracy runs (900-frame
            # synthetic, 400-frame fr1: the same threads as the short ones,
            # most of an hour under TSan's 5-15x slowdown on 2 cores) and
            # without three tests whose deadlines TSan's slowness misses
            # (pipeline.subscriber_receives_every_pose and the live stall and
            # Ctrl-C tests: they ran without a race report, but their timing
            # assertions failed on the 2-core VM).
            for t in queue transport \
                "pipeline fusion_thread_tracks_as_well" "pipeline stop_flushes_every_computed_pose" \
                "pipeline bad_endpoint_and_source_fail_before_starting" \
                "pipeline corrupt_frame_stops_with_poses_kept" \
                "live planes_every_frame_delivered_tracked_published" "live no_sensor_is_a_clear_error"; do
                log="$dir/tsan-${t// /.}.log"
                # shellcheck disable=SC2086 # module and test name
                run_case "$log" env OMP_NUM_THREADS=1 \
                    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$here/tests/tsan.supp" \
                    "$dir/tests/kinreg_tests" $t || rc=1
                echo "TSan $t: $(tail -1 "$log")"
            done
            [ $rc -eq 0 ] || status=1
            echo "== sanitize: TSan modules $([ $rc -eq 0 ] && echo passed || echo FAILED)"
        else
            tail -30 "$dir/sanitize-build.log"
            echo "== sanitize: TSan build FAILED"
            status=1
        fi
        ;;
    fuzz)
        dir="$build-asan"
        secs=${FUZZ_SECONDS:-10}
        echo "== sanitize: fuzz smoke, ${secs} s per harness"
        if [ ! -x "$dir/tests/fuzz/fuzz_wire" ]; then
            configure "$dir" address,undefined -DKINREG_FUZZ=ON && cmake --build "$dir" -j "$jobs" > "$dir/sanitize-build.log" 2>&1
        fi
        if JOBS=$jobs tests/fuzz/run.sh "$dir" "$secs"; then
            echo "== sanitize: fuzz smoke passed"
        else
            echo "== sanitize: fuzz smoke FAILED"
            status=1
        fi
        ;;
    *)
        echo "usage: scripts/sanitize.sh [asan|tsan|fuzz]..." >&2
        exit 2
        ;;
    esac
    echo "== sanitize: $pass took $(($(now) - t0)) s"
done
exit $status
