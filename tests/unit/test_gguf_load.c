/* test_gguf_load — the weights a GGUF file loads into (docs/notes/gguf.md
 * "load and memory"):
 *   - a llama file of block-quantized matrices large enough (>= 1 MiB) for
 *     the threaded 8-row repack: every repacked matrix of the loaded model
 *     is, byte for byte, this test's own one-thread repack
 *     (quant_repack_x8(..., 1)) of the file's tensor with attn_q / attn_k
 *     rows moved back to Hugging Face order by this test's permutation, so
 *     the loader's copies (row-order copy freed after the repack, pages
 *     dropped) change no weight; and the matrices the kernels cannot repack
 *     borrow the file's bytes;
 *   - loads with 1, 2 and 3 pack threads (kern_set_pack_threads) give the
 *     same bytes;
 *   - the GGUF source after drop(): its row-order copy of attn_q is freed,
 *     and read() / find() still give the values (made again);
 *   - quantize-at-load (w8a8_int8 -> Q8_0, fp8 -> F8_B128, over dummy
 *     weights) with 3 pack threads writes the one-thread bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "kernels/quant_dot.h"
#include "model/gguf.h"
#include "model/hfq.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "model/wsource.h"
#include "util/dtype.h"

/* dims: attn_q 1024 x 1024 Q8_0 (1.06 MiB), ffn_gate / up 4096 x 1024 and
 * ffn_down 1024 x 4096 (2.2-3.3 MiB): each is split over the pack threads */
enum { H = 1024, NH = 8, NKV = 2, HD = 128, FF = 4096, V = 264 };

/* ggml type ids */
enum { G_F32 = 0, G_Q4_0 = 2, G_Q8_0 = 8, G_Q4_K = 12, G_Q5_K = 13, G_Q6_K = 14 };

typedef struct tdesc {
    const char *gname; /* GGUF name */
    int64_t ne0, ne1;  /* ne1 = 0: a vector */
    int type;
    int heads;         /* attn_q / attn_k: rows permuted per head in the file */
} tdesc;

static const tdesc T[] = {
    {"token_embd.weight", H, V, G_Q6_K, 0},     /* tied LM head: repacked, rows read in place */
    {"output_norm.weight", H, 0, G_F32, 0},
    {"blk.0.attn_norm.weight", H, 0, G_F32, 0},
    {"blk.0.ffn_norm.weight", H, 0, G_F32, 0},
    {"blk.0.attn_q.weight", H, NH * HD, G_Q8_0, NH},
    {"blk.0.attn_k.weight", H, NKV * HD, G_Q4_K, NKV},
    {"blk.0.attn_v.weight", H, NKV * HD, G_Q4_0, 0},
    {"blk.0.attn_output.weight", NH * HD, H, G_Q6_K, 0},
    {"blk.0.ffn_gate.weight", H, FF, G_Q4_K, 0},
    {"blk.0.ffn_up.weight", H, FF, G_Q5_K, 0},
    {"blk.0.ffn_down.weight", FF, H, G_Q6_K, 0},
};
#define NT (sizeof T / sizeof T[0])

static uint8_t *g_bytes[NT]; /* what the file holds, per tensor */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static void write_file(const char *path)
{
    gguf_writer *w = gguf_writer_create(0);
    gguf_writer_str(w, "general.architecture", "llama");
    gguf_writer_u32(w, "llama.context_length", 256);
    gguf_writer_u32(w, "llama.embedding_length", H);
    gguf_writer_u32(w, "llama.block_count", 1);
    gguf_writer_u32(w, "llama.feed_forward_length", FF);
    gguf_writer_u32(w, "llama.attention.head_count", NH);
    gguf_writer_u32(w, "llama.attention.head_count_kv", NKV);
    gguf_writer_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_writer_f32(w, "llama.rope.freq_base", 10000.0f);
    for (size_t i = 0; i < NT; i++) {
        int64_t ne[2] = {T[i].ne0, T[i].ne1};
        assert_int_equal(gguf_writer_tensor(w, T[i].gname, T[i].type, T[i].ne1 ? 2 : 1, ne), 0);
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gguf_writer_write_header(w, f), 0);
    for (size_t i = 0; i < NT; i++) {
        size_t n = gguf_type_bytes(T[i].type, T[i].ne0 * (T[i].ne1 ? T[i].ne1 : 1));
        free(g_bytes[i]);
        g_bytes[i] = malloc(n);
        assert_non_null(g_bytes[i]);
        if (T[i].type == G_F32)
            for (size_t j = 0; j < n / 4; j++) ((float *)g_bytes[i])[j] = 1.0f + 0.001f * (float)(j % 7);
        else /* random codes and scales: the repack moves bytes, whatever they say */
            for (size_t j = 0; j < n; j++) g_bytes[i][j] = rnd8() & 0xbf; /* no f16 NaN/Inf exponents */
        assert_int_equal(gguf_writer_write_data(w, f, g_bytes[i], n), 0);
    }
    assert_int_equal(gguf_writer_finish(w, f), 0);
    fclose(f);
    gguf_writer_destroy(w);
}

static kern_type kt_of(int ggml)
{
    return ggml == G_Q4_0 ? KERN_TYPE_Q4_0 : ggml == G_Q8_0 ? KERN_TYPE_Q8_0 : ggml == G_Q4_K ? KERN_TYPE_Q4_K
         : ggml == G_Q5_K ? KERN_TYPE_Q5_K : KERN_TYPE_Q6_K;
}

/* The file's tensor i in HF row order (llama.cpp's per-head permutation of
 * attn_q / attn_k undone: HF row j < d/2 of a head is file row 2j, row
 * d/2 + j is file row 2j + 1). */
static uint8_t *hf_rows(size_t i)
{
    const int n = (int)T[i].ne1;
    const size_t rb = gguf_type_bytes(T[i].type, T[i].ne0), bytes = rb * (size_t)n;
    uint8_t *out = malloc(bytes);
    assert_non_null(out);
    if (!T[i].heads) {
        memcpy(out, g_bytes[i], bytes);
        return out;
    }
    const int d = n / T[i].heads, half = d / 2;
    for (int h = 0; h < T[i].heads; h++)
        for (int j = 0; j < d; j++) {
            int src = j < half ? 2 * j : 2 * (j - half) + 1;
            memcpy(out + (size_t)(h * d + j) * rb, g_bytes[i] + (size_t)(h * d + src) * rb, rb);
        }
    return out;
}

static const linear_weight *weight_of(const model_weights *w, size_t i)
{
    const model_layer *l = &w->layers[0];
    switch (i) {
    case 0: return &w->lm_head;
    case 4: return &l->wq;
    case 5: return &l->wk;
    case 6: return &l->wv;
    case 7: return &l->wo;
    case 8: return &l->wgate;
    case 9: return &l->wup;
    case 10: return &l->wdown;
    default: return NULL;
    }
}

typedef struct snap {
    void *bytes[NT];
    size_t nbytes[NT];
    int layout[NT];
} snap;

static void load_snap(const char *path, int pack_threads, snap *s)
{
    kern_set_pack_threads(pack_threads);
    char err[1024];
    model_load_opts o = {.model_path = path, .dtype = -1};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fprintf(stderr, "%s\n", err);
    assert_non_null(m);
    const model_weights *w = m->w;
    for (size_t i = 0; i < NT; i++) {
        const linear_weight *lw = weight_of(w, i);
        s->bytes[i] = NULL;
        if (!lw) continue;
        s->nbytes[i] = lw->mat.bytes;
        s->layout[i] = lw->mat.layout;
        s->bytes[i] = malloc(lw->mat.bytes);
        assert_non_null(s->bytes[i]);
        memcpy(s->bytes[i], lw->mat.data, lw->mat.bytes);
        assert_int_equal(lw->mat.qtype, kt_of(T[i].type));
    }
    /* the embedding rows are read from the file in place */
    assert_memory_equal(w->embed, g_bytes[0], gguf_type_bytes(T[0].type, (int64_t)H * V));
    model_free(m);
    kern_set_pack_threads(1);
}

static void snap_free(snap *s)
{
    for (size_t i = 0; i < NT; i++) free(s->bytes[i]);
}

static void test_repacked_weights(void **state)
{
    (void)state;
    assert_int_equal(kernels_init(NULL), 0);
    char path[] = "/tmp/test_gguf_load_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    write_file(path);
    snap one, two, three;
    load_snap(path, 1, &one);
    load_snap(path, 2, &two);
    load_snap(path, 3, &three);
    int n_repacked = 0;
    for (size_t i = 0; i < NT; i++) {
        if (!one.bytes[i]) continue;
        const int n = (int)T[i].ne1, k = (int)T[i].ne0;
        const kern_type kt = kt_of(T[i].type);
        uint8_t *hf = hf_rows(i);
        const int layout = quant_x8_layout(kt, n, kernels_isa());
        assert_int_equal(one.layout[i], layout);
        if (layout) { /* the loader's bytes = a one-thread repack of the file's rows */
            size_t nb = quant_x8_bytes(layout, n, k);
            assert_int_equal(one.nbytes[i], nb);
            void *ref = malloc(nb);
            assert_non_null(ref);
            quant_repack_x8(layout, ref, hf, n, k, 1);
            if (memcmp(ref, one.bytes[i], nb)) {
                fprintf(stderr, "%s: repacked bytes differ from the one-thread repack of the file\n", T[i].gname);
                fail();
            }
            free(ref);
            n_repacked++;
        } else { /* scalar CPU: the file's bytes (HF order) */
            assert_int_equal(one.nbytes[i], kern_type_mat_bytes(kt, n, k));
            assert_memory_equal(one.bytes[i], hf, one.nbytes[i]);
        }
        free(hf);
        /* threads change nothing */
        assert_int_equal(two.nbytes[i], one.nbytes[i]);
        assert_int_equal(three.nbytes[i], one.nbytes[i]);
        assert_memory_equal(two.bytes[i], one.bytes[i], one.nbytes[i]);
        assert_memory_equal(three.bytes[i], one.bytes[i], one.nbytes[i]);
    }
    if (kernels_isa() != KERN_ISA_SCALAR) assert_int_equal(n_repacked, 8);
    snap_free(&one), snap_free(&two), snap_free(&three);
    unlink(path);
}

/* The source's row-order copy of attn_q after drop(): freed; read() and a
 * second find() still give the values. */
static void test_drop_permuted(void **state)
{
    (void)state;
    char path[] = "/tmp/test_gguf_load_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    write_file(path);
    wsrc s;
    char err[512];
    assert_int_equal(wsrc_open_gguf(&s, path, err, sizeof err), 0);
    wsrc_tensor t;
    const int64_t want[2] = {NH * HD, H};
    assert_int_equal(wsrc_find(&s, "model.layers.0.self_attn.q_proj.weight", 2, want, &t), 1);
    uint8_t *hf = hf_rows(4);
    const size_t bytes = gguf_type_bytes(G_Q8_0, (int64_t)H * NH * HD);
    assert_int_equal(t.nbytes, bytes);
    assert_memory_equal(t.data, hf, bytes);
    float *a = malloc(sizeof(float) * H * NH * HD), *b = malloc(sizeof(float) * H * NH * HD);
    assert_non_null(a), assert_non_null(b);
    assert_int_equal(wsrc_read(&s, &t, a, DTYPE_F32), 0);
    wsrc_drop(&s, &t); /* the whole tensor: the copy goes */
    assert_int_equal(wsrc_read(&s, &t, b, DTYPE_F32), 0);
    assert_memory_equal(a, b, sizeof(float) * H * NH * HD);
    wsrc_tensor t2;
    assert_int_equal(wsrc_find(&s, "model.layers.0.self_attn.q_proj.weight", 2, want, &t2), 1);
    assert_memory_equal(t2.data, hf, bytes);
    free(a), free(b), free(hf);
    wsrc_close(&s);
    unlink(path);
}

/* Quantize-at-load rows split over the pack threads: the same bytes. */
static void test_at_load_threads(void **state)
{
    (void)state;
    const char *flags[] = {"w8a8_int8", "fp8"};
    const int64_t want[2] = {1024, 1536}; /* 1.5M values: split */
    for (int f = 0; f < 2; f++) {
        void *got[2] = {NULL, NULL};
        size_t nb[2] = {0, 0};
        int type[2] = {-1, -1};
        for (int r = 0; r < 2; r++) {
            kern_set_pack_threads(r ? 3 : 1);
            wsrc s;
            char err[512];
            assert_int_equal(wsrc_open_dummy(&s, 1234, DTYPE_BF16), 0);
            assert_int_equal(wsrc_wrap_hfq_at_load(&s, flags[f], err, sizeof err), 0);
            wsrc_tensor t;
            assert_int_equal(wsrc_find(&s, "model.layers.0.mlp.up_proj.weight", 2, want, &t), 1);
            assert_non_null(t.data);
            type[r] = t.type, nb[r] = t.nbytes;
            got[r] = malloc(t.nbytes);
            assert_non_null(got[r]);
            memcpy(got[r], t.data, t.nbytes);
            wsrc_close(&s);
        }
        kern_set_pack_threads(1);
        assert_int_equal(type[0], f ? KERN_TYPE_F8_B128 : KERN_TYPE_Q8_0);
        assert_int_equal(type[1], type[0]);
        assert_int_equal(nb[1], nb[0]);
        assert_memory_equal(got[1], got[0], nb[0]);
        free(got[0]), free(got[1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repacked_weights),
        cmocka_unit_test(test_drop_permuted),
        cmocka_unit_test(test_at_load_threads),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < NT; i++) free(g_bytes[i]);
    return rc;
}
