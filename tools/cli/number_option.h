/* Numeric option values, checked before any conversion: a value is parsed as
 * a double (the whole argument, finite), compared with the option's allowed
 * range, and only then converted to the int, unsigned or float it fills, so
 * no value can overflow a conversion (3e9 frames, 1e12 seconds, 1e-300 as a
 * rate) and every refusal says the allowed range. */
#ifndef KINREG_TOOLS_CLI_NUMBER_OPTION_H
#define KINREG_TOOLS_CLI_NUMBER_OPTION_H

#include <stdbool.h>

/* What one numeric option allows: [lo, hi] (lo excluded when lo_open),
 * whole numbers only when integer. `what` names the quantity ("frames",
 * "seconds"), `hint` (or NULL) adds what special values mean ("0 = all cores"). */
typedef struct {
    const char *name;
    double lo, hi;
    bool lo_open, integer;
    const char *what, *hint;
} kr_number_rule;

/* Parses `arg` under rule `r`. On success stores the value (within the range,
 * so converting it to the option's type is exact for whole numbers) and
 * returns true; otherwise prints one line to stderr, e.g.
 *   kinreg: --frames '3e9' is not allowed: expected frames: a whole number from 1 to 2147483647
 * and returns false. `who` prefixes the line ("kinreg run"). */
bool kr_number_option(const char *who, const kr_number_rule *r, const char *arg, double *out);

/* The same check for a value already parsed (a list element, say). */
bool kr_number_in_range(const kr_number_rule *r, double v);
/* Prints the refusal line of kr_number_option for `arg`. */
void kr_number_refuse(const char *who, const kr_number_rule *r, const char *arg);

#endif
