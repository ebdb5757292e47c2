/* Reading class or row indices stored in a float tensor. */
#ifndef DC_OPS_INDICES_H
#define DC_OPS_INDICES_H

#include "ops_internal.h"

/* The values of `ids` (any shape, read in row-major order) as int64 in
 * tape memory, each checked to be an integer in 0..limit-1. NULL on error,
 * with a message naming `op`, `what` and the first bad value. */
int64_t *dc_read_indices(dc_tape *tape, const char *op, const char *what, const dc_tensor *ids, int64_t limit);

/* The same indices where the context's kernels read them: the host array
 * itself on the CPU, a device copy in tape memory on CUDA. */
const int64_t *dc_indices_on_device(dc_tape *tape, const int64_t *host, int64_t n);

/* Positions of indices grouped by index value, for an adjoint that adds
 * into each picked row once: `data`, where the context's kernels read it,
 * holds the n_groups distinct values in ascending order, then the start of
 * each group's positions (n_groups + 1 of them, the last n), then the n
 * positions, ascending within each group. */
typedef struct dc_index_groups {
    const int64_t *data;
    int64_t n_groups;
} dc_index_groups;

/* Groups the n indices `host` (each in 0..limit-1) in tape memory, by a
 * counting sort: O(n + limit) time, limit + 3n + 1 int64 of host memory.
 * NULL on failure, with the error set. */
const dc_index_groups *dc_index_groups_on_device(dc_tape *tape, const int64_t *host, int64_t n, int64_t limit);

#endif /* DC_OPS_INDICES_H */
