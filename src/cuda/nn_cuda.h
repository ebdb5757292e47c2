/* Device entry points of the model ops and optimizers (src/cuda/nn.cu). All
 * pointers are device memory; row indices are int64 on the device. */
#ifndef DC_CUDA_NN_H
#define DC_CUDA_NN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../internal.h"
#include "cuda_backend.h"

dc_status dc_cuda_gather_rows(dc_ctx *ctx, dc_dtype dtype, const void *table, int64_t rs, int64_t cs,
                              const int64_t *rows, int64_t n, int64_t width, void *out);
/* Adds the rows of gy (n rows of width) into the rows of grad their ids
 * picked, grouped by dc_cuda_group_indices (start: rows + 1 entries). */
dc_status dc_cuda_scatter_rows(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs, const int64_t *start,
                               const int64_t *positions, int64_t rows, int64_t width, const void *gy);

/* Which op and input an index error belongs to (messages name them). */
typedef enum dc_index_site {
    DC_SITE_EMBEDDING_IDS,
    DC_SITE_CROSS_ENTROPY_TARGETS,
    DC_SITE_SEGMENT_INDEX,
    DC_SITE_SEGMENT_REDUCE_FN_INDEX,
} dc_index_site;

/* Blocks of the first pass of dc_cuda_read_indices (its `parts` holds this
 * many doubles). */
#define DC_CUDA_INDEX_PARTS 256

/* Reads n index values (a contiguous tensor's elements, stored as dtype)
 * into int64 on the device (out), without the host: a value that is not an
 * integer in 0..limit-1 becomes 0, and the first such value of the first
 * call that meets one (in stream order) is kept in the context's index
 * error record with `site` (which op and input), to be reported at the
 * next wait of the host (dc_cuda_take_index_error). `parts`: device memory
 * of DC_CUDA_INDEX_PARTS doubles. */
dc_status dc_cuda_read_indices(dc_ctx *ctx, dc_dtype dtype, const void *values, int64_t n, int64_t limit, int site,
                               int64_t *out, double *parts);

/* The grouping's tiles (consecutive ids) and digits per pass. */
#define DC_CUDA_GROUP_TILE 2048
#define DC_CUDA_GROUP_DIGITS 64

/* int64 entries of the scratch dc_cuda_group_indices needs for n ids. */
static inline int64_t dc_cuda_group_scratch(int64_t n)
{
    return 3 * n + DC_CUDA_GROUP_DIGITS * ((n + DC_CUDA_GROUP_TILE - 1) / DC_CUDA_GROUP_TILE + 1);
}

/* Groups n ids (each in 0..limit-1) by value on the device: start (limit +
 * 1 entries) says where each id's positions begin in `positions` (n
 * entries, ascending within each id). A stable radix sort over the blocks,
 * a pass per 6 bits of limit - 1, then a search for each start; nothing
 * atomic, the same ids give the same groups on any grid. scratch:
 * dc_cuda_group_scratch(n) entries of device memory. */
dc_status dc_cuda_group_indices(dc_ctx *ctx, const int64_t *ids, int64_t n, int64_t limit, int64_t *start,
                                int64_t *positions, int64_t *scratch);
/* Mean cross entropy of n rows of c logits into out; lse: each row's
 * maximum and log of its sum of terms (2 n doubles, the pair a row, which
 * the gradient reads), loss_rows: n doubles of scratch. */
dc_status dc_cuda_cross_entropy(dc_ctx *ctx, dc_dtype dtype, const void *logits, int64_t n, int64_t c,
                                const int64_t *targets, double *lse, double *loss_rows, void *out);
dc_status dc_cuda_cross_entropy_grad(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                                     const void *logits, int64_t n, int64_t c, const int64_t *targets,
                                     const double *lse, const void *gy, bool add);
/* A parameter's optimizer slots in device memory: its Adam step count (a
 * double, exact to 2^53) and the step's coefficients, computed on the
 * device from the learning rate, so that a captured step replays with the
 * right ones (DC_OPT_SLOTS doubles per parameter). */
enum { DC_OPT_STEPS, DC_OPT_LR_T, DC_OPT_EPS_T, DC_OPT_DECAY, DC_OPT_SLOTS };

/* One parameter of an optimizer step: n elements of w updated from its
 * gradient g and its state m (Adam: and v, and its DC_OPT_SLOTS slots). */
typedef struct dc_cuda_update {
    int64_t n;
    void *w;
    const void *g;
    void *m, *v;
    double *slots;
} dc_cuda_update;

/* Parameters one launch updates (a longer list takes more launches). */
enum { DC_CUDA_UPDATES_PER_LAUNCH = 32 };

/* Adam steps of n parameters of one dtype: each step count advanced and its
 * coefficients computed from *lr (device memory), then every update, in two
 * launches per DC_CUDA_UPDATES_PER_LAUNCH parameters. */
dc_status dc_cuda_adam(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double b1,
                       double b2, double eps, double weight_decay);
/* SGD steps of n parameters of one dtype (buffer m), at the learning rate
 * *lr (device memory), one launch per DC_CUDA_UPDATES_PER_LAUNCH. */
dc_status dc_cuda_sgd(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double mu);

/* Sets the n elements of x (device memory) to value, rounded to dtype,
 * without the host waiting (a copy from host memory would). */
dc_status dc_cuda_fill(dc_ctx *ctx, dc_dtype dtype, void *x, int64_t n, double value);

/* dc_clip_grad_norm on the device, the host never waiting: the global norm
 * of the gradients of params (the plain sum of squares, and where it
 * overflows or underflows the rescaled one, as the CPU computes it) and,
 * where it exceeds max_norm and is finite, every gradient scaled by
 * max_norm / norm. *norm (if not NULL) gets where the norm lies in device
 * memory, valid until the next call. */
dc_status dc_cuda_clip(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, const double **norm);

#ifdef __cplusplus
}
#endif

#endif /* DC_CUDA_NN_H */
