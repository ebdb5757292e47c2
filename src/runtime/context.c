#define _POSIX_C_SOURCE 200809L /* pthreads */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../cuda/cuda_device.h"
#include "runtime.h"

dc_ctx_options dc_ctx_options_default(void)
{
    dc_ctx_options o;
    memset(&o, 0, sizeof o);
    o.backend = DC_BACKEND_AUTO;
    return o;
}

const char *dc_backend_name(dc_backend backend)
{
    switch (backend) {
    case DC_BACKEND_AUTO: return "auto";
    case DC_BACKEND_CPU: return "cpu";
    case DC_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
uint64_t dc_rng_next(dc_ctx *ctx)
{
    uint64_t *s = ctx->rng;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void dc_ctx_seed(dc_ctx *ctx, uint64_t seed)
{
    if (!ctx)
        return;
    for (int i = 0; i < 4; ++i)
        ctx->rng[i] = splitmix64(&seed);
}

double dc_rng_uniform(dc_ctx *ctx) { return (double)(dc_rng_next(ctx) >> 11) * 0x1.0p-53; }

/* A device number: decimal digits only, within int. */
static bool parse_device_number(const char *text, int *out)
{
    int value = 0;
    if (!*text)
        return false;
    for (const char *c = text; *c; ++c) {
        if (*c < '0' || *c > '9' || value > (INT_MAX - (*c - '0')) / 10)
            return false;
        value = value * 10 + (*c - '0');
    }
    *out = value;
    return true;
}

/* The backend AUTO resolves to: DC_DEVICE if set (with "cuda:N" also the
 * device, in *device), else CUDA if possible. */
static dc_status resolve_backend(dc_backend asked, dc_backend *out, int *device)
{
    if (asked != DC_BACKEND_AUTO) {
        *out = asked;
        return DC_OK;
    }
    const char *env = getenv("DC_DEVICE");
    if (!env || !*env || strcmp(env, "auto") == 0)
        *out = DC_BACKEND_AUTO;
    else if (strcmp(env, "cpu") == 0)
        *out = DC_BACKEND_CPU;
    else if (strcmp(env, "cuda") == 0)
        *out = DC_BACKEND_CUDA;
    else if (strncmp(env, "cuda:", 5) == 0 && parse_device_number(env + 5, device))
        *out = DC_BACKEND_CUDA;
    else {
        return dc_error_noctx(DC_ERR_ARG, "DC_DEVICE=%s is not one of cpu, cuda, cuda:N (N a device number), auto",
                              env);
    }
    return DC_OK;
}

/* Threads of the probe wait here until every one has been started. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    bool open;
} gate;

static void *wait_at_gate(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->opened, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* Whether `n` threads can run at once here: n - 1 are started, all alive
 * together, then let go. OpenMP ends the process when it cannot start the
 * threads of a parallel region; this makes the context fail with a status
 * instead, while its threads can be created at all. */
static dc_status can_start_threads(int n)
{
    if (n <= 1)
        return DC_OK;
    pthread_t *threads = malloc((size_t)(n - 1) * sizeof *threads);
    if (!threads)
        return dc_error_noctx(DC_ERR_MEMORY, "dc_ctx_new: out of memory");
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    int started = 0, err = 0;
    while (started < n - 1 && (err = pthread_create(&threads[started], NULL, wait_at_gate, &g)) == 0)
        ++started;
    pthread_mutex_lock(&g.lock);
    g.open = true;
    pthread_cond_broadcast(&g.opened);
    pthread_mutex_unlock(&g.lock);
    for (int i = 0; i < started; ++i)
        pthread_join(threads[i], NULL);
    free(threads);
    if (started < n - 1)
        return dc_error_noctx(DC_ERR_MEMORY,
                              "dc_ctx_new: cannot start %d threads (the %dth failed: %s); give fewer in num_threads "
                              "or OMP_NUM_THREADS",
                              n, started + 2, strerror(err));
    return DC_OK;
}

dc_ctx *dc_ctx_new(const dc_ctx_options *options, dc_status *status)
{
    dc_ctx_options o = options ? *options : dc_ctx_options_default();
    dc_status st = DC_OK;
    dc_ctx *ctx = NULL;
    if ((int)o.backend < DC_BACKEND_AUTO || o.backend > DC_BACKEND_CUDA) {
        st = dc_error_noctx(DC_ERR_ARG, "dc_ctx_new: unknown backend %d", (int)o.backend);
        goto done;
    }
    if (o.num_threads < 0 || o.num_threads > DC_MAX_THREADS) {
        st = dc_error_noctx(DC_ERR_ARG, "dc_ctx_new: num_threads is %d; give 0 for the default or 1 to %d",
                            o.num_threads, DC_MAX_THREADS);
        goto done;
    }
    if (o.cuda_device < 0) {
        st = dc_error_noctx(DC_ERR_ARG, "dc_ctx_new: cuda_device is %d; CUDA numbers devices from 0",
                            o.cuda_device);
        goto done;
    }
    dc_backend backend = DC_BACKEND_AUTO;
    int cuda_device = o.cuda_device;
    st = resolve_backend(o.backend, &backend, &cuda_device);
    if (st != DC_OK)
        goto done;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        st = dc_error_noctx(DC_ERR_MEMORY, "dc_ctx_new: out of memory");
        goto done;
    }
    ctx->quiet = o.quiet;
    const char *poison = getenv("DC_POISON");
    ctx->poison = poison && strcmp(poison, "1") == 0;
    ctx->cuda_tf32 = o.cuda_tf32;
    ctx->cuda_device = cuda_device;
#ifdef _OPENMP
    if (o.num_threads > 0) {
        ctx->cpu.num_threads = o.num_threads;
    } else {
        /* OpenMP's count, but no more than the CPUs this process may run on:
         * more threads than CPUs (OMP_NUM_THREADS=8 on 2 cores) make every
         * region wait for threads the scheduler has not run yet */
        ctx->cpu.num_threads = omp_get_max_threads();
        if (ctx->cpu.num_threads > omp_get_num_procs())
            ctx->cpu.num_threads = omp_get_num_procs();
    }
#else
    ctx->cpu.num_threads = 1;
#endif
    dc_ctx_seed(ctx, o.seed);
    st = can_start_threads(ctx->cpu.num_threads);
    if (st != DC_OK)
        goto done;
    ctx->cpu.scratch = calloc((size_t)ctx->cpu.num_threads, sizeof *ctx->cpu.scratch);
    if (!ctx->cpu.scratch) {
        st = dc_error_noctx(DC_ERR_MEMORY, "dc_ctx_new: out of memory");
        goto done;
    }

    ctx->backend = DC_BACKEND_CPU;
    if (backend == DC_BACKEND_CUDA || backend == DC_BACKEND_AUTO) {
        dc_status cs = dc_cuda_init(ctx);
        if (cs == DC_OK) {
            ctx->backend = DC_BACKEND_CUDA;
        } else if (backend == DC_BACKEND_CUDA) {
            st = dc_error_noctx(DC_ERR_DEVICE, "dc_ctx_new: CUDA was requested but is not usable: %s", ctx->error);
            goto done;
        } else if (!ctx->quiet && cs != DC_ERR_UNSUPPORTED) {
            fprintf(stderr, "dualcast: no usable CUDA device (%s); running on the CPU\n", ctx->error);
        }
        dc_clear_error(ctx); /* the context starts with no error */
    }
    if (ctx->backend == DC_BACKEND_CPU)
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU, %d thread%s", ctx->cpu.num_threads,
                 ctx->cpu.num_threads == 1 ? "" : "s");
done:
    if (status)
        *status = st;
    if (st != DC_OK) {
        dc_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

void dc_ctx_free(dc_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->cuda)
        dc_cuda_shutdown(ctx);
    for (int i = 0; ctx->cpu.scratch && i < ctx->cpu.num_threads; ++i)
        free(ctx->cpu.scratch[i].ptr);
    free(ctx->cpu.scratch);
    free(ctx);
}

dc_backend dc_ctx_backend(const dc_ctx *ctx) { return ctx ? ctx->backend : DC_BACKEND_CPU; }

int dc_ctx_num_threads(const dc_ctx *ctx) { return ctx ? ctx->cpu.num_threads : 1; }

const char *dc_ctx_device_name(const dc_ctx *ctx) { return ctx ? ctx->device_name : ""; }

int dc_ctx_cuda_device(const dc_ctx *ctx) { return ctx && ctx->cuda ? ctx->cuda_device : -1; }

dc_status dc_ctx_synchronize(dc_ctx *ctx)
{
    if (!ctx)
        return DC_ERR_ARG;
    ctx->api = "dc_ctx_synchronize";
    return ctx->cuda ? dc_cuda_synchronize(ctx) : DC_OK;
}

dc_device_memory_stats dc_ctx_device_memory(const dc_ctx *ctx)
{
    if (ctx && ctx->cuda)
        return dc_cuda_memory_stats(ctx);
    dc_device_memory_stats s = {0, 0, 0};
    return s;
}

dc_device_counters dc_ctx_device_counters(const dc_ctx *ctx)
{
    if (ctx && ctx->cuda)
        return dc_cuda_counters(ctx);
    dc_device_counters c = {0, 0, 0, 0, 0, 0};
    return c;
}

void *dc_pool_scratch(dc_cpu_pool *pool, int thread, size_t bytes)
{
    dc_scratch *s = &pool->scratch[thread];
    if (s->cap >= bytes)
        return s->ptr;
    size_t cap = bytes + bytes / 2;
    cap = (cap + 63) & ~(size_t)63;
    void *p = dc_host_block_alloc(NULL, cap);
    if (!p)
        return NULL;
    free(s->ptr);
    s->ptr = p;
    s->cap = cap;
    return p;
}
