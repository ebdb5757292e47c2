/* Tests of the emulation's stream capture and CUDA graphs (cuda_runtime.h):
 * `graph_cases NAME` runs one case and prints "NAME: passed", or names the
 * check that failed and exits with 1. Written as the mirror leaves a .cu
 * file: launches as calls of dc_emu::launch, __shared__ variables as static
 * ones announced to the runtime. */
#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "cusparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

const char *case_name = "";

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "graph_cases %s: line %d: %s does not hold\n", case_name, __LINE__, #cond);                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* a call that must succeed, and one that must fail with `err` */
#define OK(call) CHECK((call) == cudaSuccess)
#define FAILS(call, err) CHECK((call) == (err))

constexpr unsigned kThreads = 64;
constexpr unsigned kBlocks = 4;
constexpr int kN = (int)(kThreads * kBlocks) - 5; /* the last block is not full */

/* y[i] += a x[i] */
void axpy(const float *x, float *y, float a, int n)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] += a * x[i];
}

/* sums[block] = the sum of the block's y, plus b: a tree over __shared__
 * memory, so that the block's threads meet at barriers */
void block_sum(const float *y, float *sums, float b, int n)
{
    static float part[kThreads];
    dc_emu::shared_memory(&part, sizeof part);
    const unsigned t = threadIdx.x;
    const int i = (int)(blockIdx.x * blockDim.x + t);
    part[t] = i < n ? y[i] : 0.0f;
    __syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half /= 2) {
        if (t < half)
            part[t] += part[t + half];
        __syncthreads();
    }
    if (t == 0)
        sums[blockIdx.x] = part[0] + b;
}

/* order[k] = the k-th block to run: a count shared by the blocks, which the
 * race check would report (its test runs without it) */
void note_block_order(float *order, float *count)
{
    if (threadIdx.x == 0) {
        order[(int)*count] = (float)blockIdx.x;
        *count += 1.0f;
    }
}

/* The work captured: y = 0, y += 2 x, y += x, sums of y by block plus b. */
void step(cudaStream_t stream, const float *x, float *y, float *sums, float b)
{
    OK(cudaMemsetAsync(y, 0, kN * sizeof *y, stream));
    dc_emu::launch(&axpy, dim3(kBlocks), dim3(kThreads), 0, stream)(x, y, 2.0f, kN);
    dc_emu::launch(&axpy, dim3(kBlocks), dim3(kThreads), 0, stream)(x, y, 1.0f, kN);
    dc_emu::launch(&block_sum, dim3(kBlocks), dim3(kThreads), 0, stream)(y, sums, b, kN);
}

float *device_floats(size_t n)
{
    void *p = NULL;
    OK(cudaMalloc(&p, n * sizeof(float)));
    return static_cast<float *>(p);
}

bool all_bits_set(const float *v, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        unsigned u;
        memcpy(&u, &v[i], sizeof u);
        if (u != 0xffffffffu)
            return false;
    }
    return true;
}

cudaStream_t new_stream(unsigned flags = cudaStreamNonBlocking)
{
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, flags));
    return s;
}

/* Two kernels and a memset captured, then the graph launched 3 times with
 * new inputs written to the captured addresses between the launches: each
 * launch gives what the same work run eagerly gives on those inputs (and
 * what the host computes), and the capture itself ran nothing. */
void replay_matches_eager()
{
    cudaStream_t s = new_stream();
    float *x = device_floats(kN), *y = device_floats(kN), *sums = device_floats(kBlocks);
    float *ye = device_floats(kN), *sums_e = device_floats(kBlocks);
    float host_x[kN], host_sums[kBlocks], eager_sums[kBlocks], host_y[kN];

    for (int i = 0; i < kN; ++i)
        host_x[i] = (float)(i % 7);
    OK(cudaMemcpyAsync(x, host_x, sizeof host_x, cudaMemcpyHostToDevice, s));

    cudaGraph_t graph = NULL;
    float b = 0.5f;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus status;
    OK(cudaStreamIsCapturing(s, &status));
    CHECK(status == cudaStreamCaptureStatusActive);
    step(s, x, y, sums, b);
    CHECK(cudaGetLastError() == cudaSuccess);
    OK(cudaStreamEndCapture(s, &graph));
    CHECK(graph != NULL);
    OK(cudaStreamIsCapturing(s, &status));
    CHECK(status == cudaStreamCaptureStatusNone);
    b = 100.0f; /* the launch's arguments were copied when it was captured */

    /* nothing ran: y and the sums hold what cudaMalloc left */
    OK(cudaMemcpyAsync(host_y, y, sizeof host_y, cudaMemcpyDeviceToHost, s));
    OK(cudaMemcpyAsync(host_sums, sums, sizeof host_sums, cudaMemcpyDeviceToHost, s));
    CHECK(all_bits_set(host_y, kN));
    CHECK(all_bits_set(host_sums, kBlocks));

    cudaGraphExec_t exec = NULL;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphDestroy(graph)); /* the executable graph does not need it */
    for (int r = 0; r < 3; ++r) {
        for (int i = 0; i < kN; ++i)
            host_x[i] = (float)((i * (r + 3)) % 11 - 5 * r);
        OK(cudaMemcpyAsync(x, host_x, sizeof host_x, cudaMemcpyHostToDevice, s));
        OK(cudaGraphLaunch(exec, s));
        OK(cudaStreamSynchronize(s));
        OK(cudaMemcpyAsync(host_sums, sums, sizeof host_sums, cudaMemcpyDeviceToHost, s));

        step(s, x, ye, sums_e, 0.5f);
        CHECK(cudaGetLastError() == cudaSuccess);
        OK(cudaMemcpyAsync(eager_sums, sums_e, sizeof eager_sums, cudaMemcpyDeviceToHost, s));
        for (unsigned k = 0; k < kBlocks; ++k) {
            double want = 0.5;
            for (int i = (int)(k * kThreads); i < (int)((k + 1) * kThreads) && i < kN; ++i)
                want += 3.0 * host_x[i];
            CHECK(host_sums[k] == eager_sums[k]);
            CHECK(host_sums[k] == (float)want);
        }
    }
    OK(cudaGraphExecDestroy(exec));
    for (float *p : {x, y, sums, ye, sums_e})
        OK(cudaFree(p));
    OK(cudaStreamDestroy(s));
}

/* The library's read of a result: a device-to-host copy and the stream's
 * synchronization. The copy is captured (CUDA records it as a memcpy node);
 * the synchronization is refused, invalidates the capture and is named. */
void stream_synchronize_breaks_capture()
{
    cudaStream_t s = new_stream();
    float *x = device_floats(kN), *y = device_floats(kN);
    float host_y[kN];
    for (int i = 0; i < kN; ++i)
        host_y[i] = 7.0f;

    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(dc_emu_capture_broken_by() == NULL);
    OK(cudaMemsetAsync(x, 0, kN * sizeof *x, s));
    dc_emu::launch(&axpy, dim3(kBlocks), dim3(kThreads), 0, s)(x, y, 1.0f, kN);
    OK(cudaMemcpyAsync(host_y, y, sizeof host_y, cudaMemcpyDeviceToHost, s));
    CHECK(host_y[0] == 7.0f); /* recorded, not run */
    FAILS(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    CHECK(strcmp(cudaGetErrorString(cudaErrorStreamCaptureUnsupported),
                 "operation not permitted when stream is capturing") == 0);
    CHECK(dc_emu_capture_broken_by() != NULL && strcmp(dc_emu_capture_broken_by(), "cudaStreamSynchronize") == 0);

    cudaStreamCaptureStatus status;
    OK(cudaStreamIsCapturing(s, &status));
    CHECK(status == cudaStreamCaptureStatusInvalidated);
    /* the stream refuses work until the capture ends */
    cudaGetLastError();
    dc_emu::launch(&axpy, dim3(kBlocks), dim3(kThreads), 0, s)(x, y, 1.0f, kN);
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureInvalidated);
    FAILS(cudaMemsetAsync(y, 0, sizeof(float), s), cudaErrorStreamCaptureInvalidated);
    FAILS(cudaStreamSynchronize(s), cudaErrorStreamCaptureInvalidated);

    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&status);
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    CHECK(graph == NULL);
    CHECK(strcmp(cudaGetErrorString(cudaErrorStreamCaptureInvalidated),
                 "operation failed due to a previous error during capture") == 0);
    /* still named after the end, and the stream is usable again */
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaStreamSynchronize") == 0);
    OK(cudaStreamIsCapturing(s, &status));
    CHECK(status == cudaStreamCaptureStatusNone);
    OK(cudaStreamSynchronize(s));
    /* nothing of the capture ran */
    float host_x[kN];
    OK(cudaMemcpyAsync(host_x, x, sizeof host_x, cudaMemcpyDeviceToHost, s));
    OK(cudaMemcpyAsync(host_y, y, sizeof host_y, cudaMemcpyDeviceToHost, s));
    CHECK(all_bits_set(host_x, kN) && all_bits_set(host_y, kN));
    /* a new capture starts unbroken */
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(dc_emu_capture_broken_by() == NULL);
    OK(cudaStreamEndCapture(s, &graph));
    CHECK(graph != NULL);
    OK(cudaGraphDestroy(graph));
    OK(cudaFree(x));
    OK(cudaFree(y));
    OK(cudaStreamDestroy(s));
}

/* A device-to-host copy alone is captured, as CUDA captures it (the
 * Programming Guide's stream capture example copies its result to a host
 * variable): each launch writes the host memory with the values then. */
void device_to_host_copy_replays()
{
    cudaStream_t s = new_stream();
    float *x = device_floats(kN), *y = device_floats(kN);
    float host_x[kN], host_y[kN];
    for (int i = 0; i < kN; ++i)
        host_y[i] = -1.0f;

    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OK(cudaMemsetAsync(y, 0, kN * sizeof *y, s));
    dc_emu::launch(&axpy, dim3(kBlocks), dim3(kThreads), 0, s)(x, y, 1.0f, kN);
    OK(cudaMemcpyAsync(host_y, y, sizeof host_y, cudaMemcpyDeviceToHost, s));
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    CHECK(host_y[0] == -1.0f);
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph));
    for (int r = 1; r <= 3; ++r) {
        for (int i = 0; i < kN; ++i)
            host_x[i] = (float)(r * i);
        OK(cudaMemcpyAsync(x, host_x, sizeof host_x, cudaMemcpyHostToDevice, s));
        OK(cudaGraphLaunch(exec, s));
        OK(cudaStreamSynchronize(s));
        for (int i = 0; i < kN; ++i)
            CHECK(host_y[i] == host_x[i]);
    }
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    OK(cudaFree(x));
    OK(cudaFree(y));
    OK(cudaStreamDestroy(s));
}

/* cudaMalloc is potentially unsafe: refused in a global capture of this
 * thread, which it invalidates. */
void malloc_breaks_global_capture()
{
    cudaStream_t s = new_stream();
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *p = &p;
    FAILS(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    CHECK(p == NULL);
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaMalloc") == 0);
    cudaGraph_t graph;
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    CHECK(graph == NULL);
    OK(cudaMalloc(&p, 64)); /* no capture: as always */
    /* thread-local captures prohibit it too, and so do they cudaFree */
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    FAILS(cudaFree(p), cudaErrorStreamCaptureUnsupported);
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaFree") == 0);
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaFree(p));
    OK(cudaStreamDestroy(s));
}

/* In a relaxed capture, or with the thread's mode relaxed, cudaMalloc and
 * cudaFree are allowed and the capture goes on; synchronizing is not. */
void malloc_allowed_in_relaxed_capture()
{
    cudaStream_t s = new_stream();
    float *y = device_floats(kN);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    void *p = NULL;
    OK(cudaMalloc(&p, 64));
    OK(cudaFree(p));
    OK(cudaMemsetAsync(y, 0, kN * sizeof *y, s));
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    CHECK(dc_emu_capture_broken_by() == NULL);
    OK(cudaGraphDestroy(graph));

    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == cudaStreamCaptureModeGlobal);
    OK(cudaMalloc(&p, 64));
    OK(cudaFree(p));
    OK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == cudaStreamCaptureModeRelaxed);
    OK(cudaStreamEndCapture(s, &graph));
    OK(cudaGraphDestroy(graph));

    /* synchronizing conflicts with any capture, relaxed or not */
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    FAILS(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaFree(y));
    OK(cudaStreamDestroy(s));
}

/* cudaDeviceSynchronize while a stream of the device captures, in any mode */
void device_synchronize_breaks_capture()
{
    cudaStream_t s = new_stream(), other = new_stream();
    OK(cudaDeviceSynchronize());
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    OK(cudaStreamSynchronize(other)); /* another stream: allowed */
    FAILS(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaDeviceSynchronize") == 0);
    cudaGraph_t graph;
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaDeviceSynchronize());
    OK(cudaStreamDestroy(s));
    OK(cudaStreamDestroy(other));
}

/* An event recorded in a capture is a captured event: it cannot be waited
 * for or timed. */
void event_synchronize_breaks_capture()
{
    cudaStream_t s = new_stream();
    cudaEvent_t e;
    OK(cudaEventCreate(&e));
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OK(cudaEventRecord(e, s));
    FAILS(cudaEventSynchronize(e), cudaErrorCapturedEvent);
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaEventSynchronize") == 0);
    cudaGraph_t graph;
    FAILS(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaEventRecord(e, s));
    OK(cudaEventSynchronize(e));
    OK(cudaEventDestroy(e));
    OK(cudaStreamDestroy(s));
}

/* The legacy stream while a blocking stream captures: a query is answered
 * with cudaErrorStreamCaptureImplicit, work on it breaks the capture; a
 * non-blocking stream's capture leaves it alone. */
void legacy_stream_breaks_blocking_capture()
{
    float *y = device_floats(kN);
    cudaStream_t blocking = new_stream(cudaStreamDefault), non_blocking = new_stream();
    cudaStreamCaptureStatus status;
    cudaGraph_t graph;

    OK(cudaStreamBeginCapture(non_blocking, cudaStreamCaptureModeGlobal));
    OK(cudaMemsetAsync(y, 0, kN * sizeof *y, 0));
    OK(cudaStreamIsCapturing(0, &status));
    CHECK(status == cudaStreamCaptureStatusNone);
    OK(cudaStreamEndCapture(non_blocking, &graph));
    OK(cudaGraphDestroy(graph));

    OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal));
    FAILS(cudaStreamIsCapturing(0, &status), cudaErrorStreamCaptureImplicit);
    OK(cudaStreamIsCapturing(blocking, &status));
    CHECK(status == cudaStreamCaptureStatusActive);
    FAILS(cudaMemsetAsync(y, 0, kN * sizeof *y, 0), cudaErrorStreamCaptureImplicit);
    CHECK(strcmp(dc_emu_capture_broken_by(), "cudaMemsetAsync") == 0);
    FAILS(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
    FAILS(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    OK(cudaFree(y));
    OK(cudaStreamDestroy(blocking));
    OK(cudaStreamDestroy(non_blocking));
}

/* GEMMs captured through cuBLAS: replayed on new values of A, with alpha and
 * beta as they were when captured, they give what eager GEMMs give. */
void gemm_replays()
{
    constexpr int m = 5, n = 3, k = 4, batch = 2;
    cudaStream_t s = new_stream();
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    float *a = device_floats(m * k * batch), *b = device_floats(k * n * batch), *c = device_floats(m * n * batch),
          *ce = device_floats(m * n * batch);
    double *da, *db, *dc, *dce;
    OK(cudaMalloc((void **)&da, m * k * sizeof(double)));
    OK(cudaMalloc((void **)&db, n * k * sizeof(double)));
    OK(cudaMalloc((void **)&dc, m * n * sizeof(double)));
    OK(cudaMalloc((void **)&dce, m * n * sizeof(double)));
    float host_a[m * k * batch], host_b[k * n * batch], host_c[m * n * batch], host_ce[m * n * batch];
    double host_da[m * k], host_db[n * k], host_dc[m * n], host_dce[m * n];
    for (int i = 0; i < k * n * batch; ++i)
        host_b[i] = (float)(i % 5 - 2);
    for (int i = 0; i < n * k; ++i)
        host_db[i] = 0.25 * (i % 3);
    OK(cudaMemcpyAsync(b, host_b, sizeof host_b, cudaMemcpyHostToDevice, s));
    OK(cudaMemcpyAsync(db, host_db, sizeof host_db, cudaMemcpyHostToDevice, s));

    float alpha = 2.0f, beta = 0.0f;
    double dalpha = -1.5, dbeta = 0.0;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, m * k, b, k, k * n, &beta, c, m,
                                    m * n, batch) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &dalpha, da, m, db, n, &dbeta, dc, m) ==
          CUBLAS_STATUS_SUCCESS);
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    const float captured_alpha = alpha;
    const double captured_dalpha = dalpha;
    alpha = 5.0f; /* alpha was captured by value (host pointer mode) */
    dalpha = 7.0;
    OK(cudaMemcpyAsync(host_c, c, sizeof host_c, cudaMemcpyDeviceToHost, s));
    CHECK(all_bits_set(host_c, m * n * batch));

    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 3; ++r) {
        for (int i = 0; i < m * k * batch; ++i)
            host_a[i] = (float)((i * (r + 1)) % 7 - 3);
        for (int i = 0; i < m * k; ++i)
            host_da[i] = 0.5 * ((i + r) % 4);
        OK(cudaMemcpyAsync(a, host_a, sizeof host_a, cudaMemcpyHostToDevice, s));
        OK(cudaMemcpyAsync(da, host_da, sizeof host_da, cudaMemcpyHostToDevice, s));
        OK(cudaGraphLaunch(exec, s));
        OK(cudaMemcpyAsync(host_c, c, sizeof host_c, cudaMemcpyDeviceToHost, s));
        OK(cudaMemcpyAsync(host_dc, dc, sizeof host_dc, cudaMemcpyDeviceToHost, s));
        CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &captured_alpha, a, m, m * k, b, k, k * n,
                                        &beta, ce, m, m * n, batch) == CUBLAS_STATUS_SUCCESS);
        CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &captured_dalpha, da, m, db, n, &dbeta, dce, m) ==
              CUBLAS_STATUS_SUCCESS);
        OK(cudaMemcpyAsync(host_ce, ce, sizeof host_ce, cudaMemcpyDeviceToHost, s));
        OK(cudaMemcpyAsync(host_dce, dce, sizeof host_dce, cudaMemcpyDeviceToHost, s));
        CHECK(memcmp(host_c, host_ce, sizeof host_c) == 0);
        CHECK(memcmp(host_dc, host_dce, sizeof host_dc) == 0);
        /* and the host's product */
        for (int p = 0; p < batch; ++p)
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < m; ++i) {
                    double want = 0;
                    for (int l = 0; l < k; ++l)
                        want += (double)host_a[p * m * k + i + l * m] * host_b[p * k * n + l + j * k];
                    CHECK(host_c[p * m * n + i + j * m] == (float)(captured_alpha * want));
                }
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                double want = 0;
                for (int l = 0; l < k; ++l)
                    want += host_da[i + l * m] * host_db[j + l * n];
                CHECK(host_dc[i + j * m] == captured_dalpha * want);
            }
    }
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
    for (float *p : {a, b, c, ce})
        OK(cudaFree(p));
    for (double *p : {da, db, dc, dce})
        OK(cudaFree(p));
    OK(cudaStreamDestroy(s));
}

/* A replayed kernel's blocks run in the order of an eager launch's:
 * ascending, or descending with DC_EMU_REVERSE=1. */
void replay_keeps_block_order()
{
    const char *e = getenv("DC_EMU_REVERSE");
    const bool reverse = e && strcmp(e, "1") == 0;
    cudaStream_t s = new_stream();
    float *order = device_floats(kBlocks + 1), *count = order + kBlocks;
    float eager[kBlocks], replayed[kBlocks];

    OK(cudaMemsetAsync(count, 0, sizeof(float), s));
    dc_emu::launch(&note_block_order, dim3(kBlocks), dim3(kThreads), 0, s)(order, count);
    OK(cudaMemcpyAsync(eager, order, sizeof eager, cudaMemcpyDeviceToHost, s));

    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OK(cudaMemsetAsync(order, 0xff, (kBlocks + 1) * sizeof(float), s));
    OK(cudaMemsetAsync(count, 0, sizeof(float), s));
    dc_emu::launch(&note_block_order, dim3(kBlocks), dim3(kThreads), 0, s)(order, count);
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, s));
    OK(cudaMemcpyAsync(replayed, order, sizeof replayed, cudaMemcpyDeviceToHost, s));
    for (unsigned k = 0; k < kBlocks; ++k) {
        CHECK(eager[k] == (float)(reverse ? kBlocks - 1 - k : k));
        CHECK(replayed[k] == eager[k]);
    }
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    OK(cudaFree(order));
    OK(cudaStreamDestroy(s));
}

/* The 3 x 4 CSR matrix A = [[1, 0, 2, 0], [0, 0, 0, 0], [0, -1, 0, 3]] as
 * cuSPARSE descriptors see it. */
const int32_t kCsrPtr[4] = {0, 2, 2, 4}, kCsrIdx[4] = {0, 2, 1, 3};
const float kCsrVal[4] = {1, 2, -1, 3};

template <typename T> T *device_copy(cudaStream_t s, const T *host, size_t n)
{
    T *d;
    OK(cudaMalloc((void **)&d, n * sizeof(T)));
    OK(cudaMemcpyAsync(d, host, n * sizeof(T), cudaMemcpyHostToDevice, s));
    return d;
}

/* SpMM (Y = A X, X and Y row-major) and SDDMM (A's pattern sampling U V^T)
 * captured through cuSPARSE: replayed on new values of X and U, with beta
 * as it was when captured, they give the host's sums in the pattern's
 * order. */
void cusparse_replays()
{
    constexpr int64_t rows = 3, cols = 4, n = 2;
    cudaStream_t s = new_stream();
    cusparseHandle_t h;
    CHECK(cusparseCreate(&h) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseSetStream(h, s) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST) == CUSPARSE_STATUS_SUCCESS);
    int32_t *ptr = device_copy(s, kCsrPtr, 4), *idx = device_copy(s, kCsrIdx, 4);
    float *val = device_copy(s, kCsrVal, 4), *sampled = device_copy(s, kCsrVal, 4);
    float host_x[cols * n], host_y[rows * n], host_u[rows * n], host_s[4];
    for (int i = 0; i < cols * n; ++i)
        host_x[i] = 0;
    float *x = device_copy(s, host_x, cols * n), *y = device_copy(s, host_x, rows * n),
          *u = device_copy(s, host_x, rows * n);
    float *v = device_copy(s, host_x, cols * n), *work;
    OK(cudaMalloc((void **)&work, 256));
    cusparseSpMatDescr_t a, c;
    cusparseDnMatDescr_t dx, dy, du, dv;
    CHECK(cusparseCreateCsr(&a, rows, cols, 4, ptr, idx, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateCsr(&c, rows, cols, 4, ptr, idx, sampled, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnMat(&dx, cols, n, n, x, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnMat(&dy, rows, n, n, y, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnMat(&du, rows, n, n, u, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnMat(&dv, cols, n, n, v, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE, T = CUSPARSE_OPERATION_TRANSPOSE;
    float one = 1, zero = 0;
    size_t bytes = 0;
    CHECK(cusparseSpMM_bufferSize(h, N, N, &one, a, dx, &zero, dy, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG3, &bytes) ==
          CUSPARSE_STATUS_SUCCESS);
    CHECK(bytes <= 256);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cusparseSpMM(h, N, N, &one, a, dx, &zero, dy, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG3, work) ==
          CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseSDDMM(h, N, T, &one, du, dv, &one, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, work) ==
          CUSPARSE_STATUS_SUCCESS);
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    one = 5; /* beta was captured by value (host pointer mode) */
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    float want_s[4] = {1, 2, -1, 3};
    for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < cols * n; ++i)
            host_x[i] = (float)((i * (r + 2)) % 5 - 2);
        for (int i = 0; i < rows * n; ++i)
            host_u[i] = 0.5f * (float)((i + r) % 3);
        OK(cudaMemcpyAsync(x, host_x, sizeof host_x, cudaMemcpyHostToDevice, s));
        OK(cudaMemcpyAsync(v, host_x, sizeof host_x, cudaMemcpyHostToDevice, s));
        OK(cudaMemcpyAsync(u, host_u, sizeof host_u, cudaMemcpyHostToDevice, s));
        OK(cudaGraphLaunch(exec, s));
        OK(cudaMemcpyAsync(host_y, y, sizeof host_y, cudaMemcpyDeviceToHost, s));
        OK(cudaMemcpyAsync(host_s, sampled, sizeof host_s, cudaMemcpyDeviceToHost, s));
        for (int64_t i = 0; i < rows; ++i) {
            for (int64_t col = 0; col < n; ++col) {
                float want = 0;
                for (int p = kCsrPtr[i]; p < kCsrPtr[i + 1]; ++p)
                    want += kCsrVal[p] * host_x[kCsrIdx[p] * n + col];
                CHECK(host_y[i * n + col] == want);
            }
            for (int p = kCsrPtr[i]; p < kCsrPtr[i + 1]; ++p) {
                float dot = 0;
                for (int64_t l = 0; l < n; ++l)
                    dot += host_u[i * n + l] * host_x[kCsrIdx[p] * n + l];
                want_s[p] = dot + want_s[p]; /* beta 1: the replays accumulate */
                CHECK(host_s[p] == want_s[p]);
            }
        }
    }
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    CHECK(cusparseDestroySpMat(a) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroySpMat(c) == CUSPARSE_STATUS_SUCCESS);
    for (cusparseDnMatDescr_t d : {dx, dy, du, dv})
        CHECK(cusparseDestroyDnMat(d) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroy(h) == CUSPARSE_STATUS_SUCCESS);
    for (float *p : {val, sampled, x, y, u, v, work})
        OK(cudaFree(p));
    OK(cudaFree(ptr));
    OK(cudaFree(idx));
    OK(cudaStreamDestroy(s));
}

/* Descriptors and products that the reference rules out are refused with
 * CUSPARSE_STATUS_INVALID_VALUE, and run nothing. */
void cusparse_checks_arguments()
{
    cudaStream_t s = new_stream();
    cusparseHandle_t h;
    CHECK(cusparseCreate(&h) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseSetStream(h, s) == CUSPARSE_STATUS_SUCCESS);
    int32_t *ptr = device_copy(s, kCsrPtr, 4), *idx = device_copy(s, kCsrIdx, 4);
    float *val = device_copy(s, kCsrVal, 4), *x, *y, *work;
    OK(cudaMalloc((void **)&x, 64 * sizeof(float)));
    OK(cudaMalloc((void **)&y, 64 * sizeof(float)));
    OK(cudaMalloc((void **)&work, 256));
    cusparseSpMatDescr_t a;
    cusparseDnMatDescr_t dx, dy, bad;
    cusparseDnVecDescr_t vx, vy;
    const cusparseStatus_t invalid = CUSPARSE_STATUS_INVALID_VALUE;
    /* bad descriptors: a negative size, a leading dimension below the row
     * length, values not aligned to 16 bytes, a NULL row offsets array */
    CHECK(cusparseCreateCsr(&a, -1, 4, 4, ptr, idx, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F) == invalid);
    CHECK(cusparseCreateCsr(&a, 3, 4, 4, NULL, idx, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F) == invalid);
    CHECK(cusparseCreateDnMat(&bad, 4, 2, 1, x, CUDA_R_32F, CUSPARSE_ORDER_ROW) == invalid);
    CHECK(cusparseCreateDnMat(&bad, 4, 2, 2, x + 1, CUDA_R_32F, CUSPARSE_ORDER_ROW) == invalid);
    CHECK(cusparseCreateDnVec(&vx, 4, x + 1, CUDA_R_32F) == invalid);
    CHECK(cusparseCreateCsr(&a, 3, 4, 4, ptr, idx, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                            CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    /* products whose sizes do not agree: X with 3 rows for A's 4 columns,
     * y of 2 elements for A's 3 rows */
    CHECK(cusparseCreateDnMat(&dx, 3, 2, 2, x, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnMat(&dy, 3, 2, 2, y, CUDA_R_32F, CUSPARSE_ORDER_ROW) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnVec(&vx, 4, x, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnVec(&vy, 2, y, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE;
    const float one = 1, zero = 0;
    size_t bytes = 0;
    CHECK(cusparseSpMM_bufferSize(h, N, N, &one, a, dx, &zero, dy, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG3, &bytes) ==
          invalid);
    CHECK(cusparseSpMM(h, N, N, &one, a, dx, &zero, dy, CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG3, work) == invalid);
    CHECK(cusparseSpMV(h, N, &one, a, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG2, work) == invalid);
    /* a compute type other than the values', and no workspace */
    CHECK(cusparseSpMV(h, N, &one, a, vx, &zero, vy, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, work) == invalid);
    CHECK(cusparseDestroyDnVec(vy) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseCreateDnVec(&vy, 3, y, CUDA_R_32F) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseSpMV(h, N, &one, a, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG2, NULL) == invalid);
    CHECK(cusparseSpMV(h, N, &one, a, vx, &zero, vy, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG2, work) ==
          CUSPARSE_STATUS_SUCCESS);
    /* the transposed product is not one the backend asks for */
    CHECK(cusparseSpMV(h, CUSPARSE_OPERATION_TRANSPOSE, &one, a, vy, &zero, vx, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG2,
                       work) == CUSPARSE_STATUS_NOT_SUPPORTED);
    CHECK(cusparseDestroySpMat(a) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroyDnMat(dx) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroyDnMat(dy) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroyDnVec(vx) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroyDnVec(vy) == CUSPARSE_STATUS_SUCCESS);
    CHECK(cusparseDestroy(h) == CUSPARSE_STATUS_SUCCESS);
    for (float *p : {val, x, y, work})
        OK(cudaFree(p));
    OK(cudaFree(ptr));
    OK(cudaFree(idx));
    OK(cudaStreamDestroy(s));
}

const struct {
    const char *name;
    void (*run)();
} cases[] = {
    {"replay_matches_eager", replay_matches_eager},
    {"stream_synchronize_breaks_capture", stream_synchronize_breaks_capture},
    {"device_to_host_copy_replays", device_to_host_copy_replays},
    {"malloc_breaks_global_capture", malloc_breaks_global_capture},
    {"malloc_allowed_in_relaxed_capture", malloc_allowed_in_relaxed_capture},
    {"device_synchronize_breaks_capture", device_synchronize_breaks_capture},
    {"event_synchronize_breaks_capture", event_synchronize_breaks_capture},
    {"legacy_stream_breaks_blocking_capture", legacy_stream_breaks_blocking_capture},
    {"gemm_replays", gemm_replays},
    {"cusparse_replays", cusparse_replays},
    {"cusparse_checks_arguments", cusparse_checks_arguments},
    {"replay_keeps_block_order", replay_keeps_block_order},
};

} // namespace

int main(int argc, char **argv)
{
    for (const auto &c : cases) {
        if (argc != 2 || strcmp(argv[1], c.name) != 0)
            continue;
        case_name = c.name;
        c.run();
        printf("%s: passed\n", c.name);
        return 0;
    }
    fprintf(stderr, "usage: graph_cases NAME, NAME one of:");
    for (const auto &c : cases)
        fprintf(stderr, " %s", c.name);
    fprintf(stderr, "\n");
    return 2;
}
