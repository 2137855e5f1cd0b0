/* Numeric option values checked before conversion (number_option.h). */
#include "number_option.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool kr_number_in_range(const kr_number_rule *r, double v)
{
    return isfinite(v) && (r->lo_open ? v > r->lo : v >= r->lo) && v <= r->hi &&
           (!r->integer || v == floor(v));
}

void kr_number_refuse(const char *who, const kr_number_rule *r, const char *arg)
{
    char range[96];
    if (r->integer)
        snprintf(range, sizeof range, "a whole number from %.0f to %.0f", r->lo, r->hi);
    else if (r->lo_open)
        snprintf(range, sizeof range, "greater than %g and at most %g", r->lo, r->hi);
    else
        snprintf(range, sizeof range, "from %g to %g", r->lo, r->hi);
    fprintf(stderr, "%s: %s '%s' is not allowed: expected %s: %s%s%s%s\n", who, r->name, arg,
            r->what, range, r->hint ? " (" : "", r->hint ? r->hint : "", r->hint ? ")" : "");
}

bool kr_number_option(const char *who, const kr_number_rule *r, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    /* ERANGE: overflow to ±HUGE_VAL, or underflow of a value like 1e-400 */
    if (end == arg || *end || errno == ERANGE || !kr_number_in_range(r, v)) {
        kr_number_refuse(who, r, arg);
        return false;
    }
    *out = v;
    return true;
}
