/* Saving and loading parameters.
 *
 * A checkpoint file holds named tensors: a header ("DUALCAST", format
 * version), each tensor's name, dtype, shape and data, then a 64-bit
 * checksum of everything before it. */
#ifndef DUALCAST_CHECKPOINT_H
#define DUALCAST_CHECKPOINT_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DC_CHECKPOINT_VERSION 1

/* Writes n tensors with their names (unique, at most 255 bytes) to `path`.
 * The file is written beside the target and renamed over it once complete,
 * so a failure leaves any existing file untouched. DC_ERR_IO on failure. */
dc_status dc_checkpoint_save(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names);

/* Loads the tensors named `names` from `path` into `tensors` (each must
 * match the stored dtype and shape). The whole file is checked first: a
 * truncated or corrupt file (DC_ERR_FORMAT), another format version
 * (DC_ERR_FORMAT), a missing name or a mismatched shape (DC_ERR_SHAPE), a
 * mismatched dtype (DC_ERR_DTYPE), a strided view on a GPU as destination
 * (DC_ERR_UNSUPPORTED) is refused with a message, and no tensor is changed. */
dc_status dc_checkpoint_load(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_CHECKPOINT_H */
