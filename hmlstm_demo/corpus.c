#define _POSIX_C_SOURCE 200809L
#include "corpus.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct text {
    unsigned char *p;
    size_t len, cap;
} text;

static int append_file(text *t, const char *path, char *err, size_t err_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (t->cap - t->len < 65536) {
            size_t cap = t->cap ? 2 * t->cap : 1 << 20;
            unsigned char *p = realloc(t->p, cap);
            if (!p) {
                fclose(f);
                snprintf(err, err_size, "out of memory reading %s", path);
                return -1;
            }
            t->p = p;
            t->cap = cap;
        }
        size_t got = fread(t->p + t->len, 1, t->cap - t->len, f);
        t->len += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, err_size, "cannot read %s", path);
        return -1;
    }
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int append_dir(text *t, const char *dir, char *err, size_t err_size)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, err_size, "cannot open directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || has_suffix(e->d_name, ".dat") || has_suffix(e->d_name, ".u8"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown) {
                rc = -1;
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(path))) {
            rc = -1;
            break;
        }
        ++n;
    }
    closedir(d);
    if (rc == 0) {
        qsort(names, n, sizeof *names, by_name);
        for (size_t i = 0; i < n && rc == 0; ++i)
            rc = append_file(t, names[i], err, err_size);
        if (n == 0) {
            snprintf(err, err_size, "directory %s has no text files", dir);
            rc = -1;
        }
    } else {
        snprintf(err, err_size, "out of memory listing %s", dir);
    }
    for (size_t i = 0; i < n; ++i)
        free(names[i]);
    free(names);
    return rc;
}

int hm_corpus_load(hm_corpus *c, int n_paths, const char *const *paths, double val_fraction, char *err,
                   size_t err_size)
{
    memset(c, 0, sizeof *c);
    if (!(val_fraction > 0 && val_fraction < 0.5)) {
        snprintf(err, err_size, "the validation fraction %g must be in (0, 0.5)", val_fraction);
        return -1;
    }
    text t = {0};
    for (int i = 0; i < n_paths; ++i) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            snprintf(err, err_size, "cannot read %s: %s", paths[i], strerror(errno));
            free(t.p);
            return -1;
        }
        if ((S_ISDIR(st.st_mode) ? append_dir(&t, paths[i], err, err_size)
                                 : append_file(&t, paths[i], err, err_size)) != 0) {
            free(t.p);
            return -1;
        }
    }
    if (t.len < 10000) {
        snprintf(err, err_size, "the corpus has %zu bytes; give at least 10000", t.len);
        free(t.p);
        return -1;
    }
    int64_t count[256] = {0};
    for (size_t i = 0; i < t.len; ++i)
        count[t.p[i]]++;
    for (int b = 0; b < 256; ++b) {
        c->index[b] = -1;
        if (count[b]) {
            c->index[b] = c->vocab;
            c->symbol[c->vocab++] = (unsigned char)b;
            const double p = (double)count[b] / (double)t.len;
            c->unigram_bits -= p * log2(p);
        }
    }
    for (size_t i = 0; i < t.len; ++i)
        t.p[i] = (unsigned char)c->index[t.p[i]];
    c->ids = t.p;
    c->len = (int64_t)t.len;
    c->train_len = (int64_t)((1.0 - val_fraction) * (double)t.len);
    return 0;
}

void hm_corpus_free(hm_corpus *c)
{
    free(c->ids);
    memset(c, 0, sizeof *c);
}

int64_t hm_corpus_batches(int64_t begin, int64_t end, int64_t steps, int64_t batch)
{
    if (begin < 0 || end <= begin || steps < 1 || batch < 1)
        return 0;
    const int64_t stream = (end - begin) / batch;
    return stream > 1 ? (stream - 1) / steps : 0;
}

int hm_corpus_batch(const hm_corpus *c, int64_t begin, int64_t end, int64_t steps, int64_t batch, int64_t k,
                    float *ids, float *targets)
{
    const int64_t per_stream = hm_corpus_batches(begin, end, steps, batch);
    if (end > c->len || per_stream < 1 || k < 0)
        return -1;
    /* the last target read: begin + (batch - 1) stream + per_stream steps,
     * below begin + batch stream <= end, as per_stream steps < stream */
    const int64_t stream = (end - begin) / batch;
    const int64_t offset = k % per_stream * steps;
    for (int64_t b = 0; b < batch; ++b) {
        const int64_t base = begin + b * stream + offset;
        for (int64_t t = 0; t < steps; ++t) {
            ids[t * batch + b] = (float)c->ids[base + t];
            targets[t * batch + b] = (float)c->ids[base + t + 1];
        }
    }
    return 0;
}
