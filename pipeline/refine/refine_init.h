/* A wide basin for the refinement (kr_refine_config.initialize): from rough
 * poses (a turntable's nominal angles, a hand-placed guess) the distance
 * fields do not overlap enough to pull, so the views are first placed by
 * pairwise registration. Each view is registered (from the given relative
 * pose, then with kr_register's search when that is not trusted; no soft
 * stage) onto its three nearest views by the given poses; the trusted pairs
 * form a graph, and a tree from the gauge places the views: first those two
 * placed views agree on, then the others, each verified against all its
 * placed neighbours together. A view nothing confirms keeps its given pose.
 * The joint refinement then closes the loops the tree left open. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_INIT_H
#define KINREG_PIPELINE_REFINE_REFINE_INIT_H

#include "kinreg/refine.h"

/* cfg gives the gauge and the interruption (kr_refine_config.interrupted,
 * asked before each registration). out (n poses) gets the placed poses; the
 * gauge keeps its pose, and a view no
 * trusted pair reached keeps its given pose relative to the gauge's.
 * *connected (may be NULL) gets the number of views placed, the gauge
 * included. */
kr_status kr_refine_init_pairwise(const kr_refine_config *cfg, kr_device *dev,
                                  const kr_refine_view *views, int n, const kr_pose *poses,
                                  double extent, kr_pose *out, int *connected);

#endif
