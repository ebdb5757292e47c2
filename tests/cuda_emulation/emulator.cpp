/* The CPU emulation of the CUDA runtime, cuBLAS and cuSPARSE declared in
 * cuda_runtime.h, cublas_v2.h and cusparse.h here: device memory, streams
 * (every call completes before it returns), kernel launches, GEMM and the
 * sparse products, and the capture of a stream's work into a graph that runs
 * it again later. */
/* _longjmp between fibers' stacks: fortified longjmp would refuse it */
#undef _FORTIFY_SOURCE
#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "cusparse.h"
#include "race_check.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <setjmp.h>
#include <thread>
#include <utility>
#include <vector>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

struct dc_emu_capture;

/* A stream: every call on it completes before it returns, unless it
 * captures; it belongs to the device current when it was made. */
struct dc_emu_stream {
    unsigned flags;
    int device;
    dc_emu_capture *capture; /* the capture it records into, or null */
};

/* A graph's node: the work one captured call does when the graph runs. */
struct dc_emu_node {
    const char *what; /* the call captured */
    std::function<cudaError_t()> run;
};

/* A capture under way: begun on `origin` by `thread`. */
struct dc_emu_capture {
    cudaStream_t origin;
    cudaStreamCaptureMode mode;
    std::thread::id thread;
    unsigned long long serial; /* counts the captures begun */
    bool invalidated;
    std::vector<dc_emu_node> nodes;
};

/* A graph of the work captured on a stream of `device`, in order; an
 * executable graph is a copy of it (the captured closures are shared, never
 * changed). */
struct dc_emu_graph {
    int device;
    std::vector<dc_emu_node> nodes;
};
struct dc_emu_graph_exec {
    int device;
    std::vector<dc_emu_node> nodes;
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
/* DC_EMU_SMS: the multiprocessors each device reports, 1 to 1024 (1 unless
 * set), so that what a backend sizes by them (grids, chunks, scratch) can
 * take a real device's sizes: 132 for an H100 */
const int sm_count = [] {
    const char *e = getenv("DC_EMU_SMS");
    if (!e)
        return 1;
    char *end;
    const long n = strtol(e, &end, 10);
    if (*e == '\0' || *end != '\0' || n < 1 || n > 1024) {
        fprintf(stderr, "cuda emulation: DC_EMU_SMS=%s is not a count of multiprocessors from 1 to 1024\n", e);
        exit(2);
    }
    return (int)n;
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

/* ---- stream capture ----
 *
 * What CUDA documents (the Programming Guide's "Stream Capture": "Prohibited
 * and Unhandled Operations" and "Invalidation"; the runtime reference of
 * cudaStreamBeginCapture and cudaThreadExchangeStreamCaptureMode): work
 * queued on a capturing stream is recorded, not run; synchronizing with a
 * capture is invalid, and so is any use of the legacy stream while a blocking
 * stream captures; potentially unsafe calls are prohibited as the thread's
 * capture interaction mode says; an invalid call invalidates the capture,
 * whose stream then refuses work until cudaStreamEndCapture, which returns
 * no graph. */

std::vector<dc_emu_capture *> captures; /* those under way */
unsigned long long capture_serial;     /* the most recently begun */
const char *capture_broken_by;         /* what invalidated that one, if anything */
/* the thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode) */
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;

void invalidate(dc_emu_capture *c, const char *what, cudaError_t err)
{
    if (c->invalidated)
        return;
    c->invalidated = true;
    fprintf(stderr, "cuda emulation: %s while stream %p captures: %s; the capture is invalidated\n", what,
            (void *)c->origin, cudaGetErrorString(err));
    if (c->serial == capture_serial)
        capture_broken_by = what;
}

/* A use of the legacy (null) stream while a blocking stream of the current
 * device captures: cudaErrorStreamCaptureImplicit, and those captures are
 * invalidated if `breaks`. */
cudaError_t legacy_stream_use(const char *what, bool breaks = true)
{
    cudaError_t err = cudaSuccess;
    for (dc_emu_capture *c : captures)
        if (!(c->origin->flags & cudaStreamNonBlocking) && c->origin->device == current_device) {
            err = cudaErrorStreamCaptureImplicit;
            if (breaks)
                invalidate(c, what, err);
        }
    return err;
}

enum class queued { run, record, refused };

/* What becomes of work that `what` queues on `stream`: it runs now, it is
 * recorded into the stream's capture, or it is refused (*err says why, and
 * is the last error). */
queued queue_on(cudaStream_t stream, const char *what, cudaError_t *err)
{
    *err = cudaSuccess;
    if (!stream) {
        *err = legacy_stream_use(what);
        if (*err)
            last_error = *err;
        return *err ? queued::refused : queued::run;
    }
    if (!stream->capture)
        return queued::run;
    if (stream->capture->invalidated) {
        last_error = *err = cudaErrorStreamCaptureInvalidated;
        return queued::refused;
    }
    return queued::record;
}

void record(cudaStream_t stream, const char *what, std::function<cudaError_t()> run)
{
    stream->capture->nodes.push_back(dc_emu_node{what, std::move(run)});
}

/* A potentially unsafe call (cudaMalloc and the like): refused with
 * cudaErrorStreamCaptureUnsupported, and the captures that prohibit it
 * invalidated, where the thread's mode says so: in the modes global and
 * thread-local, a capture of this thread not begun in relaxed mode; in the
 * mode global, also a global capture of another thread. */
cudaError_t unsafe_call(const char *what)
{
    if (thread_capture_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    const std::thread::id self = std::this_thread::get_id();
    cudaError_t err = cudaSuccess;
    for (dc_emu_capture *c : captures) {
        const bool ours = c->thread == self;
        if ((ours && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!ours && c->mode == cudaStreamCaptureModeGlobal && thread_capture_mode == cudaStreamCaptureModeGlobal)) {
            err = cudaErrorStreamCaptureUnsupported;
            invalidate(c, what, err);
        }
    }
    if (err)
        last_error = err;
    return err;
}

/* A graph's node reaches device memory that was freed since the capture: a
 * device would fault. */
[[noreturn]] void stale_node(const char *what, const void *p, size_t bytes)
{
    fprintf(stderr, "cuda emulation: a graph's %s reaches %p (%zu bytes), which is no longer allocated device memory\n",
            what, p, bytes);
    abort();
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

namespace {

/* Runs the grid on `device`, whose memory it opens. */
cudaError_t execute_grid(int device, dim3 grid, dim3 block, void (*body)(void *), void *closure)
{
    const unsigned threads = block.x * block.y * block.z;
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
                if (!run_block(threads))
                    return last_error = cudaErrorMemoryAllocation;
            }
    return cudaSuccess;
}

} // namespace

void run_grid(dim3 grid, dim3 block, cudaStream_t stream, void (*body)(void *), void *closure,
              void *(*copy)(const void *), void (*destroy)(void *))
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
    cudaError_t err;
    switch (queue_on(stream, "cudaLaunchKernel", &err)) {
    case queued::refused:
        return;
    case queued::record: {
        /* the arguments as they are now, converted to the parameters' types:
         * a captured launch copies them as a launch does */
        const std::shared_ptr<void> saved(copy(closure), destroy);
        record(stream, "cudaLaunchKernel",
               [device, grid, block, body, saved] { return execute_grid(device, grid, block, body, saved.get()); });
        return;
    }
    case queued::run:
        execute_grid(device, grid, block, body, closure);
        return;
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
    prop->multiProcessorCount = sm_count;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (!valid_device(device))
        return last_error = cudaErrorInvalidDevice;
    *value = attr == cudaDevAttrMultiProcessorCount ? sm_count : attr == cudaDevAttrL2CacheSize ? 4 << 20 : 0;
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
    if (cudaError_t err = unsafe_call("cudaMalloc")) {
        *ptr = NULL;
        return err;
    }
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
    /* cudaFree(NULL) too: it is unsafe in a capture as any cudaFree */
    if (cudaError_t err = unsafe_call("cudaFree"))
        return err;
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
    cudaError_t err;
    const queued how = queue_on(stream, "cudaMemcpyAsync", &err);
    if (how == queued::refused)
        return err;
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
    if (how == queued::record) {
        /* host memory, pinned or pageable, is read or written when the graph
         * runs, as a memcpy node does */
        record(stream, "cudaMemcpyAsync", [dst, src, bytes, dst_dev, src_dev] {
            if (dst_dev && !is_device_range(dst, bytes))
                stale_node("cudaMemcpyAsync", dst, bytes);
            if (src_dev && !is_device_range(src, bytes))
                stale_node("cudaMemcpyAsync", src, bytes);
            device_access open;
            memmove(dst, src, bytes);
            return cudaSuccess;
        });
        return cudaSuccess;
    }
    device_access open;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t stream)
{
    if (!valid_device(dst_device) || !valid_device(src_device))
        return last_error = cudaErrorInvalidDevice;
    cudaError_t err;
    const queued how = queue_on(stream, "cudaMemcpyPeerAsync", &err);
    if (how == queued::refused)
        return err;
    if (bytes == 0)
        return cudaSuccess;
    if (!is_device_range(dst, bytes, dst_device))
        return fail(cudaErrorInvalidValue, "%s: destination %p (%zu bytes) is not memory of the device named",
                    "cudaMemcpyPeerAsync", dst, bytes);
    if (!is_device_range(src, bytes, src_device))
        return fail(cudaErrorInvalidValue, "%s: source %p (%zu bytes) is not memory of the device named",
                    "cudaMemcpyPeerAsync", src, bytes);
    if (how == queued::record) {
        record(stream, "cudaMemcpyPeerAsync", [dst, dst_device, src, src_device, bytes] {
            if (!is_device_range(dst, bytes, dst_device))
                stale_node("cudaMemcpyPeerAsync", dst, bytes);
            if (!is_device_range(src, bytes, src_device))
                stale_node("cudaMemcpyPeerAsync", src, bytes);
            device_access open;
            memmove(dst, src, bytes);
            return cudaSuccess;
        });
        return cudaSuccess;
    }
    device_access open;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    cudaError_t err;
    const queued how = queue_on(stream, "cudaMemsetAsync", &err);
    if (how == queued::refused)
        return err;
    if (bytes == 0)
        return cudaSuccess;
    if (!is_device_range(ptr, bytes))
        return fail(cudaErrorInvalidValue, "%s: %p (%zu bytes) is not device memory", "cudaMemsetAsync", ptr, bytes);
    if (how == queued::record) {
        record(stream, "cudaMemsetAsync", [ptr, value, bytes] {
            if (!is_device_range(ptr, bytes))
                stale_node("cudaMemsetAsync", ptr, bytes);
            device_access open;
            memset(ptr, value, bytes);
            return cudaSuccess;
        });
        return cudaSuccess;
    }
    device_access open;
    memset(ptr, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    if (cudaError_t err = unsafe_call("cudaStreamCreateWithFlags"))
        return err;
    *stream = new dc_emu_stream{flags, current_device, nullptr};
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    /* the emulation's choice (CUDA does not say): a capturing stream stays,
     * and its capture can only fail */
    if (stream && stream->capture) {
        if (!stream->capture->invalidated)
            invalidate(stream->capture, "cudaStreamDestroy", cudaErrorStreamCaptureUnsupported);
        return last_error = cudaErrorStreamCaptureUnsupported;
    }
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    if (!stream) {
        const cudaError_t err = legacy_stream_use("cudaStreamSynchronize");
        return err ? last_error = err : cudaSuccess;
    }
    if (dc_emu_capture *c = stream->capture) {
        if (c->invalidated)
            return last_error = cudaErrorStreamCaptureInvalidated;
        invalidate(c, "cudaStreamSynchronize", cudaErrorStreamCaptureUnsupported);
        return last_error = cudaErrorStreamCaptureUnsupported;
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t err = cudaSuccess;
    for (dc_emu_capture *c : captures)
        if (c->origin->device == current_device) {
            err = cudaErrorStreamCaptureUnsupported;
            invalidate(c, "cudaDeviceSynchronize", err);
        }
    return err ? last_error = err : cudaSuccess;
}

/* An event belongs to the device current when it was made. */
struct dc_emu_event {
    unsigned long long ns;
    bool recorded;
    int device;
    unsigned long long captured_in; /* the capture it was last recorded in, or 0 */
};

unsigned long long dc_emu::clock_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new dc_emu_event{0, false, current_device, 0};
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
    cudaError_t err;
    switch (queue_on(stream, "cudaEventRecord", &err)) {
    case queued::refused:
        return err;
    case queued::record:
        /* a captured event: it stands for work of the graph, and nothing
         * can wait for it or time it */
        event->captured_in = stream->capture->serial;
        event->recorded = false;
        return cudaSuccess;
    case queued::run:
        break;
    }
    event->ns = clock_ns();
    event->recorded = true;
    event->captured_in = 0;
    return cudaSuccess;
}

namespace {

/* An event last recorded in a capture cannot be waited for or timed
 * (cudaErrorCapturedEvent); its capture, if still under way, is invalidated.
 * The emulation keeps refusing it after the capture ends, until it is
 * recorded outside a capture again. */
cudaError_t captured_event_use(cudaEvent_t event, const char *what)
{
    if (!event->captured_in)
        return cudaSuccess;
    for (dc_emu_capture *c : captures)
        if (c->serial == event->captured_in)
            invalidate(c, what, cudaErrorCapturedEvent);
    return last_error = cudaErrorCapturedEvent;
}

} // namespace

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return captured_event_use(event, "cudaEventSynchronize");
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (cudaError_t err = captured_event_use(start, "cudaEventElapsedTime"))
        return err;
    if (cudaError_t err = captured_event_use(end, "cudaEventElapsedTime"))
        return err;
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
    if (cudaError_t err = unsafe_call("cudaHostAlloc"))
        return err;
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
    if (cudaError_t err = unsafe_call("cudaFreeHost"))
        return err;
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
    case cudaErrorIllegalState:
        return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent:
        return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
        return "attempt to terminate a thread-local capture sequence from another thread";
    }
    return "unknown error";
}

/* ---- stream capture and graphs ---- */

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    /* "Capture may not be initiated if stream is cudaStreamLegacy" */
    if (!stream)
        return fail(cudaErrorStreamCaptureUnsupported, "%s %p (%zu): the legacy stream cannot capture",
                    "cudaStreamBeginCapture", stream, (size_t)0);
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue, "%s %p (%zu): no such capture mode", "cudaStreamBeginCapture", stream,
                    (size_t)mode);
    if (stream->capture)
        return fail(cudaErrorIllegalState, "%s %p (%zu): the stream captures already", "cudaStreamBeginCapture",
                    stream, (size_t)0);
    dc_emu_capture *c = new dc_emu_capture{stream, mode, std::this_thread::get_id(), ++capture_serial, false, {}};
    captures.push_back(c);
    stream->capture = c;
    capture_broken_by = NULL;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    if (!graph)
        return last_error = cudaErrorInvalidValue;
    if (!stream || !stream->capture)
        return fail(cudaErrorIllegalState, "%s %p (%zu): the stream does not capture", "cudaStreamEndCapture", stream,
                    (size_t)0);
    dc_emu_capture *c = stream->capture;
    /* "If mode is not cudaStreamCaptureModeRelaxed, cudaStreamEndCapture must
     * be called on this stream from the same thread" */
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
        return last_error = cudaErrorStreamCaptureWrongThread;
    captures.erase(std::find(captures.begin(), captures.end(), c));
    stream->capture = nullptr;
    const bool invalidated = c->invalidated;
    if (!invalidated)
        *graph = new dc_emu_graph{stream->device, std::move(c->nodes)};
    else
        *graph = NULL;
    delete c;
    return invalidated ? last_error = cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status)
{
    if (!status)
        return last_error = cudaErrorInvalidValue;
    if (!stream) {
        /* reported, the capture left as it is */
        if (cudaError_t err = legacy_stream_use("cudaStreamIsCapturing", false))
            return last_error = err;
        *status = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    *status = !stream->capture ? cudaStreamCaptureStatusNone
              : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                             : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode)
{
    if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                  *mode != cudaStreamCaptureModeRelaxed))
        return last_error = cudaErrorInvalidValue;
    std::swap(*mode, thread_capture_mode);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    if (!exec || !graph)
        return last_error = cudaErrorInvalidValue;
    if (flags & ~(unsigned long long)(cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority))
        return fail(cudaErrorInvalidValue, "%s %p (flags %#zx): only the flags auto free on launch and node priority are emulated",
                    "cudaGraphInstantiate", graph, (size_t)flags);
    *exec = new dc_emu_graph_exec{graph->device, graph->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    if (!exec)
        return last_error = cudaErrorInvalidValue;
    cudaError_t err;
    switch (queue_on(stream, "cudaGraphLaunch", &err)) {
    case queued::refused:
        return err;
    case queued::record:
        /* the emulation's choice: it does not nest graphs */
        invalidate(stream->capture, "cudaGraphLaunch", cudaErrorStreamCaptureUnsupported);
        return last_error = cudaErrorStreamCaptureUnsupported;
    case queued::run:
        break;
    }
    const int device = stream ? stream->device : current_device;
    if (device != exec->device)
        return fail(cudaErrorInvalidValue, "%s %p (%zu): a graph of another device's stream, launched on this one's",
                    "cudaGraphLaunch", exec, (size_t)device);
    if (device != current_device)
        return fail(cudaErrorInvalidResourceHandle, "%s %p (%zu): a launch on a stream of a device that is not current",
                    "cudaGraphLaunch", exec, (size_t)device);
    for (const dc_emu_node &node : exec->nodes)
        if (cudaError_t e = node.run())
            return last_error = e;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (!exec)
        return last_error = cudaErrorInvalidValue;
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    if (!graph)
        return last_error = cudaErrorInvalidValue;
    delete graph;
    return cudaSuccess;
}

extern "C" const char *dc_emu_capture_broken_by(void) { return capture_broken_by; }

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
void gemm_on(int device, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T *a, int lda,
             long long sa, const T *b, int ldb, long long sb, T beta, T *c, int ldc, long long sc, int batch)
{
    device_access open(device);
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
                *cij = (T)((double)alpha * s + (beta == 0 ? 0.0 : (double)beta * (double)*cij));
            }
    }
}

template <typename T>
cublasStatus_t gemm(const char *what, cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const T *alpha, const T *a, int lda, long long sa, const T *b, int ldb, long long sb,
                    const T *beta, T *c, int ldc, long long sc, int batch)
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
    const int device = handle->device;
    cudaError_t err;
    switch (queue_on(handle->stream, what, &err)) {
    case queued::refused:
        fprintf(stderr, "cuda emulation: %s: %s\n", what, cudaGetErrorString(err));
        return CUBLAS_STATUS_EXECUTION_FAILED;
    case queued::record: {
        /* the host pointer mode: alpha and beta as they are now */
        const T al = *alpha, be = *beta;
        record(handle->stream, what, [=] {
            gemm_on(device, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch);
            return cudaSuccess;
        });
        return CUBLAS_STATUS_SUCCESS;
    }
    case queued::run:
        break;
    }
    gemm_on(device, ta, tb, m, n, k, *alpha, a, lda, sa, b, ldb, sb, *beta, c, ldc, sc, batch);
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *a, int lda, long long sa,
                                         const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                                         long long sc, int batch)
{
    return gemm("cublasSgemmStridedBatched", handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                batch);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *a, int lda, long long sa,
                                         const double *b, int ldb, long long sb, const double *beta, double *c,
                                         int ldc, long long sc, int batch)
{
    return gemm("cublasDgemmStridedBatched", handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                batch);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                           float *c, int ldc)
{
    return gemm("cublasSgemm", handle, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *a, int lda, const double *b, int ldb,
                           const double *beta, double *c, int ldc)
{
    return gemm("cublasDgemm", handle, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/* ---- cuSPARSE ---- */

/* A handle, like cuBLAS's, belongs to the device current when it was made. */
struct dc_emu_sparse {
    int device;
    cudaStream_t stream;
};

struct dc_emu_sp_mat {
    int64_t rows, cols, nnz;
    void *ptr, *idx, *values;
    bool wide;
    cudaDataType type;
};

struct dc_emu_dn_mat {
    int64_t rows, cols, ld;
    void *values;
    cudaDataType type;
};

struct dc_emu_dn_vec {
    int64_t size;
    void *values;
    cudaDataType type;
};

namespace {

/* the workspace each call asks for */
const size_t kSparseWorkspace = 256;

cusparseStatus_t sparse_invalid(const char *what, const char *why)
{
    fprintf(stderr, "cuda emulation: %s: %s\n", what, why);
    return CUSPARSE_STATUS_INVALID_VALUE;
}

bool sparse_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

bool sparse_type_ok(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_64F; }

/* DC_EMU_CUSPARSE_REFUSE=1: the _bufferSize calls answer that the layout is
 * not supported, as cuSPARSE may for an algorithm and layout it lacks */
cusparseStatus_t sparse_sized(cusparseStatus_t checked, size_t *bytes)
{
    if (checked != CUSPARSE_STATUS_SUCCESS)
        return checked;
    const char *refuse = getenv("DC_EMU_CUSPARSE_REFUSE");
    if (refuse && strcmp(refuse, "1") == 0)
        return CUSPARSE_STATUS_NOT_SUPPORTED;
    *bytes = kSparseWorkspace;
    return CUSPARSE_STATUS_SUCCESS;
}

/* Where the call runs, as gemm() decides it; the work is `run`, which reads
 * the operands when it runs (now, or when a captured graph runs). */
cusparseStatus_t sparse_queue(const char *what, cusparseHandle_t handle, std::function<void()> run)
{
    const int stream_device = handle->stream ? handle->stream->device : current_device;
    if (handle->device != current_device || stream_device != handle->device) {
        fprintf(stderr, "cuda emulation: %s with a handle of device %d on a stream of device %d, device %d current\n",
                what, handle->device, stream_device, current_device);
        return CUSPARSE_STATUS_EXECUTION_FAILED;
    }
    cudaError_t err;
    switch (queue_on(handle->stream, what, &err)) {
    case queued::refused:
        fprintf(stderr, "cuda emulation: %s: %s\n", what, cudaGetErrorString(err));
        return CUSPARSE_STATUS_EXECUTION_FAILED;
    case queued::record:
        record(handle->stream, what, [run] {
            run();
            return cudaSuccess;
        });
        return CUSPARSE_STATUS_SUCCESS;
    case queued::run:
        break;
    }
    run();
    return CUSPARSE_STATUS_SUCCESS;
}

int64_t sparse_index(const void *p, bool wide, int64_t i)
{
    return wide ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

/* C[i, c] = alpha sum over A's row i, in its order, of A[i, j] B[j, c] +
 * beta C[i, c] (C not read when beta is 0); B and C row-major with n
 * columns and leading dimensions ldb, ldc. */
template <typename T>
void csr_product(int device, const dc_emu_sp_mat &a, const T *b, int64_t ldb, T *c, int64_t ldc, int64_t n, T alpha,
                 T beta)
{
    device_access open(device);
    const T *vals = (const T *)a.values;
    for (int64_t i = 0; i < a.rows; ++i)
        for (int64_t col = 0; col < n; ++col) {
            T acc = 0;
            for (int64_t p = sparse_index(a.ptr, a.wide, i); p < sparse_index(a.ptr, a.wide, i + 1); ++p)
                acc += vals[p] * b[sparse_index(a.idx, a.wide, p) * ldb + col];
            T *o = &c[i * ldc + col];
            *o = beta == 0 ? alpha * acc : alpha * acc + beta * *o;
        }
}

/* C's values[p] = alpha sum over l of A[i, l] B[j, l] + beta values[p], for
 * entry p at (i, j); A and B row-major with k columns. */
template <typename T>
void sampled_product(int device, const dc_emu_sp_mat &c, const T *a, int64_t lda, const T *b, int64_t ldb, int64_t k,
                     T alpha, T beta)
{
    device_access open(device);
    T *vals = (T *)c.values;
    for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t p = sparse_index(c.ptr, c.wide, i); p < sparse_index(c.ptr, c.wide, i + 1); ++p) {
            const int64_t j = sparse_index(c.idx, c.wide, p);
            T acc = 0;
            for (int64_t l = 0; l < k; ++l)
                acc += a[i * lda + l] * b[j * ldb + l];
            vals[p] = beta == 0 ? alpha * acc : alpha * acc + beta * vals[p];
        }
}

template <typename T> T host_scalar(const void *p) { return *(const T *)p; }

/* SpMM and SpMV (a vector is a matrix of one column): the checks, then the
 * product. */
cusparseStatus_t spmm(const char *what, cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                      const void *alpha, const dc_emu_sp_mat *a, const void *b, int64_t b_rows, int64_t n, int64_t ldb,
                      cudaDataType b_type, const void *beta, void *c, int64_t c_rows, int64_t c_cols, int64_t ldc,
                      cudaDataType c_type, cudaDataType compute, bool alg_ok, bool sizing, void *buffer)
{
    if (!handle || !a || !b || !c || !alpha || !beta)
        return sparse_invalid(what, "a handle, descriptor or scalar is NULL");
    if (op_a != CUSPARSE_OPERATION_NON_TRANSPOSE || op_b != CUSPARSE_OPERATION_NON_TRANSPOSE || !alg_ok)
        return CUSPARSE_STATUS_NOT_SUPPORTED;
    if (a->type != compute || b_type != compute || c_type != compute)
        return sparse_invalid(what, "the value types differ from the compute type");
    if (a->cols != b_rows || a->rows != c_rows || n != c_cols)
        return sparse_invalid(what, "the sizes of A, B and C do not agree");
    if (ldb < n || ldc < n)
        return sparse_invalid(what, "a leading dimension is below the row length");
    if (!sparse_aligned(b) || !sparse_aligned(c))
        return sparse_invalid(what, "a dense array is not aligned to 16 bytes");
    if (sizing)
        return CUSPARSE_STATUS_SUCCESS;
    if (!buffer)
        return sparse_invalid(what, "no workspace");
    const dc_emu_sp_mat m = *a;
    const int device = handle->device;
    if (compute == CUDA_R_32F) {
        const float al = host_scalar<float>(alpha), be = host_scalar<float>(beta);
        return sparse_queue(what, handle,
                            [=] { csr_product(device, m, (const float *)b, ldb, (float *)c, ldc, n, al, be); });
    }
    const double al = host_scalar<double>(alpha), be = host_scalar<double>(beta);
    return sparse_queue(what, handle,
                        [=] { csr_product(device, m, (const double *)b, ldb, (double *)c, ldc, n, al, be); });
}

cusparseStatus_t sddmm(const char *what, cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                       const void *alpha, const dc_emu_dn_mat *a, const dc_emu_dn_mat *b, const void *beta,
                       const dc_emu_sp_mat *c, cudaDataType compute, cusparseSDDMMAlg_t alg, bool sizing, void *buffer)
{
    if (!handle || !a || !b || !c || !alpha || !beta)
        return sparse_invalid(what, "a handle, descriptor or scalar is NULL");
    /* the backend's form: A (m x k) times B^T, B stored n x k */
    if (op_a != CUSPARSE_OPERATION_NON_TRANSPOSE || op_b != CUSPARSE_OPERATION_TRANSPOSE ||
        alg != CUSPARSE_SDDMM_ALG_DEFAULT)
        return CUSPARSE_STATUS_NOT_SUPPORTED;
    if (a->type != compute || b->type != compute || c->type != compute)
        return sparse_invalid(what, "the value types differ from the compute type");
    if (a->rows != c->rows || b->rows != c->cols || a->cols != b->cols)
        return sparse_invalid(what, "the sizes of A, B and C do not agree");
    if (sizing)
        return CUSPARSE_STATUS_SUCCESS;
    if (!buffer)
        return sparse_invalid(what, "no workspace");
    const dc_emu_sp_mat m = *c;
    const int device = handle->device;
    const int64_t lda = a->ld, ldb = b->ld, k = a->cols;
    const void *av = a->values, *bv = b->values;
    if (compute == CUDA_R_32F) {
        const float al = host_scalar<float>(alpha), be = host_scalar<float>(beta);
        return sparse_queue(what, handle, [=] {
            sampled_product(device, m, (const float *)av, lda, (const float *)bv, ldb, k, al, be);
        });
    }
    const double al = host_scalar<double>(alpha), be = host_scalar<double>(beta);
    return sparse_queue(
        what, handle, [=] { sampled_product(device, m, (const double *)av, lda, (const double *)bv, ldb, k, al, be); });
}

} // namespace

cusparseStatus_t cusparseCreate(cusparseHandle_t *handle)
{
    *handle = new dc_emu_sparse{current_device, NULL};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroy(cusparseHandle_t handle)
{
    if (handle->device != current_device) {
        fprintf(stderr, "cuda emulation: cusparseDestroy of a handle of device %d while device %d is current\n",
                handle->device, current_device);
        abort();
    }
    delete handle;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t stream)
{
    handle->stream = stream;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSetPointerMode(cusparseHandle_t, cusparsePointerMode_t mode)
{
    return mode == CUSPARSE_POINTER_MODE_HOST ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_NOT_SUPPORTED;
}

cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t *descr, int64_t rows, int64_t cols, int64_t nnz,
                                   void *row_offsets, void *col_ind, void *values, cusparseIndexType_t row_type,
                                   cusparseIndexType_t col_type, cusparseIndexBase_t base, cudaDataType value_type)
{
    const char *what = "cusparseCreateCsr";
    if (!descr || rows < 0 || cols < 0 || nnz < 0 || !row_offsets || (nnz > 0 && (!col_ind || !values)))
        return sparse_invalid(what, "a size is negative or an array NULL");
    if (row_type != col_type || base != CUSPARSE_INDEX_BASE_ZERO || !sparse_type_ok(value_type))
        return sparse_invalid(what, "index or value type not emulated");
    if (row_type == CUSPARSE_INDEX_32I && (rows > INT32_MAX || cols > INT32_MAX || nnz > INT32_MAX))
        return sparse_invalid(what, "sizes beyond 32-bit indices");
    if (!sparse_aligned(row_offsets) || !sparse_aligned(col_ind) || !sparse_aligned(values))
        return sparse_invalid(what, "an array is not aligned to 16 bytes");
    *descr =
        new dc_emu_sp_mat{rows, cols, nnz, row_offsets, col_ind, values, row_type == CUSPARSE_INDEX_64I, value_type};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroySpMat(cusparseConstSpMatDescr_t descr)
{
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t *descr, int64_t rows, int64_t cols, int64_t ld, void *values,
                                     cudaDataType value_type, cusparseOrder_t order)
{
    const char *what = "cusparseCreateDnMat";
    if (!descr || rows < 0 || cols < 0 || !values || !sparse_type_ok(value_type) || order != CUSPARSE_ORDER_ROW)
        return sparse_invalid(what, "a size is negative, the values NULL or a type not emulated");
    if (ld < cols)
        return sparse_invalid(what, "the leading dimension is below the number of columns (row-major)");
    if (!sparse_aligned(values))
        return sparse_invalid(what, "the values are not aligned to 16 bytes");
    *descr = new dc_emu_dn_mat{rows, cols, ld, values, value_type};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroyDnMat(cusparseConstDnMatDescr_t descr)
{
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateDnVec(cusparseDnVecDescr_t *descr, int64_t size, void *values, cudaDataType value_type)
{
    if (!descr || size < 0 || !values || !sparse_type_ok(value_type) || !sparse_aligned(values))
        return sparse_invalid("cusparseCreateDnVec",
                              "a negative size, NULL or misaligned values or a type not emulated");
    *descr = new dc_emu_dn_vec{size, values, value_type};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroyDnVec(cusparseConstDnVecDescr_t descr)
{
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSpMV_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, const void *alpha,
                                         cusparseConstSpMatDescr_t a, cusparseConstDnVecDescr_t x, const void *beta,
                                         cusparseDnVecDescr_t y, cudaDataType compute_type, cusparseSpMVAlg_t alg,
                                         size_t *bytes)
{
    if (!x || !y || !bytes)
        return sparse_invalid("cusparseSpMV_bufferSize", "a descriptor or the size is NULL");
    const cusparseStatus_t s = spmm("cusparseSpMV_bufferSize", handle, op_a, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, a,
                                    x->values, x->size, 1, 1, x->type, beta, y->values, y->size, 1, 1, y->type,
                                    compute_type, alg == CUSPARSE_SPMV_CSR_ALG2, true, NULL);
    return sparse_sized(s, bytes);
}

cusparseStatus_t cusparseSpMV(cusparseHandle_t handle, cusparseOperation_t op_a, const void *alpha,
                              cusparseConstSpMatDescr_t a, cusparseConstDnVecDescr_t x, const void *beta,
                              cusparseDnVecDescr_t y, cudaDataType compute_type, cusparseSpMVAlg_t alg, void *buffer)
{
    if (!x || !y)
        return sparse_invalid("cusparseSpMV", "a descriptor is NULL");
    return spmm("cusparseSpMV", handle, op_a, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, a, x->values, x->size, 1, 1,
                x->type, beta, y->values, y->size, 1, 1, y->type, compute_type, alg == CUSPARSE_SPMV_CSR_ALG2, false,
                buffer);
}

cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                         const void *alpha, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                                         const void *beta, cusparseDnMatDescr_t c, cudaDataType compute_type,
                                         cusparseSpMMAlg_t alg, size_t *bytes)
{
    if (!b || !c || !bytes)
        return sparse_invalid("cusparseSpMM_bufferSize", "a descriptor or the size is NULL");
    const cusparseStatus_t s =
        spmm("cusparseSpMM_bufferSize", handle, op_a, op_b, alpha, a, b->values, b->rows, b->cols, b->ld, b->type, beta,
             c->values, c->rows, c->cols, c->ld, c->type, compute_type, alg == CUSPARSE_SPMM_CSR_ALG3, true, NULL);
    return sparse_sized(s, bytes);
}

cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                              const void *alpha, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                              const void *beta, cusparseDnMatDescr_t c, cudaDataType compute_type,
                              cusparseSpMMAlg_t alg, void *buffer)
{
    if (!b || !c)
        return sparse_invalid("cusparseSpMM", "a descriptor is NULL");
    return spmm("cusparseSpMM", handle, op_a, op_b, alpha, a, b->values, b->rows, b->cols, b->ld, b->type, beta,
                c->values, c->rows, c->cols, c->ld, c->type, compute_type, alg == CUSPARSE_SPMM_CSR_ALG3, false,
                buffer);
}

cusparseStatus_t cusparseSDDMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                          const void *alpha, cusparseConstDnMatDescr_t a, cusparseConstDnMatDescr_t b,
                                          const void *beta, cusparseSpMatDescr_t c, cudaDataType compute_type,
                                          cusparseSDDMMAlg_t alg, size_t *bytes)
{
    if (!bytes)
        return sparse_invalid("cusparseSDDMM_bufferSize", "the size is NULL");
    const cusparseStatus_t s =
        sddmm("cusparseSDDMM_bufferSize", handle, op_a, op_b, alpha, a, b, beta, c, compute_type, alg, true, NULL);
    return sparse_sized(s, bytes);
}

cusparseStatus_t cusparseSDDMM(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                               const void *alpha, cusparseConstDnMatDescr_t a, cusparseConstDnMatDescr_t b,
                               const void *beta, cusparseSpMatDescr_t c, cudaDataType compute_type,
                               cusparseSDDMMAlg_t alg, void *buffer)
{
    return sddmm("cusparseSDDMM", handle, op_a, op_b, alpha, a, b, beta, c, compute_type, alg, false, buffer);
}
