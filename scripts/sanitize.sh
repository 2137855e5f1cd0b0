#!/usr/bin/env bash
# The sanitizer and fuzzing passes of `scripts/setup.sh test` (what CI runs),
# CPU-only, built with clang-14 from Debian:
#
#   1. ASan+UBSan: every module that runs kinreg's code once (build folder
#      ${BUILD_DIR}-asan), without the cases tagged long (long accuracy
#      runs), and the tests built with KINREG_SANITIZED on smaller inputs; the
#      same build carries the libFuzzer harnesses (tests/fuzz).
#   2. TSan: the modules labelled threads, without the cases tagged long or
#      deadline, in ${BUILD_DIR}-tsan.
#   3. Fuzz smoke: every harness FUZZ_SECONDS (default 10) on its corpus.
#
#   scripts/sanitize.sh [asan|tsan|fuzz]...      (default: all three)
#
# Modules and cases are chosen by their CTest labels and case tags, declared
# in the test files (KR_LABELS, KR_TEST_TAGGED) and listed in
# tests/CMakeLists.txt: `ctest -N -L threads` shows what TSan runs. Each pass
# prints its wall time; the exit status is non-zero when any pass failed.
# Environment: BUILD_DIR (default build), JOBS, FUZZ_SECONDS, KINREG_DATA.
# ccache is used when installed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here" || exit 1
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
passes=("$@")
[ ${#passes[@]} -gt 0 ] || passes=(asan tsan fuzz)
cc=${SANITIZE_CC:-clang-14}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
status=0
now() { date +%s; }

configure() { # DIR SANITIZERS [extra cmake args]
    local dir=$1 san=$2
    shift 2
    CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINREG_WERROR=ON -DKINREG_CUDA=OFF \
        -DKINREG_SANITIZE="$san" "${launcher[@]}" "$@" > /dev/null
}

# Options: kinreg's own code runs with the strict checks (the fakenect and
# mpi modules relax one each: see the asan pass). Everything reported fails
# the test.
asan_strict="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Leaks of third-party caches that live as long as the process (tests/lsan.supp).
export LSAN_OPTIONS="suppressions=$here/tests/lsan.supp"
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
            # Every module once, in one `ctest -j`: the strict options and
            # without the cases tagged long (long accuracy runs: pipeline's
            # 900 synthetic frames and 400 fr1 frames, recovery's runs with
            # jumps, recovery_search's 300 frames with jumps, and cases of
            # 25-76 s of CPU under ASan whose code a shorter case runs there)
            # that drive the same code as the short ones and took 12 of the
            # pass's minutes under ASan on 2 cores; the plain suite runs them. The fakenect
            # modules run whole and without strict string checks
            # (libfreenect's fakenect, third-party, passes non-terminated
            # buffers to strchr/strtol-like calls), the mpi one without leak
            # detection: tests/CMakeLists.txt amends the environment of those
            # modules. `script` modules (layers) check the source tree with a
            # script and compile planted files: nothing of kinreg's runs under
            # the sanitizer.
            (cd "$dir" && KINREG_TEST_SKIP=long ASAN_OPTIONS=$asan_strict ctest -j "$jobs" --output-on-failure \
                --timeout 1800 -LE '^script$') || rc=1
            [ $rc -eq 0 ] || status=1
            # Where this pass's minutes and cores went (its cases' times).
            scripts/test_summary.sh "$dir" | grep -E '^(slowest|most CPU):' | sed 's/^/asan /'
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
            # The threads modules, without the cases tagged long (900-frame
            # synthetic, 400-frame fr1: the same threads as the short ones,
            # most of an hour under TSan's 5-15x slowdown on 2 cores) and
            # without those tagged deadline (pipeline_publish.subscriber_receives_every_pose
            # and the live stall and Ctrl-C tests: they ran without a race
            # report, but their timing assertions failed on the 2-core VM).
            (cd "$dir" && KINREG_TEST_SKIP=long,deadline OMP_NUM_THREADS=1 \
                TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$here/tests/tsan.supp" \
                ctest --output-on-failure -L '^threads$') || rc=1
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
