/* fuzz_checkpoint: the input is a checkpoint file. It is written to a
 * temporary file and loaded with dc_checkpoint_load into a fixed set of
 * tensors (both dtypes, a scalar, an empty tensor, a strided view, a name of
 * 255 bytes, the same name for two tensors), three times with different
 * subsets of names. checkpoint.h promises that a failed load changes no
 * tensor, so each tensor is compared with its values before the load. The
 * status is also compared with that of a reference reader written here from
 * the format description (FORMAT for a file that is not a well-formed
 * checkpoint or that stores a name twice or an empty one, SHAPE or DTYPE
 * for a mismatch), and after a successful load
 * every tensor must hold the bytes stored under its name. The same loads run
 * again with the file's checksum made right, so that a mutation reaches the
 * parser; last, the tensors are saved and loaded back.
 *
 * An input that starts with "DCFZPATH" and a kind byte loads from something
 * other than a regular file (a directory, a device, a FIFO, a pipe, a
 * symbolic link, a missing or empty path): the loader must fail cleanly, or
 * read the pipe's or the link's contents as a file's. */
/* mkdtemp, mkfifo, symlink, pipe */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

#define FZ_N_TENSORS 8

/* DC_FUZZ_TRACE=1 in the environment prints each load and its status. */
static bool tracing;
static char dir[64];
static char path[96];
static char link_path[96];
static char fifo_path[96];
static char saved_path[96];

/* One context and tape for the whole run (the tape is reset for each
 * input): a tape's first data block is 16 MiB, whose allocation and
 * poisoning under AddressSanitizer cost more than the loads. */
static dc_ctx *shared_ctx;
static dc_tape *shared_tape;
static void free_shared(void);

static void remove_files(void)
{
    unlink(path);
    unlink(link_path);
    unlink(fifo_path);
    unlink(saved_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tracing = fz_tracing_requested();
    snprintf(dir, sizeof dir, "/tmp/dc_fuzz_ckpt.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("fuzz_checkpoint: mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/file.ckpt", dir);
    snprintf(link_path, sizeof link_path, "%s/link.ckpt", dir);
    snprintf(fifo_path, sizeof fifo_path, "%s/fifo.ckpt", dir);
    snprintf(saved_path, sizeof saved_path, "%s/saved.ckpt", dir);
    atexit(remove_files);
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.num_threads = 1;
    shared_ctx = dc_ctx_new(&o, NULL);
    if (!shared_ctx)
        FZ_FAIL("dc_ctx_new: %s", dc_last_error(NULL));
    shared_tape = dc_tape_new(shared_ctx);
    if (!shared_tape)
        FZ_FAIL("dc_tape_new failed");
    atexit(free_shared);
    return 0;
}

/* ---- a reference reader ---------------------------------------------------- */

typedef struct ref_entry {
    const uint8_t *name;
    uint32_t name_len;
    uint32_t dtype;
    uint32_t ndim;
    int64_t shape[DC_MAX_DIMS];
    const uint8_t *data;
    uint64_t bytes;
} ref_entry;

typedef struct ref_reader {
    const uint8_t *p;
    size_t len, at;
    bool bad;
} ref_reader;

static const uint8_t *ref_take(ref_reader *r, uint64_t n)
{
    if (r->bad || n > r->len - r->at) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->at;
    r->at += (size_t)n;
    return q;
}

static uint64_t ref_le(ref_reader *r, int bytes)
{
    const uint8_t *q = ref_take(r, (uint64_t)bytes);
    uint64_t v = 0;
    for (int i = 0; q && i < bytes; ++i)
        v |= (uint64_t)q[i] << (8 * i);
    return v;
}

/* FNV-1a, 64 bits, as the format's checksum. */
static uint64_t ref_fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Parses the file as checkpoint.h describes it: "DUALCAST", version 1, a
 * count, entries (name length and bytes, dtype, rank, sizes, data), and the
 * FNV-1a hash of everything before it. Returns the number of entries, or -1
 * for a file that is not well formed. Sets *beyond when an entry's shape is
 * one dc_tensor_new refuses (sizes, zeros counted as ones, multiplying past
 * INT64_MAX / 16): no tensor can have it, and the loader may call the file
 * corrupt for it. */
static int ref_parse(const uint8_t *p, size_t len, ref_entry *e, int max_entries, bool *beyond)
{
    *beyond = false;
    if (len < 8 + 4 + 4 + 8 || memcmp(p, "DUALCAST", 8) != 0)
        return -1;
    const uint64_t h = ref_fnv1a(p, len - 8);
    ref_reader r = {p, len, len - 8, false};
    if (ref_le(&r, 8) != h)
        return -1;
    r.len = len - 8;
    r.at = 8;
    if (ref_le(&r, 4) != DC_CHECKPOINT_VERSION)
        return -1;
    const uint64_t n = ref_le(&r, 4);
    int kept = 0;
    for (uint64_t i = 0; i < n; ++i) {
        ref_entry x;
        x.name_len = (uint32_t)ref_le(&r, 4);
        x.name = ref_take(&r, x.name_len);
        x.dtype = (uint32_t)ref_le(&r, 4);
        x.ndim = (uint32_t)ref_le(&r, 4);
        if (r.bad || x.name_len == 0 || x.name_len > 255 || x.dtype > 1 || x.ndim > DC_MAX_DIMS)
            return -1;
        /* saturating: a product too large for the file is truncated */
        uint64_t numel = 1, span = 1;
        for (uint32_t d = 0; d < x.ndim; ++d) {
            const uint64_t s = ref_le(&r, 8);
            if (s > (uint64_t)INT64_MAX)
                return -1;
            x.shape[d] = (int64_t)s;
            numel = (s != 0 && numel > UINT64_MAX / s) ? UINT64_MAX : numel * s;
            span = (s != 0 && span > UINT64_MAX / s) ? UINT64_MAX : span * (s ? s : 1);
        }
        if (span > (uint64_t)FZ_SPAN_BOUND)
            *beyond = true;
        if (r.bad)
            return -1;
        const uint64_t es = x.dtype ? 8 : 4;
        x.bytes = numel > UINT64_MAX / es ? UINT64_MAX : numel * es;
        x.data = ref_take(&r, x.bytes);
        if (r.bad)
            return -1;
        if (kept < max_entries)
            e[kept++] = x;
    }
    if (r.at != r.len)
        return -1;
    return kept;
}

/* The status a load of names[] into tensors[] must give, and for each
 * tensor the entry it must receive (the first with its name). */
static dc_status ref_expect(int count, const ref_entry *e, int n, dc_tensor *const *tensors,
                            const char *const *names, const ref_entry **match)
{
    if (count < 0)
        return DC_ERR_FORMAT;
    /* a name stored twice makes the file malformed */
    for (int a = 0; a < count; ++a)
        for (int b = a + 1; b < count; ++b)
            if (e[a].name_len == e[b].name_len && memcmp(e[a].name, e[b].name, e[a].name_len) == 0)
                return DC_ERR_FORMAT;
    for (int i = 0; i < n; ++i) {
        match[i] = NULL;
        const size_t len = strlen(names[i]);
        for (int k = 0; k < count && !match[i]; ++k)
            if (e[k].name_len == len && memcmp(e[k].name, names[i], len) == 0)
                match[i] = &e[k];
        if (!match[i])
            return DC_ERR_SHAPE;
        bool same = (int)match[i]->ndim == dc_tensor_ndim(tensors[i]);
        for (int d = 0; same && d < dc_tensor_ndim(tensors[i]); ++d)
            same = match[i]->shape[d] == dc_tensor_shape(tensors[i])[d];
        if (!same)
            return DC_ERR_SHAPE;
        if ((int)match[i]->dtype != (int)dc_tensor_dtype(tensors[i]))
            return DC_ERR_DTYPE;
    }
    return DC_OK;
}

/* ---- the destinations ------------------------------------------------------- */

typedef struct targets {
    dc_ctx *ctx;
    dc_tape *tape;
    dc_tensor *t[FZ_N_TENSORS];
    const char *names[FZ_N_TENSORS];
    dc_tensor *owned[FZ_N_TENSORS]; /* the persistent ones, freed at the end */
    unsigned char *before[FZ_N_TENSORS];
    size_t bytes[FZ_N_TENSORS];
    dc_status worst; /* of the loads since it was cleared: the first failure, else DC_OK */
} targets;

static char long_name[256];

static void free_shared(void)
{
    dc_tape_free(shared_tape);
    dc_ctx_free(shared_ctx);
}

static dc_tensor *persistent(targets *g, int i, dc_dtype dtype, int ndim, const int64_t *shape)
{
    dc_tensor *t = dc_tensor_new(g->ctx, dtype, ndim, shape);
    if (!t)
        FZ_FAIL("dc_tensor_new: %s", dc_last_error(g->ctx));
    g->owned[i] = t;
    return t;
}

static void make_targets(targets *g)
{
    memset(long_name, 'n', 255);
    long_name[255] = '\0';
    g->ctx = shared_ctx;
    g->tape = shared_tape;
    dc_tape_reset(g->tape);
    dc_clear_error(g->ctx);
    static const int64_t s34[] = {3, 4}, s4[] = {4}, s05[] = {0, 5}, s32[] = {3, 2}, s212[] = {2, 1, 2},
                         s8[] = {1, 1, 2, 1, 1, 1, 1, 1};
    g->t[0] = persistent(g, 0, DC_F32, 2, s34);
    g->names[0] = "w";
    g->t[1] = persistent(g, 1, DC_F64, 1, s4);
    g->names[1] = "b";
    g->t[2] = persistent(g, 2, DC_F32, 0, NULL);
    g->names[2] = "s";
    g->t[3] = persistent(g, 3, DC_F64, 2, s05);
    g->names[3] = "e";
    /* a transposed view of a tape tensor: a strided destination */
    dc_tensor *base = dc_tape_tensor_new(g->tape, DC_F32, 2, s32, NULL);
    g->t[4] = base ? dc_op_transpose(g->tape, base, 0, 1) : NULL;
    if (!g->t[4])
        FZ_FAIL("no transposed view: %s", dc_last_error(g->ctx));
    g->names[4] = "v";
    g->t[5] = persistent(g, 5, DC_F64, 3, s212);
    g->names[5] = long_name;
    g->t[6] = persistent(g, 6, DC_F32, 8, s8);
    g->names[6] = "rank8";
    /* the same name again, for a second tensor of its shape */
    g->t[7] = persistent(g, 7, DC_F32, 2, s34);
    g->names[7] = "w";
    for (int i = 0; i < FZ_N_TENSORS; ++i) {
        g->bytes[i] = (size_t)dc_tensor_numel(g->t[i]) * dc_dtype_size(dc_tensor_dtype(g->t[i]));
        for (int64_t k = 0; k < dc_tensor_numel(g->t[i]); ++k)
            if (dc_tensor_set(g->t[i], k, 100.0 * i + (double)k + 0.5) != DC_OK)
                FZ_FAIL("dc_tensor_set: %s", dc_last_error(g->ctx));
        g->before[i] = malloc(g->bytes[i] ? g->bytes[i] : 1);
        if (!g->before[i])
            FZ_FAIL("out of memory");
    }
}

/* Remembers every tensor's bytes, to compare after a failed load. */
static void snapshot(targets *g)
{
    for (int i = 0; i < FZ_N_TENSORS; ++i)
        if (dc_tensor_to_host(g->t[i], g->before[i], g->bytes[i]) != DC_OK)
            FZ_FAIL("dc_tensor_to_host: %s", dc_last_error(g->ctx));
}

static bool same_bytes(targets *g, int i, const void *want)
{
    unsigned char *now = malloc(g->bytes[i] ? g->bytes[i] : 1);
    if (!now)
        FZ_FAIL("out of memory");
    if (dc_tensor_to_host(g->t[i], now, g->bytes[i]) != DC_OK)
        FZ_FAIL("dc_tensor_to_host: %s", dc_last_error(g->ctx));
    const bool same = memcmp(now, want, g->bytes[i]) == 0;
    free(now);
    return same;
}

static void free_targets(targets *g)
{
    for (int i = 0; i < FZ_N_TENSORS; ++i) {
        dc_tensor_free(g->owned[i]);
        free(g->before[i]);
    }
}

/* One load of the tensors `which` (indices into g), checked against the
 * reference; expect_known false when the file is not a regular file whose
 * contents are `data` (the reference cannot say what the load gives). */
static void load_and_check(targets *g, const char *from, const int *which, int n, const uint8_t *data, size_t size,
                           bool expect_known)
{
    dc_tensor *t[FZ_N_TENSORS];
    const char *names[FZ_N_TENSORS];
    for (int i = 0; i < n; ++i) {
        t[i] = g->t[which[i]];
        names[i] = g->names[which[i]];
    }
    dc_clear_error(g->ctx);
    if (tracing) {
        fprintf(stderr, "dc_checkpoint_load(\"%s\", %d, {", from, n);
        for (int i = 0; i < n; ++i) {
            char shape[128];
            fprintf(stderr, "%s\"%.12s%s\": %s%s", i ? ", " : "", names[i], strlen(names[i]) > 12 ? "..." : "",
                    dc_dtype_name(dc_tensor_dtype(t[i])), dc_tensor_shape_str(t[i], shape, sizeof shape));
        }
        fprintf(stderr, "})\n");
        fflush(stderr);
    }
    const dc_status st = dc_checkpoint_load(g->ctx, from, n, t, names);
    if (g->worst == DC_OK)
        g->worst = st;
    if (tracing)
        fprintf(stderr, "    -> %s%s%s\n", dc_status_name(st), st != DC_OK ? ": " : "",
                st != DC_OK ? dc_last_error(g->ctx) : "");
    if (st != DC_OK) {
        fz_check_error(g->ctx, "dc_checkpoint_load", st);
        for (int i = 0; i < FZ_N_TENSORS; ++i)
            if (!same_bytes(g, i, g->before[i]))
                FZ_FAIL("dc_checkpoint_load failed (%s: %s) but changed tensor \"%s\"", dc_status_name(st),
                        dc_last_error(g->ctx), g->names[i]);
    }
    if (expect_known) {
        ref_entry entries[64];
        const ref_entry *match[FZ_N_TENSORS];
        bool beyond;
        const int count = ref_parse(data, size, entries, 64, &beyond);
        const dc_status want = ref_expect(count, entries, n, t, names, match);
        /* more than 64 entries: the reference kept the first 64, which
         * only matters when a name is found beyond them, or stored again */
        const bool unsure = (count == 64 && (want == DC_ERR_SHAPE || st == DC_ERR_FORMAT)) ||
                            (beyond && st == DC_ERR_FORMAT);
        if (st != want && !unsure)
            FZ_FAIL("dc_checkpoint_load gave %s (%s); the reference reader expects %s", dc_status_name(st),
                    dc_last_error(g->ctx), dc_status_name(want));
        for (int i = 0; st == DC_OK && want == DC_OK && i < n; ++i)
            if (!same_bytes(g, which[i], match[i]->data))
                FZ_FAIL("tensor \"%s\" does not hold the stored bytes after a load", names[i]);
    }
    if (st == DC_OK)
        snapshot(g);
}

static void write_file(const char *to, const uint8_t *data, size_t size)
{
    FILE *f = fopen(to, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        FZ_FAIL("cannot write %s: %s", to, strerror(errno));
}

/* The three loads of one file: every tensor, the two that share a name, and
 * none (which must succeed on any well-formed file). */
static void load_all_ways(targets *g, const char *from, const uint8_t *data, size_t size, bool expect_known)
{
    static const int all[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int pair[] = {7, 0};
    load_and_check(g, from, all, FZ_N_TENSORS, data, size, expect_known);
    load_and_check(g, from, pair, 2, data, size, expect_known);
    load_and_check(g, from, all, 0, data, size, expect_known);
}

/* Saves what the tensors hold now (whatever the loads left) and loads it
 * back: the save of seven names, a strided view among them, must succeed
 * and give the same bytes; a save with a name twice must be refused. */
static void save_round_trip(targets *g)
{
    snapshot(g);
    const int n = FZ_N_TENSORS - 1; /* the last one repeats the name "w" */
    dc_clear_error(g->ctx);
    dc_status st = dc_checkpoint_save(g->ctx, saved_path, n, g->t, g->names);
    if (st != DC_OK)
        FZ_FAIL("dc_checkpoint_save failed: %s", dc_last_error(g->ctx));
    for (int i = 0; i < FZ_N_TENSORS; ++i)
        if (dc_tensor_fill(g->t[i], -1.0) != DC_OK)
            FZ_FAIL("dc_tensor_fill: %s", dc_last_error(g->ctx));
    st = dc_checkpoint_load(g->ctx, saved_path, n, g->t, g->names);
    if (st != DC_OK)
        FZ_FAIL("loading what dc_checkpoint_save wrote failed: %s", dc_last_error(g->ctx));
    for (int i = 0; i < n; ++i)
        if (!same_bytes(g, i, g->before[i]))
            FZ_FAIL("tensor \"%s\" changed in a save and load", g->names[i]);
    dc_clear_error(g->ctx);
    st = dc_checkpoint_save(g->ctx, saved_path, FZ_N_TENSORS, g->t, g->names);
    if (st == DC_OK)
        FZ_FAIL("dc_checkpoint_save accepted the name \"w\" twice");
    fz_check_error(g->ctx, "dc_checkpoint_save", st);
}

/* Loads from a path that is not a regular file (a directory, a device, a
 * FIFO, a pipe): every load must be refused with DC_ERR_IO, at once (a FIFO
 * with no writer must not block, a device that never ends must not be read). */
static void load_refused(targets *g, const char *from)
{
    g->worst = DC_OK;
    load_all_ways(g, from, NULL, 0, false);
    if (g->worst != DC_ERR_IO)
        FZ_FAIL("dc_checkpoint_load of %s gave %s, not DC_ERR_IO: %s", from, dc_status_name(g->worst),
                dc_last_error(g->ctx));
}

/* An input of the form "DCFZPATH" kind rest: load from a path that is not a
 * regular file, or through a symbolic link to one. */
static void load_special(targets *g, uint8_t kind, const uint8_t *rest, size_t size)
{
    switch (kind % 8) {
    case 0: load_refused(g, dir); break;
    case 1: load_refused(g, "/dev/zero"); break;
    case 2:
        unlink(fifo_path);
        if (mkfifo(fifo_path, 0600) != 0)
            FZ_FAIL("mkfifo: %s", strerror(errno));
        load_refused(g, fifo_path);
        break;
    case 3: {
        /* a pipe that holds the rest of the input, its write end closed */
        int fds[2];
        if (size > 16384 || pipe(fds) != 0)
            break;
        if (write(fds[1], rest, size) != (ssize_t)size)
            FZ_FAIL("write to a pipe: %s", strerror(errno));
        close(fds[1]);
        char fd_path[64];
        snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", fds[0]);
        load_refused(g, fd_path);
        close(fds[0]);
        break;
    }
    case 4:
        write_file(path, rest, size);
        unlink(link_path);
        if (symlink(path, link_path) != 0)
            FZ_FAIL("symlink: %s", strerror(errno));
        load_all_ways(g, link_path, rest, size, true);
        break;
    case 5: load_all_ways(g, "/nonexistent/dualcast.ckpt", NULL, 0, false); break;
    case 6: load_all_ways(g, "", NULL, 0, false); break;
    default: load_refused(g, "/dev/null"); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    targets g;
    memset(&g, 0, sizeof g);
    make_targets(&g);
    snapshot(&g);
    if (size >= 9 && memcmp(data, "DCFZPATH", 8) == 0) {
        load_special(&g, data[8], data + 9, size - 9);
    } else {
        write_file(path, data, size);
        load_all_ways(&g, path, data, size, true);
        /* Again with the checksum made right, so that a mutation of a valid
         * file reaches the parser instead of failing the checksum. */
        if (size >= 8) {
            uint8_t *fixed = malloc(size);
            if (!fixed)
                FZ_FAIL("out of memory");
            memcpy(fixed, data, size);
            const uint64_t h = ref_fnv1a(fixed, size - 8);
            for (int i = 0; i < 8; ++i)
                fixed[size - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
            if (memcmp(fixed, data, size) != 0) {
                write_file(path, fixed, size);
                load_all_ways(&g, path, fixed, size, true);
            }
            free(fixed);
        }
        save_round_trip(&g);
    }
    free_targets(&g);
    return 0;
}
