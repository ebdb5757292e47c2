/* The op table: each op's name and adjoint, from the op list. */
#include "backward.h"

#define DC_OP_ROW_EW(ID, name, n_in, fwd, bwd, reads, n_targets, t0, t1) \
    [DC_OP_##ID] = {#name, dc_elementwise_backward},
#define DC_OP_ROW_OP(ID, name, backward) [DC_OP_##ID] = {#name, backward},
const dc_op_info dc_op_table[DC_OP_COUNT] = {DC_OP_LIST(DC_OP_ROW_EW, DC_OP_ROW_OP)};
