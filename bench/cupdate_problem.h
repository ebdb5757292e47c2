/* The paper's c-update as every benchmark poses it: the control values and
 * the pure reverse-mode form built from primitive ops. */
#ifndef DC_BENCH_CUPDATE_PROBLEM_H
#define DC_BENCH_CUPDATE_PROBLEM_H

#include <stdint.h>

#include <dualcast.h>

/* n control values each for z and zb from a fixed seed, the first three
 * forced to FLUSH (z = 1), COPY (z = 0, zb = 0) and UPDATE (z = 0, zb = 1),
 * the rest random 0 or 1. */
void cupdate_control_values(int64_t n, float *z, float *zb);

/* FLUSH if z == 1, COPY elif zb == 0, else UPDATE, from primitive ops and
 * select on `tape` (one node per op); x holds c, f, i, g. */
dc_tensor *cupdate_pure(dc_tape *tape, dc_tensor *z, dc_tensor *zb, dc_tensor *const *x);

#endif /* DC_BENCH_CUPDATE_PROBLEM_H */
