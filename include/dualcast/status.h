/* Status codes returned by every fallible dualcast function. */
#ifndef DUALCAST_STATUS_H
#define DUALCAST_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dc_status {
    DC_OK = 0,
    DC_ERR_ARG,         /* a NULL, out-of-range or inconsistent argument */
    DC_ERR_SHAPE,       /* shapes that do not broadcast or do not fit the op */
    DC_ERR_DTYPE,       /* element types that differ or are not supported */
    DC_ERR_STATE,       /* a call out of order: backward twice, after a reset */
    DC_ERR_MEMORY,      /* an allocation failed */
    DC_ERR_DEVICE,      /* no usable CUDA device (a build without CUDA included), or a CUDA call failed */
    DC_ERR_IO,          /* reading or writing a file failed */
    DC_ERR_FORMAT,      /* a file's contents are invalid */
    DC_ERR_UNSUPPORTED, /* not available in this build or on this backend */
    DC_ERR_MISMATCH,    /* a check found values that disagree (dc_gradcheck) */
    DC_STATUS_COUNT
} dc_status;

/* A constant, human-readable name for a status ("DC_ERR_SHAPE"). */
const char *dc_status_name(dc_status status);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_STATUS_H */
