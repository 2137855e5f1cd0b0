/* fakenect dump file names: parsing and formatting. */
#include "capture/fakenect_name.h"

#include "capture/fakenect_format.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool kr_fakenect_parse_depth_name(const char *name, double *stamp, uint32_t *ticks)
{
    if (name[0] != 'd' || name[1] != '-') return false;
    const char *p = name + 2;
    char *end;
    errno = 0;
    double t = strtod(p, &end);
    /* Seconds on the host's clock: Unix time is 1.7e9, 1e10 the year 2286;
     * beyond that the name is no recording's (and the ticks derived from
     * it would overflow). */
    if (end == p || errno == ERANGE || !isfinite(t) || fabs(t) > 1e10 || *end != '-') return false;
    p = end + 1;
    /* strtoul would accept a sign or spaces; a counter is digits only. */
    if (!isdigit((unsigned char)*p)) return false;
    errno = 0;
    unsigned long k = strtoul(p, &end, 10);
    if (errno == ERANGE || k > UINT32_MAX || *end != '.' || end[1] == '\0') return false;
    *stamp = t;
    *ticks = (uint32_t)k;
    return true;
}

uint32_t kr_fakenect_ticks(double stamp)
{
    long long t = llround(stamp * KR_KINECT_TICKS_PER_S);
    return (uint32_t)(unsigned long long)t; /* conversion to unsigned is modulo 2^N */
}

int kr_fakenect_format_depth_name(char *buf, size_t size, double stamp)
{
    return snprintf(buf, size, "d-%f-%u.pgm", stamp, (unsigned)kr_fakenect_ticks(stamp));
}
