#include <stdlib.h>
#include <string.h>

#include "../cuda/cuda_device.h"
#include "runtime.h"

void *dc_mem_alloc(dc_ctx *ctx, size_t bytes)
{
    if (ctx->cuda)
        return dc_cuda_alloc(ctx, bytes);
    return dc_host_block_alloc(NULL, bytes);
}

void dc_mem_free(dc_ctx *ctx, void *ptr)
{
    if (!ptr)
        return;
    if (ctx->cuda)
        dc_cuda_free(ctx, ptr);
    else
        free(ptr);
}

static dc_status mem_set(dc_ctx *ctx, void *ptr, int value, size_t bytes)
{
    if (ctx->cuda)
        return dc_cuda_memset(ctx, ptr, value, bytes);
    if (bytes)
        memset(ptr, value, bytes);
    return DC_OK;
}

dc_status dc_mem_zero(dc_ctx *ctx, void *ptr, size_t bytes) { return mem_set(ctx, ptr, 0, bytes); }

dc_status dc_mem_poison(dc_ctx *ctx, void *ptr, size_t bytes)
{
    return ctx->poison ? mem_set(ctx, ptr, 0xff, bytes) : DC_OK;
}

dc_status dc_mem_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (ctx->cuda)
        return dc_cuda_to_host(ctx, dst, src, bytes);
    if (bytes)
        memcpy(dst, src, bytes);
    return DC_OK;
}

dc_status dc_mem_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (ctx->cuda)
        return dc_cuda_from_host(ctx, dst, src, bytes);
    if (bytes)
        memcpy(dst, src, bytes);
    return DC_OK;
}
