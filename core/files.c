/* Files in and out (core/files.h): regular input files only, output files
 * written whole or not at all. */
#include "core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a named pipe";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

FILE *kr_fopen_regular(const char *path, char *why, size_t size)
{
    /* O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, size, "%s", strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(why, size, "%s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(why, size, "it is %s, not a regular file: kinreg reads its inputs from files only",
                 kind_of(sb.st_mode));
        close(fd);
        return NULL;
    }
    /* A regular file ignores O_NONBLOCK, but clear it for plain reads. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(why, size, "%s", strerror(errno));
        close(fd);
    }
    return f;
}

kr_status kr_open_input(const char *path, const char *what, FILE **out)
{
    char why[256];
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot read %s %s: %s", what, path, why);
    *out = f;
    return KR_OK;
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void output_free(kr_output *o)
{
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->f = NULL;
}

kr_status kr_output_open(kr_output *o, const char *path, const char *what, bool binary)
{
    memset(o, 0, sizeof *o);
    o->what = what;
    struct stat sb;
    /* Not a regular file (a device, a pipe): written in place, as asked. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode))
            return kr_error(KR_ERR_IO, "cannot write %s to %s: it is a directory", what, path);
        FILE *f = fopen(path, binary ? "wb" : "w");
        if (!f)
            return kr_error(KR_ERR_IO, "cannot write %s to %s: %s", what, path, strerror(errno));
        o->f = f;
        if (!(o->path = copy_string(path))) {
            fclose(f);
            return kr_error(KR_ERR_NOMEM, "no memory to write %s", what);
        }
        return KR_OK;
    }
    /* Through a symbolic link, the file it names is replaced, not the link. */
    struct stat lb;
    char *real = lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode) ? realpath(path, NULL) : NULL;
    o->path = copy_string(real ? real : path);
    free(real);
    size_t n = o->path ? strlen(o->path) + 16 : 0;
    o->tmp = o->path ? malloc(n) : NULL;
    if (!o->tmp) {
        output_free(o);
        return kr_error(KR_ERR_NOMEM, "no memory to write %s", what);
    }
    /* PATH.tmp-XXXXXX: beside the target, so the rename stays on its file system. */
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", o->path);
    int fd = mkstemp(o->tmp);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        /* mkstemp makes the file 0600; give it what fopen would have. */
        mode_t mask = umask(0);
        umask(mask);
        (void)fchmod(fd, 0666 & ~mask); /* on failure the file only stays private */
        o->f = fdopen(fd, binary ? "wb" : "w");
        if (!o->f) {
            err = errno;
            close(fd);
            unlink(o->tmp);
        }
    }
    if (err) {
        kr_status s = kr_error(KR_ERR_IO, "cannot write %s to %s: %s", what, path, strerror(err));
        output_free(o);
        return s;
    }
    return KR_OK;
}

kr_status kr_output_commit(kr_output *o)
{
    if (!o->f) return kr_error(KR_ERR_INVALID_ARG, "kr_output_commit: no open file");
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
    o->f = NULL;
    if (!err && o->tmp && rename(o->tmp, o->path) != 0) err = errno;
    if (err) {
        if (o->tmp) unlink(o->tmp);
        kr_status s =
            kr_error(KR_ERR_IO, "cannot write %s to %s: %s%s", o->what, o->path, strerror(err),
                     o->tmp ? " (the file there before, if any, is unchanged)" : "");
        output_free(o);
        return s;
    }
    output_free(o);
    return KR_OK;
}

void kr_output_abort(kr_output *o)
{
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    output_free(o);
}
