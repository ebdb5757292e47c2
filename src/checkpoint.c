/* Checkpoint files: header, named tensors, checksum (see checkpoint.h).
 * Integers are little-endian. */
#define _POSIX_C_SOURCE 200809L /* open, fstat, fsync, fchmod, strndup */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* A file of its own beside `path`, created with O_EXCL under a short name
 * (within NAME_MAX whatever the target's name), so
 * that saves to one path from several threads or processes never share one
 * (".dc" and 16 hex digits, then ".tmp").
 * Its mode is the kernel's default for a new file (0666 less the umask).
 * Returns the descriptor and the name in tmp (malloc'd), or -1 with errno. */
static int create_beside(const char *path, char **tmp)
{
    static _Atomic unsigned long counter;
    const char *slash = strrchr(path, '/');
    const size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    *tmp = malloc(dir_len + 32);
    if (!*tmp) {
        errno = ENOMEM;
        return -1;
    }
    for (int attempt = 0; attempt < 100; ++attempt) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = ((uint64_t)getpid() << 40) ^ ((uint64_t)++counter << 20) ^ (uint64_t)ts.tv_nsec ^
                     ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)tmp;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        snprintf(*tmp, dir_len + 32, "%.*s.dc%016llx.tmp", (int)dir_len, path, (unsigned long long)x);
        const int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static bool write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Makes the rename durable: the directory entry reaches the disk. */
static bool sync_directory(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return false;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return false;
    const bool ok = fsync(fd) == 0 || errno == EINVAL; /* some file systems cannot sync a directory */
    close(fd);
    return ok;
}

/* Writes the image to a new file beside `path` (with the existing file's
 * permission bits, if there is one), flushes it to the disk, renames it over
 * `path` and flushes the directory: a reader sees the old file or the new
 * one, whole, and after a power loss one of them is there. */
static dc_status write_atomically(dc_ctx *ctx, const char *path, const unsigned char *image, size_t len)
{
    struct stat old;
    const bool replacing = stat(path, &old) == 0;
    if (replacing && !S_ISREG(old.st_mode))
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_save: %s exists and is not a regular file", path);
    char *tmp = NULL;
    const int fd = create_beside(path, &tmp);
    if (fd < 0) {
        const int err = errno;
        free(tmp);
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_save: cannot create a file beside %s: %s", path,
                        strerror(err));
    }
    const char *step = "write";
    bool ok = write_all(fd, image, len);
    if (ok && replacing && fchmod(fd, old.st_mode & 07777) != 0) {
        ok = false;
        step = "keep the permissions of";
    }
    if (ok && fsync(fd) != 0) {
        ok = false;
        step = "flush";
    }
    const int err_write = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        step = "close";
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        step = "rename over";
    }
    const int err = ok ? 0 : (errno ? errno : err_write);
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_save: cannot %s %s: %s", step, path, strerror(err));
    }
    free(tmp);
    if (!sync_directory(path))
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_save: wrote %s but cannot flush its directory: %s", path,
                        strerror(errno));
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

    st = write_atomically(ctx, path, b.p, b.len);
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

/* Reads n bytes at offset `at`; false on an error or an early end. */
static bool read_at(int fd, off_t at, void *dst, size_t n)
{
    unsigned char *p = dst;
    while (n > 0) {
        const ssize_t got = pread(fd, p, n, at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        at += got;
        n -= (size_t)got;
    }
    return true;
}

static uint32_t le32(const unsigned char *x)
{
    return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}

/* Checks what the header and the entries' headers describe, reading no
 * tensor data: the magic, the version, the count, each entry's name length,
 * dtype, rank and shape, and that the data they describe, then the
 * checksum, end exactly where the file does. DC_OK, or DC_ERR_FORMAT with
 * the reason. So a file is read whole only when it is as long as its
 * header says. */
static dc_status check_description(dc_ctx *ctx, const char *path, int fd, uint64_t size)
{
    unsigned char head[sizeof magic + 8];
    if (size < sizeof head + 8 || !read_at(fd, 0, head, sizeof head) || memcmp(head, magic, sizeof magic) != 0)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s is not a dualcast checkpoint%s", path,
                        size < sizeof head + 8 ? " (too short)" : "");
    const uint32_t version = le32(head + sizeof magic), n = le32(head + sizeof magic + 4);
    if (version != DC_CHECKPOINT_VERSION)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s has format version %u; this library reads %d",
                        path, version, DC_CHECKPOINT_VERSION);
    if (n > 1u << 20)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s claims %u tensors", path, n);
    const uint64_t end = size - 8; /* where the checksum starts */
    uint64_t at = sizeof head;
    for (uint32_t i = 0; i < n; ++i) {
        unsigned char x[12];
        bool bad = at + 4 > end || !read_at(fd, (off_t)at, x, 4) || le32(x) > 255;
        if (!bad) {
            at += 4 + le32(x);
            bad = at + 8 > end || !read_at(fd, (off_t)at, x, 8);
        }
        const uint32_t dtype = bad ? 0 : le32(x), ndim = bad ? 0 : le32(x + 4);
        bad = bad || (dtype != DC_F32 && dtype != DC_F64) || ndim > DC_MAX_DIMS;
        uint64_t numel = 1;
        at += 8;
        for (uint32_t d = 0; !bad && d < ndim; ++d, at += 8) {
            bad = at + 8 > end || !read_at(fd, (off_t)at, x, 8);
            const uint64_t dim = bad ? 0 : (uint64_t)le32(x) | (uint64_t)le32(x + 4) << 32;
            bad = bad || dim > (uint64_t)INT64_MAX || (dim > 0 && numel > (uint64_t)(INT64_MAX / 16) / dim);
            numel *= bad ? 1 : dim;
        }
        if (!bad) {
            const uint64_t bytes = numel * dc_dtype_size((dc_dtype)dtype);
            bad = bytes > end - at;
            at += bad ? 0 : bytes;
        }
        if (bad)
            return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s: entry %u is malformed or truncated", path,
                            i);
    }
    if (at != end)
        return dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s has %llu unexpected bytes", path,
                        (unsigned long long)(end - at));
    return DC_OK;
}

/* The file's bytes: only from a regular file (a device or a FIFO could be
 * read forever), and only when it is as long as its header describes. */
static dc_status read_file(dc_ctx *ctx, const char *path, unsigned char **data, size_t *len)
{
    /* O_NONBLOCK: opening a FIFO with no writer does not wait */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int err = errno;
        close(fd);
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: cannot stat %s: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: %s is not a regular file", path);
    }
    const uint64_t size = (uint64_t)st.st_size;
    dc_status status = check_description(ctx, path, fd, size);
    unsigned char *p = NULL;
    if (status == DC_OK && !(p = malloc(size ? (size_t)size : 1)))
        status = dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_load: out of memory for the %llu bytes of %s",
                          (unsigned long long)size, path);
    if (status == DC_OK && !read_at(fd, 0, p, (size_t)size))
        status = dc_error(ctx, DC_ERR_IO, "dc_checkpoint_load: cannot read %s (did it change while read?)", path);
    close(fd);
    if (status != DC_OK) {
        free(p);
        return status;
    }
    *data = p;
    *len = (size_t)size;
    return DC_OK;
}

/* Orders entries by name (bytes, then length), for qsort. */
static int by_name(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    const uint32_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    const int c = n ? memcmp(x->name, y->name, n) : 0;
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
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
        bool bad = r.short_read || (dtype != DC_F32 && dtype != DC_F64) || ndim > DC_MAX_DIMS || e[i].name_len == 0 ||
                   e[i].name_len > 255;
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
    /* a name twice would load whichever comes first: refused */
    const entry **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) {
        free(e);
        return dc_error(ctx, DC_ERR_MEMORY, "dc_checkpoint_load: out of memory");
    }
    for (uint32_t i = 0; i < n; ++i)
        sorted[i] = &e[i];
    qsort(sorted, n, sizeof *sorted, by_name);
    for (uint32_t i = 1; i < n; ++i)
        if (by_name(&sorted[i - 1], &sorted[i]) == 0) {
            const int len_i = (int)sorted[i]->name_len;
            const char *name = sorted[i]->name;
            free(sorted);
            dc_status st = dc_error(ctx, DC_ERR_FORMAT, "dc_checkpoint_load: %s holds two tensors named \"%.*s\"",
                                    path, len_i, name);
            free(e);
            return st;
        }
    free(sorted);
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
    const int again = st == DC_OK ? dc_tensors_repeated(ctx, n, tensors) : -1;
    if (again >= 0)
        st = dc_error(ctx, DC_ERR_ARG, "dc_checkpoint_load: tensor %d (\"%s\") is given twice (one load would be lost)",
                      again, names[again]);
    for (int i = 0; st == DC_OK && i < n; ++i) {
        char what[96];
        snprintf(what, sizeof what, "tensor %d (\"%.48s\")", i, names[i]);
        if ((st = dc_tensor_check_live(tensors[i], "dc_checkpoint_load", what)) != DC_OK)
            break;
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
