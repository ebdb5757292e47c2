#include "peer_io.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes n = prod(shape) elements of `size` bytes, NumPy type `descr`. */
static int npy_write(const char *path, const char *descr, size_t size, int ndim, const int64_t *shape,
                     const void *data)
{
    char dims[160] = "";
    size_t used = 0;
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) {
        used += (size_t)snprintf(dims + used, sizeof dims - used, d ? " %lld," : "%lld,", (long long)shape[d]);
        n *= shape[d];
    }
    if (ndim > 1)
        dims[used - 1] = '\0'; /* (3, 4) but (5,) */
    char header[256];
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr,
                       dims);
    /* magic (6) + version (2) + header length (2) + header, padded with
     * spaces to a multiple of 64 and ended by a newline */
    const int total = (10 + len + 1 + 63) / 64 * 64;
    while (10 + len < total - 1)
        header[len++] = ' ';
    header[len++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const unsigned char pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(header, 1, (size_t)len, f) == (size_t)len &&
             (n == 0 || fwrite(data, size, (size_t)n, f) == (size_t)n);
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data)
{
    return npy_write(path, "<f4", sizeof *data, ndim, shape, data);
}

int npy_write_i64(const char *path, int ndim, const int64_t *shape, const int64_t *data)
{
    return npy_write(path, "<i8", sizeof *data, ndim, shape, data);
}

dc_status npy_write_tensor(const char *dir, const char *name, const dc_tensor *t)
{
    if (!t || dc_tensor_dtype(t) != DC_F32)
        return DC_ERR_ARG;
    const int64_t n = dc_tensor_numel(t);
    float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf)
        return DC_ERR_MEMORY;
    dc_status st = dc_tensor_to_host(t, buf, (size_t)n * sizeof *buf);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (st == DC_OK && npy_write_f32(path, dc_tensor_ndim(t), dc_tensor_shape(t), buf) != 0)
        st = DC_ERR_ARG;
    free(buf);
    return st;
}

static int64_t status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    int64_t kib = -1;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            kib = atoll(line + k + 1);
            break;
        }
    fclose(f);
    return kib;
}

int64_t proc_rss_bytes(void)
{
    const int64_t kib = status_kib("VmRSS");
    return kib < 0 ? -1 : kib * 1024;
}

int64_t proc_peak_rss_bytes(void)
{
    const int64_t kib = status_kib("VmHWM");
    return kib < 0 ? -1 : kib * 1024;
}

void proc_reset_peak_rss(void)
{
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}
