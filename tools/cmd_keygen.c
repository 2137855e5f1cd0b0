/* kinreg keygen — make a CURVE key pair for encrypted, authenticated
 * publishing (docs/SECURITY.md). */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "kinreg/transport.h"

/* No options but -h/--help, taken only alone and spelt out (no abbreviation). */
#define KEYGEN_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                              \
    TEXT(KR_HELP(                                                                                  \
        "usage: kinreg keygen NAME\n"                                                              \
        "\n"                                                                                       \
        "Writes a new CURVE key pair for publishing over ZeroMQ with encryption and\n"             \
        "authentication (docs/SECURITY.md):\n"                                                     \
        "  NAME.key         the public key: give it to the other side\n"                           \
        "  NAME.key_secret  the public and the secret key, mode 0600: keep it private\n"           \
        "Both are czmq certificate text (lines public-key = \"...\" in Z85). Existing\n"           \
        "files are never overwritten.\n"                                                           \
        "\n"                                                                                       \
        "The publisher: kinreg run --curve-secret server.key_secret --curve-allow allowed ...\n"   \
        "  where allowed lists the subscribers' keys: cat alice.key bob.key > allowed\n"           \
        "A subscriber: kinreg sub --curve-server server.key --curve-secret alice.key_secret "      \
        "ENDPOINT\n"))                                                                             \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_NO_HELP)
KR_OPTION_TABLE(keygen_option_table, KEYGEN_OPTIONS, void, none, NULL);

static const kr_command keygen_command = {"keygen", &keygen_option_table, KR_HELP_LAYOUT_DEFAULT, 0,
                                          NULL};

int kr_cmd_keygen(int argc, char **argv)
{
    if (argc == 2) {
        int rc = kr_command_parse_word(&keygen_command, argv[1], NULL);
        if (rc >= 0) return rc;
    }
    if (argc == 2 && argv[1][0] == '-')
        return kr_command_usage_error(&keygen_command, "unknown option '%s'", argv[1]);
    if (argc != 2 || !argv[1][0])
        return kr_command_usage_error(&keygen_command,
                                      "expected one NAME (writes NAME.key and NAME.key_secret)");
    kr_curve_keypair kp;
    kr_status st = kr_curve_keypair_new(&kp);
    if (st == KR_OK) st = kr_curve_keypair_save(&kp, argv[1]);
    if (st != KR_OK) {
        fprintf(stderr, "kinreg keygen: %s\n", kr_last_error());
        return KR_EXIT_FAILURE;
    }
    fprintf(stderr, "kinreg keygen: wrote %s.key (public) and %s.key_secret (secret, mode 0600)\n",
            argv[1], argv[1]);
    printf("%s\n", kp.public_key);
    return KR_EXIT_OK;
}
