#include "kernels.h"

#include "../../broadcast/pp.h"
#include "../../dual/scalar_math.h"

#define DC_S float
#define DC_SFX f32
#include "kernel_formulas.h"
#include "kernels_impl.h"
#undef DC_S
#undef DC_SFX

#define DC_S double
#define DC_SFX f64
#include "kernel_formulas.h"
#include "kernels_impl.h"
#undef DC_S
#undef DC_SFX

#define NAME_ROW(ID, name, n_in, n_out) [DC_K_##ID] = #name,
static const char *const kernel_names[] = {DC_KERNEL_LIST(NAME_ROW)[DC_K_PARTIALS_BWD] = "partials_bwd"};
#undef NAME_ROW
_Static_assert(sizeof kernel_names / sizeof kernel_names[0] == DC_K_COUNT, "every kernel needs a name");

dc_chunk_fn dc_cpu_kernel(dc_kernel_id id, dc_dtype dtype)
{
    return dtype == DC_F64 ? kernel_table_f64[id] : kernel_table_f32[id];
}

const char *dc_kernel_name(dc_kernel_id id) { return (id >= 0 && id < DC_K_COUNT) ? kernel_names[id] : "?"; }
