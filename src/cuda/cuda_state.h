/* State of the CUDA backend, shared by its .cu files (C++). */
#ifndef DC_CUDA_STATE_H
#define DC_CUDA_STATE_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

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
} dc_cuda_block;

struct dc_cuda_state {
    cudaStream_t stream;
    cublasHandle_t blas;
    int sm_count;
    int max_blocks; /* grid cap for grid-stride kernels */
    /* caching allocator: blocks given back wait here for a request of their size */
    dc_cuda_block *free_blocks;
    size_t n_free, cap_free;
    dc_cuda_block *live; /* hash table of handed-out blocks */
    size_t live_cap, live_count;
    size_t reserved;
    uint64_t malloc_calls, free_calls;
    /* debugging counters (dc_ctx_device_counters) */
    uint64_t launches;   /* kernels launched, a cuBLAS product counted as one */
    uint64_t host_waits; /* times the host waited for the device */
    dc_cuda_index_error *index_error_host, *index_error_dev;
    /* the clip's table and state (dc_cuda_clip), kept from call to call */
    double *clip_table;
    size_t clip_cap;
    /* device scratch for kernel arguments that do not fit a launch */
    void *scratch;
    size_t scratch_cap;
};

extern "C" dc_status dc_cuda_check(dc_ctx *ctx, cudaError_t err, const char *what);

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
