/* Stream capture and graph launches for dc_graph (src/graph.c). */
#include "cuda_state.h"

/* An instantiated graph and the device blocks its kernels use that were
 * given back while it was captured (temporaries of the ops): held until the
 * graph is destroyed, so that no one else is handed them meanwhile. */
struct dc_cuda_graph {
    cudaGraphExec_t exec;
    dc_cuda_blocks owned;
};

extern "C" {

dc_status dc_cuda_capture_begin(dc_ctx *ctx, dc_cuda_graph *reuse)
{
    DC_CUDA_ENTER(ctx);
    dc_cuda_state *s = ctx->cuda;
    /* thread-local mode: calls this thread makes that could break the
     * capture (cudaMalloc, a wait) fail, and the library refuses its own
     * waits before CUDA does, naming the call */
    const cudaError_t err = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return dc_error(ctx, DC_ERR_DEVICE, "dc_graph_capture: cannot begin a capture: %s", cudaGetErrorString(err));
    }
    s->capturing = true;
    s->capture_wanted_memory = false;
    s->capture_reuse = reuse;
    if (reuse) {
        /* the graph's temporaries serve this capture's: the two graphs run
         * on one stream, one after the other */
        s->capture_free = reuse->owned;
        reuse->owned = dc_cuda_blocks{NULL, 0, 0};
    }
    return DC_OK;
}

bool dc_cuda_capture_wanted_memory(const dc_ctx *ctx) { return ctx->cuda && ctx->cuda->capture_wanted_memory; }

uint64_t dc_cuda_releases(const dc_ctx *ctx) { return ctx->cuda ? ctx->cuda->releases : 0; }

dc_status dc_cuda_capture_end(dc_ctx *ctx, bool instantiate, dc_cuda_graph **graph)
{
    DC_CUDA_ENTER(ctx);
    dc_cuda_state *s = ctx->cuda;
    s->capturing = false;
    s->handed_out_at_capture = s->handed_out;
    *graph = NULL;
    cudaGraph_t captured = NULL;
    cudaError_t err = cudaStreamEndCapture(s->stream, &captured);
    dc_status st = DC_OK;
    if (err != cudaSuccess) {
        cudaGetLastError();
        st = dc_error(ctx, DC_ERR_DEVICE, "dc_graph_capture: the capture was broken: %s", cudaGetErrorString(err));
    } else if (instantiate) {
        dc_cuda_graph *g = (dc_cuda_graph *)calloc(1, sizeof *g);
        if (!g) {
            st = dc_error(ctx, DC_ERR_MEMORY, "dc_graph_capture: out of memory");
        } else if ((err = cudaGraphInstantiate(&g->exec, captured, 0)) != cudaSuccess) {
            cudaGetLastError();
            free(g);
            st = dc_error(ctx, DC_ERR_DEVICE, "dc_graph_capture: cannot instantiate the graph: %s",
                          cudaGetErrorString(err));
        } else {
            g->owned = s->capture_free;
            s->capture_free = dc_cuda_blocks{NULL, 0, 0};
            *graph = g;
        }
    }
    if (captured)
        cudaGraphDestroy(captured);
    if (s->capture_reuse && s->capture_free.at) {
        /* no new graph: the blocks lent go back to the graph they serve */
        s->capture_reuse->owned = s->capture_free;
        s->capture_free = dc_cuda_blocks{NULL, 0, 0};
    }
    s->capture_reuse = NULL;
    /* nothing captured will run: its blocks are free again */
    dc_cuda_blocks_to_cache(ctx, &s->capture_free);
    return st;
}

dc_status dc_cuda_graph_launch(dc_ctx *ctx, dc_cuda_graph *graph)
{
    DC_CUDA_ENTER(ctx);
    ctx->cuda->graph_launches++;
    return dc_cuda_check(ctx, cudaGraphLaunch(graph->exec, ctx->cuda->stream), "dc_graph_replay");
}

void dc_cuda_graph_destroy(dc_ctx *ctx, dc_cuda_graph *graph)
{
    if (!graph)
        return;
    dc_cuda_enter(ctx);
    cudaGraphExecDestroy(graph->exec);
    /* a launch still queued runs before any later use of the blocks: the
     * stream orders them */
    dc_cuda_blocks_to_cache(ctx, &graph->owned);
    free(graph->owned.at);
    free(graph);
}

} /* extern "C" */
