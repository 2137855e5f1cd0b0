/* Regular input files only (regular_file.h). */
#include "capture/regular_file.h"

#include <errno.h>
#include <fcntl.h>
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
        snprintf(why, size,
                 "it is %s, not a regular file: kinreg reads frames and indexes from files only",
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
