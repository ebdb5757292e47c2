/* The adjoint of each op, as listed in op_table.c. */
#ifndef DC_OPS_BACKWARD_H
#define DC_OPS_BACKWARD_H

#include "../tape_internal.h"

dc_status dc_elementwise_backward(dc_tape *tape, dc_node *node); /* elementwise.c */
dc_status dc_sum_backward(dc_tape *tape, dc_node *node);         /* reduce.c */
dc_status dc_matmul_backward(dc_tape *tape, dc_node *node);      /* matmul.c */
dc_status dc_transpose_backward(dc_tape *tape, dc_node *node);   /* layout.c */
dc_status dc_reshape_backward(dc_tape *tape, dc_node *node);     /* layout.c */
dc_status dc_slice_backward(dc_tape *tape, dc_node *node);       /* layout.c */
dc_status dc_concat_backward(dc_tape *tape, dc_node *node);      /* layout.c */
dc_status dc_embedding_backward(dc_tape *tape, dc_node *node);   /* embedding.c */
dc_status dc_cross_entropy_backward(dc_tape *tape, dc_node *node); /* cross_entropy.c */
dc_status dc_broadcast_fn_backward(dc_tape *tape, dc_node *node); /* broadcast_fn.c */
dc_status dc_reduce_backward(dc_tape *tape, dc_node *node);     /* reductions.c */
dc_status dc_segment_reduce_backward(dc_tape *tape, dc_node *node); /* segment_reduce.c */
dc_status dc_scan_backward(dc_tape *tape, dc_node *node);        /* scan.c */
dc_status dc_spmm_backward(dc_tape *tape, dc_node *node);         /* ../sparse/spmm.c */
dc_status dc_sddmm_backward(dc_tape *tape, dc_node *node);        /* ../sparse/spmm.c */
dc_status dc_csr_sum_backward(dc_tape *tape, dc_node *node);      /* ../sparse/csr_segment.c */
dc_status dc_csr_expand_backward(dc_tape *tape, dc_node *node);   /* ../sparse/csr_segment.c */
dc_status dc_csr_to_dense_backward(dc_tape *tape, dc_node *node); /* ../sparse/csr_layout.c */
dc_status dc_csr_sample_backward(dc_tape *tape, dc_node *node);   /* ../sparse/csr_layout.c */
dc_status dc_csr_permute_backward(dc_tape *tape, dc_node *node);  /* ../sparse/csr_layout.c */
dc_status dc_reduce_fn_backward(dc_tape *tape, dc_node *node);    /* assoc.c */
dc_status dc_scan_fn_backward(dc_tape *tape, dc_node *node);      /* assoc.c */
dc_status dc_segment_reduce_fn_backward(dc_tape *tape, dc_node *node); /* assoc.c */

#endif /* DC_OPS_BACKWARD_H */
