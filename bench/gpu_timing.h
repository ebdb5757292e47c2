/* Timing of work queued on a CUDA stream, for the GPU benchmark (C callable;
 * the CUDA side is in gpu_timing.cu).
 *
 * A repetition is timed as
 *
 *     gpu_timer_start(t);     flush L2, hold the stream, record event 0
 *     ... queue work ...
 *     gpu_timer_mark(t);      record event 1
 *     ... queue more work ...
 *     gpu_timer_stop(t, ms);  release the stream, wait, ms[k] = event k to k+1
 *
 * Holding the stream: a one-thread kernel spins until the host releases it,
 * so that the host queues the whole repetition before the GPU starts it. The
 * events then measure the GPU running the queued work back to back, not the
 * host's time to issue it, which at small sizes is longer than the kernels.
 * The spin gives up after a timeout, so a repetition in which the host waits
 * for the GPU (a synchronizing call) costs time but cannot deadlock; such
 * repetitions are counted, and their times include the host's gaps. */
#ifndef DC_BENCH_GPU_TIMING_H
#define DC_BENCH_GPU_TIMING_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_TIMER_MAX_MARKS = 4 };

typedef struct gpu_timer gpu_timer;

/* A timer on `stream` (a cudaStream_t as void *, e.g. dc_ctx_cuda_stream).
 * hold_stream: hold the stream while the host queues (see above); flush_l2:
 * overwrite a buffer of twice the L2 size before every repetition, outside
 * the timed region, so that no repetition reads what the previous one left
 * in the cache. Prints the CUDA error and exits on failure. */
gpu_timer *gpu_timer_new(void *stream, bool hold_stream, bool flush_l2);
void gpu_timer_free(gpu_timer *t);

void gpu_timer_start(gpu_timer *t);
void gpu_timer_mark(gpu_timer *t);

/* Releases the stream, waits for the last event and writes the n - 1 times
 * between the n events recorded since gpu_timer_start into ms[]; returns
 * n - 1. Exits with the CUDA error if the queued work failed. */
int gpu_timer_stop(gpu_timer *t, double *ms);

/* Repetitions whose hold timed out since the last call; resets the count. */
int gpu_timer_take_hold_timeouts(gpu_timer *t);

/* Bytes overwritten by the L2 flush before each repetition (0 when off). */
size_t gpu_timer_flush_bytes(const gpu_timer *t);

/* Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes
 * written: median over `reps` cudaMemcpyAsync calls of `bytes` bytes each,
 * timed with the timer (so on its stream). The buffers are freed again. */
double gpu_copy_gbs(gpu_timer *t, size_t bytes, int reps);

/* The text of a CUDA error code as the launchers in this directory return. */
const char *gpu_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* DC_BENCH_GPU_TIMING_H */
