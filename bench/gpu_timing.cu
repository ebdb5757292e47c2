/* CUDA events, a stream hold and an L2 flush around the benchmark's timed
 * work; the device's copy bandwidth. See gpu_timing.h. */
#include "gpu_timing.h"

#include <atomic>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "bench_common.h"
}

/* Long enough for the host to queue any repetition of the benchmark (tens of
 * launches), short enough that a repetition in which the host blocks on the
 * GPU costs a fraction of a second, not forever. */
static const unsigned long long kHoldTimeoutNs = 200ull * 1000 * 1000;

struct gpu_timer {
    cudaStream_t stream;
    cudaEvent_t events[GPU_TIMER_MAX_MARKS];
    int n_marks;
    bool hold;
    /* in mapped host memory: the host writes release, the kernel timed_out */
    volatile int *release;
    volatile int *timed_out;
    int *release_dev, *timed_out_dev;
    int hold_timeouts;
    void *flush_buf;
    size_t flush_bytes;
};

static void check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

static __device__ unsigned long long global_ns()
{
#ifdef DC_CUDA_EMULATION /* tests/cuda_emulation */
    return dc_emu::clock_ns();
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#endif
}

/* Spins until the host writes *release (host memory, read through the bus on
 * every poll because it is volatile) or until the timeout. */
static __global__ void hold_stream_kernel(const volatile int *release, int *timed_out, unsigned long long timeout_ns)
{
    const unsigned long long t0 = global_ns();
    while (*release == 0) {
        if (global_ns() - t0 > timeout_ns) {
            *timed_out = 1;
            return;
        }
        __nanosleep(1000);
    }
}

extern "C" gpu_timer *gpu_timer_new(void *stream, bool hold_stream, bool flush_l2)
{
    gpu_timer *t = (gpu_timer *)calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "bench_cuda: out of memory\n");
        exit(1);
    }
    t->stream = (cudaStream_t)stream;
    t->hold = hold_stream;
    for (int k = 0; k < GPU_TIMER_MAX_MARKS; ++k)
        check(cudaEventCreate(&t->events[k]), "cudaEventCreate");
    int *flags = NULL;
    check(cudaHostAlloc((void **)&flags, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    flags[0] = flags[1] = 0;
    t->release = flags;
    t->timed_out = flags + 1;
    int *flags_dev = NULL;
    check(cudaHostGetDevicePointer((void **)&flags_dev, flags, 0), "cudaHostGetDevicePointer");
    t->release_dev = flags_dev;
    t->timed_out_dev = flags_dev + 1;
    if (flush_l2) {
        int device = 0, l2 = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
        t->flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
        check(cudaMalloc(&t->flush_buf, t->flush_bytes), "cudaMalloc (L2 flush buffer)");
    }
    return t;
}

extern "C" void gpu_timer_free(gpu_timer *t)
{
    if (!t)
        return;
    cudaStreamSynchronize(t->stream);
    for (int k = 0; k < GPU_TIMER_MAX_MARKS; ++k)
        cudaEventDestroy(t->events[k]);
    cudaFreeHost((void *)t->release);
    cudaFree(t->flush_buf);
    free(t);
}

extern "C" void gpu_timer_start(gpu_timer *t)
{
    if (t->flush_buf)
        check(cudaMemsetAsync(t->flush_buf, 0, t->flush_bytes, t->stream), "L2 flush");
    if (t->hold) {
        *t->release = 0;
        *t->timed_out = 0;
        hold_stream_kernel<<<1, 1, 0, t->stream>>>(t->release_dev, t->timed_out_dev, kHoldTimeoutNs);
        check(cudaGetLastError(), "stream hold kernel");
    }
    t->n_marks = 0;
    gpu_timer_mark(t);
}

extern "C" void gpu_timer_mark(gpu_timer *t)
{
    if (t->n_marks == GPU_TIMER_MAX_MARKS) {
        fprintf(stderr, "bench_cuda: more than %d timer marks\n", GPU_TIMER_MAX_MARKS);
        exit(1);
    }
    check(cudaEventRecord(t->events[t->n_marks++], t->stream), "cudaEventRecord");
}

extern "C" int gpu_timer_stop(gpu_timer *t, double *ms)
{
    if (t->hold) {
        /* every launch of the repetition is queued before the GPU may go on */
        std::atomic_thread_fence(std::memory_order_seq_cst);
        *t->release = 1;
    }
    check(cudaEventSynchronize(t->events[t->n_marks - 1]), "timed work");
    if (t->hold && *t->timed_out)
        t->hold_timeouts++;
    for (int k = 0; k + 1 < t->n_marks; ++k) {
        float elapsed = 0;
        check(cudaEventElapsedTime(&elapsed, t->events[k], t->events[k + 1]), "cudaEventElapsedTime");
        ms[k] = elapsed;
    }
    return t->n_marks - 1;
}

extern "C" int gpu_timer_take_hold_timeouts(gpu_timer *t)
{
    const int n = t->hold_timeouts;
    t->hold_timeouts = 0;
    return n;
}

extern "C" size_t gpu_timer_flush_bytes(const gpu_timer *t) { return t->flush_buf ? t->flush_bytes : 0; }

extern "C" double gpu_copy_gbs(gpu_timer *t, size_t bytes, int reps)
{
    void *src = NULL, *dst = NULL;
    check(cudaMalloc(&src, bytes), "cudaMalloc (copy source)");
    check(cudaMalloc(&dst, bytes), "cudaMalloc (copy destination)");
    check(cudaMemsetAsync(src, 1, bytes, t->stream), "cudaMemsetAsync");
    double *times = (double *)malloc((size_t)reps * sizeof *times);
    if (!times) {
        fprintf(stderr, "bench_cuda: out of memory\n");
        exit(1);
    }
    for (int r = -1; r < reps; ++r) { /* r = -1 warms up */
        gpu_timer_start(t);
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, t->stream), "cudaMemcpyAsync");
        gpu_timer_mark(t);
        double ms;
        gpu_timer_stop(t, &ms);
        if (r >= 0)
            times[r] = ms;
    }
    const double median_ms = bench_median(times, reps);
    free(times);
    check(cudaFree(src), "cudaFree");
    check(cudaFree(dst), "cudaFree");
    return 2.0 * (double)bytes / (median_ms * 1e-3) / 1e9;
}

extern "C" const char *gpu_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
