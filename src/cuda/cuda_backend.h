/* What the core library asks of the CUDA backend. Built from src/cuda/ when
 * DC_CUDA is on; src/cuda/no_cuda.c answers "not built with CUDA" otherwise. */
#ifndef DC_CUDA_BACKEND_H
#define DC_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../internal.h"

/* Sets ctx->cuda and ctx->device_name when a device works. Returns DC_OK, or
 * DC_ERR_DEVICE / DC_ERR_UNSUPPORTED with the reason in ctx's error. */
dc_status dc_cuda_init(dc_ctx *ctx);
void dc_cuda_shutdown(dc_ctx *ctx);

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes);
void dc_cuda_free(dc_ctx *ctx, void *ptr);
dc_status dc_cuda_memset0(dc_ctx *ctx, void *ptr, size_t bytes);
dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_cuda_synchronize(dc_ctx *ctx);
dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx);

#endif /* DC_CUDA_BACKEND_H */
