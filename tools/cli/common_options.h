/* Specs of options that several commands take under the same names with the
 * same values (options.h): a row names one of these instead of spelling its
 * own, so that renaming an option, or giving it a short name, is one edit
 * here for every command that takes it. Each command still writes what the
 * value fills and the option's help line, which say what it means there.
 *
 * Options of the same name that are not (yet) the same option, left with
 * their commands:
 *   --backend     register: also --engine E, the finer choice (cublas)
 *   --seed        run, demo, bench: 0..2^32-1 (N); refine: the same (S);
 *                 register: any 64-bit number (S)
 *   --threads     run, demo, bench: 0 = all cores; register: 1..4096
 *   --depth-scale run, demo, bench: "raw units per metre" (TUM: 5000); register: no hint
 *   --intrinsics  refine: a preset NAME only
 *   --iterations  run, demo, bench: counts per level; refine: LM iterations
 *   --synthetic   register: points; refine: views or room:N[:WxH]
 *   --format, -f  sub: tum|json of the output; record, convert: fakenect|tum
 *   -n, -t        --frames and --trajectory FILE where they exist; sub's -n
 *                 (--count) and -t (--topics) are retired letters
 *                 (kr_retired_letter): they still work, with a warning;
 *                 refine has --trajectory FILE (its input) without -t
 *   -o            --output: the command's output, a FILE (refine, bench's
 *                 JSON report) or a DIR (demo)
 *   --curve-secret  run, demo: the publisher's key pair (read at once);
 *                 sub: the subscriber's (a path)
 */
#ifndef KINREG_TOOLS_CLI_COMMON_OPTIONS_H
#define KINREG_TOOLS_CLI_COMMON_OPTIONS_H

#include <limits.h>

#include "options.h"

#define KR_OPT_HELP ('h', "help", NULL, KR_FLAG)
#define KR_OPT_QUIET ('q', "quiet", NULL, KR_FLAG)
#define KR_OPT_JSON (0, "json", NULL, KR_FLAG)
#define KR_OPT_DETERMINISTIC (0, "deterministic", NULL, KR_FLAG)
#define KR_OPT_VIEW_PUBLIC (0, "view-public", NULL, KR_FLAG)
/* run, demo, bench, refine, register: which hardware computes. */
#define KR_OPT_BACKEND ('b', "backend", "B", KR_CHOICE("expected auto, cpu or cuda"))

/* The source's (run, demo, bench, record, convert). */
#define KR_OPT_FRAMES ('n', "frames", "N", KR_WHOLE(1, INT_MAX, "frames", NULL))
#define KR_OPT_SKIP_BAD (0, "skip-bad", NULL, KR_FLAG)
/* kr_intrinsics_option (pipeline_options.h) checks it; also register's. */
#define KR_OPT_INTRINSICS (0, "intrinsics", "NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3]", KR_CUSTOM)

/* The synthetic source's (kr_synthetic_option_table, pipeline_options.h). */
#define KR_OPT_DURATION (0, "duration", "SEC", KR_ABOVE(0, 86400, "seconds", NULL))
#define KR_OPT_JUMPS (0, "jumps", "N", KR_WHOLE(0, 100000, "jumps", NULL))
#define KR_OPT_JUMP_ANGLE (0, "jump-angle", "DEG", KR_REAL(0, 180, "degrees", NULL))
#define KR_OPT_JUMP_DISTANCE (0, "jump-distance", "M", KR_REAL(0, 100, "metres", NULL))
#define KR_OPT_COVERED (0, "covered", "N", KR_WHOLE(0, 100000, "stretches", NULL))
#define KR_OPT_COVERED_FRAMES (0, "covered-frames", "K", KR_WHOLE(1, 100000, "frames", NULL))

#endif
