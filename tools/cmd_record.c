/* kinreg record — write a source's depth frames (by default the live Kinect)
 * to a directory as a fakenect dump or a TUM sequence. */
#include <stdio.h>

#include "tools/commands.h"
#include "tools/cli/output_path.h"
#include "record_loop.h"
#include "tools/cli/record_options.h"

typedef struct {
    kr_record_options rec;
} record_args;

#define RECORD_COMMAND(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg record [OPTIONS] DIR [SOURCE]\n\n"                                          \
        "Writes every depth frame of SOURCE (default 'kinect', the first live Kinect v1)\n"        \
        "into DIR, created when missing, with the source's intrinsics and ground truth when\n"     \
        "it has any. Each frame is on disk and listed in the index before the next is read,\n"     \
        "so Ctrl-C (or a sensor that stops) leaves a valid recording of every frame so far.\n"     \
        "SOURCE is any source kinreg run accepts: kinect[:N|:SERIAL], synthetic[:SEED],\n"         \
        "tum:DIR, fakenect:DIR or a directory.\n\n"))                                              \
    GROUP(kr_record_option_table, rec, KR_SHOW_ALL)                                                \
    TEXT(KR_HELP("\nexit status: 0 done (also after Ctrl-C), 1 failure, 2 usage error,\n"          \
                 "3 the sensor stopped delivering frames, 4 a file could not be written\n"         \
                 "(full disk, file-size limit: the message names it; the frames before it\n"       \
                 "stay a valid recording)\n\n"                                                     \
                 "example: kinreg record -n 300 desk_dump kinect\n"                                \
                 "         kinreg run fakenect:desk_dump\n"))
KR_OPTION_TABLE(record_option_table, RECORD_COMMAND, record_args, a, NULL);

static const kr_command record_command = {"record", &record_option_table, KR_HELP_LAYOUT_DEFAULT, 0,
                                          NULL};

int kr_cmd_record(int argc, char **argv)
{
    const char *who = "kinreg record";
    record_args args;
    kr_record_options_default(&args.rec);
    int rc = kr_command_parse(&record_command, argc, argv, &args);
    if (rc >= 0) return rc;
    kr_record_options o = args.rec;
    if (argc - optind < 1 || argc - optind > 2) {
        return kr_command_usage_error(&record_command,
                                      "expected DIR and optionally SOURCE (got %d arguments)",
                                      argc - optind);
    }
    const char *dir = argv[optind];
    o.source.uri = argc - optind == 2 ? argv[optind + 1] : "kinect";
    /* Before the sensor is opened: a live take is not lost to a typo. */
    if (!kr_output_dir_writable(who, "DIR", dir)) return KR_EXIT_USAGE;

    kr_source *src = NULL;
    kr_status st = kr_source_create(&src, &o.source);
    if (st != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, kr_strerror(st), kr_last_error());
        return st == KR_ERR_INVALID_ARG ? KR_EXIT_USAGE : kr_exit_code(st);
    }
    kr_record_job job = {who, dir, o.recorder, o.quiet};
    rc = kr_record_source(src, &job);
    kr_source_destroy(&src);
    return rc;
}
