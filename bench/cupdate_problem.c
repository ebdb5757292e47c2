#include "cupdate_problem.h"

#include <stdlib.h>

void cupdate_control_values(int64_t n, float *z, float *zb)
{
    srand(7);
    for (int64_t r = 0; r < n; ++r) {
        z[r] = r == 0 ? 1.0f : r < 3 ? 0.0f : (float)(rand() % 2);
        zb[r] = r == 1 ? 0.0f : r == 2 ? 1.0f : (float)(rand() % 2);
    }
}

dc_tensor *cupdate_pure(dc_tape *tape, dc_tensor *z, dc_tensor *zb, dc_tensor *const *x)
{
    dc_tensor *c = x[0], *f = x[1], *i = x[2], *g = x[3];
    dc_tensor *flush = dc_op_mul(tape, dc_op_sigmoid(tape, i), dc_op_tanh(tape, g));
    dc_tensor *update = dc_op_add(tape, dc_op_mul(tape, dc_op_sigmoid(tape, f), c), flush);
    return dc_op_select(tape, z, flush, dc_op_select(tape, zb, update, c));
}
