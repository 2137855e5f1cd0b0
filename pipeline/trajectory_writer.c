/* The trajectory file, every write checked (trajectory_writer.h). */
#include "pipeline/trajectory_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kinreg/trajectory.h"

#define HEADER "# kinreg trajectory (TUM format): timestamp tx ty tz qx qy qz qw\n"

/* A reader of a pipe that takes nothing for this long has stopped reading:
 * the writing ends there rather than hold up tracking (a reader that stopped
 * held a 2-core run to 43 frames in 18 s). */
#define PIPE_PATIENCE_MS 1000

/* Remembers the first failure and cuts the file back to its whole lines: a
 * short write may have left half a line, which trajectory readers reject. A
 * file that cannot be truncated (a pipe, /dev/full) is left as it is. */
static void fail(kr_trajectory_writer *w, int err)
{
    if (w->failed) return;
    w->failed = true;
    const char *why = err == EAGAIN  ? "its reader took nothing for a second (stopped reading?)"
                      : err == EPIPE ? "its reader closed it"
                                     : strerror(err);
    snprintf(w->error, sizeof w->error, "cannot write the trajectory to %.400s: %s", w->path, why);
    if (w->fd >= 0 && ftruncate(w->fd, (off_t)w->good) != 0) {
        /* not a regular file: nothing to cut */
    }
}

/* write(2) until all of `text` is out; a short write is retried, so a
 * failure is a real one (ENOSPC, EFBIG, EIO, ...). */
static bool write_all(kr_trajectory_writer *w, const char *text, size_t len)
{
    if (w->failed || w->fd < 0) return false;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(w->fd, text + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        /* A pipe (opened non-blocking) that is full: wait a while for its
         * reader, then give up. */
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = w->fd, .events = POLLOUT};
            int ready = poll(&pf, 1, PIPE_PATIENCE_MS);
            if (ready > 0 || (ready < 0 && errno == EINTR)) continue;
            fail(w, EAGAIN);
            return false;
        }
        if (n <= 0) {
            fail(w, n < 0 ? errno : EIO);
            return false;
        }
        done += (size_t)n;
    }
    w->good += (long long)len;
    return true;
}

kr_status kr_trajectory_writer_open(kr_trajectory_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->path = path;
    /* Non-blocking: a named pipe with no reader is refused at once (ENXIO)
     * instead of waiting forever, deaf to Ctrl-C; regular files ignore it. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0 && errno == ENXIO)
        return kr_error(KR_ERR_IO,
                        "cannot write the trajectory to %s: it is a named pipe that nothing reads "
                        "(start its reader first)",
                        path);
    if (fd < 0)
        return kr_error(KR_ERR_IO, "cannot write the trajectory to %s: %s", path, strerror(errno));
    w->fd = fd;
    write_all(w, HEADER, strlen(HEADER));
    return KR_OK;
}

bool kr_trajectory_writer_append(kr_trajectory_writer *w, double stamp, const kr_pose *pose)
{
    char line[256];
    kr_trajectory_format_line(stamp, pose, line, sizeof line - 1);
    size_t len = strlen(line);
    line[len++] = '\n';
    if (!write_all(w, line, len)) return false;
    w->poses++;
    return true;
}

bool kr_trajectory_writer_close(kr_trajectory_writer *w)
{
    if (w->fd >= 0) {
        int fd = w->fd;
        w->fd = -1; /* closed: fail() must not truncate a number another thread may reuse */
        if (close(fd) != 0 && errno != EINTR) fail(w, errno);
    }
    return !w->failed;
}
