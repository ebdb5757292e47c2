/* State of the CUDA backend, shared by its .cu files (C++). */
#ifndef DC_CUDA_STATE_H
#define DC_CUDA_STATE_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

extern "C" {
#include "cuda_backend.h"
}

/* The first bad index a kernel met (dc_cuda_read_indices), in mapped host
 * memory: the device writes it, the host reads it after a wait. */
typedef struct dc_cuda_index_error {
    int claimed;
    int site; /* dc_index_site */
    int64_t position;
    double value;
    int64_t limit;
} dc_cuda_index_error;

typedef struct dc_cuda_block {
    void *ptr;
    size_t size;
    uint64_t serial; /* in the live table: when it was handed out (dc_cuda_state.handed_out) */
} dc_cuda_block;

/* A list of blocks not handed out (the cache, a capture's, a graph's). */
typedef struct dc_cuda_blocks {
    dc_cuda_block *at;
    size_t n, cap;
} dc_cuda_blocks;

struct dc_cuda_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    cusparseHandle_t sparse; /* NULL: the sparse products run the library's kernels */
    int sm_count;
    int max_blocks; /* grid cap for grid-stride kernels */
    /* caching allocator: blocks given back wait here for a request of their size */
    dc_cuda_blocks cache;
    dc_cuda_block *live; /* hash table of handed-out blocks */
    size_t live_cap, live_count;
    size_t reserved;
    uint64_t malloc_calls, free_calls;
    /* debugging counters (dc_ctx_device_counters) */
    uint64_t launches;   /* kernels launched, a cuBLAS product counted as one */
    uint64_t host_waits; /* times the host waited for the device */
    uint64_t graph_launches;
    uint64_t cusparse_calls; /* sparse products run by cuSPARSE */
    /* blocks handed out so far, and that count when the latest capture
     * ended: a block handed out after it is in no graph */
    uint64_t handed_out, handed_out_at_capture;
    /* blocks given back by dc_cuda_free outside a capture that a graph may
     * use (handed out before the latest capture ended): a graph captured
     * at another count may use memory now another's. The temporaries an op
     * run eagerly between replays takes and gives back are not counted. */
    uint64_t releases;
    bool capturing;             /* a dc_graph capture records on the stream */
    bool capture_wanted_memory; /* ... and refused a cudaMalloc */
    /* blocks given back while a capture records: its graph uses them, so
     * they are handed out again only within the capture, then kept by the
     * graph until it is destroyed */
    dc_cuda_blocks capture_free;
    struct dc_cuda_graph *capture_reuse; /* the graph that lent its blocks to the capture, or NULL */
    dc_cuda_index_error *index_error_host, *index_error_dev;
    /* the clip's table and state (dc_cuda_clip), kept from call to call */
    double *clip_table;
    size_t clip_cap;
};

extern "C" dc_status dc_cuda_check(dc_ctx *ctx, cudaError_t err, const char *what);

/* Appends a block to a list; false when out of host memory. */
extern "C" bool dc_cuda_blocks_push(dc_cuda_blocks *list, void *ptr, size_t size);

/* Takes a block of exactly `size` from the list, or NULL. */
extern "C" void *dc_cuda_blocks_take(dc_cuda_blocks *list, size_t size);

/* Gives every block of the list to the context's cache (or to CUDA where
 * the cache cannot grow) and empties it. */
extern "C" void dc_cuda_blocks_to_cache(dc_ctx *ctx, dc_cuda_blocks *list);

/* Makes the context's device the calling thread's current device where it
 * is not (see include/dualcast/context.h): every entry point of the backend
 * that works on the device calls it first. DC_ERR_DEVICE if it cannot. */
extern "C" dc_status dc_cuda_enter(dc_ctx *ctx);

/* Counts `count` kernels just launched, and checks that the launch went
 * through (cudaGetLastError). */
static inline dc_status dc_cuda_launched(dc_ctx *ctx, int count, const char *what)
{
    ctx->cuda->launches += (uint64_t)count;
    return dc_cuda_check(ctx, cudaGetLastError(), what);
}

/* dc_cuda_enter, returning its failure from the calling function. */
#define DC_CUDA_ENTER(ctx)                                                                                             \
    do {                                                                                                               \
        const dc_status enter_status_ = dc_cuda_enter(ctx);                                                            \
        if (enter_status_ != DC_OK)                                                                                    \
            return enter_status_;                                                                                      \
    } while (0)

#endif /* DC_CUDA_STATE_H */
