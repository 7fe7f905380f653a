/* cmd_misc — small subcommands: version, cpu-info. */
#include <stdio.h>

#include "cli/cli.h"
#include "kernels/kernels.h"
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
    return 0;
}
