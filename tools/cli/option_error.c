/* One-line errors for options getopt refused (option_error.h). */
#include "option_error.h"

#include <getopt.h>
#include <string.h>

#include "tools/cli/exit_codes.h"

int kr_option_error(const char *command, int argc, char **argv, int opt)
{
    /* getopt has already moved optind past the offending word. */
    const char *word = optind > 0 && optind - 1 < argc ? argv[optind - 1] : "?";
    char name[128];
    if (optopt && (strncmp(word, "--", 2) != 0))
        snprintf(name, sizeof name, "-%c", optopt);
    else {
        size_t n = strcspn(word, "=");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name - 1 ? n : sizeof name - 1), word);
    }
    if (opt == ':')
        fprintf(stderr, "kinreg %s: option '%s' needs a value (see 'kinreg %s --help')\n", command,
                name, command);
    else
        fprintf(stderr, "kinreg %s: unknown option '%s' (see 'kinreg %s --help')\n", command, name,
                command);
    return KR_EXIT_USAGE;
}
