/* The CUDA backend's device runtime, what the runtime floor (src/runtime/)
 * asks of it: making and ending a context on a device, device memory and
 * copies, waiting. Built from src/cuda/ when DC_CUDA is on; src/cuda/no_cuda.c
 * answers "not built with CUDA" otherwise. The backend's compute is in
 * cuda_backend.h. */
#ifndef DC_CUDA_DEVICE_H
#define DC_CUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "../runtime/runtime.h"

/* Sets ctx->cuda and ctx->device_name when device ctx->cuda_device works.
 * Returns DC_OK, or DC_ERR_DEVICE / DC_ERR_UNSUPPORTED with the reason in
 * ctx's error. */
dc_status dc_cuda_init(dc_ctx *ctx);
void dc_cuda_shutdown(dc_ctx *ctx);

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes);
void dc_cuda_free(dc_ctx *ctx, void *ptr);
/* Sets every byte to `value`. */
dc_status dc_cuda_memset(dc_ctx *ctx, void *ptr, int value, size_t bytes);
dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Waits for the device's queued work. Like every call of the backend that
 * waits, it then reports an index that a kernel found out of range since
 * the last wait (DC_ERR_ARG, naming the op; see dc_cuda_read_indices). */
dc_status dc_cuda_synchronize(dc_ctx *ctx);
/* Copies device memory of src_ctx into device memory of dst_ctx (both CUDA,
 * on one device or two): after src_ctx's queued work, and done on return. */
dc_status dc_cuda_copy_between(dc_ctx *dst_ctx, void *dst, dc_ctx *src_ctx, const void *src, size_t bytes);
dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx);
dc_device_counters dc_cuda_counters(const dc_ctx *ctx);

#endif /* DC_CUDA_DEVICE_H */
