/* Ordered decode-ahead for file replays: worker threads decode the next
 * frames of a replay in parallel while the caller takes them one by one in
 * their original order. A replay from PNG files is otherwise limited by the
 * decoder (about 5 ms a VGA frame), far slower than the CUDA tracker. */
#ifndef KINREG_CAPTURE_PREFETCH_H
#define KINREG_CAPTURE_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "capture/png_depth.h"
#include "kinreg/status.h"

typedef struct kr_prefetch kr_prefetch;

/* Decodes item `index` into a malloc'd sample buffer (*raw), with a PNG
 * reader owned by the calling worker. Runs on worker threads: it may only
 * read `user`. Errors set the message with kr_error as usual. */
typedef kr_status (*kr_prefetch_decode)(const void *user, size_t index, kr_png_reader *reader,
                                        uint16_t **raw);

/* Workers the machine can spare for decoding: none on a machine of fewer
 * than 4 cores (the tracker needs them; items are decoded on demand then),
 * else half the cores up to 6. KINREG_DECODE_THREADS=N overrides (0: none). */
int kr_prefetch_default_workers(void);

/* Starts `workers` (>= 1) threads decoding items 0 … count − 1, at most
 * `ahead` items beyond the one the caller waits for. */
kr_status kr_prefetch_start(kr_prefetch **out, int workers, int ahead, size_t count,
                            kr_prefetch_decode decode, const void *user);

/* Item `index` (the next one in order: 0, 1, 2, …): its status, and its
 * samples in *raw (the caller owns them) when KR_OK. The error message of a
 * failed item is set on the calling thread. */
kr_status kr_prefetch_take(kr_prefetch *p, size_t index, uint16_t **raw);

/* Stops and joins the workers and frees what was decoded and not taken. */
void kr_prefetch_stop(kr_prefetch **p);

#endif
