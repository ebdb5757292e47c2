/* The CUDA entry points of a build without CUDA: every request for a device
 * is answered with DC_ERR_UNSUPPORTED, and nothing else is ever called. */
#include "cuda_backend.h"

dc_status dc_cuda_init(dc_ctx *ctx)
{
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "dualcast was built without CUDA (DC_CUDA=OFF)");
}

void dc_cuda_shutdown(dc_ctx *ctx) { (void)ctx; }

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    return NULL;
}

void dc_cuda_free(dc_ctx *ctx, void *ptr)
{
    (void)ctx;
    (void)ptr;
}

dc_status dc_cuda_memset0(dc_ctx *ctx, void *ptr, size_t bytes)
{
    (void)ptr;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_synchronize(dc_ctx *ctx)
{
    (void)ctx;
    return DC_OK;
}

dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx)
{
    (void)ctx;
    dc_device_memory_stats s = {0, 0, 0};
    return s;
}
