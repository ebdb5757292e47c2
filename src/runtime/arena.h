/* A bump allocator whose blocks are kept across resets, so that a training
 * step that repeats the same allocations stops allocating after the first.
 * Blocks come from a pluggable allocator (host memory, or device memory for
 * the CUDA backend); the bookkeeping lives in host memory. */
#ifndef DC_ARENA_H
#define DC_ARENA_H

#include <stddef.h>

typedef void *(*dc_block_alloc_fn)(void *user, size_t bytes);
typedef void (*dc_block_free_fn)(void *user, void *block);

typedef struct dc_arena_block {
    unsigned char *base;
    size_t cap;
    size_t used;
} dc_arena_block;

typedef struct dc_arena {
    dc_arena_block *blocks;
    size_t n_blocks;
    size_t cap_blocks;
    size_t current;      /* index of the block being filled */
    size_t in_use;       /* bytes handed out since the last reset, padding included */
    size_t peak;         /* most in_use ever */
    size_t reserved;     /* bytes of all blocks */
    size_t block_size;   /* default size of a new block */
    dc_block_alloc_fn alloc;
    dc_block_free_fn free;
    void *user;
} dc_arena;

void dc_arena_init(dc_arena *arena, size_t block_size, dc_block_alloc_fn alloc, dc_block_free_fn free,
                   void *user);

/* Frees every block. */
void dc_arena_release(dc_arena *arena);

/* `bytes` aligned to `align` (a power of two, at most 256), or NULL when the
 * block allocator fails. Zero bytes gives a valid unique pointer. */
void *dc_arena_alloc(dc_arena *arena, size_t bytes, size_t align);

/* Forgets every allocation. Keeps the block when there is one; replaces
 * several (steps that outgrew the first) by one of the peak's size and an
 * eighth more, so that the memory held stays near the largest step's. */
void dc_arena_reset(dc_arena *arena);

/* Host block allocator (64-byte aligned); NULL for more than the
 * machine's physical memory, even where the system would grant it. */
void *dc_host_block_alloc(void *user, size_t bytes);
void dc_host_block_free(void *user, void *block);

#endif /* DC_ARENA_H */
