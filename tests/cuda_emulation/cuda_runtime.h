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
 * Work queued on a stream runs before the call returns, unless the stream
 * captures: then it is recorded into a CUDA graph (see "stream capture and
 * CUDA graphs" below).
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
    cudaErrorIllegalState = 401,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
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
#define cudaStreamDefault 0x00
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
/* the CUDA runtime's cudaDeviceSynchronize: every call completes before it
 * returns, so there is nothing to wait for outside a capture */
cudaError_t cudaDeviceSynchronize(void);

/* ---- stream capture and CUDA graphs ----
 *
 * As in CUDA (the Programming Guide's "Stream Capture" and the runtime
 * reference's cudaStreamBeginCapture, cudaThreadExchangeStreamCaptureMode):
 * work queued on a capturing stream is recorded into a graph, not run.
 * Recorded are kernel launches (with their arguments converted and copied
 * when the launch is captured), cudaMemsetAsync, cudaMemcpyAsync in the
 * three directions (host memory, pinned or not, is read or written when the
 * graph runs), cudaMemcpyPeerAsync and the cuBLAS GEMMs (alpha and beta by
 * value: the host pointer mode). cudaEventRecord on a capturing stream makes
 * a captured event and no node. cudaGraphLaunch runs the recorded work in
 * order, each kernel as a launch does (DC_EMU_REVERSE, the race check), at
 * the addresses recorded.
 *
 * Refused while a capture is under way, as CUDA refuses them, with the
 * capture invalidated (cudaStreamEndCapture then fails with
 * cudaErrorStreamCaptureInvalidated and no graph):
 * - cudaStreamSynchronize of a capturing stream, cudaDeviceSynchronize while
 *   any stream of the current device captures, cudaEventSynchronize and
 *   cudaEventElapsedTime of an event last recorded in a capture
 *   (cudaErrorStreamCaptureUnsupported, cudaErrorCapturedEvent), whatever
 *   the mode;
 * - the potentially unsafe calls cudaMalloc, cudaFree, cudaHostAlloc,
 *   cudaFreeHost and cudaStreamCreateWithFlags, when the rule of the thread's
 *   capture interaction mode prohibits them (cudaErrorStreamCaptureUnsupported):
 *   a capture of this thread not begun in relaxed mode, or in the thread mode
 *   global, a global capture of another thread;
 * - any use of the legacy (null) stream while a blocking stream (created
 *   without cudaStreamNonBlocking) of the current device captures
 *   (cudaErrorStreamCaptureImplicit; cudaStreamIsCapturing only reports it);
 * - cudaGraphLaunch and cudaStreamDestroy on a capturing stream (the
 *   emulation's choice: it does not nest graphs).
 * Work queued on a stream whose capture was invalidated fails with
 * cudaErrorStreamCaptureInvalidated until cudaStreamEndCapture.
 * dc_emu_capture_broken_by (below) names the call that invalidated a capture
 * ("cudaLaunchKernel" for a kernel launch). Calls refused for their
 * arguments (an invalid grid, a stream of a device that is not current) do
 * not invalidate a capture. A graph's memset or copy that reaches device
 * memory freed since the capture stops the program, as a device would fault.
 * cudaStreamBeginCapture refuses the legacy stream
 * (cudaErrorStreamCaptureUnsupported) and a stream that captures already,
 * cudaStreamEndCapture a stream that does not capture (both
 * cudaErrorIllegalState); an event last recorded in a capture stays refused
 * after the capture ends, until it is recorded outside one.
 * Not emulated: cudaStreamWaitEvent (so captures that join other streams),
 * graphs built node by node, graph update, conditional nodes, child graphs,
 * host nodes, memory nodes, device launch. */
typedef struct dc_emu_graph *cudaGraph_t;
typedef struct dc_emu_graph_exec *cudaGraphExec_t;
typedef enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
} cudaStreamCaptureMode;
typedef enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
} cudaStreamCaptureStatus;
enum cudaGraphInstantiateFlags {
    cudaGraphInstantiateFlagAutoFreeOnLaunch = 1,
    cudaGraphInstantiateFlagUpload = 2,
    cudaGraphInstantiateFlagDeviceLaunch = 4,
    cudaGraphInstantiateFlagUseNodePriority = 8,
};
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode);
/* flags: 0, cudaGraphInstantiateFlagAutoFreeOnLaunch or
 * cudaGraphInstantiateFlagUseNodePriority (no effect here); upload and
 * device launch are refused (cudaErrorInvalidValue). The executable graph
 * is a copy: the graph may be destroyed once it is instantiated. */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags = 0);
/* Runs the graph's work in the order it was captured, on a stream of the
 * graph's device while that device is current (as a kernel launch). */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* Emulation only, not CUDA: the name of the call that invalidated the most
 * recently begun capture (the first one, if several did), such as
 * "cudaStreamSynchronize", or NULL while that capture is valid or if none was
 * begun. It keeps its answer after cudaStreamEndCapture, until the next
 * cudaStreamBeginCapture. C linkage, so that C tests can declare it. */
extern "C" const char *dc_emu_capture_broken_by(void);

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

/* Runs body(closure) for every thread of a grid of blocks: each block's
 * threads as coroutines. Records cudaErrorInvalidConfiguration for an empty
 * or oversized grid or block, and cudaErrorInvalidResourceHandle for a
 * stream of a device that is not current, as a launch would. On a capturing
 * stream it runs nothing: it records the launch with a copy of the closure
 * made by copy(closure) (freed by destroy) for cudaGraphLaunch to run. */
void run_grid(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void *), void *closure,
              void *(*copy)(const void *), void (*destroy)(void *));

/* A launch's argument: copy-initialized from the argument as in a call (no
 * explicit conversion, which nvcc would refuse). */
template <typename T> T implicit_arg(T value) { return value; }

/* What `k<<<grid, block, shared, stream>>>` becomes: called with the
 * arguments, it converts them to the kernel's parameter types once (a launch
 * copies its arguments) and runs the grid, or, on a capturing stream, records
 * the launch with those converted arguments. */
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
            static void *copy(const void *self) { return new call(*static_cast<const call *>(self)); }
            static void destroy(void *self) { delete static_cast<call *>(self); }
        };
        call c{kernel, std::tuple<P...>(implicit_arg<P>(std::forward<A>(args))...)};
        run_grid(grid, block, stream, &call::body, &c, &call::copy, &call::destroy);
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
