/* The context: backend choice, threads, random numbers and the last error.
 *
 * A context and everything made from it (tensors, tapes, optimizers) must be
 * used from one host thread at a time: its scratch buffers, random number
 * generator, CUDA allocator and error buffer are shared by every call made
 * through it, without locks.
 *
 * A CUDA context runs on one device (dc_ctx_options.cuda_device). Making
 * it, freeing it, and any call that queues work on its device or allocates
 * device memory for it makes that device the calling thread's current CUDA
 * device (cudaSetDevice) where it is not already, and leaves it current
 * (dc_ctx_new gives the thread its previous device back when it fails):
 * contexts on different devices can be used from one thread in any order,
 * and code of the caller's own that relies on the current device sets it
 * again after such a call. */
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
    /* DC_DEVICE if set (see dc_ctx_options.backend); else CUDA when built
     * with it and a device works, else the CPU */
    DC_BACKEND_AUTO = 0,
    DC_BACKEND_CPU,
    DC_BACKEND_CUDA,
} dc_backend;

/* The most threads a context may ask for. */
#define DC_MAX_THREADS 1024

typedef struct dc_ctx_options {
    /* Only DC_BACKEND_AUTO reads DC_DEVICE from the environment: "cpu" and
     * "cuda" act as DC_BACKEND_CPU and DC_BACKEND_CUDA (so "cuda" fails
     * without a usable device instead of falling back), "cuda:N" as
     * DC_BACKEND_CUDA on device N (in place of cuda_device), "auto" or an
     * empty or unset variable as AUTO; any other value fails with
     * DC_ERR_ARG. */
    dc_backend backend;
    /* Threads of dualcast's CPU loops (the broadcast engine, cross entropy,
     * embedding, optimizer updates, gradient clipping) and, with OpenBLAS's
     * OpenMP build, of its matrix products; 0: omp_get_max_threads() when
     * the context is made, at most omp_get_num_procs() (the CPUs the process
     * may run on). Other BLAS builds keep their own thread count (see
     * README.md). At most DC_MAX_THREADS; dc_ctx_new fails with
     * DC_ERR_MEMORY when that many threads cannot be started. */
    int num_threads;
    uint64_t seed;  /* seed of the context's random number generator */
    bool quiet;     /* do not print the line saying AUTO fell back to the CPU */
    bool cuda_tf32; /* allow TF32 tensor cores in CUDA matmuls (off: results match the CPU) */
    /* The CUDA device, numbered as the CUDA runtime numbers them (so after
     * CUDA_VISIBLE_DEVICES); 0 is the first. A CPU context does not use it
     * (a negative value is refused all the same). */
    int cuda_device;
} dc_ctx_options;

/* Default options: AUTO backend, num_threads 0, seed 0, quiet and cuda_tf32
 * off, cuda_device 0. */
dc_ctx_options dc_ctx_options_default(void);

/* Creates a context; `options` may be NULL for the defaults. Returns NULL on
 * failure and sets *status if `status` is not NULL; dc_last_error(NULL) then
 * says why. Failures: DC_ERR_ARG for an unknown backend, a num_threads
 * below 0 or above DC_MAX_THREADS, a negative cuda_device, or a DC_DEVICE value other than cpu, cuda,
 * cuda:N (N a device number) or auto; DC_ERR_DEVICE when CUDA is asked for
 * (DC_BACKEND_CUDA, or DC_DEVICE=cuda or cuda:N with AUTO) and cannot be
 * used, a build without CUDA or a device number beyond the devices present
 * included; DC_ERR_MEMORY. AUTO without DC_DEVICE falls back to the CPU
 * where the CUDA device cannot be used, and says so on stderr unless
 * quiet. Free with dc_ctx_free after every tensor and tape made
 * from it. */
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

/* The backend this context runs on: DC_BACKEND_CPU or DC_BACKEND_CUDA
 * (DC_BACKEND_CPU for NULL). */
dc_backend dc_ctx_backend(const dc_ctx *ctx);

/* "auto", "cpu" or "cuda". */
const char *dc_backend_name(dc_backend backend);

/* Restarts the context's random number generator from `seed`. */
void dc_ctx_seed(dc_ctx *ctx, uint64_t seed);

/* The threads of the context's own CPU loops (num_threads, or the default
 * it resolved to); 1 for NULL. Matrix products on the CPU do not follow it:
 * OpenBLAS runs them on its own thread count. */
int dc_ctx_num_threads(const dc_ctx *ctx);

/* Waits for all queued device work (a no-op on the CPU). Reports a CUDA error
 * of earlier asynchronous work as DC_ERR_DEVICE. */
dc_status dc_ctx_synchronize(dc_ctx *ctx);

/* A short description of the device ("CPU, 2 threads", or the GPU's name
 * and cuda:N, its number). */
const char *dc_ctx_device_name(const dc_ctx *ctx);

/* The context's CUDA allocator (all 0 on the CPU): bytes_reserved is the
 * device memory it holds now, in blocks obtained from cudaMalloc and not yet
 * returned with cudaFree, whether in use or cached for reuse (sizes rounded
 * up to the allocator's size classes); the 256-byte probe allocation made
 * when the context starts and cuBLAS's own workspace are not counted.
 * malloc_calls and free_calls count its cudaMalloc calls (failed ones
 * included) and its cudaFree calls. A training loop in steady state leaves
 * all three unchanged. */
typedef struct dc_device_memory_stats {
    uint64_t bytes_reserved;
    uint64_t malloc_calls;
    uint64_t free_calls;
} dc_device_memory_stats;
dc_device_memory_stats dc_ctx_device_memory(const dc_ctx *ctx);

/* Debugging counters of a CUDA context's work since it was made: kernels
 * launched (a cuBLAS product counts as one), times the host waited for the
 * device (a copy to the host, a copy from pageable host memory, a
 * synchronization), cudaMalloc and cudaFree calls, and launches of captured
 * graphs (include/dualcast/graph.h; the kernels a graph holds are not
 * counted again when it is launched), and the sparse products run by
 * cuSPARSE (SpMV, SpMM, SDDMM: each also counted as a kernel launch; see
 * docs/design.md for which products go there). A training step that can be
 * captured launches kernels and does none of the rest. All zero on the CPU
 * backend and for NULL. */
typedef struct dc_device_counters {
    uint64_t kernel_launches;
    uint64_t host_waits;
    uint64_t malloc_calls;
    uint64_t free_calls;
    uint64_t graph_launches;
    uint64_t cusparse_calls;
} dc_device_counters;
dc_device_counters dc_ctx_device_counters(const dc_ctx *ctx);

/* The CUDA stream the context queues all its device work on, as a
 * cudaStream_t cast to void *; NULL on the CPU backend (and in a build
 * without CUDA). Work a caller queues on it, such as CUDA events around a
 * step or its own kernels, runs in order with the context's; it belongs to
 * the context's device (dc_ctx_cuda_device), which must be current when a
 * kernel is launched on it. The context owns the stream: do not destroy it;
 * it is valid until dc_ctx_free. */
void *dc_ctx_cuda_stream(const dc_ctx *ctx);

/* The CUDA device the context runs on (see dc_ctx_options.cuda_device); -1
 * on the CPU backend and for NULL. */
int dc_ctx_cuda_device(const dc_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_CONTEXT_H */
