/* Loss you can reproduce: where the synthetic camera jumps and when its
 * sensor is covered. Events are seeded and spread through the sequence, so
 * every run of one seed fails in the same frames and a test can check that
 * the tracker notices and recovers. */
#ifndef KINREG_CAPTURE_SYNTHETIC_LOSS_H
#define KINREG_CAPTURE_SYNTHETIC_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/pose.h"
#include "kinreg/source.h"

/* Applies the configured jumps to `poses` (the smooth path, one per frame;
 * changed in place to the true poses) and marks covered frames in `covered`
 * (one flag per frame, zeroed by the caller). Fails with a clear message when
 * the events do not fit into the sequence. */
kr_status kr_synth_loss_apply(const kr_source_config *cfg, uint64_t seed, unsigned frames,
                              kr_pose *poses, bool *covered);

#endif
