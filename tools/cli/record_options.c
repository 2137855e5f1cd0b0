/* Parsing of the options shared by record and convert. */
#include "record_options.h"

#include "common_options.h"
#include "pipeline_options.h"

void kr_record_options_default(kr_record_options *o)
{
    kr_source_config_default(&o->source);
    kr_recorder_config_default(&o->recorder);
    o->format_given = false;
    o->quiet = false;
}

#define RECORD_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    TEXT(KR_HELP("options:\n"))                                                                    \
    OPT(FORMAT, ('f', "format", "F", KR_CHOICE("expected fakenect or tum")),                       \
        KR_REFUSE_UNLESS(kr_record_format_parse(arg, &o->recorder.format) == KR_OK);               \
        o->format_given = true, KR_HELP("fakenect | tum: the layout written (see below)"))         \
    OPT(FRAMES, KR_OPT_FRAMES, o->source.max_frames = (int)v,                                      \
        KR_HELP("stop after N frames (default: all; alias --max-frames)"))                         \
    ALIAS(FRAMES, "max-frames")                                                                    \
    OPT(INTRINSICS, KR_OPT_INTRINSICS, KR_FAIL_UNLESS(kr_intrinsics_option(&o->source, arg) > 0),  \
        KR_HELP("\nthe source's intrinsics: preset fr1 fr2 fr3 default kinect or\n"                \
                "explicit values as for kinreg run (default: the source's own);\n"                 \
                "recorded in DIR/kinreg-intrinsics.txt in both formats"))                          \
    OPT(SKIP_BAD, KR_OPT_SKIP_BAD, o->source.skip_bad = true,                                      \
        KR_HELP("skip and count corrupt input frames instead of stopping"))                        \
    OPT(FORCE, (0, "force", NULL, KR_FLAG), o->recorder.overwrite = true,                          \
        KR_HELP("replace a recording already in DIR (its index is rewritten;\n"                    \
                "frame files of the old recording are left in place)"))                            \
    GROUP(kr_synthetic_option_table, source, KR_SHOW_NEVER)                                        \
    TEXT(KR_HELP(                                                                                  \
        "      --%s %s, --%s %s, --%s %s, --%s %s, --%s %s,\n"                                     \
        "      --%s %s  the synthetic source's length and losses, as for kinreg run\n"             \
        "                          (a recording of the scan kinreg demo --jumps tracks)\n",        \
        KR_SPEC_NAME(KR_OPT_DURATION), KR_SPEC_META(KR_OPT_DURATION), KR_SPEC_NAME(KR_OPT_JUMPS),  \
        KR_SPEC_META(KR_OPT_JUMPS), KR_SPEC_NAME(KR_OPT_JUMP_ANGLE),                               \
        KR_SPEC_META(KR_OPT_JUMP_ANGLE), KR_SPEC_NAME(KR_OPT_JUMP_DISTANCE),                       \
        KR_SPEC_META(KR_OPT_JUMP_DISTANCE), KR_SPEC_NAME(KR_OPT_COVERED),                          \
        KR_SPEC_META(KR_OPT_COVERED), KR_SPEC_NAME(KR_OPT_COVERED_FRAMES),                         \
        KR_SPEC_META(KR_OPT_COVERED_FRAMES)))                                                      \
    OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no status line"))                           \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\nformats:\n"                                                                    \
                 "  fakenect  DIR/INDEX.txt + d-<time>-<ticks>.pgm, raw 11-bit disparity, "        \
                 "640x480 only;\n"                                                                 \
                 "            replays with kinreg (fakenect:DIR) and libfreenect's fakenect\n"     \
                 "  tum       DIR/depth.txt + depth/<time>.png, 16-bit PNG, value / 5000 = "       \
                 "metres;\n"                                                                       \
                 "            replays with kinreg (tum:DIR) and TUM RGB-D tools\n"))
KR_OPTION_TABLE(kr_record_option_table, RECORD_OPTIONS, kr_record_options, o, NULL);
