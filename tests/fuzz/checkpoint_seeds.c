/* Writes the seed corpus of fuzz_checkpoint into a folder (the argument):
 * checkpoints written by dc_checkpoint_save that fuzz_checkpoint's loads
 * accept or refuse for each reason, and the "DCFZPATH" inputs that load from
 * paths other than a regular file (those of known bugs left out; see
 * known/README.md). Built with the fuzz targets; the files it writes are in
 * corpus/fuzz_checkpoint/:
 *   build-fuzz/tests/fuzz/fuzz_checkpoint_seeds tests/fuzz/corpus/fuzz_checkpoint */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dualcast.h>

static dc_ctx *ctx;
static const char *dir;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_checkpoint_seeds: %s: %s\n", what, dc_last_error(ctx));
    exit(1);
}

static dc_tensor *tensor(dc_dtype dtype, int ndim, const int64_t *shape)
{
    dc_tensor *t = dc_tensor_new(ctx, dtype, ndim, shape);
    if (!t)
        fail("dc_tensor_new");
    for (int64_t i = 0; i < dc_tensor_numel(t); ++i)
        if (dc_tensor_set(t, i, 0.5 * (double)i - 1.0) != DC_OK)
            fail("dc_tensor_set");
    return t;
}

static void save(const char *name, int n, dc_tensor *const *tensors, const char *const *names)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (dc_checkpoint_save(ctx, path, n, tensors, names) != DC_OK)
        fail(path);
}

/* "DCFZPATH", the kind, then `rest` (the contents of a pipe or a link's
 * target, for kinds 3 and 4). */
static void special(const char *name, unsigned char kind, const char *rest_file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *out = fopen(path, "wb");
    if (!out)
        fail(path);
    fwrite("DCFZPATH", 1, 8, out);
    fputc(kind, out);
    if (rest_file) {
        snprintf(path, sizeof path, "%s/%s", dir, rest_file);
        FILE *in = fopen(path, "rb");
        if (!in)
            fail(path);
        int c;
        while ((c = fgetc(in)) != EOF)
            fputc(c, out);
        fclose(in);
    }
    fclose(out);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    ctx = dc_ctx_new(&o, NULL);
    if (!ctx)
        fail("dc_ctx_new");
    char long_name[256];
    memset(long_name, 'n', 255);
    long_name[255] = '\0';
    /* what fuzz_checkpoint loads into (make_targets there) */
    static const int64_t s34[] = {3, 4}, s4[] = {4}, s05[] = {0, 5}, s23[] = {2, 3}, s212[] = {2, 1, 2},
                         s8[] = {1, 1, 2, 1, 1, 1, 1, 1}, s43[] = {4, 3};
    dc_tensor *t[] = {tensor(DC_F32, 2, s34), tensor(DC_F64, 1, s4),  tensor(DC_F32, 0, NULL),
                      tensor(DC_F64, 2, s05), tensor(DC_F32, 2, s23), tensor(DC_F64, 3, s212),
                      tensor(DC_F32, 8, s8)};
    const char *names[] = {"w", "b", "s", "e", "v", long_name, "rank8"};
    const int n = (int)(sizeof t / sizeof t[0]);
    save("all.ckpt", n, t, names); /* every load succeeds */
    const char *reversed[] = {"rank8", long_name, "v", "e", "s", "b", "w"};
    dc_tensor *t_reversed[] = {t[6], t[5], t[4], t[3], t[2], t[1], t[0]};
    save("all_reversed.ckpt", n, t_reversed, reversed);
    save("only_w.ckpt", 1, t, names);     /* the pair loads, the others miss names */
    save("none.ckpt", 0, NULL, NULL);     /* only the load of no tensor succeeds */
    dc_tensor *w64 = tensor(DC_F64, 2, s34); /* dtype mismatch */
    save("w_f64.ckpt", 1, &w64, names);
    dc_tensor *w43 = tensor(DC_F32, 2, s43); /* shape mismatch */
    save("w_transposed.ckpt", 1, &w43, names);
    special("path_dir", 0, NULL);
    special("path_pipe", 3, "all.ckpt");
    special("path_link", 4, "all.ckpt");
    special("path_missing", 5, NULL);
    special("path_empty", 6, NULL);
    special("path_dev_null", 7, NULL);
    for (int i = 0; i < n; ++i)
        dc_tensor_free(t[i]);
    dc_tensor_free(w64);
    dc_tensor_free(w43);
    dc_ctx_free(ctx);
    return 0;
}
