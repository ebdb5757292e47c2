/* Files and process statistics shared by the programs that compare dualcast
 * with PyTorch and JAX (bench/peers/): .npy files that NumPy reads, and the
 * process's resident memory. */
#ifndef DC_BENCH_PEER_IO_H
#define DC_BENCH_PEER_IO_H

#include <stddef.h>
#include <stdint.h>

#include <dualcast.h>

/* Writes n = prod(shape) float32 values as a NumPy .npy file (version 1.0,
 * little-endian). ndim may be 0 (a scalar). Returns 0, or -1 with errno set. */
int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data);

/* The same for int64 values (NumPy's '<i8'). */
int npy_write_i64(const char *path, int ndim, const int64_t *shape, const int64_t *data);

/* Writes a float32 tensor as dir/name.npy. */
dc_status npy_write_tensor(const char *dir, const char *name, const dc_tensor *t);

/* Resident set size now / its peak since the last reset, in bytes (from
 * /proc/self/status); -1 when unknown. */
int64_t proc_rss_bytes(void);
int64_t proc_peak_rss_bytes(void);

/* Gives freed heap memory back to the system and resets the peak resident
 * set size to the current one, so that the next peak measures what comes
 * after this call. */
void proc_reset_peak_rss(void);

#endif /* DC_BENCH_PEER_IO_H */
