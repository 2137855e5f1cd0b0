/* Checks each file libfreenect's fakenect is about to open (fakenect_guard.h). */
#include "capture/fakenect_guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/files.h"

/* fakenect loops unless FAKENECT_LOOP is 0, false, no or off (any case). */
static bool loop_from_env(const char *v)
{
    if (!v) return true;
    return strcasecmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0 &&
           strcasecmp(v, "off") != 0;
}

void kr_fakenect_guard_free(kr_fakenect_guard *g)
{
    for (size_t i = 0; g->names && i < g->count; i++)
        free(g->names[i]);
    free(g->names);
    g->names = NULL;
    g->count = g->next = 0;
}

kr_status kr_fakenect_guard_open(kr_fakenect_guard *g, const char *dir, const char *loop_env)
{
    memset(g, 0, sizeof *g);
    snprintf(g->dir, sizeof g->dir, "%s", dir);
    g->loop = loop_from_env(loop_env);
    char index[4200], why[160];
    snprintf(index, sizeof index, "%s/INDEX.txt", dir);
    FILE *f = kr_fopen_regular(index, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open %s: %s", index, why);
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t n;
    kr_status st = KR_OK;
    /* fakenect's one_line(): the text up to '\n' or EOF; an empty line ends the replay. */
    while ((n = getline(&line, &lcap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
        if (n == 0) break;
        if (g->count == cap) {
            size_t c = cap ? 2 * cap : 64;
            char **grown = realloc(g->names, c * sizeof *grown);
            if (!grown) {
                st = kr_error(KR_ERR_NOMEM, "no memory for the lines of %s", index);
                break;
            }
            g->names = grown;
            cap = c;
        }
        if (!(g->names[g->count] = strdup(line))) {
            st = kr_error(KR_ERR_NOMEM, "no memory for the lines of %s", index);
            break;
        }
        g->count++;
    }
    free(line);
    fclose(f);
    if (st != KR_OK) kr_fakenect_guard_free(g);
    return st;
}

/* A file fopen(path, "rb") will open: regular, readable, without blocking. */
static bool openable(const char *path, char *why, size_t size)
{
    FILE *f = kr_fopen_regular(path, why, size);
    if (!f) return false;
    fclose(f);
    return true;
}

kr_status kr_fakenect_guard_check(const kr_fakenect_guard *g)
{
    char path[8400], why[160];
    if (g->next == 0) { /* the index is (re)opened */
        snprintf(path, sizeof path, "%s/INDEX.txt", g->dir);
        if (!openable(path, why, sizeof why))
            return kr_error(
                KR_ERR_IO,
                "%s vanished mid-replay (%s): libfreenect's fakenect would end the program "
                "here; the replay stops instead",
                path, why);
    }
    if (g->next >= g->count) return KR_OK; /* the end: fakenect opens nothing */
    snprintf(path, sizeof path, "%s/%s", g->dir, g->names[g->next]);
    if (!openable(path, why, sizeof why))
        return kr_error(
            KR_ERR_IO,
            "%s (%s/INDEX.txt:%zu) vanished mid-replay (%s): libfreenect's fakenect would "
            "end the program here; the replay stops instead",
            path, g->dir, g->next + 1, why);
    return KR_OK;
}

void kr_fakenect_guard_advance(kr_fakenect_guard *g)
{
    if (g->next < g->count)
        g->next++;
    else if (g->loop)
        g->next = 0; /* rewound: the next call reopens INDEX.txt */
}
