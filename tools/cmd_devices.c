/* kinreg devices — the Kinects libfreenect can see. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "kinreg/kinect.h"

/* No options but -h/--help, taken only alone and spelt out (no abbreviation). */
#define DEVICES_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                             \
    TEXT(KR_HELP("usage: kinreg devices\n\n"                                                       \
                 "Lists the Kinect v1 sensors attached through libfreenect, one per line:\n"       \
                 "  kinect:INDEX  serial SERIAL\n"                                                 \
                 "Either form (kinect:0, kinect:SERIAL) is a source for run and record.\n"         \
                 "Under libfreenect's fakenect (LD_LIBRARY_PATH=/usr/lib/<arch>/fakenect,\n"       \
                 "FAKENECT_PATH=DIR) it shows the recording being replayed instead.\n\n"           \
                 "Exit status: 0 when at least one sensor is found, 1 when none is (with what\n"   \
                 "to check), 2 usage error.\n"))                                                   \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_NO_HELP)
KR_OPTION_TABLE(devices_option_table, DEVICES_OPTIONS, void, none, NULL);

static const kr_command devices_command = {"devices", &devices_option_table, KR_HELP_LAYOUT_DEFAULT,
                                           0, NULL};

int kr_cmd_devices(int argc, char **argv)
{
    if (argc == 2) {
        int rc = kr_command_parse_word(&devices_command, argv[1], NULL);
        if (rc >= 0) return rc;
    }
    if (argc > 1) {
        fprintf(stderr, "kinreg devices: unexpected %s '%s' (see 'kinreg devices --help')\n",
                argv[1][0] == '-' ? "option" : "argument", argv[1]);
        return KR_EXIT_USAGE;
    }
    kr_kinect_list list;
    kr_status s = kr_kinect_enumerate(&list);
    if (s != KR_OK) {
        fprintf(stderr, "kinreg devices: %s: %s\n", kr_strerror(s), kr_last_error());
        return KR_EXIT_FAILURE;
    }
    if (list.count == 0) {
        fprintf(stderr, "kinreg devices: no Kinect found: %s\n", KR_KINECT_HINT);
        return KR_EXIT_FAILURE;
    }
    for (int i = 0; i < list.count; i++) {
        if (list.replay)
            printf("kinect:%d  fakenect replay of %s\n", i, list.replay_path);
        else if (i < KR_KINECT_MAX_LISTED && list.serial[i][0])
            printf("kinect:%d  serial %s\n", i, list.serial[i]);
        else
            printf("kinect:%d\n", i);
    }
    return KR_EXIT_OK;
}
