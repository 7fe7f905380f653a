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

#endif
