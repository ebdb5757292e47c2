/* Checkpoint files: header, named tensors, checksum (see checkpoint.h).
 * Integers are little-endian. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static const char magic[8] = {'D', 'U', 'A', 'L', 'C', 'A', 'S', 'T'};

/* FNV-1a, 64 bits: detects truncation and corruption (not tampering). */
static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* A growing byte buffer for the file image. */
typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    bool failed;
} buf;

/* Room for n more bytes; false (and failed set) when out of memory. */
static bool reserve(buf *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void put(buf *b, const void *src, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

/* The arguments save and load share: a path, n >= 0 tensors of this
 * context, and their names. */
static dc_status check_args(dc_ctx *ctx, const char *fn, const char *path, int n, dc_tensor *const *tensors,
                            const char *const *names)
{
    if (!path)
        return dc_error(ctx, DC_ERR_ARG, "%s: path is NULL", fn);
    if (n < 0)
        return dc_error(ctx, DC_ERR_ARG, "%s: n is %d; give 0 or more tensors", fn, n);
    if (n > 0 && (!tensors || !names))
        return dc_error(ctx, DC_ERR_ARG, "%s: %s is NULL for %d tensors", fn, !tensors ? "tensors" : "names", n);
    for (int i = 0; i < n; ++i) {
        if (!tensors[i] || !names[i])
            return dc_error(ctx, DC_ERR_ARG, "%s: tensor or name %d is NULL", fn, i);
        if (tensors[i]->ctx != ctx)
            return dc_error(ctx, DC_ERR_ARG, "%s: tensor %d (\"%s\") belongs to another context", fn, i, names[i]);
    }
    return DC_OK;
}

dc_status dc_checkpoint_save(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names)
{
    if (!ctx)
        return DC_ERR_ARG;
    dc_status st = check_args(ctx, "dc_checkpoint_save", path, n, tensors, names);
    if (st != DC_OK)
        return st;
    for (int i = 0; i < n; ++i) {
        if (strlen(names[i]) == 0 || strlen(names[i]) > 255)
            return dc_error(ctx, DC_ERR_ARG, "dc_checkpoint_save: name %d must have 1 to 255 bytes", i);
        for (int j = 0; j < i; ++j)
            if (strcmp(names[i], names[j]) == 0)
                return dc_error(ctx, DC_ERR_ARG, "dc_checkpoint_save: name \"%s\" is used twice", names[i]);
    }
    buf b = {0};
    put(&b, magic, sizeof magic);
    put_u32(&b, DC_CHECKPOINT_VERSION);
    put_u32(&b, (uint32_t)n);
    for (int i = 0; i < n && st == DC_OK; ++i) {
        const dc_tensor *t = tensors[i];
        const uint32_t len = (uint32_t)strlen(names[i]);
        put_u32(&b, len);
        put(&b, names[i], len);
        put_u32(&b, (uint32_t)t->dtype);
        put_u32(&b, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; ++d)
            put_u64(&b, (uint64_t)t->shape[d]);
        const size_t bytes = (size_t)t->numel * dc_dtype_size(t->dtype);
        if (reserve(&b, bytes)) {
            st = dc_tensor_to_host(t, b.p + b.len, bytes);
            b.len += bytes;
        }
    }
    if (st == DC_OK)
        put_u64(&b, fnv1a(b.p, b.len));
    if (st == DC_OK && b.failed)
        st = dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_save: out of memory");
    if (st != DC_OK) {
        free(b.p);
        return st;
    }

    /* Write beside the target, then rename: the old file survives a failure. */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(b.p);
        return dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_save: out of memory");
    }
    snprintf(tmp, plen + 32, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(b.p, 1, b.len, f) == b.len;
    ok = f && fflush(f) == 0 && ok;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        st = dc_error(ctx, DC_ERR_IO, "dc_checkpoint_save: cannot write %s: %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    free(b.p);
    return st;
}

/* A cursor over the file image that fails instead of reading past the end. */
typedef struct reader {
    const unsigned char *p;
    size_t len, at;
    bool short_read;
} reader;

static const unsigned char *take(reader *r, size_t n)
{
    if (r->short_read || n > r->len - r->at) {
        r->short_read = true;
        return NULL;
    }
    const unsigned char *p = r->p + r->at;
    r->at += n;
    return p;
}

static uint32_t get_u32(reader *r)
{
    const unsigned char *x = take(r, 4);
    return x ? (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24 : 0;
}

static uint64_t get_u64(reader *r)
{
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}

typedef struct entry {
    const char *name;
    uint32_t name_len;
    dc_dtype dtype;
    int ndim;
    int64_t shape[DC_MAX_DIMS];
    const unsigned char *data;
    size_t bytes;
} entry;

static dc_status read_file(dc_ctx *ctx, const char *path, unsigned char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: cannot open %s: %s", path, strerror(errno));
    unsigned char *p = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *q = realloc(p, cap);
            if (!q) {
                free(p);
                fclose(f);
                return dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_load: out of memory reading %s", path);
            }
            p = q;
        }
        size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(p);
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: cannot read %s", path);
    }
    *data = p;
    *len = n;
    return DC_OK;
}

static dc_status parse(dc_ctx *ctx, const char *path, const unsigned char *p, size_t len, entry **out, int *count)
{
    if (len < sizeof magic + 8 + 8 || memcmp(p, magic, sizeof magic) != 0)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s is not a dualcast checkpoint%s", path,
                        len < sizeof magic + 16 ? " (too short)" : "");
    const uint64_t stored = (uint64_t)p[len - 8] | (uint64_t)p[len - 7] << 8 | (uint64_t)p[len - 6] << 16 |
                            (uint64_t)p[len - 5] << 24 | (uint64_t)p[len - 4] << 32 | (uint64_t)p[len - 3] << 40 |
                            (uint64_t)p[len - 2] << 48 | (uint64_t)p[len - 1] << 56;
    reader r = {p, len - 8, sizeof magic, false};
    const uint32_t version = get_u32(&r);
    if (version != DC_CHECKPOINT_VERSION)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s has format version %u; this library reads %d",
                        path, version, DC_CHECKPOINT_VERSION);
    if (fnv1a(p, len - 8) != stored)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s is truncated or corrupt (checksum mismatch)",
                        path);
    const uint32_t n = get_u32(&r);
    if (n > 1u << 20)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s claims %u tensors", path, n);
    entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_load: out of memory");
    for (uint32_t i = 0; i < n; ++i) {
        e[i].name_len = get_u32(&r);
        e[i].name = (const char *)take(&r, e[i].name_len);
        const uint32_t dtype = get_u32(&r), ndim = get_u32(&r);
        bool bad = r.short_read || (dtype != DC_F32 && dtype != DC_F64) || ndim > DC_MAX_DIMS || e[i].name_len > 255;
        int64_t numel = 1;
        for (uint32_t d = 0; !bad && d < ndim; ++d) {
            e[i].shape[d] = (int64_t)get_u64(&r);
            bad = e[i].shape[d] < 0 || (e[i].shape[d] > 0 && numel > INT64_MAX / 16 / e[i].shape[d]);
            numel *= bad ? 1 : e[i].shape[d];
        }
        if (!bad) {
            e[i].dtype = (dc_dtype)dtype;
            e[i].ndim = (int)ndim;
            e[i].bytes = (size_t)numel * dc_dtype_size(e[i].dtype);
            e[i].data = take(&r, e[i].bytes);
        }
        if (bad || r.short_read) {
            free(e);
            return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s: entry %u is malformed", path, i);
        }
    }
    if (r.at != r.len) {
        free(e);
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s has %zu unexpected bytes", path, r.len - r.at);
    }
    *out = e;
    *count = (int)n;
    return DC_OK;
}

dc_status dc_checkpoint_load(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names)
{
    if (!ctx)
        return DC_ERR_ARG;
    dc_status st = check_args(ctx, "dc_checkpoint_load", path, n, tensors, names);
    if (st != DC_OK)
        return st;
    unsigned char *file = NULL;
    size_t len = 0;
    st = read_file(ctx, path, &file, &len);
    if (st != DC_OK)
        return st;
    entry *entries = NULL;
    int count = 0;
    st = parse(ctx, path, file, len, &entries, &count);
    const entry **match = st == DC_OK ? calloc((size_t)(n ? n : 1), sizeof *match) : NULL;
    if (st == DC_OK && !match)
        st = dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_load: out of memory");
    /* Every tensor is matched and checked before any is written. */
    for (int i = 0; st == DC_OK && i < n; ++i) {
        const size_t len_i = strlen(names[i]);
        for (int k = 0; k < count && !match[i]; ++k)
            if (entries[k].name_len == len_i && memcmp(entries[k].name, names[i], len_i) == 0)
                match[i] = &entries[k];
        const dc_tensor *t = tensors[i];
        if (!match[i]) {
            st = dc_error(ctx, DC_ERR_SHAPE, "dc_checkpoint_load: %s has no tensor named \"%s\"", path, names[i]);
            break;
        }
        bool same_shape = match[i]->ndim == t->ndim;
        for (int d = 0; same_shape && d < t->ndim; ++d)
            same_shape = match[i]->shape[d] == t->shape[d];
        if (!same_shape || match[i]->dtype != t->dtype) {
            char want[128], got[128];
            st = dc_error(ctx, same_shape ? DC_ERR_DTYPE : DC_ERR_SHAPE,
                          "dc_checkpoint_load: \"%s\" is %s %s in %s but the tensor is %s %s",
                          names[i], dc_dtype_name(match[i]->dtype),
                          dc_shape_format(got, sizeof got, match[i]->ndim, match[i]->shape), path,
                          dc_dtype_name(t->dtype), dc_tensor_shape_str(t, want, sizeof want));
            break;
        }
        /* refused here, not half way through the copies below */
        if (t->ctx->cuda && !dc_tensor_is_contiguous(t)) {
            st = dc_error(ctx, DC_ERR_UNSUPPORTED,
                          "dc_checkpoint_load: \"%s\" is a strided view on the device; load into a contiguous tensor",
                          names[i]);
            break;
        }
    }
    for (int i = 0; st == DC_OK && i < n; ++i)
        st = dc_tensor_from_host_copy(tensors[i], match[i]->data, match[i]->bytes);
    free(match);
    free(entries);
    free(file);
    return st;
}
