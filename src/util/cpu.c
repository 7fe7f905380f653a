/* cpu — see cpu.h.  AVX state must be enabled by the OS (XCR0) as well as
 * advertised by cpuid, or the first vector instruction faults. */
#include "util/cpu.h"

#include <cpuid.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static cpu_features g_cpu;
static int g_done;

static uint64_t xgetbv0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

const cpu_features *cpu_get(void)
{
    if (g_done) return &g_cpu;
    cpu_features c;
    memset(&c, 0, sizeof c);
    unsigned a, b, cx, d;
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
        int osxsave = (cx >> 27) & 1;
        uint64_t xcr0 = osxsave ? xgetbv0() : 0;
        int ymm_ok = (xcr0 & 0x6) == 0x6;
        int zmm_ok = (xcr0 & 0xe6) == 0xe6;
        c.fma = ymm_ok && ((cx >> 12) & 1);
        c.f16c = ymm_ok && ((cx >> 29) & 1);
        if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
            c.avx2 = ymm_ok && ((b >> 5) & 1);
            c.avx512f = zmm_ok && ((b >> 16) & 1);
            c.avx512dq = zmm_ok && ((b >> 17) & 1);
            c.avx512bw = zmm_ok && ((b >> 30) & 1);
            c.avx512vl = zmm_ok && ((b >> 31) & 1);
            c.avx512vnni = zmm_ok && ((cx >> 11) & 1);
            /* AMX: XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA) enabled by the OS */
            int amx_os = ((xcr0 >> 17) & 3) == 3;
            c.amx_bf16 = amx_os && ((d >> 22) & 1);
            c.amx_tile = amx_os && ((d >> 24) & 1);
        }
        if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.avx512bf16 = zmm_ok && ((a >> 5) & 1);
    }
    unsigned brand[12];
    if (__get_cpuid(0x80000000, &a, &b, &cx, &d) && a >= 0x80000004) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &brand[i * 4], &brand[i * 4 + 1], &brand[i * 4 + 2],
                        &brand[i * 4 + 3]);
        memcpy(c.brand, brand, 48);
        c.brand[48] = 0;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c.n_cores = n > 0 ? (int)n : 1;
    g_cpu = c;
    g_done = 1;
    return &g_cpu;
}
