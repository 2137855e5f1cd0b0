/* Device memory taken by the test process, as another program on a shared
 * GPU takes it: for the cases that check what kinreg does when a device runs
 * out of memory (a clear error, nothing lost, no hang), which no input of a
 * sane size reaches on a card of 139 GiB. */
#ifndef KINREG_TESTS_DEVICE_HOLD_H
#define KINREG_TESTS_DEVICE_HOLD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int device;
    int n;
    void *block[64];
    size_t held; /* bytes */
} kr_test_device_hold;

/* Takes all but about `leave` bytes of `device`'s free memory, after the
 * device's memory pool gave back what it keeps (refine keeps freed blocks for
 * the next level). false, with a message printed, where there is no CUDA or
 * the memory could not be taken; *h is then empty. */
bool kr_test_device_hold_begin(kr_test_device_hold *h, int device, size_t leave);
/* Gives it back (an empty hold: nothing). */
void kr_test_device_hold_end(kr_test_device_hold *h);

#endif
