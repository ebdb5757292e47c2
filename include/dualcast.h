/* dualcast: reverse-mode automatic differentiation in which each fused
 * elementwise broadcast is one tape node, differentiated in forward mode with
 * dual numbers. Include this header; link dualcast::dualcast. */
#ifndef DUALCAST_H
#define DUALCAST_H

#include "dualcast/status.h"
#include "dualcast/context.h"
#include "dualcast/tensor.h"
#include "dualcast/tape.h"
#include "dualcast/ops.h"
#include "dualcast/reduce.h"
#include "dualcast/bfn_abi.h"
#include "dualcast/broadcast.h"
#include "dualcast/assoc.h"
#include "dualcast/gradcheck.h"
#include "dualcast/optim.h"
#include "dualcast/checkpoint.h"
#include "dualcast/blas.h"
#include "dualcast/graph.h"
#include "dualcast/sparse.h"

#define DUALCAST_VERSION_MAJOR 0
#define DUALCAST_VERSION_MINOR 1
#define DUALCAST_VERSION_PATCH 0

#endif /* DUALCAST_H */
