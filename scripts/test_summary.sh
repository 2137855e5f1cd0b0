#!/usr/bin/env bash
# Prints one closing line for a ctest run that counts test cases, skipped
# ones included: ctest counts modules, and a module whose data is missing
# passes with its data tests skipped ("100% tests passed" hides them).
#
#   scripts/test_summary.sh BUILD_DIR
#
# Reads BUILD_DIR/Testing/Temporary/LastTest.log (every module's output),
# where each module ends with "MODULE: N passed, N failed, N skipped" and each
# skipped case is "[ SKIP ] module.test: reason". Prints, e.g.,
#   skipped: tum.replay_fr1_xyz: no TUM data (KINREG_DATA or ../shared/data)
#   kinreg test cases in 27 modules:
#   cases: 412 passed, 0 failed, 9 skipped
# Before the count, the ten slowest cases and the ten that used the most CPU
# (each result line carries its wall and CPU time: "[  OK  ] module.test
# (12.3 s, CPU 20.1 s)"), so that a CI log says where the suite's minutes
# went and which of them kept the cores busy. The count comes last and alone on its line, in the
# plain 'N passed, N failed' form that CI reads as the closing line.
# Exit status 0 (the caller keeps ctest's own).
set -uo pipefail
log=${1:-build}/Testing/Temporary/LastTest.log
[ -r "$log" ] || { echo "kinreg tests: no $log to summarise" >&2; exit 0; }
awk '
    /^[A-Za-z0-9_]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ {
        p += $2; f += $4; s += $6; m++
    }
    /^\[ SKIP \] / { sub(/^\[ SKIP \] /, ""); skips[++n] = $0 }
    /^\[ +(OK|FAIL) +\] .* \([0-9.]+ s, CPU [0-9.]+ s\)$/ {
        t = $(NF - 4)
        sub(/^\(/, "", t)
        times[++c] = t + 0; cpus[c] = $(NF - 1) + 0; names[c] = $(NF - 5)
    }
    END {
        for (i = 1; i <= n && i <= 20; i++) print "skipped: " skips[i]
        if (n > 20) printf "skipped: ... and %d more (%s)\n", n - 20, FILENAME
        for (k = 1; k <= 10 && k <= c; k++) {
            best = 0
            for (i = 1; i <= c; i++) if (!(i in shown) && (best == 0 || times[i] > times[best])) best = i
            shown[best] = 1
            printf "slowest: %7.1f s  %s\n", times[best], names[best]
        }
        for (k = 1; k <= 10 && k <= c; k++) {
            best = 0
            for (i = 1; i <= c; i++) if (!(i in busy) && (best == 0 || cpus[i] > cpus[best])) best = i
            busy[best] = 1
            printf "most CPU: %6.1f s  %s\n", cpus[best], names[best]
        }
        printf "kinreg test cases in %d modules:\n", m
        printf "cases: %d passed, %d failed, %d skipped\n", p, f, s
    }' "$log"
exit 0
