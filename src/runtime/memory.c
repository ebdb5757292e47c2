#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/cuda_device.h"
#include "runtime.h"

/* More than the machine's memory is refused at once: where the system
 * overcommits, such a request would be granted and then fail page by page
 * (or hang the machine) as the op writes it, instead of reporting
 * DC_ERR_MEMORY. */
static bool beyond_physical_memory(size_t bytes)
{
    if (bytes < ((size_t)1 << 30))
        return false;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages;
}

void *dc_mem_alloc(dc_ctx *ctx, size_t bytes)
{
    if (ctx->cuda)
        return dc_cuda_alloc(ctx, bytes);
    if (beyond_physical_memory(bytes))
        return NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
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
