/* Parsing of the options shared by record and convert. */
#include "record_options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>

#include "tools/cli.h"
#include "number_option.h"
#include "option_error.h"
#include "pipeline_options.h"

void kr_record_options_help(FILE *out)
{
    fprintf(
        out,
        "options:\n"
        "  -f, --format F          fakenect | tum: the layout written (see below)\n"
        "  -n, --frames N          stop after N frames (default: all; alias --max-frames)\n"
        "      --intrinsics NAME|fx,fy,cx,cy[,k1,k2,p1,p2,k3]\n"
        "                          the source's intrinsics: preset fr1 fr2 fr3 default kinect or\n"
        "                          explicit values as for kinreg run (default: the source's own);\n"
        "                          recorded in DIR/kinreg-intrinsics.txt in both formats\n"
        "      --skip-bad          skip and count corrupt input frames instead of stopping\n"
        "      --force             replace a recording already in DIR (its index is rewritten;\n"
        "                          frame files of the old recording are left in place)\n"
        "      --duration SEC, --jumps N, --jump-angle DEG, --jump-distance M, --covered N,\n"
        "      --covered-frames K  the synthetic source's length and losses, as for kinreg run\n"
        "                          (a recording of the scan kinreg demo --jumps tracks)\n"
        "  -q, --quiet             no status line\n"
        "  -h, --help              this text\n\n"
        "formats:\n"
        "  fakenect  DIR/INDEX.txt + d-<time>-<ticks>.pgm, raw 11-bit disparity, 640x480 only;\n"
        "            replays with kinreg (fakenect:DIR) and libfreenect's fakenect\n"
        "  tum       DIR/depth.txt + depth/<time>.png, 16-bit PNG, value / 5000 = metres;\n"
        "            replays with kinreg (tum:DIR) and TUM RGB-D tools\n");
}

static bool parse_count(const char *who, const char *arg, int *out)
{
    static const kr_number_rule rule = {"--frames", 1, INT_MAX, false, true, "frames", NULL};
    double v;
    if (!kr_number_option(who, &rule, arg, &v)) return false;
    *out = (int)v;
    return true;
}

int kr_record_parse_options(int argc, char **argv, const char *who, void (*help)(FILE *out),
                            kr_record_options *o)
{
    enum { OPT_INTRINSICS = 256, OPT_FORCE, OPT_SKIP_BAD };
    static const struct option longopts[] = {{"format", required_argument, 0, 'f'},
                                             {"frames", required_argument, 0, 'n'},
                                             {"max-frames", required_argument, 0, 'n'},
                                             {"intrinsics", required_argument, 0, OPT_INTRINSICS},
                                             {"skip-bad", no_argument, 0, OPT_SKIP_BAD},
                                             {"force", no_argument, 0, OPT_FORCE},
                                             {"quiet", no_argument, 0, 'q'},
                                             {"help", no_argument, 0, 'h'},
                                             /* The synthetic source's, with the codes and
                                              * checks of kr_pipeline_option. */
                                             {"duration", required_argument, 0, 1007},
                                             {"jumps", required_argument, 0, 1031},
                                             {"jump-angle", required_argument, 0, 1032},
                                             {"jump-distance", required_argument, 0, 1033},
                                             {"covered", required_argument, 0, 1034},
                                             {"covered-frames", required_argument, 0, 1035},
                                             {0, 0, 0, 0}};
    kr_source_config_default(&o->source);
    kr_recorder_config_default(&o->recorder);
    o->format_given = false;
    o->quiet = false;
    int opt;
    optind = 1;
    opterr = 0; /* kr_option_error prints one line instead */
    while ((opt = getopt_long(argc, argv, ":f:n:qh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            if (kr_record_format_parse(optarg, &o->recorder.format) != KR_OK) {
                fprintf(stderr, "%s: --format '%s' is not allowed: expected fakenect or tum\n", who, optarg);
                return KR_EXIT_USAGE;
            }
            o->format_given = true;
            break;
        case 'n':
            if (!parse_count(who, optarg, &o->source.max_frames)) return KR_EXIT_USAGE;
            break;
        case OPT_INTRINSICS:
            if (kr_intrinsics_option(&o->source, optarg) < 0) return KR_EXIT_USAGE;
            break;
        case OPT_SKIP_BAD:
            o->source.skip_bad = true;
            break;
        case OPT_FORCE:
            o->recorder.overwrite = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            help(stdout);
            return KR_EXIT_OK;
        case 1007:
        case 1031:
        case 1032:
        case 1033:
        case 1034:
        case 1035: {
            kr_pipeline_config tmp;
            kr_pipeline_config_default(&tmp);
            tmp.source = o->source;
            if (kr_pipeline_option(&tmp, opt, optarg) < 0) return KR_EXIT_USAGE;
            o->source = tmp.source;
            break;
        }
        default:
            return kr_option_error(argv[0], argc, argv, opt);
        }
    }
    return -1;
}
