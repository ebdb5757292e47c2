/* Race checking for the emulated kernels (DC_EMU_RACECHECK=1).
 *
 * The kernels of the emulated build are compiled with gcc's ThreadSanitizer
 * instrumentation, which calls a function before every load and store the
 * compiler could not keep in registers. Those functions are defined in
 * race_check.cpp, in place of ThreadSanitizer's own runtime (which is not
 * linked): while a kernel runs they record, for every 4-byte word of device
 * memory and of the block's __shared__ variables, which thread of which
 * block last wrote it and which read it, and between which barriers. Two
 * accesses to a word race when one of them writes and nothing orders them:
 * they come from different blocks (a kernel has no ordering between blocks),
 * or from different threads of one block between the same two barriers. The
 * first race stops the program with both accesses named (block, thread, and
 * the address of the code), as compute-sanitizer does on a device.
 *
 * What it does not see: copies made by calls of memcpy or memset in a
 * kernel (the instrumentation leaves those to ThreadSanitizer's runtime;
 * small fixed-size copies become loads and stores and are seen), memory
 * other than device allocations and __shared__ variables (mapped host
 * memory), and a thread that returns before a barrier the others reach: its
 * accesses count as ordered before that barrier. An access narrower than a
 * word counts as one to the whole word, so threads writing neighbouring
 * bytes would be reported (the library's tensors are float32 and float64).
 *
 * Only the emulator (emulator.cpp) calls these; without DC_EMU_RACECHECK=1
 * the instrumented accesses return at once. */
#ifndef DC_CUDA_EMULATION_RACE_CHECK_H
#define DC_CUDA_EMULATION_RACE_CHECK_H

#include <stddef.h>

namespace dc_emu {
namespace race {

/* Whether DC_EMU_RACECHECK=1 asked for the check. */
bool enabled();

/* The device memory to watch: [base, base + bytes), reserved and not yet
 * used. Returns false where the shadow cannot be reserved. */
bool watch(const void *base, size_t bytes);

/* A kernel's grid starts, or has ended. */
void launch_begin(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y);
void launch_end();

/* Block `block` (linear index in its grid) starts; its threads are in the
 * phase before the first barrier. */
void block_begin(unsigned block);

/* The block's barrier was released: its threads are in the next phase. */
void barrier_released();

/* Thread `thread` (linear index in its block) runs from here on. */
void thread_runs(unsigned thread);

/* A new block reached the __shared__ variable [p, p + bytes): its words
 * start with no accesses. */
void shared_declared(void *p, size_t bytes);

/* The device memory [p, p + bytes) was freed: its record goes. */
void released(const void *p, size_t bytes);

} // namespace race
} // namespace dc_emu

#endif /* DC_CUDA_EMULATION_RACE_CHECK_H */
