/* The race check of the emulated kernels (see race_check.h), and the entry
 * points of gcc's ThreadSanitizer instrumentation that feed it. This file
 * itself is compiled without the instrumentation. */
#include "race_check.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace dc_emu {
namespace race {

namespace {

constexpr size_t kWord = 4;
constexpr size_t kPage = 4096;

/* who accessed a word: a thread of a block, between two barriers, and the
 * code that did, as its distance from code_anchor (the program is far
 * smaller than 2 GiB; 16 bytes in all rather than 24) */
struct accessor {
    uint32_t block, phase;
    int32_t code;
    uint16_t thread;
};

enum : uint16_t {
    WRITTEN = 1,         /* `write` is the last write */
    READ = 2,            /* `read` is the last read since that write */
    READ_BY_BLOCKS = 4,  /* and `other`, of another block, read it too */
    READ_BY_THREADS = 8, /* and other threads of read.block read it in read.phase,
                            `other` one of them unless READ_BY_BLOCKS */
};

/* What one word saw in the launch `launch`; a record of an earlier launch
 * counts as empty (a launch is ordered after everything before it). */
struct word_record {
    uint32_t launch;
    uint16_t flags;
    accessor write, read, other;
};
static_assert(sizeof(word_record) == 56, "14 bytes of record per byte of memory watched");

struct shared_variable {
    const unsigned char *begin, *end;
    std::vector<word_record> words;
};

const bool requested = [] {
    const char *e = getenv("DC_EMU_RACECHECK");
    return e && strcmp(e, "1") == 0;
}();

/* set only while a kernel runs with the check on: every instrumented access
 * outside one returns at its first test */
bool in_kernel;
uint32_t launch_serial;
unsigned grid_x, grid_y, block_x, block_y;
accessor current; /* the running thread (its code set per access) */

const unsigned char *device_begin;
size_t device_bytes;
word_record *device_words;                     /* one per word of [device_begin, + device_bytes) */
std::vector<shared_variable> shared_variables; /* those of this launch */

/* p's offset in the watched device memory; beyond device_bytes where p is
 * outside it (the difference wraps around below it) */
uintptr_t device_offset(const unsigned char *p) { return (uintptr_t)p - (uintptr_t)device_begin; }

word_record *record_of(const unsigned char *p)
{
    const uintptr_t offset = device_offset(p);
    if (offset < device_bytes)
        return &device_words[offset / kWord];
    for (shared_variable &v : shared_variables) {
        const uintptr_t in_variable = (uintptr_t)p - (uintptr_t)v.begin;
        if (in_variable < (uintptr_t)(v.end - v.begin))
            return &v.words[in_variable / kWord];
    }
    return nullptr;
}

void code_anchor() {}

void print_accessor(const accessor &a)
{
    const void *pc = (const void *)((intptr_t)&code_anchor + a.code);
    fprintf(stderr, "block (%u, %u, %u) thread (%u, %u, %u)", a.block % grid_x, a.block / grid_x % grid_y,
            a.block / (grid_x * grid_y), a.thread % block_x, a.thread / block_x % block_y,
            a.thread / (block_x * block_y));
    Dl_info info;
    if (dladdr(pc, &info) && info.dli_fname)
        fprintf(stderr, " at %s+%#lx", info.dli_fname,
                (unsigned long)((const unsigned char *)pc - (const unsigned char *)info.dli_fbase));
}

[[noreturn]] void report(const unsigned char *word, bool write, const char *earlier_kind, const accessor &earlier)
{
    fprintf(stderr, "cuda emulation: race on the %s word at %p: a %s by ",
            device_offset(word) < device_bytes ? "device memory" : "__shared__",
            (const void *)word, write ? "write" : "read");
    print_accessor(current);
    fprintf(stderr, " after a %s by ", earlier_kind);
    print_accessor(earlier);
    fprintf(stderr, "%s (`addr2line -f -C -e FILE OFFSET` names the code)\n",
            earlier.block == current.block ? ", in the same block between the same two barriers"
                                           : ", in another block (nothing orders the blocks of a kernel)");
    fflush(stderr);
    /* not abort(): a test framework that catches it would go on from inside
     * a kernel's coroutine */
    _exit(1);
}

/* An earlier access by `a` and the current one are unordered: different
 * blocks, or different threads of one block between the same two barriers. */
bool unordered(const accessor &a)
{
    return a.block != current.block || (a.thread != current.thread && a.phase == current.phase);
}

void check_word(const unsigned char *word, bool write)
{
    word_record *r = record_of(word);
    if (!r)
        return;
    if (r->launch != launch_serial) {
        *r = word_record{};
        r->launch = launch_serial;
    }
    if ((r->flags & WRITTEN) && unordered(r->write))
        report(word, write, "write", r->write);
    if (write) {
        if (r->flags & READ) {
            if (unordered(r->read))
                report(word, true, "read", r->read);
            /* from here read.block is this block */
            if (r->flags & READ_BY_BLOCKS)
                report(word, true, "read", r->other);
            /* and read.thread this thread */
            if ((r->flags & READ_BY_THREADS) && r->read.phase == current.phase)
                report(word, true, "read", r->other);
        }
        /* the reads before are ordered before this write, so whatever
         * races with one of them races with the write too */
        r->flags = WRITTEN;
        r->write = current;
        return;
    }
    if (!(r->flags & READ)) {
        r->flags |= READ;
        r->read = current;
    } else if (r->read.block != current.block) {
        r->other = r->read;
        r->flags = (uint16_t)((r->flags | READ_BY_BLOCKS) & ~READ_BY_THREADS);
        r->read = current;
    } else if (r->read.phase != current.phase) {
        r->flags &= (uint16_t)~READ_BY_THREADS;
        r->read = current;
    } else if (r->read.thread != current.thread && !(r->flags & READ_BY_THREADS)) {
        if (!(r->flags & READ_BY_BLOCKS))
            r->other = current;
        r->flags |= READ_BY_THREADS;
    }
}

inline void access(const void *p, size_t bytes, bool write, const void *pc)
{
    if (!in_kernel)
        return;
    current.code = (int32_t)((intptr_t)pc - (intptr_t)&code_anchor);
    const unsigned char *c = static_cast<const unsigned char *>(p);
    const unsigned char *w = c - (uintptr_t)c % kWord;
    for (; w < c + bytes; w += kWord)
        check_word(w, write);
}

} // namespace

bool enabled() { return requested; }

bool watch(const void *base, size_t bytes)
{
    void *shadow = mmap(NULL, bytes / kWord * sizeof(word_record), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (shadow == MAP_FAILED)
        return false;
    device_begin = static_cast<const unsigned char *>(base);
    device_bytes = bytes;
    device_words = static_cast<word_record *>(shadow);
    return true;
}

void launch_begin(unsigned gx, unsigned gy, unsigned bx, unsigned by)
{
    if (!requested)
        return;
    ++launch_serial;
    grid_x = gx;
    grid_y = gy;
    block_x = bx;
    block_y = by;
    shared_variables.clear();
    in_kernel = true;
}

void launch_end() { in_kernel = false; }

void block_begin(unsigned block)
{
    current.block = block;
    current.phase = 0;
}

void barrier_released() { ++current.phase; }

void thread_runs(unsigned thread) { current.thread = (uint16_t)thread; }

void shared_declared(void *p, size_t bytes)
{
    if (!in_kernel)
        return;
    const unsigned char *begin = static_cast<const unsigned char *>(p);
    for (shared_variable &v : shared_variables)
        if (v.begin == begin) {
            v.words.assign(v.words.size(), word_record{});
            return;
        }
    shared_variables.push_back(
        shared_variable{begin, begin + bytes, std::vector<word_record>((bytes + kWord - 1) / kWord)});
}

void released(const void *p, size_t bytes)
{
    if (!device_words)
        return;
    /* the shadow's whole pages of the range go back to the system */
    const size_t first = device_offset(static_cast<const unsigned char *>(p)) / kWord;
    const uintptr_t begin = (uintptr_t)(device_words + first), end = (uintptr_t)(device_words + first + bytes / kWord);
    const uintptr_t b = (begin + kPage - 1) / kPage * kPage, e = end / kPage * kPage;
    if (e > b)
        madvise((void *)b, e - b, MADV_DONTNEED);
}

} // namespace race
} // namespace dc_emu

/* ---- the entry points the instrumentation calls ---- */

using dc_emu::race::access;

#define DC_RACE_ENTRY(kind, bytes, write)                                                                              \
    extern "C" void __tsan_##kind##bytes(void *p) { access(p, bytes, write, __builtin_return_address(0)); }            \
    extern "C" void __tsan_unaligned_##kind##bytes(void *p) { access(p, bytes, write, __builtin_return_address(0)); }
DC_RACE_ENTRY(read, 1, false)
DC_RACE_ENTRY(read, 2, false)
DC_RACE_ENTRY(read, 4, false)
DC_RACE_ENTRY(read, 8, false)
DC_RACE_ENTRY(read, 16, false)
DC_RACE_ENTRY(write, 1, true)
DC_RACE_ENTRY(write, 2, true)
DC_RACE_ENTRY(write, 4, true)
DC_RACE_ENTRY(write, 8, true)
DC_RACE_ENTRY(write, 16, true)
#undef DC_RACE_ENTRY

/* (the signatures are gcc's built-in declarations of these) */
extern "C" void __tsan_read_range(void *p, long bytes) { access(p, (size_t)bytes, false, __builtin_return_address(0)); }
extern "C" void __tsan_write_range(void *p, long bytes) { access(p, (size_t)bytes, true, __builtin_return_address(0)); }
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void *caller) { (void)caller; }
extern "C" void __tsan_func_exit(void *unused) { (void)unused; }
/* fences (the benchmark's host code has one): as strong as asked for or more */
extern "C" void __tsan_atomic_thread_fence(int order)
{
    (void)order;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
extern "C" void __tsan_atomic_signal_fence(int order)
{
    (void)order;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
