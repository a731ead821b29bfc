/* The instruction set the CPU kernels use: the best the CPU and the OS
 * support (gemm_avx2_cpu, gemm_avx512_cpu), or the one TANDEM_ISA names
 * (portable, avx2, avx512), read once per process. */
#include "ops/nn.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int isa_level = -1; /* racing first calls store the same value */
static char isa_err[160];         /* written before isa_level is stored */

static const char *const isa_names[] = {"portable", "avx2", "avx512"};

static int isa_pick(void)
{
    int best = gemm_avx512_cpu() ? OP_ISA_AVX512 : gemm_avx2_cpu() ? OP_ISA_AVX2 : OP_ISA_PORTABLE;
    const char *v = getenv("TANDEM_ISA");
    if (!v || !*v)
        return best;
    for (int i = 0; i <= OP_ISA_AVX512; i++) {
        if (strcmp(v, isa_names[i]) != 0)
            continue;
        if (i > best) {
            snprintf(isa_err, sizeof isa_err, "TANDEM_ISA=%s: this CPU (or its OS) supports at most %s", isa_names[i],
                     isa_names[best]);
            return best;
        }
        return i;
    }
    snprintf(isa_err, sizeof isa_err, "TANDEM_ISA=%.40s: not an instruction set (portable, avx2 or avx512)", v);
    return best;
}

int op_isa_level(void)
{
    int v = atomic_load_explicit(&isa_level, memory_order_acquire);
    if (v < 0) {
        static atomic_flag busy = ATOMIC_FLAG_INIT;
        /* one caller writes isa_err; the others compute the same level */
        if (!atomic_flag_test_and_set(&busy)) {
            v = isa_pick();
            atomic_store_explicit(&isa_level, v, memory_order_release);
        } else {
            while ((v = atomic_load_explicit(&isa_level, memory_order_acquire)) < 0)
                ;
        }
    }
    return v;
}

const char *op_isa_error(void)
{
    op_isa_level();
    return isa_err[0] ? isa_err : NULL;
}

const char *op_isa_name(void) { return isa_names[op_isa_level()]; }
