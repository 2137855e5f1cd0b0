/* A file the program writes itself, whole or not at all (output_file.h). */
#include "output_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void release(kr_output_file *o)
{
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->f = NULL;
}

bool kr_output_file_open(kr_output_file *o, const char *who, const char *what, const char *path)
{
    memset(o, 0, sizeof *o);
    o->what = what;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* A device or a pipe: written in place, as asked. */
        if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "%s: cannot write %s to %s: it is a directory\n", who, what, path);
            return false;
        }
        o->f = fopen(path, "w");
        if (!o->f || !(o->path = strdup(path))) {
            fprintf(stderr, "%s: cannot write %s to %s: %s\n", who, what, path, strerror(errno));
            if (o->f) fclose(o->f);
            release(o);
            return false;
        }
        return true;
    }
    /* Through a symbolic link the file it names is replaced, not the link. */
    struct stat lb;
    char *real = lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode) ? realpath(path, NULL) : NULL;
    o->path = strdup(real ? real : path);
    free(real);
    size_t n = o->path ? strlen(o->path) + 16 : 0;
    o->tmp = n ? malloc(n) : NULL;
    if (!o->tmp) {
        fprintf(stderr, "%s: cannot write %s to %s: out of memory\n", who, what, path);
        release(o);
        return false;
    }
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", o->path);
    int fd = mkstemp(o->tmp);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        /* mkstemp makes the file 0600; give it what fopen would have. */
        mode_t mask = umask(0);
        umask(mask);
        (void)fchmod(fd, 0666 & ~mask); /* on failure the file only stays private */
        if (!(o->f = fdopen(fd, "w"))) {
            err = errno;
            close(fd);
            unlink(o->tmp);
        }
    }
    if (err) {
        fprintf(stderr, "%s: cannot write %s to %s: %s\n", who, what, path, strerror(err));
        release(o);
        return false;
    }
    return true;
}

bool kr_output_file_commit(kr_output_file *o, const char *who)
{
    if (!o->f) return false;
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
    o->f = NULL;
    if (!err && o->tmp && rename(o->tmp, o->path) != 0) err = errno;
    if (err) {
        if (o->tmp) unlink(o->tmp);
        fprintf(stderr, "%s: cannot write %s to %s: %s%s\n", who, o->what, o->path, strerror(err),
                o->tmp ? " (the file there before, if any, is unchanged)" : "");
    }
    release(o);
    return !err;
}

void kr_output_file_abort(kr_output_file *o)
{
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    release(o);
}
