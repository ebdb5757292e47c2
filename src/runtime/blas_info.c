/* What the CPU matrix products run on (include/dualcast/blas.h). */
#include <dualcast/blas.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* OpenBLAS's self-description, where the BLAS linked is OpenBLAS: weak, so
 * that another BLAS leaves them NULL instead of failing to link. */
#if defined(__GNUC__) && defined(__ELF__)
#define DC_WEAK __attribute__((weak))
#else
#define DC_WEAK
#endif
extern char *openblas_get_config(void) DC_WEAK;
extern char *openblas_get_corename(void) DC_WEAK;

/* OpenBLAS's x86 kernel sets that use AVX2 or AVX-512 (the names
 * openblas_get_corename gives, compared without case). Any other on a CPU
 * with AVX2 is a fallback (Prescott, Core2, Nehalem, Sandybridge, ...). */
static const char *const avx2_cores[] = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"};

static bool listed(const char *core, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (strcasecmp(core, list[i]) == 0)
            return true;
    return false;
}

static void cpu_vector(bool *avx2, bool *avx512)
{
    *avx2 = *avx512 = false;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    *avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    *avx512 = __builtin_cpu_supports("avx512f");
#endif
}

void dc_blas_info_get(dc_blas_info *info)
{
    memset(info, 0, sizeof *info);
    const char *config = openblas_get_config ? openblas_get_config() : NULL;
    const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
    snprintf(info->library, sizeof info->library, "%s", config ? config : "a BLAS that does not describe itself");
    snprintf(info->core, sizeof info->core, "%s", core ? core : "");
    bool avx2, avx512;
    cpu_vector(&avx2, &avx512);
    snprintf(info->cpu_vector, sizeof info->cpu_vector, "%s", avx512 ? "AVX-512" : avx2 ? "AVX2" : "");
    if (!core)
        return;
    const size_t n2 = sizeof avx2_cores / sizeof *avx2_cores;
    if (avx512 && !listed(core, avx2_cores, n2))
        snprintf(info->warning, sizeof info->warning,
                 "OpenBLAS runs its %s kernels, which use neither AVX2 nor AVX-512, on a CPU with AVX-512: "
                 "matrix products may run several times slower than they can; set OPENBLAS_CORETYPE=SkylakeX "
                 "(or Cooperlake, SapphireRapids) before the program starts",
                 core);
    else if (avx2 && !listed(core, avx2_cores, n2))
        snprintf(info->warning, sizeof info->warning,
                 "OpenBLAS runs its %s kernels, which do not use AVX2, on a CPU with AVX2: matrix products may "
                 "run several times slower than they can; set OPENBLAS_CORETYPE=Haswell (Intel) or Zen (AMD) "
                 "before the program starts",
                 core);
}
