/* cpu — x86-64 feature detection (cpuid + xgetbv), read once at start-up. */
#ifndef SGLC_UTIL_CPU_H
#define SGLC_UTIL_CPU_H

typedef struct cpu_features {
    int avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512bf16, avx512vnni;
    int amx_tile, amx_bf16; /* cpuid only; the OS must still grant XTILEDATA (arch_prctl) */
    int n_cores;           /* online logical CPUs */
    char brand[64];
} cpu_features;

/* Filled on first call; later calls return the same struct. */
const cpu_features *cpu_get(void);

#endif
