/* --curve-secret, --curve-allow and --max-subscribers (curve_options.h). */
#include "curve_options.h"

#include <stdlib.h>
#include <string.h>

#include "kinreg/transport.h"

/* The configuration points into these for the whole run. */
static kr_curve_keypair server_pair;
static char (*allow_keys)[KR_CURVE_KEY_LEN + 1];
static const char **allow_list;

static bool load_secret(kr_publisher_config *pub, const char *who, const char *name,
                        const char *path)
{
    if (kr_curve_keypair_load(path, &server_pair) != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, name, kr_last_error());
        return false;
    }
    pub->curve_secret_key = server_pair.secret_key;
    return true;
}

static bool load_allow(kr_publisher_config *pub, const char *who, const char *name,
                       const char *path)
{
    char(*keys)[KR_CURVE_KEY_LEN + 1] = NULL;
    size_t n = 0;
    if (kr_curve_allow_load(path, &keys, &n) != KR_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, name, kr_last_error());
        return false;
    }
    const char **list = calloc(n, sizeof *list);
    if (!list) {
        free(keys);
        fprintf(stderr, "%s: %s: out of memory\n", who, name);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        list[i] = keys[i];
    free(allow_keys);
    free(allow_list);
    allow_keys = keys;
    allow_list = list;
    pub->curve_allow = allow_list;
    pub->curve_allow_count = n;
    return true;
}

/* Digits only (strtol's way): 1..100000. */
static bool max_subscribers(kr_publisher_config *pub, const char *arg)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < 1 || v > 100000) return false;
    pub->max_connections = (int)v;
    return true;
}

#define CURVE_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                               \
    OPT(SECRET, (0, "curve-secret", "FILE", KR_CUSTOM),                                            \
        KR_FAIL_UNLESS(load_secret(pub, who, name, arg)),                                          \
        KR_HELP("encrypt and authenticate the stream with CURVE: the\n"                            \
                "publisher's NAME.key_secret from kinreg keygen"))                                 \
    OPT(ALLOW, (0, "curve-allow", "FILE", KR_CUSTOM),                                              \
        KR_FAIL_UNLESS(load_allow(pub, who, name, arg)),                                           \
        KR_HELP("with --curve-secret: the subscribers' public keys that may\n"                     \
                "connect (their NAME.key files joined: cat a.key b.key > FILE)"))                  \
    OPT(MAX_SUBSCRIBERS,                                                                           \
        (0, "max-subscribers", "N", KR_CHOICE("expected a whole number 1..100000")),               \
        KR_REFUSE_UNLESS(max_subscribers(pub, arg)),                                               \
        KR_HELP("connections beyond N are closed at once (default 64)"))
KR_OPTION_TABLE(kr_curve_option_table, CURVE_OPTIONS, kr_publisher_config, pub, "kinreg");
