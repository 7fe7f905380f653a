/* cmd_misc — small subcommands: version, cpu-info. */
#include <stdio.h>

#include "cli/cli.h"
#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_select.h"
#include "util/cpu.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("sglc %s\n", SGLC_VERSION);
    return 0;
}

int cmd_cpu_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const cpu_features *c = cpu_get();
    kernels_init(NULL);
    printf("cpu: %s\ncores: %d\navx2: %d fma: %d f16c: %d\n", c->brand, c->n_cores, c->avx2, c->fma,
           c->f16c);
    printf("avx512f: %d bw: %d vl: %d dq: %d bf16: %d vnni: %d\n", c->avx512f, c->avx512bw,
           c->avx512vl, c->avx512dq, c->avx512bf16, c->avx512vnni);
    printf("amx-tile: %d amx-bf16: %d\n", c->amx_tile, c->amx_bf16);
    printf("kernels: %s\n", kernels_desc());
    /* the per-CPU path choice of kernels_init (kernels.h kern_choice): the
     * bf16 matmul body with the single-thread rates that decided it */
    char line[512];
    printf("%s\n", kernels_choice_line(line, sizeof line));
    if (kernels_isa() == KERN_ISA_AVX512) {
        /* the quantized kernels' VNNI-or-AVX2 table and its start-up check
         * (quant_select.c): AVX2 time / VNNI time per type, decode and GEMM */
        const quant_select_info *qi = quant_select_get();
        printf("int8 kernels: %s", qi->how ? qi->how : "?");
        if (qi->n_checked) {
            printf(" (%d types, 1 thread, %.1f ms; %d table entries overturned%s%s)\nint8 vnni speed-up (gemv/gemm):",
                   qi->n_checked, qi->ms, qi->n_overturned, qi->n_overturned ? ": " : "", qi->overturned);
            for (int t = 0; t < KERN_TYPE_COUNT; t++) {
                double g1 = quant_select_ratio((kern_type)t, 0), g2 = quant_select_ratio((kern_type)t, 1);
                const kern_type_traits *tr = kern_type_get((kern_type)t);
                if (g1 > 0 && tr && tr->name) printf(" %s %.2f/%.2f", tr->name, g1, g2);
            }
        }
        printf("\n");
    }
    /* the matmul each weight type gets on this CPU's ISA: the ISA's own
     * kernel, or the scalar reference where the ISA has none; on AVX-512
     * the quantized types' VNNI-or-AVX2 choice (a table checked by
     * bench_quant, qkern.md): "avx512[gemm,x8]/avx2" = those paths VNNI,
     * the rest AVX2 */
    kern_isa isa = kernels_isa();
    printf("weight types (matmul on %s):", kernels_isa_name(isa));
    for (int t = 0; t < KERN_TYPE_COUNT; t++) {
        const kern_type_traits *tr = kern_type_get((kern_type)t);
        if (!tr || !tr->name || t == KERN_TYPE_Q8_K || t == KERN_TYPE_Q8_1) continue; /* activation types */
        if (!tr->matmul_ok && !tr->is_quantized) continue;                           /* KV / checkpoint types */
        kern_matmul_fn f = tr->matmul[isa];
        const char *how = !f ? (tr->matmul[KERN_ISA_SCALAR] ? "scalar" : "none")
                          : isa != KERN_ISA_SCALAR && f == tr->matmul[KERN_ISA_SCALAR] ? "scalar"
                          : isa == KERN_ISA_AVX512 && f == tr->matmul[KERN_ISA_AVX2] ? "avx2" /* AVX2 body in the slot */
                                                                                      : kernels_isa_name(isa);
        const char *part = isa == KERN_ISA_AVX512 ? kern_type_avx512_partial((kern_type)t) : NULL;
        if (part) printf(" %s=avx512[%s]/avx2", tr->name, part);
        else printf(" %s=%s", tr->name, how);
    }
    printf("\n");
    return 0;
}
