/* Kernels with and without races, for the race check of the emulation
 * (race_check.h): `race_check_cases NAME` runs one of them with
 * DC_EMU_RACECHECK=1 and prints "no race reported" if the check let it
 * finish; `race_check_cases NAME graph` captures its launch into a CUDA graph
 * (cuda_runtime.h), says so on stderr just before it launches the graph, and
 * launches it, so that a race is reported in the replayed kernel. Written as
 * the mirror leaves a .cu file: launches as calls of dc_emu::launch,
 * __shared__ variables as static ones announced to the runtime. */
#include "cuda_runtime.h"

#include <stdio.h>
#include <string.h>

namespace {

constexpr unsigned kThreads = 64;

/* thread 0 of every block writes the one result */
void every_block_writes_one_word(float *out)
{
    if (threadIdx.x == 0)
        out[0] = (float)blockIdx.x;
}

/* block 1 reads what block 0 writes */
void block_reads_another_blocks_write(float *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        out[0] = 1.0f;
    if (blockIdx.x == 1 && threadIdx.x == 0)
        out[1] = out[0];
}

/* every block reads the word that block 1 then writes: the write races
 * with the reads of the other blocks, not with its own block's */
void write_after_reads_in_other_blocks(float *out)
{
    if (threadIdx.x == 0) {
        out[4 + blockIdx.x] = out[0];
        if (blockIdx.x == 1)
            out[0] = 2.0f;
    }
}

/* each thread reads its neighbour's shared word without a barrier after
 * the writes */
void read_without_barrier(float *out)
{
    static float s[kThreads];
    dc_emu::shared_memory(&s, sizeof s);
    s[threadIdx.x] = (float)threadIdx.x;
    out[blockIdx.x * kThreads + threadIdx.x] = s[(threadIdx.x + 1) % kThreads];
}

/* thread 0 reads a word that thread 1 then overwrites, between the same
 * two barriers */
void write_after_read_without_barrier(float *out)
{
    static float s[kThreads];
    dc_emu::shared_memory(&s, sizeof s);
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = s[1];
    if (threadIdx.x == 1)
        s[1] = 0.0f;
}

/* the same exchanges, each ordered by a barrier, and blocks apart */
void ordered(float *out)
{
    static float s[kThreads];
    dc_emu::shared_memory(&s, sizeof s);
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    const float neighbour = s[(threadIdx.x + 1) % kThreads];
    __syncthreads();
    s[threadIdx.x] = neighbour;
    __syncthreads();
    out[blockIdx.x * kThreads + threadIdx.x] = s[threadIdx.x] + s[0];
}

const struct {
    const char *name;
    void (*kernel)(float *);
} cases[] = {
    {"every_block_writes_one_word", every_block_writes_one_word},
    {"block_reads_another_blocks_write", block_reads_another_blocks_write},
    {"write_after_reads_in_other_blocks", write_after_reads_in_other_blocks},
    {"read_without_barrier", read_without_barrier},
    {"write_after_read_without_barrier", write_after_read_without_barrier},
    {"ordered", ordered},
};

/* The launch captured on a stream, then the graph launched: the kernel runs
 * only then. */
int run_in_graph(const char *name, void (*kernel)(float *), float *out)
{
    cudaStream_t stream;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) {
        fprintf(stderr, "race_check_cases: the capture cannot begin\n");
        return 2;
    }
    dc_emu::launch(kernel, dim3(4), dim3(kThreads), 0, stream)(out);
    if (cudaGetLastError() != cudaSuccess || cudaStreamEndCapture(stream, &graph) != cudaSuccess ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        fprintf(stderr, "race_check_cases: the capture failed\n");
        return 2;
    }
    fprintf(stderr, "race_check_cases: launching the graph of %s\n", name);
    if (cudaGraphLaunch(exec, stream) != cudaSuccess) {
        fprintf(stderr, "race_check_cases: the graph's launch failed\n");
        return 2;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    const bool graph = argc == 3 && strcmp(argv[2], "graph") == 0;
    for (const auto &c : cases) {
        if ((argc != 2 && !graph) || strcmp(argv[1], c.name) != 0)
            continue;
        float *out = NULL;
        if (cudaMalloc((void **)&out, 4 * kThreads * sizeof *out) != cudaSuccess) {
            fprintf(stderr, "race_check_cases: cudaMalloc failed\n");
            return 2;
        }
        if (graph) {
            if (int rc = run_in_graph(c.name, c.kernel, out))
                return rc;
        } else {
            dc_emu::launch(c.kernel, dim3(4), dim3(kThreads))(out);
            if (cudaGetLastError() != cudaSuccess) {
                fprintf(stderr, "race_check_cases: the launch failed\n");
                return 2;
            }
        }
        cudaFree(out);
        printf("%s: no race reported%s\n", c.name, graph ? " in the graph" : "");
        return 0;
    }
    fprintf(stderr, "usage: race_check_cases NAME [graph], NAME one of:");
    for (const auto &c : cases)
        fprintf(stderr, " %s", c.name);
    fprintf(stderr, "\n");
    return 2;
}
