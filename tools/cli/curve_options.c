/* --curve-secret, --curve-allow and --max-subscribers (curve_options.h). */
#include "curve_options.h"

#include <stdlib.h>
#include <string.h>

/* The configuration points into these for the whole run. */
static kr_curve_keypair server_pair;
static char (*allow_keys)[KR_CURVE_KEY_LEN + 1];
static const char **allow_list;

void kr_curve_options_help(FILE *out)
{
    fprintf(
        out,
        "      --curve-secret FILE encrypt and authenticate the stream with CURVE: the\n"
        "                          publisher's NAME.key_secret from kinreg keygen\n"
        "      --curve-allow FILE  with --curve-secret: the subscribers' public keys that may\n"
        "                          connect (their NAME.key files joined: cat a.key b.key > FILE)\n"
        "      --max-subscribers N connections beyond N are closed at once (default 64)\n");
}

static int load_allow(kr_pipeline_config *cfg, const char *path)
{
    char(*keys)[KR_CURVE_KEY_LEN + 1] = NULL;
    size_t n = 0;
    if (kr_curve_allow_load(path, &keys, &n) != KR_OK) {
        fprintf(stderr, "kinreg: --curve-allow: %s\n", kr_last_error());
        return -1;
    }
    const char **list = calloc(n, sizeof *list);
    if (!list) {
        free(keys);
        fprintf(stderr, "kinreg: --curve-allow: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        list[i] = keys[i];
    free(allow_keys);
    free(allow_list);
    allow_keys = keys;
    allow_list = list;
    cfg->publish.curve_allow = allow_list;
    cfg->publish.curve_allow_count = n;
    return 1;
}

int kr_curve_option(kr_pipeline_config *cfg, int opt, const char *arg)
{
    switch (opt) {
    case 1100:
        if (kr_curve_keypair_load(arg, &server_pair) != KR_OK) {
            fprintf(stderr, "kinreg: --curve-secret: %s\n", kr_last_error());
            return -1;
        }
        cfg->publish.curve_secret_key = server_pair.secret_key;
        return 1;
    case 1101:
        return load_allow(cfg, arg);
    case 1102: {
        char *end;
        long v = strtol(arg, &end, 10);
        if (end == arg || *end || v < 1 || v > 100000) {
            fprintf(stderr,
                    "kinreg: --max-subscribers '%s' is not allowed: expected a whole number "
                    "1..100000\n",
                    arg);
            return -1;
        }
        cfg->publish.max_connections = (int)v;
        return 1;
    }
    }
    return 0;
}
