/* libfreenect context set-up, the fakenect safety checks and device listing. */
#include "capture/freenect_context.h"
#include "core/files.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capture/fakenect_format.h"

/* Device attributes (serials) arrived after libfreenect 0.2 and fakenect does
 * not have them: weak, so kinreg also loads where they are missing. */
extern int freenect_list_device_attributes(freenect_context *ctx,
                                           struct freenect_device_attributes **list)
    __attribute__((weak));
extern void freenect_free_device_attributes(struct freenect_device_attributes *list)
    __attribute__((weak));

bool kr_freenect_is_fakenect(void)
{
    Dl_info info;
    if (!dladdr((void *)freenect_init, &info) || !info.dli_fname) return false;
    return strstr(info.dli_fname, "/fakenect/") != NULL;
}

/* The one header line fakenect skips, then 640×480 samples. */
#define REPLAY_DEPTH_BYTES (640L * 480L * 2L)

static kr_status check_listed_file(const char *dir, const char *name, unsigned line,
                                   unsigned *depth_frames)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return kr_error(KR_ERR_IO,
                        "%s/INDEX.txt:%u lists %s, which is missing: fakenect would stop the "
                        "program there; repair the dump or record it again",
                        dir, line, path);
    if (name[0] != 'd') return KR_OK;
    if (st.st_size < REPLAY_DEPTH_BYTES + 4)
        return kr_error(KR_ERR_FORMAT,
                        "%s is %lld bytes, too short for a 640x480 depth frame (%ld bytes of "
                        "samples): the dump is truncated",
                        path, (long long)st.st_size, REPLAY_DEPTH_BYTES);
    ++*depth_frames;
    return KR_OK;
}

kr_status kr_freenect_check_replay(char *path, size_t path_size, unsigned *depth_frames)
{
    const char *dir = getenv("FAKENECT_PATH");
    if (!dir || !*dir)
        return kr_error(KR_ERR_NO_SENSOR,
                        "libfreenect here is fakenect (the replay library), but FAKENECT_PATH "
                        "is not set: set it to a dump directory (fakenect-record or `kinreg "
                        "record`), or drop the fakenect directory from LD_LIBRARY_PATH");
    snprintf(path, path_size, "%s", dir);
    char index[4096];
    snprintf(index, sizeof index, "%s/INDEX.txt", dir);
    char why[160];
    FILE *f = kr_fopen_regular(index, why, sizeof why);
    if (!f)
        return kr_error(KR_ERR_IO,
                        "cannot open %s (FAKENECT_PATH): %s: a fakenect dump holds INDEX.txt",
                        index, why);
    *depth_frames = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned lineno = 0;
    kr_status st = KR_OK;
    while (st == KR_OK && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0)
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u is empty: fakenect would try to open the directory itself", index,
                          lineno);
        else
            st = check_listed_file(dir, line, lineno, depth_frames);
    }
    free(line);
    fclose(f);
    if (st == KR_OK && *depth_frames == 0)
        st = kr_error(KR_ERR_FORMAT, "%s lists no depth frames (d-*.pgm)", index);
    return st;
}

static void route_log(freenect_context *ctx, freenect_loglevel level, const char *msg)
{
    (void)ctx;
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') n--;
    kr_log_level l = level <= FREENECT_LOG_ERROR     ? KR_LOG_ERROR
                     : level == FREENECT_LOG_WARNING ? KR_LOG_WARN
                     : level <= FREENECT_LOG_INFO    ? KR_LOG_INFO
                                                     : KR_LOG_DEBUG;
    kr_log(l, "libfreenect: %.*s", (int)n, msg);
}

kr_status kr_freenect_context_open(freenect_context **ctx, char *replay_path, size_t path_size,
                                   unsigned *replay_frames)
{
    replay_path[0] = '\0';
    *replay_frames = 0;
    if (kr_freenect_is_fakenect()) {
        kr_status st = kr_freenect_check_replay(replay_path, path_size, replay_frames);
        if (st != KR_OK) return st;
    }
    freenect_context *c = NULL;
    if (freenect_init(&c, NULL) < 0 || !c)
        return kr_error(KR_ERR_NO_SENSOR,
                        "libfreenect could not start USB access (libusb): no Kinect can be "
                        "reached; %s",
                        KR_KINECT_HINT);
    freenect_set_log_callback(c, route_log);
    freenect_set_log_level(c, FREENECT_LOG_WARNING);
    freenect_select_subdevices(c, FREENECT_DEVICE_CAMERA);
    *ctx = c;
    return KR_OK;
}

kr_status kr_kinect_enumerate(kr_kinect_list *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_kinect_enumerate: NULL output");
    kr_kinect_list list;
    memset(&list, 0, sizeof list);
    list.replay = kr_freenect_is_fakenect();
    freenect_context *ctx = NULL;
    unsigned replay_frames;
    kr_status st = kr_freenect_context_open(&ctx, list.replay_path, sizeof list.replay_path, &replay_frames);
    if (st != KR_OK) return st;
    list.count = freenect_num_devices(ctx);
    if (list.count < 0) list.count = 0;
    if (!list.replay && freenect_list_device_attributes && freenect_free_device_attributes) {
        struct freenect_device_attributes *attrs = NULL;
        if (freenect_list_device_attributes(ctx, &attrs) >= 0) {
            int i = 0;
            for (struct freenect_device_attributes *a = attrs; a && i < KR_KINECT_MAX_LISTED; a = a->next, i++)
                snprintf(list.serial[i], sizeof list.serial[i], "%s", a->camera_serial ? a->camera_serial : "");
            freenect_free_device_attributes(attrs);
        }
    }
    freenect_shutdown(ctx);
    *out = list;
    return KR_OK;
}
