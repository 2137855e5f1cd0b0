/* kinreg convert — rewrite a recording in the other format: a TUM sequence
 * as a fakenect dump or a fakenect dump as a TUM sequence. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/cli/output_path.h"
#include "record_loop.h"
#include "tools/cli/record_options.h"

typedef struct {
    kr_record_options rec;
} convert_args;

#define CONVERT_COMMAND(OPT, ALIAS, GROUP, TEXT, MORE)                                             \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg convert [OPTIONS] INPUT OUTPUT\n\n"                                         \
        "Reads every depth frame of INPUT (tum:DIR, fakenect:DIR, a directory holding\n"           \
        "depth.txt or INDEX.txt, or any other source) and writes it to the directory OUTPUT,\n"    \
        "with INPUT's intrinsics and ground truth. The output format defaults to the other\n"      \
        "kind: TUM input becomes a fakenect dump, a fakenect dump becomes TUM; other\n"            \
        "sources need -f. Depth converts through the Kinect v1 disparity model\n"                  \
        "z = 1 / (3.3309495161 - 0.0030711016 d): to disparity and back, a depth moves by\n"       \
        "at most half a disparity step (1.5 mm at 1 m, 25 mm at 4 m).\n\n"))                       \
    GROUP(kr_record_option_table, rec, KR_SHOW_ALL)                                                \
    TEXT(KR_HELP("\nexample: kinreg convert -n 100 tum:../shared/data/tum/fr1_xyz_head "           \
                 "fr1_dump\n"                                                                      \
                 "         kinreg convert fakenect:fr1_dump fr1_again   (back to TUM)\n"))
KR_OPTION_TABLE(convert_option_table, CONVERT_COMMAND, convert_args, a, NULL);

static const kr_command convert_command = {"convert", &convert_option_table, KR_HELP_LAYOUT_DEFAULT,
                                           0, NULL};

/* The input's kind, from its description ("tum:DIR (N frames)"), which names
 * what the URI dispatch chose even for a bare directory. */
static bool output_format(const kr_source *src, kr_record_format *f)
{
    const char *d = kr_source_describe(src);
    if (strncmp(d, "tum:", 4) == 0)
        *f = KR_RECORD_FAKENECT;
    else if (strncmp(d, "fakenect:", 9) == 0)
        *f = KR_RECORD_TUM;
    else
        return false;
    return true;
}

/* Writing into the directory being read would replace frames before they
 * are read. */
static bool same_directory(const char *input, const char *output)
{
    const char *c = strchr(input, ':');
    if (c && (strncmp(input, "tum:", 4) == 0 || strncmp(input, "fakenect:", 9) == 0)) input = c + 1;
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(input, a) && realpath(output, b) && strcmp(a, b) == 0;
}

int kr_cmd_convert(int argc, char **argv)
{
    const char *who = "kinreg convert";
    convert_args args;
    kr_record_options_default(&args.rec);
    int rc = kr_command_parse(&convert_command, argc, argv, &args);
    if (rc >= 0) return rc;
    kr_record_options o = args.rec;
    if (argc - optind != 2) {
        return kr_command_usage_error(
            &convert_command, "expected INPUT and OUTPUT (got %d arguments)", argc - optind);
    }
    const char *input = argv[optind], *output = argv[optind + 1];
    if (same_directory(input, output)) {
        fprintf(stderr, "%s: OUTPUT %s is the input directory: choose another one\n", who, output);
        return KR_EXIT_USAGE;
    }
    o.source.uri = input;
    if (!kr_output_dir_writable(who, "OUTPUT", output)) return KR_EXIT_USAGE;

    kr_source *src = NULL;
    kr_status st = kr_source_create(&src, &o.source);
    if (st != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, kr_strerror(st), kr_last_error());
        return st == KR_ERR_INVALID_ARG ? KR_EXIT_USAGE : kr_exit_code(st);
    }
    if (!o.format_given && !output_format(src, &o.recorder.format)) {
        fprintf(stderr,
                "%s: %s is neither a TUM sequence nor a fakenect dump: give the output "
                "format with -f fakenect or -f tum\n",
                who, kr_source_describe(src));
        kr_source_destroy(&src);
        return KR_EXIT_USAGE;
    }
    kr_record_job job = {who, output, o.recorder, o.quiet};
    rc = kr_record_source(src, &job);
    kr_source_destroy(&src);
    return rc;
}
