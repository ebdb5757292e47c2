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
 * The file is written beside the target under a name of its own (created
 * exclusively, so saves to one path from several threads or processes never
 * share it), flushed to the disk, renamed over the target and its directory
 * flushed: readers see the old file or the new one, whole, and after a
 * power loss one of them is there. Saving over a file keeps its permission
 * bits; a new file gets 0666 less the umask. A failure leaves any existing
 * file untouched. DC_ERR_IO on failure (a target that exists and is not a
 * regular file included), DC_ERR_ARG for bad arguments, a name used twice
 * or a name of 0 or more than 255 bytes. */
dc_status dc_checkpoint_save(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names);

/* Loads the tensors named `names` from `path` into `tensors` (each must
 * match the stored dtype and shape). Only a regular file is read (a device
 * or a FIFO is refused with DC_ERR_IO), and only once its header and its
 * entries' headers describe exactly its length: nothing more than they
 * describe is ever read. The whole file is checked first: a truncated,
 * overlong or corrupt file, another format version, a name stored twice or
 * an empty one (DC_ERR_FORMAT), a missing name or a mismatched shape
 * (DC_ERR_SHAPE), a mismatched dtype (DC_ERR_DTYPE), a strided view on a GPU
 * as destination (DC_ERR_UNSUPPORTED), a tensor given twice (DC_ERR_ARG: one
 * load would be lost), a tape tensor whose tape was reset since
 * (DC_ERR_STATE) is refused with a message, and no tensor is changed. */
dc_status dc_checkpoint_load(dc_ctx *ctx, const char *path, int n, dc_tensor *const *tensors,
                             const char *const *names);

#ifdef __cplusplus
}
#endif

#endif /* DUALCAST_CHECKPOINT_H */
