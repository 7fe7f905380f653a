/* kern_types — what each weight storage type is: block geometry, row
 * conversion and its kernels per ISA.
 *
 * DESIGN: a storage type is described by one kern_type_traits entry, in
 * the spirit of ggml's type traits: a row of k elements is k / block_size
 * blocks of block_bytes each (f32: 1 element of 4 bytes; bf16 and f16: 1
 * of 2; a block-quantized type such as Q8_0 would be 32 elements of 34
 * bytes: 32 int8 + one f16 scale).  Code that sizes weights asks
 * kern_type_row_bytes() instead of multiplying by an element size, so a
 * type whose bytes per element are not a whole number fits without
 * touching the loader or the memory accounting.  The kernels of a type are
 * per ISA: dot (one stored row against an f32 vector: the reference for
 * GEMV-style code and tests) and matmul (the kern_matmul entry the ISA's
 * vtable provides for this type; the linear step calls it).  Adding a type
 * is one entry here plus its kernels.
 *
 * The storage type ids equal util/dtype.h's ids for the float types, so a
 * dtype converts to a kern_type by value (kern_type_of_dtype); types that
 * are not a dtype (block-quantized ones) go after KERN_TYPE_BF16.
 *
 * Thread safety: the table is constant apart from its per-ISA kernel
 * slots, filled once by kern_types_init() (called from kernels_init(),
 * before compute threads exist) and only read afterwards.
 */
#ifndef SGLC_KERNELS_KERN_TYPES_H
#define SGLC_KERNELS_KERN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "util/dtype.h"

typedef enum kern_type {
    KERN_TYPE_F32 = DTYPE_F32,
    KERN_TYPE_F16 = DTYPE_F16,
    KERN_TYPE_BF16 = DTYPE_BF16,
    KERN_TYPE_F8_E4M3 = DTYPE_F8_E4M3, /* a KV cache / checkpoint type (fp8 weights are read through it) */
    KERN_TYPE_F8_E5M2 = DTYPE_F8_E5M2,
    KERN_TYPE_FLOAT_COUNT, /* the float types are the ids below this */
    /* block-quantized types: the layouts of kernels/quant_blocks.h */
    KERN_TYPE_Q4_0 = KERN_TYPE_FLOAT_COUNT,
    KERN_TYPE_Q4_1,
    KERN_TYPE_Q5_0,
    KERN_TYPE_Q5_1,
    KERN_TYPE_Q8_0,
    KERN_TYPE_Q2_K,
    KERN_TYPE_Q3_K,
    KERN_TYPE_Q4_K,
    KERN_TYPE_Q5_K,
    KERN_TYPE_Q6_K,
    KERN_TYPE_IQ4_NL,
    KERN_TYPE_IQ4_XS,
    KERN_TYPE_Q8_K, /* activations of the K-quant dots (not a weight type) */
    KERN_TYPE_Q8_1, /* activations of the _1 types' dots (not a weight type) */
    KERN_TYPE_F8_B128, /* fp8 e4m3 weights with an f32 scale per 128 (kernels/quant_fp8.h) */
    KERN_TYPE_COUNT
} kern_type;

#define KERN_ISA_COUNT 3 /* scalar, avx2, avx512 (amx is the avx512 table with tiles on) */

/* dot of one stored row (k elements of the type, row-major) with f32 x (k). */
typedef float (*kern_row_dot_fn)(const void *row, const float *x, int k);
typedef void (*kern_matmul_fn)(float *y, const float *x, int m, const kern_mat *w,
                               const float *bias, int ith, int nth, void *scratch);

typedef struct kern_type_traits {
    const char *name;        /* "f32", "f16", "bf16" */
    int block_size;          /* elements per block */
    size_t block_bytes;      /* bytes per block */
    int is_quantized;        /* 1: values are blocks with scales */
    int matmul_ok;           /* 1: kern_mat_init / kern_matmul accept it as a weight */
    /* k elements (a multiple of block_size) of the type at src -> f32 dst. */
    void (*row_to_f32)(float *dst, const void *src, int64_t k);
    /* f32 -> the type (rounding to nearest even); NULL if not writable. */
    void (*row_from_f32)(void *dst, const float *src, int64_t k);
    /* per ISA (index kern_isa); NULL where the ISA is not compiled in or
     * the type has no kernel there */
    kern_row_dot_fn dot[KERN_ISA_COUNT];
    kern_matmul_fn matmul[KERN_ISA_COUNT];
} kern_type_traits;

/* Fill the per-ISA kernel slots (idempotent; kernels_init calls it). */
void kern_types_init(void);

/* Traits of a type; NULL for an id outside [0, KERN_TYPE_COUNT). */
const kern_type_traits *kern_type_get(kern_type t);
/* For a block-quantized weight type on an AVX-512 CPU, the matmul paths
 * that run its VNNI kernel when only some do ("gemm,x8": the plain-layout
 * GEMM and the repacked layout; the others run the AVX2 kernel); NULL when
 * all or none do, or for any other type (cpu-info). */
const char *kern_type_avx512_partial(kern_type t);
static inline kern_type kern_type_of_dtype(dtype d) { return (kern_type)d; }
/* The kern_type of a GGUF (ggml) tensor type id; -1 when sglc has none. */
int kern_type_of_ggml(int ggml_type);
/* The GGUF (ggml) type id of t; -1 for none. */
int kern_type_to_ggml(kern_type t);
/* Type by name ("q4_K", "Q4_K", "bf16"; case-insensitive); -1 when unknown. */
int kern_type_by_name(const char *name);

/* Bytes of one row of k elements: k / block_size * block_bytes.  0 when k
 * is not a multiple of the block size (the caller reports a bad shape). */
size_t kern_type_row_bytes(kern_type t, int64_t k);
/* Bytes of an (n, k) row-major matrix; 0 on a bad shape. */
size_t kern_type_mat_bytes(kern_type t, int64_t n, int64_t k);
/* 1 when k elements make whole blocks of the type. */
int kern_type_row_ok(kern_type t, int64_t k);

/* Dot of a stored row with x using the current ISA's kernel (the scalar
 * one if the ISA has none for this type). */
float kern_type_dot(kern_type t, const void *row, const float *x, int k);

#endif
