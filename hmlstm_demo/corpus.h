/* A character corpus: text read from files, its symbols, a train/validation
 * split, and batches of parallel streams for truncated backpropagation. */
#ifndef HMLSTM_CORPUS_H
#define HMLSTM_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hm_corpus {
    unsigned char *ids;     /* the text as symbol indices */
    int64_t len;
    int64_t train_len;      /* [0, train_len) trains, the rest validates */
    int vocab;
    unsigned char symbol[256]; /* index -> byte */
    int index[256];            /* byte -> index, -1 if absent */
    double unigram_bits;    /* entropy of the symbol frequencies, bits per symbol */
} hm_corpus;

/* Reads and concatenates the files (a directory stands for its regular
 * files, sorted, skipping *.dat and *.u8), keeps the last `val_fraction` for
 * validation. Returns 0, or -1 with a message in err. */
int hm_corpus_load(hm_corpus *c, int n_paths, const char *const *paths, double val_fraction, char *err,
                   size_t err_size);

void hm_corpus_free(hm_corpus *c);

/* Batch k of [begin, end) cut into `batch` streams: ids[t * batch + b] and
 * targets (the next symbol) for t < steps; k counts on past the last whole
 * batch by wrapping round to the first. Returns 0, or -1 (nothing written)
 * where [begin, end) is not within the corpus or holds no whole batch
 * (hm_corpus_batches), or k is negative. */
int hm_corpus_batch(const hm_corpus *c, int64_t begin, int64_t end, int64_t steps, int64_t batch, int64_t k,
                    float *ids, float *targets);

/* Number of whole batches in [begin, end): 0 where begin is negative, the
 * range empty, or steps or batch below 1. */
int64_t hm_corpus_batches(int64_t begin, int64_t end, int64_t steps, int64_t batch);

#endif /* HMLSTM_CORPUS_H */
