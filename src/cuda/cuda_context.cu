/* The CUDA backend's context: its device, one stream, a cuBLAS handle and a
 * caching allocator. With no device or no driver (cudaGetDeviceCount
 * or the first allocation fails), dc_cuda_init reports DC_ERR_DEVICE and the
 * context stays on the CPU. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"
#include "nn_cuda.h"

extern "C" {

static dc_status device_error(dc_ctx *ctx, const char *what, cudaError_t err)
{
    return dc_error(ctx, DC_ERR_DEVICE, "%s: %s", what, cudaGetErrorString(err));
}

dc_status dc_cuda_check(dc_ctx *ctx, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? DC_OK : device_error(ctx, what, err);
}

/* The calling thread's current device becomes `device`; a no-op where it is
 * already. */
static cudaError_t make_current(int device)
{
    int current = -1;
    cudaError_t err = cudaGetDevice(&current);
    if (err == cudaSuccess && current != device)
        err = cudaSetDevice(device);
    return err;
}

dc_status dc_cuda_enter(dc_ctx *ctx)
{
    const cudaError_t err = make_current(ctx->cuda_device);
    if (err == cudaSuccess)
        return DC_OK;
    cudaGetLastError();
    return dc_error(ctx, DC_ERR_DEVICE, "cudaSetDevice(%d): %s", ctx->cuda_device, cudaGetErrorString(err));
}

/* Allocation sizes are rounded to classes so that freed blocks are reused:
 * powers of two up to 1 MiB, then whole MiB. */
static size_t size_class(size_t bytes)
{
    if (bytes <= 512)
        return 512;
    if (bytes <= (1u << 20)) {
        size_t s = 512;
        while (s < bytes)
            s <<= 1;
        return s;
    }
    return (bytes + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
}

/* Live blocks: an open-addressing table from pointer to size class. */
static size_t slot_of(const dc_cuda_state *s, const void *p)
{
    uintptr_t h = (uintptr_t)p >> 8;
    h ^= h >> 17;
    h *= 0xed5ad4bbu;
    return (size_t)h & (s->live_cap - 1);
}

static bool live_grow(dc_cuda_state *s)
{
    const size_t old_cap = s->live_cap;
    dc_cuda_block *old = s->live;
    const size_t cap = old_cap ? 2 * old_cap : 1024;
    dc_cuda_block *t = (dc_cuda_block *)calloc(cap, sizeof *t);
    if (!t)
        return false;
    s->live = t;
    s->live_cap = cap;
    s->live_count = 0;
    for (size_t i = 0; i < old_cap; ++i)
        if (old[i].ptr) {
            size_t j = slot_of(s, old[i].ptr);
            while (t[j].ptr)
                j = (j + 1) & (cap - 1);
            t[j] = old[i];
            s->live_count++;
        }
    free(old);
    return true;
}

static bool live_insert(dc_cuda_state *s, void *p, size_t size, uint64_t serial)
{
    if (2 * (s->live_count + 1) > s->live_cap && !live_grow(s))
        return false;
    size_t j = slot_of(s, p);
    while (s->live[j].ptr)
        j = (j + 1) & (s->live_cap - 1);
    s->live[j].ptr = p;
    s->live[j].size = size;
    s->live[j].serial = serial;
    s->live_count++;
    return true;
}

/* Removes p, returning its entry (size 0 if unknown). */
static dc_cuda_block live_remove(dc_cuda_state *s, void *p)
{
    dc_cuda_block none = {NULL, 0, 0};
    if (!s->live_cap)
        return none;
    size_t j = slot_of(s, p);
    while (s->live[j].ptr && s->live[j].ptr != p)
        j = (j + 1) & (s->live_cap - 1);
    if (!s->live[j].ptr)
        return none;
    const dc_cuda_block found = s->live[j];
    s->live[j].ptr = NULL;
    s->live_count--;
    /* re-insert the rest of the cluster (linear probing deletion) */
    for (size_t k = (j + 1) & (s->live_cap - 1); s->live[k].ptr; k = (k + 1) & (s->live_cap - 1)) {
        dc_cuda_block b = s->live[k];
        s->live[k].ptr = NULL;
        s->live_count--;
        live_insert(s, b.ptr, b.size, b.serial);
    }
    return found;
}

/* A wait or a new allocation while a capture records: refused before CUDA
 * sees it (it would break the capture), naming the public call. */
static dc_status refused_in_capture(dc_ctx *ctx, const char *what)
{
    return dc_error(ctx, DC_ERR_STATE,
                    "%s %s, which a step being captured (dc_graph_capture) cannot: read results after a replay, put "
                    "inputs into tensors before it, capture warm steps",
                    ctx->api ? ctx->api : "a call", what);
}

bool dc_cuda_blocks_push(dc_cuda_blocks *list, void *ptr, size_t size)
{
    if (list->n == list->cap) {
        const size_t cap = list->cap ? 2 * list->cap : 256;
        dc_cuda_block *grown = (dc_cuda_block *)realloc(list->at, cap * sizeof *grown);
        if (!grown)
            return false;
        list->at = grown;
        list->cap = cap;
    }
    list->at[list->n].ptr = ptr;
    list->at[list->n].size = size;
    list->at[list->n].serial = 0;
    list->n++;
    return true;
}

void *dc_cuda_blocks_take(dc_cuda_blocks *list, size_t size)
{
    for (size_t i = list->n; i-- > 0;)
        if (list->at[i].size == size) {
            void *p = list->at[i].ptr;
            list->at[i] = list->at[--list->n];
            return p;
        }
    return NULL;
}

/* Gives a block back to CUDA. */
static void release_to_cuda(dc_ctx *ctx, void *ptr, size_t size)
{
    dc_cuda_state *s = ctx->cuda;
    dc_cuda_enter(ctx);
    cudaFree(ptr);
    s->free_calls++;
    s->reserved -= size;
}

void dc_cuda_blocks_to_cache(dc_ctx *ctx, dc_cuda_blocks *list)
{
    for (size_t i = 0; i < list->n; ++i)
        if (!dc_cuda_blocks_push(&ctx->cuda->cache, list->at[i].ptr, list->at[i].size))
            release_to_cuda(ctx, list->at[i].ptr, list->at[i].size);
    list->n = 0;
}

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes)
{
    dc_cuda_state *s = ctx->cuda;
    const size_t size = size_class(bytes ? bytes : 1);
    void *p = s->capturing ? dc_cuda_blocks_take(&s->capture_free, size) : NULL;
    if (!p)
        p = dc_cuda_blocks_take(&s->cache, size);
    if (!p) {
        if (dc_cuda_enter(ctx) != DC_OK)
            return NULL;
        if (s->capturing) {
            s->capture_wanted_memory = true;
            refused_in_capture(ctx, "needs new device memory");
            return NULL;
        }
        cudaError_t err = cudaMalloc(&p, size);
        s->malloc_calls++;
        if (err != cudaSuccess) {
            /* give cached blocks back and try once more */
            cudaGetLastError();
            for (size_t i = 0; i < s->cache.n; ++i)
                release_to_cuda(ctx, s->cache.at[i].ptr, s->cache.at[i].size);
            s->cache.n = 0;
            err = cudaMalloc(&p, size);
            s->malloc_calls++;
            if (err != cudaSuccess) {
                cudaGetLastError();
                device_error(ctx, "cudaMalloc", err);
                return NULL;
            }
        }
        s->reserved += size;
    }
    if (!live_insert(s, p, size, ++s->handed_out)) {
        if (!dc_cuda_blocks_push(&s->cache, p, size))
            release_to_cuda(ctx, p, size);
        return NULL;
    }
    return p;
}

void dc_cuda_free(dc_ctx *ctx, void *ptr)
{
    dc_cuda_state *s = ctx->cuda;
    if (!ptr)
        return;
    const dc_cuda_block b = live_remove(s, ptr);
    const size_t size = b.size;
    if (!size)
        return;
    if (s->capturing && dc_cuda_blocks_push(&s->capture_free, ptr, size))
        return;
    if (b.serial <= s->handed_out_at_capture)
        s->releases++;
    /* out of host memory: to CUDA (inside a capture, cudaFree breaks it,
     * and the step runs eagerly) */
    if (!dc_cuda_blocks_push(&s->cache, ptr, size))
        release_to_cuda(ctx, ptr, size);
}

dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx)
{
    dc_device_memory_stats st = {ctx->cuda->reserved, ctx->cuda->malloc_calls, ctx->cuda->free_calls};
    return st;
}

dc_device_counters dc_cuda_counters(const dc_ctx *ctx)
{
    const dc_cuda_state *s = ctx->cuda;
    dc_device_counters c = {s->launches,   s->host_waits,     s->malloc_calls,
                            s->free_calls, s->graph_launches, s->cusparse_calls};
    return c;
}

void *dc_ctx_cuda_stream(const dc_ctx *ctx)
{
    return ctx && ctx->cuda ? (void *)ctx->cuda->stream : NULL;
}

dc_status dc_cuda_init(dc_ctx *ctx)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return device_error(ctx, "no CUDA device", err);
    }
    if (count == 0)
        return dc_error(ctx, DC_ERR_DEVICE, "no CUDA device");
    const int device = ctx->cuda_device;
    if (device >= count)
        return dc_error(ctx, DC_ERR_DEVICE, "CUDA device %d asked for, but %d device%s present (numbered from 0)",
                        device, count, count == 1 ? " is" : "s are");
    dc_cuda_state *s = (dc_cuda_state *)calloc(1, sizeof *s);
    if (!s)
        return dc_error(ctx, DC_ERR_MEMORY, "out of memory");
    /* a context that cannot be made gives the thread its device back */
    int previous = device;
    if (cudaGetDevice(&previous) != cudaSuccess) {
        cudaGetLastError();
        previous = device;
    }
    cudaDeviceProp prop;
    err = make_current(device);
    if (err == cudaSuccess)
        err = cudaGetDeviceProperties(&prop, device);
    /* the first allocation is where a missing or old driver shows */
    void *probe = NULL;
    if (err == cudaSuccess)
        err = cudaMalloc(&probe, 256);
    if (err == cudaSuccess)
        err = cudaFree(probe);
    if (err == cudaSuccess)
        err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess)
        err = cudaHostAlloc((void **)&s->index_error_host, sizeof *s->index_error_host, cudaHostAllocMapped);
    if (err == cudaSuccess) {
        memset(s->index_error_host, 0, sizeof *s->index_error_host);
        err = cudaHostGetDevicePointer((void **)&s->index_error_dev, s->index_error_host, 0);
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (s->index_error_host)
            cudaFreeHost(s->index_error_host);
        if (s->stream)
            cudaStreamDestroy(s->stream);
        free(s);
        make_current(previous);
        return device_error(ctx, "CUDA device unusable", err);
    }
    if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS) {
        cudaFreeHost(s->index_error_host);
        cudaStreamDestroy(s->stream);
        free(s);
        make_current(previous);
        return dc_error(ctx, DC_ERR_DEVICE, "cuBLAS could not be initialized");
    }
    cublasSetStream(s->blas, s->stream);
    /* cuSPARSE where it is available and not refused (DC_CUSPARSE=0): the
     * sparse products it has deterministic algorithms for go there, all
     * others to the library's kernels (src/cuda/sparse.cu) */
    const char *use_sparse = getenv("DC_CUSPARSE");
    if (!(use_sparse && strcmp(use_sparse, "0") == 0) && cusparseCreate(&s->sparse) == CUSPARSE_STATUS_SUCCESS) {
        cusparseSetStream(s->sparse, s->stream);
        /* alpha and beta are host values, read when a call is made */
        cusparseSetPointerMode(s->sparse, CUSPARSE_POINTER_MODE_HOST);
    } else {
        s->sparse = NULL;
    }
    /* TF32 only when asked: by default results match the CPU's float32 */
    cublasSetMathMode(s->blas, ctx->cuda_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    s->sm_count = prop.multiProcessorCount;
    s->max_blocks = prop.multiProcessorCount * 32;
    ctx->cuda = s;
    snprintf(ctx->device_name, sizeof ctx->device_name, "%.100s (cuda:%d, sm_%d%d, %d SMs, %.0f GiB)", prop.name,
             device, prop.major, prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30));
    return DC_OK;
}

void dc_cuda_shutdown(dc_ctx *ctx)
{
    dc_cuda_state *s = ctx->cuda;
    if (!s)
        return;
    dc_cuda_enter(ctx);
    cudaStreamSynchronize(s->stream);
    for (size_t i = 0; i < s->cache.n; ++i)
        cudaFree(s->cache.at[i].ptr);
    for (size_t i = 0; i < s->capture_free.n; ++i)
        cudaFree(s->capture_free.at[i].ptr);
    for (size_t i = 0; i < s->live_cap; ++i)
        if (s->live[i].ptr)
            cudaFree(s->live[i].ptr);
    if (s->index_error_host)
        cudaFreeHost(s->index_error_host);
    cublasDestroy(s->blas);
    if (s->sparse)
        cusparseDestroy(s->sparse);
    cudaStreamDestroy(s->stream);
    free(s->cache.at);
    free(s->capture_free.at);
    free(s->live);
    free(s);
    ctx->cuda = NULL;
}

/* After a wait of the host: an index a kernel found out of range since the
 * last wait becomes the call's error (the record is then cleared). */
static dc_status after_wait(dc_ctx *ctx, cudaError_t err, const char *what)
{
    ctx->cuda->host_waits++;
    dc_status st = dc_cuda_check(ctx, err, what);
    dc_cuda_index_error *e = ctx->cuda->index_error_host;
    if (st != DC_OK || !e->claimed)
        return st;
    /* in dc_index_site's order: the op, its argument, what it used instead */
    static const char *const sites[][3] = {{"dc_op_embedding", "ids", "row 0"},
                                           {"dc_op_cross_entropy", "targets", "row 0"},
                                           {"dc_op_segment_reduce", "index", "segment 0"},
                                           {"dc_op_segment_reduce_fn", "index", "segment 0"}};
    const int site = e->site >= 0 && e->site <= DC_SITE_SEGMENT_REDUCE_FN_INDEX ? e->site : 0;
    e->claimed = 0;
    return dc_error(ctx, DC_ERR_ARG,
                    "%s: %s[%lld] is %g, not an index in 0..%lld (found on the device, reported at the first wait "
                    "for it; the op used %s in its place)",
                    sites[site][0], sites[site][1], (long long)e->position, e->value, (long long)e->limit - 1,
                    sites[site][2]);
}

dc_status dc_cuda_memset(dc_ctx *ctx, void *ptr, int value, size_t bytes)
{
    DC_CUDA_ENTER(ctx);
    return dc_cuda_check(ctx, cudaMemsetAsync(ptr, value, bytes, ctx->cuda->stream), "cudaMemsetAsync");
}

dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    DC_CUDA_ENTER(ctx);
    if (ctx->cuda->capturing)
        return refused_in_capture(ctx, "waits for the device to copy to the host");
    cudaStream_t st = ctx->cuda->stream;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(st);
    return after_wait(ctx, err, "copy to host");
}

dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    DC_CUDA_ENTER(ctx);
    if (ctx->cuda->capturing)
        return refused_in_capture(ctx, "copies from host memory (a replay would read it again, changed or gone)");
    /* synchronous with respect to the host buffer, which the caller may reuse */
    cudaStream_t st = ctx->cuda->stream;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(st);
    return after_wait(ctx, err, "copy from host");
}

dc_status dc_cuda_synchronize(dc_ctx *ctx)
{
    DC_CUDA_ENTER(ctx);
    if (ctx->cuda->capturing)
        return refused_in_capture(ctx, "waits for the device");
    return after_wait(ctx, cudaStreamSynchronize(ctx->cuda->stream), "synchronize");
}

/* Lets device `to` reach the memory of device `from`, so that copies between
 * them go directly rather than through host memory; where the devices
 * cannot, or a device has no more peers to give, copies are staged. */
static void enable_peer_access(int to, int from)
{
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, to, from) == cudaSuccess && can && make_current(to) == cudaSuccess)
        cudaDeviceEnablePeerAccess(from, 0); /* cudaErrorPeerAccessAlreadyEnabled after the first time */
    cudaGetLastError();
}

dc_status dc_cuda_copy_between(dc_ctx *dst_ctx, void *dst, dc_ctx *src_ctx, const void *src, size_t bytes)
{
    /* the source's writers first; then the copy, finished before the source
     * context's later work may overwrite what it reads. Failures are the
     * destination's, as the rest of dc_tensor_copy's. */
    const int from = src_ctx->cuda_device, to = dst_ctx->cuda_device;
    cudaError_t err = make_current(from);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(src_ctx->cuda->stream);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return dc_error(dst_ctx, DC_ERR_DEVICE, "copy between contexts: the source's work on CUDA device %d: %s",
                        from, cudaGetErrorString(err));
    }
    if (from != to)
        enable_peer_access(to, from);
    DC_CUDA_ENTER(dst_ctx);
    err = from == to ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dst_ctx->cuda->stream)
                     : cudaMemcpyPeerAsync(dst, to, src, from, bytes, dst_ctx->cuda->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(dst_ctx->cuda->stream);
    src_ctx->cuda->host_waits++;
    return after_wait(dst_ctx, err, "copy between contexts");
}

} /* extern "C" */
