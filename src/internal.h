/* Definitions shared by the library's sources; not installed. */
#ifndef DC_INTERNAL_H
#define DC_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dualcast.h>

#include "arena.h"

#if defined(__GNUC__)
#define DC_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DC_PRINTF(fmt, args)
#endif

struct dc_cuda_state; /* src/cuda/, NULL on the CPU backend */

/* Per-thread scratch memory of the CPU loop engine, grown on demand. */
typedef struct dc_scratch {
    void *ptr;
    size_t cap;
} dc_scratch;

struct dc_ctx {
    dc_backend backend;
    int num_threads;
    bool quiet;
    bool poison; /* DC_POISON=1: memory to be written before it is read starts as NaN */
    bool cuda_tf32;
    int cuda_device; /* the device a CUDA context runs on (asked for until dc_cuda_init) */
    uint64_t rng[4];
    char error[1024]; /* same size as the thread's message without a context */
    dc_status status; /* of the last error */
    char device_name[160];
    dc_scratch *scratch; /* one per thread */
    int n_scratch;
    struct dc_cuda_state *cuda;
};

struct dc_tensor {
    dc_ctx *ctx;
    dc_tape *tape;        /* owner, or NULL for a persistent tensor */
    uint64_t generation;  /* tape generation at creation */
    dc_dtype dtype;
    int ndim;
    int64_t numel;
    int64_t shape[DC_MAX_DIMS];
    int64_t strides[DC_MAX_DIMS]; /* elements */
    void *data;           /* first element, on the context's device */
    void *alloc;          /* owned allocation of a persistent tensor, or NULL */
    dc_tensor *grad;      /* contiguous, same shape; owned by this tensor */
    bool requires_grad;   /* a parameter, or computed from one while recording */
    bool grad_valid;      /* grad holds a value; else it counts as zero */
    bool is_leaf;         /* not the output of a recorded node */
    bool is_grad;         /* the gradient buffer of another tensor */
    bool grad_in_base;    /* grad is a view into slice_base's gradient */
    dc_tensor *slice_base; /* for a recorded slice: the tensor it views ... */
    int slice_axis;        /* ... along this axis ... */
    int64_t slice_start;   /* ... from this element */
    char name[32];
};

/* ---- errors (src/error.c) ---- */

/* Records a formatted message and returns `status`, for
 * `return dc_error(ctx, DC_ERR_SHAPE, "...")`. */
dc_status dc_error(dc_ctx *ctx, dc_status status, const char *fmt, ...) DC_PRINTF(3, 4);
dc_status dc_verror(dc_ctx *ctx, dc_status status, const char *fmt, va_list ap);

/* Records a message for a failure with no context at hand (dc_ctx_new). */
dc_status dc_error_noctx(dc_status status, const char *fmt, ...) DC_PRINTF(2, 3);

/* "[2, 3]" into buf; returns buf. */
char *dc_shape_format(char *buf, size_t size, int ndim, const int64_t *shape);

/* ---- device memory (src/memory.c): host memory on the CPU, the CUDA
 * allocator on a GPU ---- */
void *dc_mem_alloc(dc_ctx *ctx, size_t bytes);
void dc_mem_free(dc_ctx *ctx, void *ptr);
dc_status dc_mem_zero(dc_ctx *ctx, void *ptr, size_t bytes);
/* With DC_POISON=1 (ctx->poison): sets every byte to 0xff, a NaN in float32
 * and float64, in memory that must be written before it is read; else
 * nothing. */
dc_status dc_mem_poison(dc_ctx *ctx, void *ptr, size_t bytes);
/* Copies between the context's device and the host. */
dc_status dc_mem_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_mem_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);

/* The team size of one of the context's parallel regions: all of its
 * threads when the work is worth splitting, else 1 (no team). Every region
 * uses one of these two sizes, never a count in between: libgomp ends the
 * pool threads that a smaller team leaves out and creates them again for the
 * next larger team, tens of microseconds each, so regions of changing sizes
 * spend more time starting threads than working. */
static inline int dc_ctx_team(const dc_ctx *ctx, bool worth_splitting)
{
    return worth_splitting ? ctx->num_threads : 1;
}

/* Scratch memory for CPU thread `thread`, at least `bytes`; NULL when out of
 * memory. Kept between calls. */
void *dc_ctx_scratch(dc_ctx *ctx, int thread, size_t bytes);

/* Random numbers from the context's generator. */
uint64_t dc_rng_next(dc_ctx *ctx);
double dc_rng_uniform(dc_ctx *ctx); /* [0, 1) */

/* ---- tensors (src/tensor.c) ---- */

/* Row-major strides of `shape`. */
void dc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
int64_t dc_shape_numel(int ndim, const int64_t *shape);

/* Checks ndim and dims for a new tensor; names `what` in the message. */
dc_status dc_check_shape(dc_ctx *ctx, const char *what, int ndim, const int64_t *shape);

/* Fills the header of a contiguous tensor (no data). */
void dc_tensor_init_header(dc_tensor *t, dc_ctx *ctx, dc_dtype dtype, int ndim, const int64_t *shape);

/* A new tape tensor with uninitialized contiguous data; NULL when out of memory. */
dc_tensor *dc_tape_alloc_tensor(dc_tape *tape, dc_dtype dtype, int ndim, const int64_t *shape);

/* A tape tensor header sharing `data` (a view); strides given. */
dc_tensor *dc_tape_alloc_view(dc_tape *tape, const dc_tensor *base, int ndim, const int64_t *shape,
                              const int64_t *strides, void *data);

/* Bytes of tape memory, aligned for any element type (device memory). */
void *dc_tape_alloc_data(dc_tape *tape, size_t bytes);

/* Host memory on the tape for bookkeeping (nodes, pointer arrays). */
void *dc_tape_alloc_meta(dc_tape *tape, size_t bytes);

/* A name for messages: the tensor's name, or its shape. */
const char *dc_tensor_label(const dc_tensor *t, char *buf, size_t size);

#endif /* DC_INTERNAL_H */
