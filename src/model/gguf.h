/* gguf — read and write GGUF files (llama.cpp's single-file model format).
 *
 * DESIGN: a GGUF file is
 *
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x   [str key][u32 value type][value]
 *   n_tensors x [str name][u32 n_dims][u64 ne[n_dims]][u32 ggml type][u64 offset]
 *   padding to `general.alignment` (u32, default 32)
 *   data section: tensor bytes at data_off + offset (offset % alignment == 0)
 *
 * where str = u64 length + bytes (no NUL) and an array value is
 * [u32 element type][u64 count][elements] (arrays may nest).  ne[0] is the
 * innermost dimension (the row length): ne = [k, n] is a row-major (n, k)
 * matrix, so a tensor's `shape` here is ne reversed.
 *
 * Reading: the file is mmapped (PROT_READ) and parsed in one pass into
 * gguf_kv / gguf_tensor records that point into the mapping (strings are
 * (pointer, length) pairs; keys and tensor names are also copied
 * NUL-terminated).  Everything is bounds-checked against the file size
 * before it is touched: magic, version (2 and 3; v1 is refused with a
 * clear message), counts (each record needs a minimum number of bytes, so
 * a count larger than the remaining bytes could hold is refused before
 * any allocation), string lengths, nesting depth, value types, tensor
 * ranks and dims (products must not overflow), ggml type ids (every id
 * ggml defines is known by name and size, so an unsupported type is an
 * error naming it where it is used, and an unknown id an error naming the
 * tensor), offsets (aligned, inside the data section), sizes and overlaps
 * (no two tensors share a byte), duplicate keys and tensor names.  Errors
 * name the file and the key or tensor.  Never a crash: gguf_parse_buffer
 * is the fuzz entry (tests/fuzz/fuzz_gguf.c).
 *
 * Writing (gguf_writer): metadata and tensor infos are collected first,
 * then gguf_writer_write_header writes the header with computed offsets
 * and the caller streams each tensor's bytes in order with
 * gguf_writer_write_data (padding added).  Used by `sglc quantize` and
 * the tests.
 *
 * Ownership: gguf_file owns its mapping, copies of names and the record
 * arrays; tensor data and string pointers stay valid until gguf_close.
 * Byte order: little-endian files on a little-endian host (x86-64).
 */
#ifndef SGLC_MODEL_GGUF_H
#define SGLC_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8 /* nesting of arrays */

typedef enum gguf_vtype {
    GGUF_T_UINT8 = 0, GGUF_T_INT8 = 1, GGUF_T_UINT16 = 2, GGUF_T_INT16 = 3,
    GGUF_T_UINT32 = 4, GGUF_T_INT32 = 5, GGUF_T_FLOAT32 = 6, GGUF_T_BOOL = 7,
    GGUF_T_STRING = 8, GGUF_T_ARRAY = 9, GGUF_T_UINT64 = 10, GGUF_T_INT64 = 11,
    GGUF_T_FLOAT64 = 12, GGUF_T_COUNT
} gguf_vtype;

typedef struct gguf_str {
    const char *s; /* borrowed (the mapping or the writer's caller); not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_value {
    int type;               /* gguf_vtype */
    union {
        uint64_t u;         /* UINT8..UINT64, BOOL (0/1) */
        int64_t i;          /* INT8..INT64 */
        double f;           /* FLOAT32, FLOAT64 */
    } num;
    gguf_str str;           /* STRING */
    /* ARRAY */
    int arr_type;           /* element gguf_vtype */
    uint64_t n;             /* elements */
    const void *arr_data;   /* fixed-size elements, raw little-endian, maybe unaligned; borrowed */
    gguf_str *strs;         /* (n) STRING elements; owned */
    struct gguf_value *arrs;/* (n) ARRAY elements; owned */
} gguf_value;

typedef struct gguf_kv {
    char *key;              /* owned, NUL-terminated */
    gguf_value v;
} gguf_kv;

typedef struct gguf_tensor {
    char *name;             /* owned, NUL-terminated */
    int ggml_type;
    int ndim;
    int64_t ne[GGUF_MAX_DIMS];  /* ne[0] = row length */
    uint64_t offset;        /* in the data section */
    size_t nbytes;
    const void *data;       /* borrowed: into the mapping */
    int keep;               /* pages must stay resident (gguf_release_unused) */
} gguf_tensor;

typedef struct gguf_file {
    char *path;             /* owned; for messages */
    void *map;              /* owned mapping (NULL for gguf_parse_buffer) */
    size_t map_len;
    const uint8_t *buf;     /* the whole file image */
    size_t len;
    uint32_t version;
    uint32_t alignment;
    size_t data_off;        /* start of the data section */
    int64_t n_kv;
    gguf_kv *kv;            /* (n_kv) owned, file order */
    int64_t n_tensors;
    gguf_tensor *tensors;   /* (n_tensors) owned, file order */
    int64_t *by_name;       /* (n_tensors) owned: indices sorted by name */
    int64_t *kv_by_key;     /* (n_kv) owned: indices sorted by key */
} gguf_file;

/* Parse a GGUF image in memory (buf, len: borrowed, must outlive *g).
 * 0, or -1 with a message naming `fname` in err (*g left empty).  The
 * fuzz entry. */
int gguf_parse_buffer(gguf_file *g, const uint8_t *buf, size_t len, const char *fname, char *err,
                      size_t errlen);
/* mmap and parse a file.  0, or -1 with the message in err. */
int gguf_open(gguf_file *g, const char *path, char *err, size_t errlen);
void gguf_close(gguf_file *g);
/* madvise(DONTNEED) the pages of the data section that hold no `keep`
 * tensor, and the metadata's (after loading copied what it needs; a
 * later read of either faults the pages back in from the file). */
void gguf_release_unused(gguf_file *g);
/* madvise(DONTNEED) the pages wholly inside [p, p + len) when that range
 * lies in the mapping's data section (a tensor copied out); the bytes
 * read back from the file if touched again. */
void gguf_drop_range(gguf_file *g, const void *p, size_t len);

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* Typed metadata getters: 1 found (value in *out), 0 absent, -1 present
 * with a type that does not fit (a message naming the key in err).
 * gguf_get_int accepts every integer type and bool; gguf_get_float every
 * number type. */
int gguf_get_int(const gguf_file *g, const char *key, int64_t *out, char *err, size_t errlen);
int gguf_get_float(const gguf_file *g, const char *key, double *out, char *err, size_t errlen);
int gguf_get_str(const gguf_file *g, const char *key, gguf_str *out, char *err, size_t errlen);
/* Element i of a numeric array value as int64 / double (no bounds check
 * beyond i < v->n, which the caller ensures). */
int64_t gguf_arr_int(const gguf_value *v, uint64_t i);
double gguf_arr_float(const gguf_value *v, uint64_t i);

/* ggml tensor types: name ("Q4_K"), block size and bytes per block.
 * 0 for an id ggml does not define (name NULL). */
const char *gguf_type_name(int ggml_type);
int gguf_type_block(int ggml_type, int *block_size, size_t *block_bytes);
/* ggml id by name (case-insensitive "q4_k", "Q4_K", "f32"); -1 unknown. */
int gguf_type_by_name(const char *name);
/* Bytes of n elements of the type; 0 when n is not whole blocks. */
size_t gguf_type_bytes(int ggml_type, int64_t n);
const char *gguf_vtype_name(int t);

/* ---- writer ------------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(uint32_t alignment);   /* 0 = default 32 */
void gguf_writer_destroy(gguf_writer *w);
/* Metadata, in the order added (strings are copied).  0 or -1 (OOM, or a
 * duplicate key). */
int gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_bool(gguf_writer *w, const char *key, int v);
int gguf_writer_str(gguf_writer *w, const char *key, const char *s);
/* Array of n strings / of n elements of a fixed-size type (raw LE bytes). */
int gguf_writer_arr_str(gguf_writer *w, const char *key, const char *const *s, uint64_t n);
int gguf_writer_arr(gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
/* Any value as raw encoded bytes after the type id (tests: nested arrays,
 * every scalar type). */
int gguf_writer_raw(gguf_writer *w, const char *key, int type, const void *bytes, size_t len);
/* A tensor (ndim <= 4, ne[0] = row length) of a ggml type; its data is
 * written later, in the order added.  Returns 0 or -1 (bad shape/type). */
int gguf_writer_tensor(gguf_writer *w, const char *name, int ggml_type, int ndim,
                       const int64_t *ne);
/* Header + metadata + tensor infos + padding.  0 or -1 (write error). */
int gguf_writer_write_header(gguf_writer *w, FILE *f);
/* n bytes of the current tensor (may be called several times per tensor:
 * the bytes go in order); the padding after a tensor is written once its
 * size is reached.  0 or -1 (write error, or more bytes than the tensor). */
int gguf_writer_write_data(gguf_writer *w, FILE *f, const void *data, size_t n);
/* 0 when every tensor got all its bytes, else -1. */
int gguf_writer_finish(gguf_writer *w, FILE *f);

#endif
