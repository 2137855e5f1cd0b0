/* kinreg — status codes, error details and logging shared by every module. */
#ifndef KINREG_STATUS_H
#define KINREG_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KR_BUILDING_LIBRARY)
#define KR_API __attribute__((visibility("default")))
#else
#define KR_API
#endif

/* One list, two uses: the enum below and kr_strerror(). 0 is success,
 * positive values are non-error outcomes, negative values are errors. */
#define KR_STATUS_LIST(X)                                                                  \
    X(KR_OK, 0, "success")                                                                 \
    X(KR_END, 1, "end of stream")                                                          \
    X(KR_TIMEOUT, 2, "timed out")                                                          \
    X(KR_ERR_INVALID_ARG, -1, "invalid argument")                                          \
    X(KR_ERR_NOMEM, -2, "out of memory")                                                   \
    X(KR_ERR_IO, -3, "file or directory cannot be opened, read or written")                \
    X(KR_ERR_FORMAT, -4, "malformed or corrupt input")                                     \
    X(KR_ERR_SIZE, -5, "wrong image size or bit depth")                                    \
    X(KR_ERR_ORDER, -6, "timestamps go backwards")                                         \
    X(KR_ERR_NO_DEVICE, -7, "no CUDA device available")                                    \
    X(KR_ERR_CUDA, -8, "CUDA or cuBLAS call failed")                                       \
    X(KR_ERR_NO_SENSOR, -9, "no depth sensor found")                                       \
    X(KR_ERR_TRANSPORT, -10, "ZeroMQ transport error")                                     \
    X(KR_ERR_ADDR_IN_USE, -11, "endpoint already in use")                                  \
    X(KR_ERR_UNSUPPORTED, -12, "not supported by this build or source")                    \
    X(KR_ERR_EMPTY, -13, "not enough data (empty model or too few points)")                \
    X(KR_ERR_STALLED, -14, "sensor stopped delivering frames")                             \
    X(KR_ERR_INTERRUPTED, -15, "interrupted")                                              \
    X(KR_ERR_NUMERIC, -16, "numerical failure (singular or non-finite)")                  \
    X(KR_ERR_EXISTS, -17, "output already exists")

typedef enum {
#define KR_STATUS_ENUM(name, value, text) name = value,
    KR_STATUS_LIST(KR_STATUS_ENUM)
#undef KR_STATUS_ENUM
} kr_status;

/* Short fixed description of a status code. Never NULL. */
KR_API const char *kr_strerror(kr_status status);

/* Detail of the last error raised on the calling thread (names the file,
 * line or endpoint involved); "" when none. Valid until the next error. */
KR_API const char *kr_last_error(void);

/* Records a detail message for the calling thread and returns `status`,
 * so error paths read `return kr_error(KR_ERR_IO, "cannot open %s", p);`. */
KR_API kr_status kr_error(kr_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's error detail. */
KR_API void kr_error_clear(void);

typedef enum { KR_LOG_ERROR = 0, KR_LOG_WARN = 1, KR_LOG_INFO = 2, KR_LOG_DEBUG = 3 } kr_log_level;

typedef void (*kr_log_fn)(kr_log_level level, const char *message, void *user);

/* Messages at or below `level` go to `fn` (stderr when fn is NULL). */
KR_API void kr_log_set(kr_log_level level, kr_log_fn fn, void *user);
KR_API void kr_log(kr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
