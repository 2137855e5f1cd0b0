/* kinreg devices — the Kinects libfreenect can see. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kinreg/kinect.h"

static void help(FILE *out)
{
    fprintf(out, "usage: kinreg devices\n\n"
                 "Lists the Kinect v1 sensors attached through libfreenect, one per line:\n"
                 "  kinect:INDEX  serial SERIAL\n"
                 "Either form (kinect:0, kinect:SERIAL) is a source for run and record.\n"
                 "Under libfreenect's fakenect (LD_LIBRARY_PATH=/usr/lib/<arch>/fakenect,\n"
                 "FAKENECT_PATH=DIR) it shows the recording being replayed instead.\n\n"
                 "Exit status: 0 when at least one sensor is found, 1 when none is (with what\n"
                 "to check), 2 usage error.\n");
}

int kr_cmd_devices(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        help(stdout);
        return KR_EXIT_OK;
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
