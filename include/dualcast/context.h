/* The context: backend choice, threads, random numbers and the last error. */
#ifndef DUALCAST_CONTEXT_H
#define DUALCAST_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dc_ctx dc_ctx;

typedef enum dc_backend {
    DC_BACKEND_AUTO = 0, /* CUDA when built with it and a device works, else the CPU */
    DC_BACKEND_CPU,
    DC_BACKEND_CUDA,
} dc_backend;

typedef struct dc_ctx_options {
    dc_backend backend; /* DC_BACKEND_AUTO also reads DC_DEVICE=cpu|cuda from the environment */
    int num_threads;    /* CPU threads; 0: OpenMP's default */
    uint64_t seed;      /* seed of the context's random number generator */
    bool quiet;         /* do not print the line saying AUTO fell back to the CPU */
    bool cuda_tf32;     /* allow TF32 tensor cores in CUDA matmuls (off: results match the CPU) */
} dc_ctx_options;

/* Default options: AUTO backend, OpenMP's thread count, seed 0. */
dc_ctx_options dc_ctx_options_default(void);

/* Creates a context; `options` may be NULL for the defaults. Returns NULL on
 * failure (an explicit CUDA request without a usable device, out of memory)
 * and sets *status if `status` is not NULL; dc_last_error(NULL) then says why.
 * Free with dc_ctx_free after every tensor and tape made from it. */
dc_ctx *dc_ctx_new(const dc_ctx_options *options, dc_status *status);

/* Frees the context. NULL is allowed. */
void dc_ctx_free(dc_ctx *ctx);

/* The message of the last error reported through this context, or "" if none.
 * With ctx NULL: the last error of dc_ctx_new in this thread. The string is
 * owned by the context and valid until the next failing call. */
const char *dc_last_error(const dc_ctx *ctx);

/* The status of the last error reported through this context (DC_OK after
 * dc_clear_error or when none). Useful after an op returned NULL. */
dc_status dc_last_status(const dc_ctx *ctx);

/* Forgets the last error. */
void dc_clear_error(dc_ctx *ctx);

/* The backend this context runs on: DC_BACKEND_CPU or DC_BACKEND_CUDA. */
dc_backend dc_ctx_backend(const dc_ctx *ctx);

/* "auto", "cpu" or "cuda". */
const char *dc_backend_name(dc_backend backend);

/* Restarts the context's random number generator from `seed`. */
void dc_ctx_seed(dc_ctx *ctx, uint64_t seed);

/* CPU threads the context uses. */
int dc_ctx_num_threads(const dc_ctx *ctx);

/* Waits for all queued device work (a no-op on the CPU). Reports a CUDA error
 * of earlier asynchronous work as DC_ERR_DEVICE. */
dc_status dc_ctx_synchronize(dc_ctx *ctx);

/* A short description of the device ("CPU, 2 threads" or the GPU's name). */
const char *dc_ctx_device_name(const dc_ctx *ctx);

/* Device memory the CUDA allocator obtained from cudaMalloc so far, and how
 * many cudaMalloc and cudaFree calls it made (all 0 on the CPU). A training
 * loop in steady state leaves the counts unchanged. */
typedef struct dc_device_memory_stats {
    uint64_t bytes_reserved;
    uint64_t malloc_calls;
    uint64_t free_calls;
} dc_device_memory_stats;
dc_device_memory_stats dc_ctx_device_memory(const dc_ctx *ctx);

/* The CUDA stream the context queues all its device work on, as a
 * cudaStream_t cast to void *; NULL on the CPU backend (and in a build
 * without CUDA). Work a caller queues on it, such as CUDA events around a
 * step or its own kernels, runs in order with the context's. The context owns
 * the stream: do not destroy it; it is valid until dc_ctx_free. */
void *dc_ctx_cuda_stream(const dc_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_CONTEXT_H */
