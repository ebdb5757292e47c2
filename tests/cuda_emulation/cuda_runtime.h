/* The part of the CUDA runtime the CUDA backend uses, emulated on the CPU so
 * that the backend's host logic and its kernels run in CI, where there is no
 * GPU. Device memory lives in a region the host cannot touch outside the
 * emulated runtime and kernels: a host dereference of a device pointer
 * faults. A new allocation holds all bits set (NaN), not zeros. Kernels run
 * block after block, the threads of a block on coroutines that switch at
 * __syncthreads, so a block's threads share its __shared__ variables and
 * meet at its barriers as on a device; a __shared__ variable holds all bits
 * set (NaN) when a block starts, so a read before the block writes it shows.
 * What it cannot show: timing, and the device's own arithmetic (it runs the
 * host path of the math, as the CPU backend does). Races between threads it
 * shows with DC_EMU_RACECHECK=1 only (race_check.h): the order it runs them
 * in hides them otherwise.
 * The emulated runtime serves one host thread, as the CUDA backend uses it.
 *
 * There are two devices (DC_EMU_DEVICES=1 to 4 sets the number), each with
 * 16 GiB of its own memory, and a current device per host thread, as in
 * CUDA: memory, streams, events and cuBLAS handles belong to the device
 * current when they are made; a launch on a stream of a device that is not
 * current fails, so does a GEMM while another device is current (and
 * cublasDestroy then stops the program), and a kernel or GEMM that touches another device's memory faults
 * (peer access enabled or not). Copies and memsets may name any device's
 * memory and stream, as CUDA's may.
 *
 * Only the emulated build of the tests includes this file (with its
 * directory first on the include path); a launch `k<<<g, b, s, st>>>(args)`
 * is rewritten to `dc_emu::launch(&k, g, b, s, st)(args)`, and a declaration
 * `__shared__ T x[N];` to `static T x[N]; dc_emu::shared_memory(&x, sizeof
 * x);`, when the sources are mirrored for that build (mirror.cmake). */
#ifndef DC_CUDA_EMULATION_RUNTIME_H
#define DC_CUDA_EMULATION_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <math.h>

#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
/* one instance per kernel (per template instantiation), shared by the block
 * that runs; blocks run one at a time (the mirror rewrites declarations to
 * this and a call of dc_emu::shared_memory) */
#define __shared__ static

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorPeerAccessAlreadyEnabled = 704,
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

typedef enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrL2CacheSize = 38,
} cudaDeviceAttr;

typedef struct dc_emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 0x01
/* an event holds the host time at which it was recorded: every call
 * completes before it returns, so that is when the work before it ended */
typedef struct dc_emu_event *cudaEvent_t;
#define cudaHostAllocMapped 0x02

typedef struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int multiProcessorCount;
    int major, minor;
} cudaDeviceProp;

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
/* every pair of devices can; access enabled is recorded, and kernels still
 * reach their own device's memory only */
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t stream = 0);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = 0);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
/* mapped host memory: the device pointer is the host pointer */
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t err);

namespace dc_emu {

/* The running thread's coordinates, set by the scheduler. */
extern uint3 thread_idx, block_idx;
extern dim3 block_dim, grid_dim;

/* Suspends the calling thread until every thread of its block got here. */
void sync_threads();

/* Called where a thread reaches the declaration of a __shared__ variable
 * of `bytes` at `p`: the first thread of each block to get there fills it
 * with all bits set, as undefined as a block's shared memory is on a
 * device. */
void shared_memory(void *p, size_t bytes);

/* The host's monotonic clock in nanoseconds, for code that reads the
 * device's global timer (built with DC_CUDA_EMULATION defined). */
unsigned long long clock_ns();

/* Runs body(thread) for every thread of a grid of blocks: each block's
 * threads as coroutines. Records cudaErrorInvalidConfiguration for an empty
 * or oversized grid or block, and cudaErrorInvalidResourceHandle for a
 * stream of a device that is not current, as a launch would. */
void run_grid(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void *), void *closure);

/* A launch's argument: copy-initialized from the argument as in a call (no
 * explicit conversion, which nvcc would refuse). */
template <typename T> T implicit_arg(T value) { return value; }

/* What `k<<<grid, block, shared, stream>>>` becomes: called with the
 * arguments, it converts them to the kernel's parameter types once (a launch
 * copies its arguments) and runs the grid. */
template <typename... P> struct launcher {
    void (*kernel)(P...);
    dim3 grid, block;
    cudaStream_t stream;
    template <typename... A> void operator()(A &&...args) const
    {
        struct call {
            void (*kernel)(P...);
            std::tuple<P...> params;
            static void body(void *self)
            {
                const call *c = static_cast<const call *>(self);
                std::apply(c->kernel, c->params);
            }
        };
        call c{kernel, std::tuple<P...>(implicit_arg<P>(std::forward<A>(args))...)};
        run_grid(grid, block, stream, &call::body, &c);
    }
};

template <typename... P>
launcher<P...> launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = 0)
{
    (void)shared_bytes;
    return launcher<P...>{kernel, grid, block, stream};
}

} // namespace dc_emu

#define threadIdx (dc_emu::thread_idx)
#define blockIdx (dc_emu::block_idx)
#define blockDim (dc_emu::block_dim)
#define gridDim (dc_emu::grid_dim)
#define __syncthreads() dc_emu::sync_threads()
inline void __nanosleep(unsigned ns) { (void)ns; }

#endif /* DC_CUDA_EMULATION_RUNTIME_H */
