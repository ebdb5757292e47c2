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

/* Stream capture for dc_graph (src/graph.c). Begin recording what is
 * queued on the context's stream (nothing runs until a launch); with
 * `reuse`, a graph of the same step lends the capture its blocks. End it,
 * instantiating the graph into *graph when asked (NULL otherwise), or
 * DC_ERR_DEVICE with CUDA's reason where the capture was broken; blocks the
 * step gave back while captured stay the new graph's (or, without one, go
 * back to `reuse` or the cache). While a capture records, the backend
 * refuses every wait and every new cudaMalloc with DC_ERR_STATE and a
 * message naming the call. Launch a graph on the stream; destroy one
 * (NULL is allowed), its blocks going to the cache. */
typedef struct dc_cuda_graph dc_cuda_graph;
dc_status dc_cuda_capture_begin(dc_ctx *ctx, dc_cuda_graph *reuse);
dc_status dc_cuda_capture_end(dc_ctx *ctx, bool instantiate, dc_cuda_graph **graph);
/* Whether the capture now recording refused a cudaMalloc (an eager run of
 * the step would make the memory, and a later capture may succeed). */
bool dc_cuda_capture_wanted_memory(const dc_ctx *ctx);
dc_status dc_cuda_graph_launch(dc_ctx *ctx, dc_cuda_graph *graph);
void dc_cuda_graph_destroy(dc_ctx *ctx, dc_cuda_graph *graph);
/* Blocks dc_cuda_free gave back outside captures so far (0 without a
 * device): a graph captured at another count may use a block now another's. */
uint64_t dc_cuda_releases(const dc_ctx *ctx);
dc_device_counters dc_cuda_counters(const dc_ctx *ctx);

#endif /* DC_CUDA_DEVICE_H */
