/* The CPU emulation of the CUDA runtime and cuBLAS declared in
 * cuda_runtime.h and cublas_v2.h here: device memory, streams (every call
 * completes before it returns), kernel launches and GEMM. */
/* _longjmp between fibers' stacks: fortified longjmp would refuse it */
#undef _FORTIFY_SOURCE
#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "race_check.h"

#include <algorithm>
#include <map>
#include <setjmp.h>
#include <vector>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

/* A stream: every call on it completes before it returns; it belongs to
 * the device current when it was made. */
struct dc_emu_stream {
    unsigned flags;
    int device;
};

namespace dc_emu {

uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;

namespace {

/* ---- devices and their memory: a reserved region per device,
 * inaccessible outside the runtime ---- */

constexpr int kMaxDevices = 4;
constexpr size_t kDeviceBytes = size_t(16) << 30; /* each device's region */
constexpr size_t kAlign = 256;
constexpr size_t kPage = 4096;
/* The regions ask for transparent huge pages: changing the protection of
 * populated memory costs per page table entry, and 2 MiB pages make it cheap
 * enough to do around every launch. */
constexpr size_t kHuge = size_t(2) << 20;

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* DC_EMU_DEVICES: how many devices there are, 1 to kMaxDevices (2 unless
 * set), so that code for a device other than the first runs too */
const int device_count = [] {
    const char *e = getenv("DC_EMU_DEVICES");
    if (!e)
        return 2;
    if (strlen(e) != 1 || e[0] < '1' || e[0] > '0' + kMaxDevices) {
        fprintf(stderr, "cuda emulation: DC_EMU_DEVICES=%s is not a count of devices from 1 to %d\n", e, kMaxDevices);
        exit(2);
    }
    return e[0] - '0';
}();
bool peer_enabled[kMaxDevices][kMaxDevices]; /* [device][peer] */
/* the host thread's current device, as in CUDA */
thread_local int current_device = 0;

unsigned char *region_base; /* device d's region starts at d * kDeviceBytes */
size_t region_used[kMaxDevices]; /* bytes handed out so far, rounded to pages; never reused */
struct allocation {
    size_t bytes;
    int device;
};
std::map<uintptr_t, allocation> live; /* base address -> allocation */
cudaError_t last_error = cudaSuccess;

bool region_reserve()
{
    if (region_base)
        return true;
    const size_t total = kDeviceBytes * kMaxDevices;
    void *p = mmap(NULL, total + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    region_base = reinterpret_cast<unsigned char *>(round_up(reinterpret_cast<uintptr_t>(p), kHuge));
    madvise(region_base, total, MADV_HUGEPAGE); /* a hint: slower without it, not wrong */
    if (race::enabled() && !race::watch(region_base, kDeviceBytes * device_count)) {
        fprintf(stderr, "cuda emulation: DC_EMU_RACECHECK=1, but the record of device memory cannot be reserved\n");
        exit(2);
    }
    return true;
}

unsigned char *device_base(int device) { return region_base + size_t(device) * kDeviceBytes; }

/* Device memory is readable and writable only while the runtime or a kernel
 * works on it: host code that dereferences a device pointer faults. A kernel
 * opens its own device's memory only, so that it faults on another's, as a
 * kernel does without peer access. */
struct device_access {
    int first, last;
    explicit device_access(int device = -1)
        : first(device < 0 ? 0 : device), last(device < 0 ? device_count - 1 : device)
    {
        protect(PROT_READ | PROT_WRITE);
    }
    ~device_access() { protect(PROT_NONE); }
    void protect(int prot) const
    {
        for (int d = first; d <= last; ++d)
            if (region_used[d])
                mprotect(device_base(d), round_up(region_used[d], kHuge), prot);
    }
};

cudaError_t fail(cudaError_t err, const char *fmt, const char *what, const void *p, size_t bytes)
{
    fprintf(stderr, "cuda emulation: ");
    fprintf(stderr, fmt, what, p, bytes);
    fprintf(stderr, "\n");
    last_error = err;
    return err;
}

bool in_region(const void *p)
{
    const unsigned char *c = static_cast<const unsigned char *>(p);
    return region_base && c >= region_base && c < region_base + kDeviceBytes * kMaxDevices;
}

/* Whether [p, p + bytes) lies inside one live allocation (of `device`, if
 * that is not -1). */
bool is_device_range(const void *p, size_t bytes, int device = -1)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = live.upper_bound(a);
    if (it == live.begin())
        return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second.bytes &&
           (device < 0 || it->second.device == device);
}

/* ---- kernels: a block's threads on coroutines ----
 *
 * A coroutine (fiber) runs the block's threads one after another until one
 * of them waits at __syncthreads; that thread keeps the fiber, and the next
 * thread starts on another. A kernel without barriers so runs each block on
 * one fiber. Once every thread has finished or waits, the waiting ones are
 * resumed in turn: the barrier is released. Fibers switch with _setjmp and
 * _longjmp (no signal mask to save, unlike swapcontext); ucontext only
 * starts each fiber on its own stack, once. */

constexpr size_t kStackBytes = 128 * 1024;
constexpr unsigned kMaxThreads = 1024;

enum fiber_state { FIBER_FREE, FIBER_WAITING };

struct fiber {
    jmp_buf resume_at;
    void *stack;
    ucontext_t start;
    fiber_state state;
    unsigned thread; /* the thread it runs */
};

/* counts the blocks run, so that each block's __shared__ variables are
 * filled once, when the first of its threads declares them */
unsigned long long block_serial;
std::map<void *, unsigned long long> shared_filled; /* variable -> block that last filled it */

jmp_buf scheduler_at;
ucontext_t creator;
std::vector<fiber *> fibers;
fiber *current;
void (*current_body)(void *);
void *current_closure;
unsigned block_threads, next_thread;
/* DC_EMU_REVERSE=1: blocks, threads and the release of each barrier in
 * descending order, so that a missing barrier or an order-dependent result
 * shows in one of the two orders */
const bool reverse_order = [] {
    const char *e = getenv("DC_EMU_REVERSE");
    return e && strcmp(e, "1") == 0;
}();

void set_thread_idx(unsigned t)
{
    thread_idx.x = t % block_dim.x;
    thread_idx.y = t / block_dim.x % block_dim.y;
    thread_idx.z = t / (block_dim.x * block_dim.y);
    race::thread_runs(t);
}

/* Back to the scheduler; returns when the scheduler resumes this fiber. */
void yield(fiber *self)
{
    if (!_setjmp(self->resume_at))
        _longjmp(scheduler_at, 1);
}

void fiber_main()
{
    fiber *self = current;
    /* first stop: back to whoever created the fiber */
    if (!_setjmp(self->resume_at))
        setcontext(&creator);
    for (;;) {
        while (next_thread < block_threads) {
            const unsigned k = next_thread++;
            self->thread = reverse_order ? block_threads - 1 - k : k;
            set_thread_idx(self->thread);
            current_body(current_closure);
        }
        self->state = FIBER_FREE;
        yield(self);
    }
}

fiber *new_fiber()
{
    fiber *f = new fiber();
    /* a guard page below the stack: an overflow faults */
    void *mem = mmap(NULL, kStackBytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        delete f;
        return NULL;
    }
    mprotect(mem, kPage, PROT_NONE);
    f->stack = static_cast<unsigned char *>(mem) + kPage;
    getcontext(&f->start);
    f->start.uc_stack.ss_sp = f->stack;
    f->start.uc_stack.ss_size = kStackBytes;
    f->start.uc_link = NULL;
    makecontext(&f->start, fiber_main, 0);
    f->state = FIBER_FREE;
    current = f;
    swapcontext(&creator, &f->start);
    fibers.push_back(f);
    return f;
}

/* Runs the fiber until it yields. */
__attribute__((noinline)) void resume(fiber *f)
{
    current = f;
    if (f->state == FIBER_WAITING)
        set_thread_idx(f->thread);
    if (!_setjmp(scheduler_at))
        _longjmp(f->resume_at, 1);
}

bool run_block(unsigned n_threads)
{
    ++block_serial;
    block_threads = n_threads;
    next_thread = 0;
    std::vector<fiber *> waiting;
    size_t used = 0;
    /* start every thread */
    while (next_thread < n_threads) {
        fiber *f = used < fibers.size() ? fibers[used] : new_fiber();
        if (!f)
            return false;
        ++used;
        f->state = FIBER_FREE;
        resume(f);
        if (f->state == FIBER_WAITING)
            waiting.push_back(f);
    }
    /* release the barrier until no thread waits */
    while (!waiting.empty()) {
        race::barrier_released();
        std::vector<fiber *> still;
        if (reverse_order)
            std::reverse(waiting.begin(), waiting.end());
        for (fiber *f : waiting) {
            resume(f);
            if (f->state == FIBER_WAITING)
                still.push_back(f);
        }
        waiting.swap(still);
    }
    return true;
}

} // namespace

void shared_memory(void *p, size_t bytes)
{
    unsigned long long &filled = shared_filled[p];
    if (filled != block_serial) {
        memset(p, 0xff, bytes);
        filled = block_serial;
        race::shared_declared(p, bytes);
    }
}

void sync_threads()
{
    fiber *self = current;
    self->state = FIBER_WAITING;
    yield(self);
}

void run_grid(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void *), void *closure)
{
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    /* the limits of compute capability 9.0 */
    if (threads == 0 || threads > kMaxThreads || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
        grid.x > 2147483647u || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "cuda emulation: a launch of grid (%u, %u, %u) and block (%u, %u, %u) is invalid\n", grid.x,
                grid.y, grid.z, block.x, block.y, block.z);
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    /* the stream's device must be current (the null stream is the current
     * device's); the kernel reaches that device's memory only */
    const int device = stream ? stream->device : current_device;
    if (device != current_device) {
        fprintf(stderr, "cuda emulation: a launch on a stream of device %d while device %d is current\n", device,
                current_device);
        last_error = cudaErrorInvalidResourceHandle;
        return;
    }
    device_access open(device);
    grid_dim = grid;
    block_dim = block;
    current_body = body;
    current_closure = closure;
    struct race_watch {
        race_watch(dim3 g, dim3 b) { race::launch_begin(g.x, g.y, b.x, b.y); }
        ~race_watch() { race::launch_end(); }
    } watch(grid, block);
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                block_idx.x = reverse_order ? grid.x - 1 - x : x;
                block_idx.y = reverse_order ? grid.y - 1 - y : y;
                block_idx.z = reverse_order ? grid.z - 1 - z : z;
                race::block_begin((block_idx.z * grid.y + block_idx.y) * grid.x + block_idx.x);
                if (!run_block((unsigned)threads)) {
                    last_error = cudaErrorMemoryAllocation;
                    return;
                }
            }
}

} // namespace dc_emu

using namespace dc_emu;

/* ---- runtime ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = device_count;
    return cudaSuccess;
}

namespace {

bool valid_device(int device) { return device >= 0 && device < device_count; }

} // namespace

cudaError_t cudaSetDevice(int device)
{
    if (!valid_device(device))
        return last_error = cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!valid_device(device))
        return last_error = cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CUDA emulated on the CPU");
    prop->totalGlobalMem = kDeviceBytes;
    prop->multiProcessorCount = 1;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (!valid_device(device))
        return last_error = cudaErrorInvalidDevice;
    *value = attr == cudaDevAttrMultiProcessorCount ? 1 : attr == cudaDevAttrL2CacheSize ? 4 << 20 : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (!valid_device(device) || !valid_device(peer))
        return last_error = cudaErrorInvalidDevice;
    *can = device != peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    if (!valid_device(peer) || peer == current_device || flags != 0)
        return last_error = cudaErrorInvalidValue;
    bool &enabled = peer_enabled[current_device][peer];
    if (enabled)
        return last_error = cudaErrorPeerAccessAlreadyEnabled;
    enabled = true;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    if (!ptr)
        return last_error = cudaErrorInvalidValue;
    const size_t rounded = round_up(bytes, kPage);
    const int d = current_device;
    if (!region_reserve() || rounded > kDeviceBytes - region_used[d]) {
        *ptr = NULL;
        return last_error = cudaErrorMemoryAllocation;
    }
    unsigned char *p = device_base(d) + region_used[d];
    region_used[d] += rounded ? rounded : kPage;
    live[reinterpret_cast<uintptr_t>(p)] = allocation{bytes, d};
    static_assert(kPage % kAlign == 0, "allocations are page aligned");
    /* device memory starts out undefined: all bits set (a NaN in float32 and
     * float64), so a read before the first write shows in the results */
    {
        device_access open(d);
        memset(p, 0xff, bytes);
    }
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    auto it = live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live.end())
        return fail(cudaErrorInvalidDevicePointer, "%s %p (%zu): not the start of a live allocation", "cudaFree", ptr,
                    (size_t)0);
    /* addresses are never handed out twice; the whole huge pages of the
     * block go back to the system (the others stay whole) */
    const uintptr_t begin = round_up(it->first, kHuge), end = (it->first + it->second.bytes) / kHuge * kHuge;
    if (end > begin)
        madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
    race::released(ptr, it->second.bytes);
    live.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    if (bytes == 0)
        return cudaSuccess;
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault)
        return fail(cudaErrorInvalidValue, "%s %p (%zu bytes): only the three directions are emulated",
                    "cudaMemcpyAsync", dst, bytes);
    if (dst_dev ? !is_device_range(dst, bytes) : in_region(dst))
        return fail(cudaErrorInvalidValue, "%s: destination %p (%zu bytes) is not where the direction says",
                    "cudaMemcpyAsync", dst, bytes);
    if (src_dev ? !is_device_range(src, bytes) : in_region(src))
        return fail(cudaErrorInvalidValue, "%s: source %p (%zu bytes) is not where the direction says",
                    "cudaMemcpyAsync", src, bytes);
    device_access open;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t stream)
{
    (void)stream;
    if (!valid_device(dst_device) || !valid_device(src_device))
        return last_error = cudaErrorInvalidDevice;
    if (bytes == 0)
        return cudaSuccess;
    if (!is_device_range(dst, bytes, dst_device))
        return fail(cudaErrorInvalidValue, "%s: destination %p (%zu bytes) is not memory of the device named",
                    "cudaMemcpyPeerAsync", dst, bytes);
    if (!is_device_range(src, bytes, src_device))
        return fail(cudaErrorInvalidValue, "%s: source %p (%zu bytes) is not memory of the device named",
                    "cudaMemcpyPeerAsync", src, bytes);
    device_access open;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    (void)stream;
    if (bytes == 0)
        return cudaSuccess;
    if (!is_device_range(ptr, bytes))
        return fail(cudaErrorInvalidValue, "%s: %p (%zu bytes) is not device memory", "cudaMemsetAsync", ptr, bytes);
    device_access open;
    memset(ptr, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    *stream = new dc_emu_stream{flags, current_device};
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return cudaSuccess;
}

/* An event belongs to the device current when it was made. */
struct dc_emu_event {
    unsigned long long ns;
    bool recorded;
    int device;
};

unsigned long long dc_emu::clock_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new dc_emu_event{0, false, current_device};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    const int device = stream ? stream->device : current_device;
    if (device != event->device)
        return fail(cudaErrorInvalidResourceHandle, "%s %p (%zu): the event and the stream belong to different devices",
                    "cudaEventRecord", event, (size_t)0);
    event->ns = clock_ns();
    event->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!start->recorded || !end->recorded)
        return fail(cudaErrorInvalidValue, "%s %p (%zu): an event was not recorded", "cudaEventElapsedTime", end,
                    (size_t)0);
    if (start->device != end->device)
        return fail(cudaErrorInvalidResourceHandle, "%s %p (%zu): the events belong to different devices",
                    "cudaEventElapsedTime", end, (size_t)0);
    *ms = (float)((double)(end->ns - start->ns) * 1e-6);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags)
{
    (void)flags;
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}

cudaError_t cudaHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags)
{
    (void)flags;
    *device_ptr = host_ptr;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidDevicePointer:
        return "invalid device pointer";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorPeerAccessAlreadyEnabled:
        return "peer access is already enabled";
    }
    return "unknown error";
}

/* ---- cuBLAS ---- */

/* A handle belongs to the device current when it was made; cuBLAS is used
 * with that device current, on a stream of that device. */
struct dc_emu_blas {
    int device;
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = new dc_emu_blas{current_device, NULL};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    /* cuBLAS assumes the device of a handle current from its creation to
     * its destruction */
    if (handle->device != current_device) {
        /* the caller may ignore the status of a destruction: stop here */
        fprintf(stderr, "cuda emulation: cublasDestroy of a handle of device %d while device %d is current\n",
                handle->device, current_device);
        abort();
    }
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

namespace {

/* C = alpha op(A) op(B) + beta C, column-major, as cuBLAS defines it (C is
 * not read when beta is 0); the leading dimensions are checked as cuBLAS
 * checks them. */
template <typename T>
cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T *alpha, const T *a,
                    int lda, long long sa, const T *b, int ldb, long long sb, const T *beta, T *c, int ldc,
                    long long sc, int batch)
{
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) ||
        ldc < (m > 1 ? m : 1)) {
        fprintf(stderr, "cuda emulation: gemm m %d n %d k %d lda %d ldb %d ldc %d batch %d is invalid\n", m, n, k, lda,
                ldb, ldc, batch);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int stream_device = handle->stream ? handle->stream->device : current_device;
    if (handle->device != current_device || stream_device != handle->device) {
        fprintf(stderr, "cuda emulation: gemm with a handle of device %d on a stream of device %d, device %d current\n",
                handle->device, stream_device, current_device);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    device_access open(handle->device);
    for (int p = 0; p < batch; ++p) {
        const T *A = a + p * sa, *B = b + p * sb;
        T *C = c + p * sc;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                double s = 0;
                for (int l = 0; l < k; ++l) {
                    const double av = ta == CUBLAS_OP_N ? A[i + (long long)l * lda] : A[l + (long long)i * lda];
                    const double bv = tb == CUBLAS_OP_N ? B[l + (long long)j * ldb] : B[j + (long long)l * ldb];
                    s += av * bv;
                }
                T *cij = &C[i + (long long)j * ldc];
                *cij = (T)((double)*alpha * s + (*beta == 0 ? 0.0 : (double)*beta * (double)*cij));
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *a, int lda, long long sa,
                                         const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                                         long long sc, int batch)
{
    return gemm(handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *a, int lda, long long sa,
                                         const double *b, int ldb, long long sb, const double *beta, double *c,
                                         int ldc, long long sc, int batch)
{
    return gemm(handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
