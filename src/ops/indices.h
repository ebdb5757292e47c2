/* Reading class or row indices stored in a float tensor, where the
 * context's kernels read them. */
#ifndef DC_OPS_INDICES_H
#define DC_OPS_INDICES_H

#include "../cuda/nn_cuda.h"
#include "ops_internal.h"

/* The values of `ids` (any shape, read in row-major order) as int64, each
 * an integer in 0..limit-1, where the context's kernels read them. On the
 * CPU: in tape memory, read by the host, and NULL with a message naming
 * `op`, `what` and the first bad value when one is not an index. On CUDA:
 * in device tape memory, converted on the device without the host waiting
 * (a step can be captured as a CUDA graph): a bad value becomes 0 and is
 * reported, naming the op, by the next call that waits for the device (see
 * dc_cuda_read_indices). NULL when out of memory. */
const int64_t *dc_read_indices(dc_tape *tape, const char *op, const char *what, dc_index_site site,
                               const dc_tensor *ids, int64_t limit);

/* The n ids (device memory, each in 0..limit-1) grouped by id for an
 * adjoint that adds into each picked row once: start[v] (limit + 1 entries)
 * begins id v's positions in `positions` (n entries, ascending within each
 * id). On CUDA only, in device tape memory, computed on the device. */
typedef struct dc_index_groups {
    const int64_t *start;
    const int64_t *positions;
} dc_index_groups;

/* NULL when out of memory (message set). */
const dc_index_groups *dc_group_indices(dc_tape *tape, const int64_t *ids, int64_t n, int64_t limit);

#endif /* DC_OPS_INDICES_H */
