/* Small helpers shared by the benchmark programs: timing, medians, the
 * machine's description and its measured streaming bandwidth. */
#ifndef DC_BENCH_COMMON_H
#define DC_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dualcast.h>

/* Seconds on a monotonic clock. */
double bench_now(void);

/* Median of n values (sorts them in place). */
double bench_median(double *v, int n);

/* Forward and backward times of one variant, one pair per timed round. */
typedef struct bench_samples {
    double *fwd, *bwd, *total; /* seconds; total = fwd + bwd */
    int n, cap;
} bench_samples;

/* Room for `cap` rounds; exits with a message when out of memory. */
void bench_samples_init(bench_samples *s, int cap);
/* Records one round (ignored beyond the capacity). */
void bench_samples_add(bench_samples *s, double fwd, double bwd);
/* Medians of the rounds recorded (sorts the samples in place). */
void bench_samples_medians(bench_samples *s, double *fwd, double *bwd, double *total);
void bench_samples_free(bench_samples *s);

/* A one-line description of the CPU ("AMD EPYC ..., 2 threads"). */
const char *bench_cpu_name(void);

/* Prints "machine: <bench_cpu_name()>" and the BLAS line (library and the
 * kernels it chose), and, where those kernels are a generic fallback on
 * this CPU, a warning with the remedy, on stdout and stderr. */
void bench_print_machine(void);

/* Streaming bandwidth in GB/s of a plain OpenMP loop reading `n_in` float
 * arrays and writing `n_out` (each of n elements): median of `reps` runs.
 * Shapes: 4 in and 5 out, or 1 in and 1 out (a copy). */
double bench_stream_gbs(int64_t n, int n_in, int n_out, int reps);

/* The same loop kept for a whole run, its arrays allocated (and touched)
 * once, so that the bandwidth can be sampled again beside each measurement
 * it is compared with: on a shared machine it drifts within a run. */
typedef struct bench_stream {
    int64_t n;
    int n_in, n_out;
    float *a[9];
} bench_stream;

/* Allocates and touches the arrays and runs the loop once; exits with a
 * message when out of memory or for a shape other than those above. */
void bench_stream_init(bench_stream *s, int64_t n, int n_in, int n_out);
/* GB/s: the median of `reps` passes of the loop. */
double bench_stream_sample(bench_stream *s, int reps);
void bench_stream_free(bench_stream *s);

/* Whether name is one of the comma-separated names in list (a NULL list
 * holds every name): the programs' --ops filters. */
bool bench_list_has(const char *list, const char *name);

/* The median of reps calls of once(arg), each returning seconds, after
 * two calls not timed (warm-up); exits with a message when out of memory. */
double bench_median_of(double (*once)(void *arg), void *arg, int reps);

/* The copy bandwidth of src's device, GB/s (bytes read and written): the
 * median of reps copies of src (dc_tensor_copy into a tensor of its shape),
 * each timed from the device at rest to the device at rest, as the
 * programs time an iteration; exits with a message on failure. */
double bench_copy_gbs(dc_ctx *ctx, const dc_tensor *src, int reps);

/* One benchmark case of the programs that time an op and its gradient
 * (bench_reduce, bench_sparse): `run` records the op on the tape (or runs it
 * unrecorded) and returns its output, `seed` gives the output's adjoint, and
 * the gradients of `params` (NULL entries skipped) are cleared before each
 * iteration. */
typedef struct bench_step {
    dc_ctx *ctx;
    dc_tape *tape;
    dc_tensor *(*run)(dc_tape *tape, const void *arg);
    const dc_tensor *(*seed)(const void *arg);
    const void *arg;
    dc_tensor *params[2];
} bench_step;

/* One iteration, from the device at rest to the device at rest
 * (dc_ctx_synchronize): the op alone (gradient false, nothing recorded) or
 * the op recorded and its adjoint from the seed (dc_backward_with). Returns
 * seconds, the output in *out where out is not NULL; exits with the
 * library's message on a failure. */
double bench_step_once(const bench_step *s, bool gradient, dc_tensor **out);

/* The medians of `reps` iterations of the op alone (*primal) and of the op
 * and its adjoint (*gradient), after two of each not timed; the two kinds
 * alternate, so that both meet the machine in the same state (on a shared
 * machine, timed one block after the other, their ratio moved with the
 * load between the blocks). */
void bench_step_medians(const bench_step *s, int reps, double *primal, double *gradient);

/* Fills with uniform values in [lo, hi) from a fixed seed. */
void bench_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed);

#endif /* DC_BENCH_COMMON_H */
