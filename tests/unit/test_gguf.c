/* test_gguf — the GGUF reader and writer (model/gguf.h), the HF <-> GGUF
 * name table, the config from GGUF metadata and the loader's errors:
 *   - writer -> reader round trip of every metadata type (u8 .. f64, bool,
 *     string, arrays of numbers / strings / nested arrays), tensor infos
 *     (ne order, offsets, alignment 32 and 64, data bytes);
 *   - malformed files, each a clear error naming what is wrong, never a
 *     crash: bad magic, v1 (refused by name), unknown version, every
 *     truncation of a valid file, absurd counts and lengths, unknown value /
 *     tensor types, zero and absurd dims, too many dims, misaligned and
 *     out-of-range offsets, overlapping tensors, duplicate keys / tensors,
 *     bad general.alignment, NUL in a name, deep nesting;
 *   - a tiny llama GGUF loads through model_load; an unsupported tensor type
 *     and an unsupported architecture are errors that name them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "cli/cli_gguf.h"
#include "kernels/kernels.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/model.h"

/* ---- raw byte builder (for files the writer would never produce) ---------- */

typedef struct bb {
    uint8_t p[1 << 16];
    size_t n;
} bb;

static void put(bb *b, const void *d, size_t n)
{
    assert_true(b->n + n <= sizeof b->p);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(bb *b, uint32_t v) { put(b, &v, 4); }
static void u64(bb *b, uint64_t v) { put(b, &v, 8); }
static void str(bb *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void hdr(bb *b, uint32_t version, uint64_t nt, uint64_t nkv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, nt);
    u64(b, nkv);
}
static void tinfo(bb *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}
static void pad(bb *b, size_t align)
{
    while (b->n % align) b->p[b->n++] = 0;
}

/* parse expecting failure with `needle` in the message */
static void expect_err(const uint8_t *buf, size_t len, const char *needle)
{
    gguf_file g;
    char err[512] = "";
    int rc = gguf_parse_buffer(&g, buf, len, "t.gguf", err, sizeof err);
    if (rc == 0 || !strstr(err, needle)) {
        fprintf(stderr, "expected error with '%s', got rc %d: '%s'\n", needle, rc, err);
        if (rc == 0) gguf_close(&g);
        fail();
    }
    assert_non_null(strstr(err, "t.gguf"));
}

/* ---- a valid file through the writer ----------------------------------------- */

static uint8_t *write_mem(gguf_writer *w, const void *const *data, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    assert_int_equal(gguf_writer_write_header(w, f), 0);
    for (int i = 0; data && data[i]; i += 2)
        assert_int_equal(gguf_writer_write_data(w, f, data[i + 1], (size_t)(uintptr_t)data[i]), 0);
    assert_int_equal(gguf_writer_finish(w, f), 0);
    fclose(f);
    *len = n;
    return (uint8_t *)buf;
}

static void test_roundtrip(void **state)
{
    (void)state;
    for (int align = 32; align <= 64; align += 32) {
        gguf_writer *w = gguf_writer_create((uint32_t)align);
        assert_non_null(w);
        uint8_t u8v = 200;
        int8_t i8v = -100;
        uint16_t u16v = 60000;
        int16_t i16v = -30000;
        double f64v = 1.0 / 3.0;
        int64_t i64v = -(1ll << 40);
        assert_int_equal(gguf_writer_raw(w, "t.u8", GGUF_T_UINT8, &u8v, 1), 0);
        assert_int_equal(gguf_writer_raw(w, "t.i8", GGUF_T_INT8, &i8v, 1), 0);
        assert_int_equal(gguf_writer_raw(w, "t.u16", GGUF_T_UINT16, &u16v, 2), 0);
        assert_int_equal(gguf_writer_raw(w, "t.i16", GGUF_T_INT16, &i16v, 2), 0);
        assert_int_equal(gguf_writer_u32(w, "t.u32", 4000000000u), 0);
        assert_int_equal(gguf_writer_i32(w, "t.i32", -5), 0);
        assert_int_equal(gguf_writer_f32(w, "t.f32", 0.25f), 0);
        assert_int_equal(gguf_writer_bool(w, "t.bool", 1), 0);
        assert_int_equal(gguf_writer_str(w, "t.str", "héllo"), 0);
        assert_int_equal(gguf_writer_u64(w, "t.u64", 1ull << 50), 0);
        assert_int_equal(gguf_writer_raw(w, "t.i64", GGUF_T_INT64, &i64v, 8), 0);
        assert_int_equal(gguf_writer_raw(w, "t.f64", GGUF_T_FLOAT64, &f64v, 8), 0);
        assert_int_equal(gguf_writer_u32(w, "t.u32", 1), -1); /* duplicate key */
        const char *ss[] = {"a", "", "ccc"};
        assert_int_equal(gguf_writer_arr_str(w, "t.astr", ss, 3), 0);
        int32_t ai[4] = {1, -2, 3, -4};
        assert_int_equal(gguf_writer_arr(w, "t.ai32", GGUF_T_INT32, ai, 4), 0);
        /* nested: [[1, 2], []] of u8 */
        static bb nb;
        nb.n = 0;
        u32(&nb, GGUF_T_ARRAY);
        u64(&nb, 2);
        u32(&nb, GGUF_T_UINT8);
        u64(&nb, 2);
        uint8_t two[2] = {1, 2};
        put(&nb, two, 2);
        u32(&nb, GGUF_T_UINT8);
        u64(&nb, 0);
        assert_int_equal(gguf_writer_raw(w, "t.nested", GGUF_T_ARRAY, nb.p, nb.n), 0);
        const int64_t ne_a[2] = {3, 2}, ne_b[1] = {5};
        assert_int_equal(gguf_writer_tensor(w, "a", 0, 2, ne_a), 0);
        assert_int_equal(gguf_writer_tensor(w, "b", 30, 1, ne_b), 0);
        assert_int_equal(gguf_writer_tensor(w, "bad", 8, 1, ne_b), -1); /* 5 is not whole Q8_0 blocks */
        float av[6] = {1, 2, 3, 4, 5, 6};
        uint16_t bv[5] = {0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0};
        const void *data[] = {(void *)(uintptr_t)sizeof av, av, (void *)(uintptr_t)sizeof bv, bv, NULL};
        size_t len;
        uint8_t *buf = write_mem(w, data, &len);
        gguf_writer_destroy(w);

        gguf_file g;
        char err[512];
        assert_int_equal(gguf_parse_buffer(&g, buf, len, "rt.gguf", err, sizeof err), 0);
        assert_int_equal(g.version, 3);
        assert_int_equal(g.alignment, (uint32_t)align);
        assert_int_equal(g.data_off % (size_t)align, 0);
        int64_t iv;
        double fv;
        gguf_str sv;
        assert_int_equal(gguf_get_int(&g, "t.u8", &iv, err, sizeof err), 1), assert_int_equal(iv, 200);
        assert_int_equal(gguf_get_int(&g, "t.i8", &iv, err, sizeof err), 1), assert_int_equal(iv, -100);
        assert_int_equal(gguf_get_int(&g, "t.u16", &iv, err, sizeof err), 1), assert_int_equal(iv, 60000);
        assert_int_equal(gguf_get_int(&g, "t.i16", &iv, err, sizeof err), 1), assert_int_equal(iv, -30000);
        assert_int_equal(gguf_get_int(&g, "t.u32", &iv, err, sizeof err), 1), assert_int_equal(iv, 4000000000ll);
        assert_int_equal(gguf_get_int(&g, "t.i32", &iv, err, sizeof err), 1), assert_int_equal(iv, -5);
        assert_int_equal(gguf_get_int(&g, "t.bool", &iv, err, sizeof err), 1), assert_int_equal(iv, 1);
        assert_int_equal(gguf_get_int(&g, "t.u64", &iv, err, sizeof err), 1), assert_true(iv == 1ll << 50);
        assert_int_equal(gguf_get_int(&g, "t.i64", &iv, err, sizeof err), 1), assert_true(iv == -(1ll << 40));
        assert_int_equal(gguf_get_float(&g, "t.f32", &fv, err, sizeof err), 1), assert_true(fv == 0.25);
        assert_int_equal(gguf_get_float(&g, "t.f64", &fv, err, sizeof err), 1), assert_true(fv == 1.0 / 3.0);
        assert_int_equal(gguf_get_float(&g, "t.i32", &fv, err, sizeof err), 1), assert_true(fv == -5.0);
        assert_int_equal(gguf_get_str(&g, "t.str", &sv, err, sizeof err), 1);
        assert_int_equal(sv.len, strlen("héllo")), assert_memory_equal(sv.s, "héllo", sv.len);
        assert_int_equal(gguf_get_int(&g, "t.str", &iv, err, sizeof err), -1);
        assert_non_null(strstr(err, "t.str"));
        assert_int_equal(gguf_get_int(&g, "t.none", &iv, err, sizeof err), 0);
        const gguf_kv *kv = gguf_find_kv(&g, "t.astr");
        assert_non_null(kv);
        assert_int_equal(kv->v.n, 3), assert_int_equal(kv->v.strs[2].len, 3), assert_int_equal(kv->v.strs[1].len, 0);
        kv = gguf_find_kv(&g, "t.ai32");
        assert_int_equal(kv->v.n, 4), assert_int_equal(gguf_arr_int(&kv->v, 3), -4);
        kv = gguf_find_kv(&g, "t.nested");
        assert_int_equal(kv->v.arr_type, GGUF_T_ARRAY), assert_int_equal(kv->v.n, 2);
        assert_int_equal(kv->v.arrs[0].n, 2), assert_int_equal(gguf_arr_int(&kv->v.arrs[0], 1), 2);
        assert_int_equal(kv->v.arrs[1].n, 0);
        assert_int_equal(g.n_tensors, 2);
        const gguf_tensor *ta = gguf_find_tensor(&g, "a"), *tb = gguf_find_tensor(&g, "b");
        assert_non_null(ta), assert_non_null(tb);
        assert_int_equal(ta->ne[0], 3), assert_int_equal(ta->ne[1], 2), assert_int_equal(ta->ndim, 2);
        assert_int_equal(ta->nbytes, 24), assert_memory_equal(ta->data, av, 24);
        assert_int_equal(tb->offset % (uint64_t)align, 0), assert_int_equal(tb->nbytes, 10);
        assert_memory_equal(tb->data, bv, 10);
        assert_null(gguf_find_tensor(&g, "c"));
        /* every truncation of this valid file fails cleanly */
        for (size_t cut = 0; cut < len; cut++) {
            gguf_file h;
            int rc = gguf_parse_buffer(&h, buf, cut, "t.gguf", err, sizeof err);
            if (rc == 0) { /* the last tensor ends the file: every cut loses a byte */
                fprintf(stderr, "truncation at %zu of %zu parsed\n", cut, len);
                gguf_close(&h);
                fail();
            }
        }
        gguf_close(&g);
        free(buf);
    }
}

static void test_malformed(void **state)
{
    (void)state;
    static bb b;
    const uint64_t ne4[1] = {4}, ne0[1] = {0}, nebig[2] = {1ull << 40, 1ull << 40};
    /* magic, versions */
    expect_err((const uint8_t *)"GGUX\3\0\0\0", 8, "bad magic");
    expect_err((const uint8_t *)"GG", 2, "bad magic");
    hdr(&b, 1, 0, 0);
    expect_err(b.p, b.n, "version 1 is not supported");
    hdr(&b, 4, 0, 0);
    expect_err(b.p, b.n, "unsupported GGUF version 4");
    hdr(&b, 3, 0, 0);
    expect_err(b.p, 12, "truncated");
    /* absurd counts */
    hdr(&b, 3, 0, 1ull << 60);
    expect_err(b.p, b.n, "metadata count");
    hdr(&b, 3, 1ull << 60, 0);
    expect_err(b.p, b.n, "tensor count");
    /* a key longer than the file */
    hdr(&b, 3, 0, 1);
    u64(&b, 1ull << 62);
    put(&b, "xxxxxxxxxxxxxxxx", 16);
    expect_err(b.p, b.n, "truncated file: metadata key");
    /* unknown value type */
    hdr(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, 99);
    put(&b, "xxxxxxxx", 8);
    expect_err(b.p, b.n, "key 'k' has unknown value type 99");
    /* array claiming more elements than the bytes left */
    hdr(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, GGUF_T_ARRAY);
    u32(&b, GGUF_T_UINT32);
    u64(&b, 1ull << 40);
    put(&b, "xxxxxxxx", 8);
    expect_err(b.p, b.n, "key 'arr': array of 1099511627776 uint32 elements does not fit");
    hdr(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, GGUF_T_ARRAY);
    u32(&b, GGUF_T_STRING);
    u64(&b, 1000);
    put(&b, "xxxxxxxx", 8);
    expect_err(b.p, b.n, "does not fit");
    hdr(&b, 3, 0, 1);
    str(&b, "arr");
    u32(&b, GGUF_T_ARRAY);
    u32(&b, 77);
    u64(&b, 1);
    expect_err(b.p, b.n, "unknown array element type 77");
    /* nesting deeper than the limit */
    hdr(&b, 3, 0, 1);
    str(&b, "deep");
    u32(&b, GGUF_T_ARRAY);
    for (int i = 0; i < GGUF_MAX_DEPTH + 2; i++) {
        u32(&b, GGUF_T_ARRAY);
        u64(&b, 1);
    }
    u32(&b, GGUF_T_UINT8);
    u64(&b, 0);
    expect_err(b.p, b.n, "nested deeper");
    /* bad bool */
    hdr(&b, 3, 0, 1);
    str(&b, "b");
    u32(&b, GGUF_T_BOOL);
    put(&b, "\x05", 1);
    expect_err(b.p, b.n, "bool is 5");
    /* duplicate key; NUL in a key */
    hdr(&b, 3, 0, 2);
    str(&b, "k");
    u32(&b, GGUF_T_UINT32);
    u32(&b, 1);
    str(&b, "k");
    u32(&b, GGUF_T_UINT32);
    u32(&b, 2);
    expect_err(b.p, b.n, "metadata key 'k' appears twice");
    hdr(&b, 3, 0, 1);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, GGUF_T_UINT32);
    u32(&b, 1);
    expect_err(b.p, b.n, "holds a NUL byte");
    /* bad alignment */
    hdr(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, GGUF_T_UINT32);
    u32(&b, 48);
    expect_err(b.p, b.n, "general.alignment must be");
    hdr(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, GGUF_T_STRING);
    str(&b, "32");
    expect_err(b.p, b.n, "general.alignment must be");
    /* tensors: dims, types, offsets */
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 5, (const uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    expect_err(b.p, b.n, "tensor 't0' has 5 dimensions");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne0, 0, 0);
    expect_err(b.p, b.n, "tensor 't0': dimension 0 is 0");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 2, nebig, 0, 0);
    expect_err(b.p, b.n, "absurd");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne4, 1234, 0);
    expect_err(b.p, b.n, "tensor 't0' has unknown ggml type id 1234");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne4, 8, 0); /* Q8_0 rows must be multiples of 32 */
    expect_err(b.p, b.n, "not a multiple of the Q8_0 block size 32");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne4, 0, 16);
    expect_err(b.p, b.n, "offset 16 is not a multiple of the alignment 32");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne4, 0, 0);
    expect_err(b.p, b.n, "data section would start");
    pad(&b, 32);
    put(&b, "0123456789", 10);
    expect_err(b.p, b.n, "tensor 't0' (F32, 16 bytes at offset 0) runs past the end");
    hdr(&b, 3, 1, 0);
    tinfo(&b, "t0", 1, ne4, 0, 1ull << 62);
    pad(&b, 32);
    put(&b, "0123456789abcdef", 16);
    expect_err(b.p, b.n, "runs past the end");
    /* overlap and duplicate names */
    hdr(&b, 3, 2, 0);
    tinfo(&b, "t0", 1, (const uint64_t[]){16}, 0, 0);
    tinfo(&b, "t1", 1, ne4, 0, 32);
    pad(&b, 32);
    for (int i = 0; i < 64; i++) put(&b, "x", 1);
    expect_err(b.p, b.n, "tensors 't0' and 't1' overlap");
    hdr(&b, 3, 2, 0);
    tinfo(&b, "t0", 1, ne4, 0, 0);
    tinfo(&b, "t0", 1, ne4, 0, 32);
    pad(&b, 32);
    for (int i = 0; i < 64; i++) put(&b, "x", 1);
    expect_err(b.p, b.n, "tensor 't0' appears twice");
    /* and the same layout without the faults parses (the checks are not blanket refusals) */
    hdr(&b, 2, 2, 0);
    tinfo(&b, "t0", 1, ne4, 0, 0);
    tinfo(&b, "t1", 1, ne4, 0, 32);
    pad(&b, 32);
    for (int i = 0; i < 48; i++) put(&b, "x", 1);
    gguf_file g;
    char err[256];
    assert_int_equal(gguf_parse_buffer(&g, b.p, b.n, "t.gguf", err, sizeof err), 0);
    assert_int_equal(g.version, 2);
    gguf_close(&g);
}

static void test_names(void **state)
{
    (void)state;
    char out[128];
    int e;
    static const char *const pairs[][2] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"model.layers.3.input_layernorm.weight", "blk.3.attn_norm.weight"},
        {"model.layers.0.self_attn.q_proj.bias", "blk.0.attn_q.bias"},
        {"model.layers.11.self_attn.o_proj.weight", "blk.11.attn_output.weight"},
        {"model.layers.1.self_attn.k_norm.weight", "blk.1.attn_k_norm.weight"},
        {"model.layers.2.post_attention_layernorm.weight", "blk.2.ffn_norm.weight"},
        {"model.layers.2.mlp.down_proj.weight", "blk.2.ffn_down.weight"},
        {"model.layers.2.mlp.gate.weight", "blk.2.ffn_gate_inp.weight"},
        {"model.layers.4.block_sparse_moe.gate.weight", "blk.4.ffn_gate_inp.weight"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        assert_int_equal(gguf_name_from_hf(pairs[i][0], out, sizeof out, &e), 1);
        assert_string_equal(out, pairs[i][1]);
        assert_int_equal(e, -1);
    }
    assert_int_equal(gguf_name_from_hf("model.layers.5.mlp.experts.17.up_proj.weight", out, sizeof out, &e), 1);
    assert_string_equal(out, "blk.5.ffn_up_exps.weight"), assert_int_equal(e, 17);
    assert_int_equal(gguf_name_from_hf("model.layers.0.block_sparse_moe.experts.7.w2.weight", out, sizeof out, &e), 1);
    assert_string_equal(out, "blk.0.ffn_down_exps.weight"), assert_int_equal(e, 7);
    assert_int_equal(gguf_name_from_hf("model.layers.0.self_attn.rotary_emb.inv_freq", out, sizeof out, &e), 0);
    assert_int_equal(gguf_name_from_hf("model.layers.x.mlp.up_proj.weight", out, sizeof out, &e), 0);
    assert_int_equal(gguf_name_from_hf("model.layers.0.mlp.experts.x.up_proj.weight", out, sizeof out, &e), 0);
    /* per architecture: the same HF name, llama.cpp's different GGUF names */
    static const char *const arch_rows[][3] = {
        {"llama", "model.layers.1.post_attention_layernorm.weight", "blk.1.ffn_norm.weight"},
        {"gemma2", "model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
        {"gemma3", "model.layers.2.pre_feedforward_layernorm.weight", "blk.2.ffn_norm.weight"},
        {"gemma2", "model.layers.0.post_feedforward_layernorm.weight", "blk.0.post_ffw_norm.weight"},
        {"gemma3", "model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight"},
        {"phi3", "model.layers.3.self_attn.qkv_proj.weight", "blk.3.attn_qkv.weight"},
        {"phi3", "model.layers.3.mlp.gate_up_proj.weight", "blk.3.ffn_up.weight"},
        {"qwen2moe", "model.layers.0.mlp.shared_expert.down_proj.weight", "blk.0.ffn_down_shexp.weight"},
        {"qwen2moe", "model.layers.0.mlp.shared_expert_gate.weight", "blk.0.ffn_gate_inp_shexp.weight"},
        {"qwen2moe", "model.layers.0.mlp.gate.weight", "blk.0.ffn_gate_inp.weight"},
        /* deepseek2 (llama.cpp's LLM_ARCH_DEEPSEEK2 names) */
        {"deepseek2", "model.layers.4.self_attn.q_proj.weight", "blk.4.attn_q.weight"},
        {"deepseek2", "model.layers.4.self_attn.q_a_proj.weight", "blk.4.attn_q_a.weight"},
        {"deepseek2", "model.layers.4.self_attn.q_a_layernorm.weight", "blk.4.attn_q_a_norm.weight"},
        {"deepseek2", "model.layers.4.self_attn.q_b_proj.weight", "blk.4.attn_q_b.weight"},
        {"deepseek2", "model.layers.4.self_attn.kv_a_proj_with_mqa.weight", "blk.4.attn_kv_a_mqa.weight"},
        {"deepseek2", "model.layers.4.self_attn.kv_a_layernorm.weight", "blk.4.attn_kv_a_norm.weight"},
        {"deepseek2", "model.layers.4.self_attn.kv_b_proj.weight", "blk.4.attn_kv_b.weight"},
        {"deepseek2", "model.layers.4.mlp.gate.e_score_correction_bias", "blk.4.exp_probs_b.bias"},
        {"deepseek2", "model.layers.4.mlp.shared_experts.up_proj.weight", "blk.4.ffn_up_shexp.weight"},
        {"deepseek2", "model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
    };
    for (size_t i = 0; i < sizeof arch_rows / sizeof arch_rows[0]; i++) {
        assert_int_equal(gguf_name_from_hf_arch(arch_rows[i][0], arch_rows[i][1], out, sizeof out, &e), 1);
        assert_string_equal(out, arch_rows[i][2]);
    }
    /* gemma-only rows do not leak into llama; qkv_proj has no llama name */
    assert_int_equal(gguf_name_from_hf("model.layers.0.pre_feedforward_layernorm.weight", out, sizeof out, &e), 0);
    assert_int_equal(gguf_name_from_hf("model.layers.0.self_attn.qkv_proj.weight", out, sizeof out, &e), 0);
    assert_int_equal(gguf_name_from_hf("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", out, sizeof out, &e), 0);
    assert_int_equal(gguf_norm_plus_one("gemma2", "blk.0.post_ffw_norm.weight"), 1);
    assert_int_equal(gguf_norm_plus_one("gemma3", "output_norm.weight"), 1);
    assert_int_equal(gguf_norm_plus_one("gemma3", "blk.0.attn_q.weight"), 0);
    assert_int_equal(gguf_norm_plus_one("llama", "output_norm.weight"), 0);
}

/* ---- a tiny llama file through model_load --------------------------------------- */

enum { H = 32, NH = 4, NKV = 2, HD = 8, FF = 64, V = 48 }; /* the test model's dims */

static void write_tiny_dims(const char *path, const char *arch, int q_type, int H, int NH, int NKV,
                            int HD, int FF, int V);

static void write_tiny(const char *path, const char *arch, int q_type)
{
    write_tiny_dims(path, arch, q_type, H, NH, NKV, HD, FF, V);
}

static void write_tiny_dims(const char *path, const char *arch, int q_type, int H, int NH, int NKV,
                            int HD, int FF, int V)
{
    gguf_writer *w = gguf_writer_create(0);
    char k[128];
#define K(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    gguf_writer_str(w, "general.architecture", arch);
    gguf_writer_u32(w, K("context_length"), 128);
    gguf_writer_u32(w, K("embedding_length"), H);
    gguf_writer_u32(w, K("block_count"), 1);
    gguf_writer_u32(w, K("feed_forward_length"), FF);
    gguf_writer_u32(w, K("attention.head_count"), NH);
    gguf_writer_u32(w, K("attention.head_count_kv"), NKV);
    gguf_writer_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    gguf_writer_f32(w, K("rope.freq_base"), 10000.0f);
#undef K
    struct { const char *n; int64_t ne0, ne1; } ts[] = {
        {"token_embd.weight", H, V}, {"output_norm.weight", H, 0},
        {"blk.0.attn_norm.weight", H, 0}, {"blk.0.ffn_norm.weight", H, 0},
        {"blk.0.attn_q.weight", H, NH * HD}, {"blk.0.attn_k.weight", H, NKV * HD},
        {"blk.0.attn_v.weight", H, NKV * HD}, {"blk.0.attn_output.weight", NH * HD, H},
        {"blk.0.ffn_gate.weight", H, FF}, {"blk.0.ffn_up.weight", H, FF}, {"blk.0.ffn_down.weight", FF, H},
    };
    size_t nt = sizeof ts / sizeof ts[0];
    for (size_t i = 0; i < nt; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        int ty = i == 6 ? q_type : 0;
        assert_int_equal(gguf_writer_tensor(w, ts[i].n, ty, ts[i].ne1 ? 2 : 1, ne), 0);
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gguf_writer_write_header(w, f), 0);
    for (size_t i = 0; i < nt; i++) {
        int ty = i == 6 ? q_type : 0;
        size_t n = gguf_type_bytes(ty, ts[i].ne0 * (ts[i].ne1 ? ts[i].ne1 : 1));
        uint8_t *z = calloc(1, n);
        float *fz = (float *)z;
        if (ty == 0)
            for (size_t j = 0; j < n / 4; j++) fz[j] = ts[i].ne1 ? 0.01f * (float)((j * 7) % 13) - 0.06f : 1.0f;
        assert_int_equal(gguf_writer_write_data(w, f, z, n), 0);
        free(z);
    }
    assert_int_equal(gguf_writer_finish(w, f), 0);
    fclose(f);
    gguf_writer_destroy(w);
}

static void test_load(void **state)
{
    (void)state;
    assert_int_equal(kernels_init(NULL), 0);
    char path[] = "/tmp/test_gguf_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    char err[1024];
    model_load_opts o = {.model_path = path, .dtype = -1};
    /* a good file loads, with the config from the metadata */
    write_tiny(path, "llama", 0);
    model *m = model_load(&o, err, sizeof err);
    if (!m) fprintf(stderr, "%s\n", err);
    assert_non_null(m);
    const model_config *c = model_get_config(m);
    assert_int_equal(c->hidden_size, H), assert_int_equal(c->n_kv_head, NKV);
    assert_int_equal(c->vocab_size, V), assert_int_equal(c->tie_word_embeddings, 1);
    assert_string_equal(c->architecture, "LlamaForCausalLM");
    model_free(m);
    /* an unsupported tensor type names the tensor and the type */
    write_tiny(path, "llama", 39 /* MXFP4: no id in sglc */);
    assert_null(model_load(&o, err, sizeof err));
    assert_non_null(strstr(err, "blk.0.attn_v.weight"));
    assert_non_null(strstr(err, "MXFP4"));
    /* an unsupported architecture names it */
    write_tiny(path, "gpt2", 0);
    assert_null(model_load(&o, err, sizeof err));
    assert_non_null(strstr(err, "unsupported GGUF architecture 'gpt2'"));
    /* garbage with a .gguf name: the reader's error */
    FILE *f = fopen(path, "wb");
    fputs("not a gguf file at all", f);
    fclose(f);
    assert_null(model_load(&o, err, sizeof err));
    assert_non_null(strstr(err, "bad magic"));
    unlink(path);
}

/* the chat template of a GGUF file renders with the vocabulary's special tokens */
static void test_chat_template(void **state)
{
    (void)state;
    char path[] = "/tmp/test_gguf_ct_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    gguf_writer *w = gguf_writer_create(0);
    const char *toks[] = {"<unk>", "<s>", "</s>", "hi"};
    gguf_writer_arr_str(w, "tokenizer.ggml.tokens", toks, 4);
    gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_str(w, "tokenizer.chat_template",
                    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}");
    FILE *f = fopen(path, "wb");
    assert_int_equal(gguf_writer_write_header(w, f), 0);
    assert_int_equal(gguf_writer_finish(w, f), 0);
    fclose(f);
    gguf_writer_destroy(w);
    tmpl_chat c;
    char *err = NULL, *out = NULL;
    assert_int_equal(cli_gguf_chat_load(&c, path, NULL, &err), 0);
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "hello");
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "<s>[user] hello</s>");
    free(out);
    tmpl_chat_free(&c);
    /* --chat-template overrides the file's */
    assert_int_equal(cli_gguf_chat_load(&c, path, "chatml", &err), 0);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 1, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    tmpl_chat_free(&c);
    json_decref(msgs);
    /* a file without one says so */
    w = gguf_writer_create(0);
    gguf_writer_str(w, "general.architecture", "llama");
    f = fopen(path, "wb");
    assert_int_equal(gguf_writer_write_header(w, f), 0);
    fclose(f);
    gguf_writer_destroy(w);
    assert_int_equal(cli_gguf_chat_load(&c, path, NULL, &err), -1);
    assert_non_null(strstr(err, "has no tokenizer.chat_template"));
    free(err);
    unlink(path);
}

/* GGUF_SEED_DIR=DIR: write the fuzzer's seed corpus (tests/fuzz/corpus/fuzz_gguf) and exit */
static int write_seeds(const char *dir)
{
    char p[4096];
    static const char *const archs[] = {"llama", "qwen3", "qwen2"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/tiny_%s.gguf", dir, archs[i]);
        write_tiny_dims(p, archs[i], 0, 8, 2, 1, 4, 16, 8);
    }
    /* metadata of every type, no tensors */
    gguf_writer *w = gguf_writer_create(0);
    uint8_t u8v = 7;
    double f64v = 2.5;
    gguf_writer_raw(w, "t.u8", GGUF_T_UINT8, &u8v, 1);
    gguf_writer_raw(w, "t.f64", GGUF_T_FLOAT64, &f64v, 8);
    gguf_writer_u32(w, "t.u32", 3);
    gguf_writer_i32(w, "t.i32", -3);
    gguf_writer_f32(w, "t.f32", 0.5f);
    gguf_writer_bool(w, "t.bool", 1);
    gguf_writer_u64(w, "t.u64", 9);
    gguf_writer_str(w, "general.architecture", "qwen3moe");
    const char *toks[] = {"a", "b", "ab"};
    gguf_writer_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    int32_t ty[3] = {1, 1, 3};
    gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_T_INT32, ty, 3);
    gguf_writer_str(w, "sglc.hf_config", "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":8}");
    snprintf(p, sizeof p, "%s/meta_only.gguf", dir);
    FILE *f = fopen(p, "wb");
    if (!f || gguf_writer_write_header(w, f) || gguf_writer_finish(w, f)) return 1;
    fclose(f);
    gguf_writer_destroy(w);
    return 0;
}

int main(void)
{
    const char *seeds = getenv("GGUF_SEED_DIR");
    if (seeds && *seeds) return write_seeds(seeds);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_chat_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
