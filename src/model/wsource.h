/* wsource — where the loader gets weights from: one interface, one
 * implementation per format.
 *
 * DESIGN: the loader (model.c) never calls a file format directly.  It
 * asks a source for a tensor by name and gets a wsrc_tensor: shape,
 * storage type (a kern_type, or -1 with the source's own type name for a
 * type sglc cannot use), and either the stored bytes (`data`, which the
 * kernels may borrow in place when the layout fits) or nothing, in which
 * case the values are read through the source (`read`, `read_row`).
 * Implementations:
 *   - safetensors (safetensors.c: wsrc_open_safetensors): mmapped files,
 *     bytes borrowed in place;
 *   - dummy weights (wsource_dummy.c: wsrc_open_dummy): random values of
 *     the shapes the loader expects, SGLang's dummy init, made on read;
 *   - GGUF (wsource_gguf.c: wsrc_open_gguf): one mmapped llama.cpp file,
 *     float bytes in place, block-quantized types dequantized on read.
 *   - Hugging Face quantized checkpoints (wsource_hfq.c: wsrc_open_hfq, see
 *     hfq.h): a wrapper over safetensors that answers `X.weight` from the
 *     packed tensors with block-quantized or dequantized bytes.
 *
 * Lifetime: a source is opened before loading and owned by the model's
 * weights afterwards (borrowed bytes and row reads need it); close()
 * releases everything.  Tensors (and their names) stay valid until then.
 * After load the loader calls keep() for every tensor whose bytes it
 * borrows and release_unused() once: a source may then drop everything
 * else (safetensors: MADV_DONTNEED).
 *
 * Threading: read_row may be called from every compute thread at once
 * (embedding lookups); the other operations only from the loading thread.
 */
#ifndef SGLC_MODEL_WSOURCE_H
#define SGLC_MODEL_WSOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern_types.h"
#include "util/dtype.h"

#define WSRC_MAX_DIMS 8

typedef struct wsrc_tensor {
    const char *name;           /* borrowed from the source (from the caller's `name` for sources
                                 * that make tensors: valid while that string is) */
    int type;                   /* kern_type, or -1: a type the source knows that sglc cannot use */
    const char *type_name;      /* the source's name for the type ("BF16", "I64", "Q4_K") */
    int ndim;
    int64_t shape[WSRC_MAX_DIMS];
    size_t nbytes;              /* stored bytes (kern_type_mat_bytes of the shape) */
    const void *data;           /* stored bytes, row-major, maybe unaligned; borrowed; NULL when
                                 * the values exist only through read / read_row */
    const char *origin;         /* where it lives (a file path), for messages */
    const void *priv;           /* the source's handle of the whole tensor (views keep it) */
    uint64_t tag;               /* the source's per-tensor state (dummy: row seed) */
    const int32_t *perm;        /* (perm_n) or NULL: the stored columns are the inputs in this
                                 * order (act-order GPTQ blocks, wsource_hfq.c); borrowed, valid
                                 * while the tensor's bytes are; read / read_row return input order */
    int64_t perm_n;             /* the full tensor's columns (a column slice cannot use perm) */
} wsrc_tensor;

typedef struct wsrc_ops {
    const char *kind;           /* "safetensors", "dummy weights": for the load log */
    /* Tensor `name` into *out: 1 found, 0 absent.  expect (ndim dims) is the
     * shape the loader wants; a source that makes tensors (dummy) returns
     * that shape, file sources return what is stored (the loader checks). */
    int (*find)(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out);
    /* All elements of t (a tensor or a view of one) into dst as dst_dt
     * (F32 or BF16 for matrices, F32 for vectors).  0, or -1 (unsupported
     * conversion, out of memory). */
    int (*read)(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt);
    /* The loader will read rows of the 2-D tensor *t after load (the
     * embedding table); the source may record state in t->tag.  May be NULL. */
    void (*bind_rows)(void *self, wsrc_tensor *t);
    /* Row r of a 2-D tensor (shape[1] values) as f32.  Thread-safe. */
    void (*read_row)(void *self, const wsrc_tensor *t, int64_t r, float *dst);
    /* t's bytes are borrowed for the life of the source.  May be NULL. */
    void (*keep)(void *self, const wsrc_tensor *t);
    /* The loader copied t's bytes (a repacked weight) and will not read
     * them again while loading: the source may drop their pages now
     * (pages shared with another tensor stay until release_unused), or
     * free bytes it made itself (GGUF's row-order copies), so t->data is
     * not to be used after this; a later read(t), or find() again, still
     * sees the values.  May be NULL. */
    void (*drop)(void *self, const wsrc_tensor *t);
    /* Loading is over: drop what is not kept.  May be NULL. */
    void (*release_unused)(void *self);
    void (*close)(void *self);
} wsrc_ops;

typedef struct wsrc {
    const wsrc_ops *ops;        /* NULL = no source */
    void *self;                 /* owned by the source; freed by close */
} wsrc;

/* Safetensors checkpoint (a directory, sharded or not, or one file); see
 * safetensors.h.  0, or -1 with the message in err. */
int wsrc_open_safetensors(wsrc *s, const char *path, char *err, size_t errlen);

/* GGUF file (gguf.h); Hugging Face names are mapped to GGUF ones
 * (gguf_model.h).  0, or -1 with the message in err. */
int wsrc_open_gguf(wsrc *s, const char *path, char *err, size_t errlen);

/* Dummy weights: uniform in [-1e-3, 1e-3) (SGLang's dummy init) from
 * `seed`, every value rounded to `prec` (F32, BF16 or F16; the tensors
 * report that type).  Values are made in the order tensors are read, so
 * one seed and one load order give the same model.  Matrices (ndim >= 2)
 * and vectors (ndim 1) come from two generators; rows bound with
 * bind_rows are a pure function of (seed at binding, row).  0 or -1. */
int wsrc_open_dummy(wsrc *s, uint64_t seed, dtype prec);

/* Convenience wrappers (NULL-safe for the optional operations). */
int wsrc_find(const wsrc *s, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out);
int wsrc_read(const wsrc *s, const wsrc_tensor *t, void *dst, dtype dst_dt);
void wsrc_keep(const wsrc *s, const wsrc_tensor *t);
void wsrc_drop(const wsrc *s, const wsrc_tensor *t);
void wsrc_release_unused(const wsrc *s);
void wsrc_close(wsrc *s);

/* A 2-D view (rows, cols) of t starting `elem_off` elements in (a whole
 * number of blocks): data and nbytes narrowed when t has bytes, the
 * parent's handle kept so keep() marks the parent.  Reading a view of a
 * source without bytes reads the next rows*cols values of that source. */
wsrc_tensor wsrc_view2(const wsrc_tensor *t, int64_t elem_off, int64_t rows, int64_t cols);

/* Elements of t. */
int64_t wsrc_numel(const wsrc_tensor *t);

/* Convert n elements stored at src (maybe unaligned) of type `type` to
 * dst_dt (F32 or BF16) at dst; the shared body of byte sources' read. 0/-1. */
int wsrc_convert(void *dst, dtype dst_dt, const void *src, int type, size_t n);

#endif
