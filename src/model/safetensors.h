/* safetensors — read-only, memory-mapped access to Hugging Face checkpoints.
 *
 * DESIGN: a checkpoint is one `model.safetensors` or several shards listed
 * by `model.safetensors.index.json` ("weight_map": tensor -> file).  Each
 * file is mmapped once (PROT_READ, MAP_PRIVATE) and its JSON header parsed
 * with jansson into st_tensor records that point into the mapping, so a
 * weight can be borrowed in place.  Validation is strict (same rules as the
 * reference Rust implementation): the header must fit in the file, be a JSON
 * object, every tensor needs a known dtype, a shape of non-negative ints and
 * data_offsets [begin, end] with end - begin == numel * elem_size; the
 * tensors must tile the data area exactly (no overlap, no hole, nothing
 * after the last one).  Every error message names the file and the tensor.
 *
 *   file:  [u64 n][n bytes JSON header][data area .............]
 *                                      ^ data_offsets are relative to here
 *
 * Ownership: st_archive owns its mappings, names and records; tensors'
 * `data` pointers stay valid until st_close().  st_release_unused() drops
 * the resident pages of everything not marked `keep` (after a loader has
 * copied/repacked what it needs), without unmapping.
 */
#ifndef SGLC_MODEL_SAFETENSORS_H
#define SGLC_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    char *name;                 /* owned */
    int dt;                     /* dtype (F32/F16/BF16), or -1 for another known safetensors dtype */
    char dtype_str[12];         /* as written in the file, e.g. "BF16", "I64" */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;           /* borrowed: points into the file's mapping */
    int file;                   /* index into st_archive.files */
    int keep;                   /* set by the loader: pages must stay resident */
} st_tensor;

typedef struct st_file {
    char *path;                 /* owned */
    void *map;                  /* owned mapping (NULL for in-memory parses) */
    size_t map_len;
    size_t data_off;            /* 8 + header length */
} st_file;

typedef struct st_archive {
    int n_files;
    st_file *files;             /* (n_files) owned */
    int n_tensors;
    st_tensor *tensors;         /* (n_tensors) owned, sorted by name */
} st_archive;

/* Parse one safetensors image held in memory (buf, len).  Tensors are
 * appended to *a with file index `file_idx`; `fname` is used in messages.
 * Returns 0, or -1 with a message in err.  This is also the fuzz entry. */
int st_parse_buffer(st_archive *a, const uint8_t *buf, size_t len, int file_idx,
                    const char *fname, char *err, size_t errlen);

/* Open a checkpoint directory (sharded index or single file) or one
 * .safetensors file.  On failure *a is left empty and err explains. */
int st_open(st_archive *a, const char *path, char *err, size_t errlen);

/* Tensor by exact name, or NULL. */
const st_tensor *st_find(const st_archive *a, const char *name);

/* Mark a tensor's bytes as needed for the life of the archive (borrowed). */
void st_mark_keep(st_archive *a, const st_tensor *t);

/* madvise(DONTNEED) every page of every file that holds no `keep` tensor
 * bytes, so repacked weights do not stay resident twice. */
void st_release_unused(st_archive *a);

void st_close(st_archive *a);

/* "F32" -> DTYPE_F32 ...; -1 for another known dtype, -2 if unknown.
 * *elem_size gets the element size in bytes (known dtypes). */
int st_dtype_parse(const char *s, size_t *elem_size);

/* ---- writer (safetensors_write.c) ---------------------------------------
 * One output file: declare every tensor (name, dtype string, shape), then
 * st_writer_begin writes the header with the offsets fixed, and the data
 * is filled in any order with st_writer_pwrite (so a converter can stream
 * tensor by tensor, row by row).  Offsets: tensors sorted by element size
 * (largest first) then name, so every tensor starts at a multiple of its
 * element size (the data area starts at a multiple of 8), as the Python
 * writer lays files out.  __metadata__ is {"format": "pt"}.
 * st_writer_finish checks every byte of every tensor was written once. */
typedef struct st_wtensor {
    char *name;                 /* owned */
    char dtype[12];             /* "I8", "BF16", ... */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    size_t off;                 /* in the data area, set by st_writer_begin */
    size_t written;             /* bytes written so far */
} st_wtensor;

typedef struct st_writer {
    st_wtensor *t;              /* (n) owned */
    int n, cap;
    int fd;                     /* -1 until begin */
    size_t data_off;            /* 8 + header length */
} st_writer;

void st_writer_init(st_writer *w);
/* Declare a tensor; returns its index, or -1 (unknown dtype, bad shape,
 * out of memory). */
int st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape);
size_t st_writer_data_bytes(const st_writer *w);
/* Create `path` and write the header.  0, or -1 with err. */
int st_writer_begin(st_writer *w, const char *path, char *err, size_t errlen);
/* n bytes of tensor idx at byte `at` of its data.  0, or -1 (out of range, I/O). */
int st_writer_pwrite(st_writer *w, int idx, size_t at, const void *buf, size_t n);
/* Close the file; -1 if a tensor is incomplete or the close fails (err). */
int st_writer_finish(st_writer *w, char *err, size_t errlen);
void st_writer_free(st_writer *w);

#endif
