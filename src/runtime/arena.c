#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "arena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Only host blocks are poisoned: device memory has no shadow. */
#define DC_POISON(p, n) (arena->alloc == dc_host_block_alloc ? ASAN_POISON_MEMORY_REGION((p), (n)) : (void)0)
#define DC_UNPOISON(p, n) (arena->alloc == dc_host_block_alloc ? ASAN_UNPOISON_MEMORY_REGION((p), (n)) : (void)0)
#else
#define DC_POISON(p, n) ((void)(p), (void)(n))
#define DC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* More than the machine's memory is refused at once: where the system
 * overcommits, such a request would be granted and then fail page by page
 * (or the process be killed) as an op writes it, instead of reporting
 * DC_ERR_MEMORY. */
static bool beyond_physical_memory(size_t bytes)
{
    if (bytes < ((size_t)1 << 30))
        return false;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages;
}

void *dc_host_block_alloc(void *user, size_t bytes)
{
    (void)user;
    if (beyond_physical_memory(bytes))
        return NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    return p;
}

void dc_host_block_free(void *user, void *block)
{
    (void)user;
    free(block);
}

void dc_arena_init(dc_arena *arena, size_t block_size, dc_block_alloc_fn alloc, dc_block_free_fn free_fn,
                   void *user)
{
    memset(arena, 0, sizeof *arena);
    arena->block_size = block_size;
    arena->alloc = alloc;
    arena->free = free_fn;
    arena->user = user;
}

void dc_arena_release(dc_arena *arena)
{
    for (size_t i = 0; i < arena->n_blocks; ++i) {
        DC_UNPOISON(arena->blocks[i].base, arena->blocks[i].cap);
        arena->free(arena->user, arena->blocks[i].base);
    }
    free(arena->blocks);
    arena->blocks = NULL;
    arena->n_blocks = arena->cap_blocks = arena->current = 0;
    arena->in_use = arena->reserved = 0;
}

static size_t align_up(size_t x, size_t align) { return (x + align - 1) & ~(align - 1); }

/* Inserts a new block of at least `bytes` right after the current one, so
 * that the order of blocks follows the order of first use. */
static dc_arena_block *add_block(dc_arena *arena, size_t bytes)
{
    if (arena->n_blocks == arena->cap_blocks) {
        size_t cap = arena->cap_blocks ? 2 * arena->cap_blocks : 8;
        dc_arena_block *b = realloc(arena->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        arena->blocks = b;
        arena->cap_blocks = cap;
    }
    size_t size = bytes > arena->block_size ? bytes : arena->block_size;
    void *base = arena->alloc(arena->user, size);
    if (!base)
        return NULL;
    DC_POISON(base, size);
    size_t at = arena->n_blocks ? arena->current + 1 : 0;
    memmove(&arena->blocks[at + 1], &arena->blocks[at], (arena->n_blocks - at) * sizeof *arena->blocks);
    arena->blocks[at] = (dc_arena_block){.base = base, .cap = size, .used = 0};
    arena->n_blocks++;
    arena->current = at;
    arena->reserved += size;
    return &arena->blocks[at];
}

void *dc_arena_alloc(dc_arena *arena, size_t bytes, size_t align)
{
    if (bytes == 0)
        bytes = 1;
    while (arena->current < arena->n_blocks) {
        dc_arena_block *b = &arena->blocks[arena->current];
        size_t start = align_up(b->used, align);
        if (start + bytes <= b->cap) {
            arena->in_use += start + bytes - b->used;
            b->used = start + bytes;
            if (arena->in_use > arena->peak)
                arena->peak = arena->in_use;
            DC_UNPOISON(b->base + start, bytes);
            return b->base + start;
        }
        /* Skip to the next kept block only if it is still empty this step. */
        if (arena->current + 1 < arena->n_blocks && arena->blocks[arena->current + 1].used == 0 &&
            arena->blocks[arena->current + 1].cap >= bytes + align)
            arena->current++;
        else
            break;
    }
    dc_arena_block *b = add_block(arena, bytes + align);
    if (!b)
        return NULL;
    size_t start = align_up((size_t)(uintptr_t)b->base, align) - (size_t)(uintptr_t)b->base;
    b->used = start + bytes;
    arena->in_use += b->used;
    if (arena->in_use > arena->peak)
        arena->peak = arena->in_use;
    DC_UNPOISON(b->base + start, bytes);
    return b->base + start;
}

void dc_arena_reset(dc_arena *arena)
{
    if (arena->n_blocks > 1) {
        /* Steps outgrew the first block: one block as large as the largest
         * step, and an eighth more (a slowly growing step then replaces it
         * rarely), takes the place of all of them. Kept, the blocks would
         * add up: one per step that outgrew the others. Same-sized steps
         * then find the same addresses in it. */
        const size_t size = arena->peak + arena->peak / 8 + 256;
        for (size_t i = 0; i < arena->n_blocks; ++i) {
            DC_UNPOISON(arena->blocks[i].base, arena->blocks[i].cap);
            arena->free(arena->user, arena->blocks[i].base);
        }
        arena->n_blocks = 0;
        arena->current = 0;
        arena->reserved = 0;
        add_block(arena, size); /* on failure the next allocation tries again */
    }
    for (size_t i = 0; i < arena->n_blocks; ++i) {
        arena->blocks[i].used = 0;
        DC_POISON(arena->blocks[i].base, arena->blocks[i].cap);
    }
    arena->current = 0;
    arena->in_use = 0;
}
