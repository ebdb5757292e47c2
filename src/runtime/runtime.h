/* The floor every other part of the library stands on: the context (its
 * backend, CPU threads, random numbers, last error), errors, and memory on
 * the context's device. Nothing here knows tensors, loops or the tape. */
#ifndef DC_RUNTIME_H
#define DC_RUNTIME_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dualcast/context.h>
#include <dualcast/status.h>
#include <dualcast/tensor.h>

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

/* The CPU threads a context's parallel regions run on, with a scratch
 * buffer per thread. */
typedef struct dc_cpu_pool {
    int num_threads;
    dc_scratch *scratch; /* num_threads of them */
} dc_cpu_pool;

struct dc_capture;

struct dc_ctx {
    dc_backend backend;
    dc_cpu_pool cpu;
    bool quiet;
    bool poison; /* DC_POISON=1: memory to be written before it is read starts as NaN */
    bool cuda_tf32;
    int cuda_device; /* the device a CUDA context runs on (asked for until dc_cuda_init) */
    uint64_t rng[4];
    char error[1024]; /* same size as the thread's message without a context */
    dc_status status; /* of the last error */
    char device_name[160];
    uint64_t visit_stamp; /* the last stamp dc_tensors_repeated used */
    /* The public function now running, for messages of calls deep inside
     * it (set by dc_tensor_check_live and the entry points that may wait). */
    const char *api;
    struct dc_capture *capture; /* the step being captured (src/graph.c), or NULL */
    bool in_graph_step;         /* a graph's step is running, captured or not */
    struct dc_cuda_state *cuda;
};

/* ---- errors (src/runtime/error.c) ---- */

/* Records a formatted message and returns `status`, for
 * `return dc_error(ctx, DC_ERR_SHAPE, "...")`. */
dc_status dc_error(dc_ctx *ctx, dc_status status, const char *fmt, ...) DC_PRINTF(3, 4);
dc_status dc_verror(dc_ctx *ctx, dc_status status, const char *fmt, va_list ap);

/* Records a message for a failure with no context at hand (dc_ctx_new). */
dc_status dc_error_noctx(dc_status status, const char *fmt, ...) DC_PRINTF(2, 3);

/* "[2, 3]" into buf; returns buf. */
char *dc_shape_format(char *buf, size_t size, int ndim, const int64_t *shape);

/* ---- device memory (src/runtime/memory.c): host memory on the CPU, the CUDA
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

/* ---- CPU threads (src/runtime/context.c) ---- */

/* The team size of one of the pool's parallel regions: all of its threads
 * when the work is worth splitting, else 1 (no team). Every region uses one
 * of these two sizes, never a count in between: libgomp ends the pool
 * threads that a smaller team leaves out and creates them again for the
 * next larger team, tens of microseconds each, so regions of changing sizes
 * spend more time starting threads than working. */
static inline int dc_pool_team(const dc_cpu_pool *pool, bool worth_splitting)
{
    return worth_splitting ? pool->num_threads : 1;
}

/* Scratch memory of thread `thread`, at least `bytes`; NULL when out of
 * memory. Kept between calls. */
void *dc_pool_scratch(dc_cpu_pool *pool, int thread, size_t bytes);

/* Random numbers from the context's generator. */
uint64_t dc_rng_next(dc_ctx *ctx);
double dc_rng_uniform(dc_ctx *ctx); /* [0, 1) */

#endif /* DC_RUNTIME_H */
