/* The program's standard output, checked (stdout_check.h). */
#include "stdout_check.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exit_codes.h"

static int first_error;  /* errno of the first failed write to descriptor 1 */
static bool said;        /* the failure was reported */
static bool installed;   /* stdout is the checked stream */
static off_t whole = -1; /* a regular file's size after the last complete flush, else -1 */

/* fopencookie's write: everything to descriptor 1, or the first failure kept
 * (a short count sets the stream's error flag). */
static ssize_t write_out(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(STDOUT_FILENO, buf + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!first_error) first_error = n < 0 ? errno : EIO;
            return (ssize_t)done;
        }
        done += (size_t)n;
    }
    return (ssize_t)size;
}

void kr_stdout_init(void)
{
    /* ulimit -f: EFBIG from write(), reported, instead of a silent kill. */
    signal(SIGXFSZ, SIG_IGN);
    if (installed) return;
    cookie_io_functions_t io = {.read = NULL, .write = write_out, .seek = NULL, .close = NULL};
    FILE *f = fopencookie(NULL, "w", io);
    if (!f) return; /* stdio's own stream stays; its failures are still seen at close */
    /* What stdio would have done: lines on a terminal, blocks elsewhere. */
    setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    fflush(stdout);
    stdout = f;
    installed = true;
    struct stat sb;
    if (fstat(STDOUT_FILENO, &sb) == 0 && S_ISREG(sb.st_mode))
        whole = lseek(STDOUT_FILENO, 0, SEEK_CUR);
}

/* What descriptor 1 is, for the message. */
static void describe(char *buf, size_t size)
{
    struct stat sb;
    if (fstat(STDOUT_FILENO, &sb) == 0 && S_ISFIFO(sb.st_mode)) {
        snprintf(buf, size, "a pipe");
        return;
    }
    if (fstat(STDOUT_FILENO, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
        snprintf(buf, size, "a socket");
        return;
    }
    char path[1024];
    ssize_t n = readlink("/proc/self/fd/1", path, sizeof path - 1);
    if (n <= 0) {
        snprintf(buf, size, "descriptor 1");
        return;
    }
    path[n] = '\0';
    /* A file name may hold anything; keep the line one line. */
    for (char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    snprintf(buf, size, "%s", path);
}

static char named[1100]; /* what descriptor 1 was, when it was closed */

static void say(const char *who, int err)
{
    if (said) return;
    said = true;
    /* A file keeps what the last complete flush left, not half a line:
     * `kinreg sub > poses.txt` stays a TUM file the reader takes. */
    if (whole >= 0 && ftruncate(STDOUT_FILENO, whole) == 0) lseek(STDOUT_FILENO, whole, SEEK_SET);
    char what[sizeof named];
    if (named[0])
        snprintf(what, sizeof what, "%s", named);
    else
        describe(what, sizeof what);
    fprintf(stderr, "%s: cannot write to standard output (%s): %s\n", who ? who : "kinreg", what,
            strerror(err ? err : EIO));
}

bool kr_stdout_flush(const char *who)
{
    if (said) return false;
    int rc = fflush(stdout);
    int err = errno;
    if (rc == 0 && !ferror(stdout) && !first_error) {
        if (whole >= 0) whole = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        return true;
    }
    say(who, first_error ? first_error : err);
    return false;
}

int kr_stdout_close(const char *who, int code)
{
    bool ok = kr_stdout_flush(who);
    /* stdout itself stays (exit() flushes it again, finding nothing); the
     * descriptor is closed here because a file system that reports write
     * errors late (NFS) says so at close. /dev/null takes its number, so
     * that no file opened later becomes "standard output". */
    if (ok) {
        describe(named, sizeof named);
        int rc = close(STDOUT_FILENO), err = errno;
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null > STDOUT_FILENO) {
            dup2(null, STDOUT_FILENO);
            close(null);
        }
        if (rc != 0 && err != EBADF) {
            say(who, err);
            ok = false;
        }
    }
    return ok ? code : code ? code : KR_EXIT_OUTPUT;
}
