/* test_pt_reader — the torch.save reader (util/pt_reader.h) and the
 * speculative token map over it (spec/spec_tokmap.h):
 *   - images written here (tests/unit/pt_build.h) in torch.save's layout:
 *     int64 and int32 storages, a view at an offset, a list of ints (with
 *     more ints than the value table holds), zip64 end records, memo gets;
 *   - robustness, each a clear error and never a crash (run it under
 *     ASan/UBSan: make test-full): every truncation, every single-bit flip
 *     and every byte set to 0xFF of a valid image; hostile pickles — deep
 *     MARK nesting, 10^5 nested tuples, huge string / storage / tensor
 *     sizes, unknown globals (os.system), dicts, other opcodes, a 2-D
 *     tensor, stride 2, a tensor outside its storage, a wrong storage size,
 *     LONG1 of 9 bytes, unset memo, leftovers at STOP, no STOP; zip: no
 *     signature, the legacy pickle format, a compressed entry, a bad CRC,
 *     big-endian byteorder, no or two data.pkl, a missing storage;
 *   - spec_tokmap: bind refuses ids out of range, duplicates, more ids than
 *     the vocabulary; the mask keeps exactly the hot logits; the LM head
 *     cut to the hot rows (f32, bf16 panels, Q8_0) gives bit-identical
 *     logits to the full head masked; kern_mat_row_f32 reads back the
 *     stored rows of packed weights.
 * PT_SEED_DIR=DIR writes the fuzzer's seed images (fuzz_pt_reader) there. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "spec/spec_tokmap.h"
#include "util/dtype.h"
#include "util/pt_reader.h"

#include "pt_build.h"

static ptb B; /* the image under test */

static void expect_ok(const uint8_t *p, size_t n, const int64_t *want, int64_t nwant)
{
    int64_t *v = NULL, nv = -1;
    char err[512] = "";
    int rc = pt_read_int_vector(p, n, &v, &nv, err, sizeof err);
    if (rc) fprintf(stderr, "unexpected error: %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(nv, nwant);
    for (int64_t i = 0; i < nwant; i++) assert_int_equal(v[i], want[i]);
    free(v);
}

static void expect_err(const uint8_t *p, size_t n, const char *pat)
{
    int64_t *v = (int64_t *)1, nv = -1;
    char err[512] = "";
    int rc = pt_read_int_vector(p, n, &v, &nv, err, sizeof err);
    if (rc == 0 || !strstr(err, pat)) fprintf(stderr, "want error '%s', got rc %d '%s'\n", pat, rc, err);
    assert_int_equal(rc, -1);
    assert_null(v);
    assert_non_null(strstr(err, pat));
}

/* A zip holding data.pkl = pk (pl bytes) and storage 0 = the bytes d (dl). */
static void wrap(const uint8_t *pk, size_t pl, const void *d, size_t dl)
{
    ptb_entry e[2] = {{"x/data.pkl", pk, pl}, {"x/data/0", d, dl}};
    ptb_zip(&B, e, 2, 0);
}

static const int64_t IDS[6] = {5, 3, 9, 1, 400, 0};

static void test_valid(void **st)
{
    (void)st;
    ptb_tensor_file(&B, IDS, 6, 0);
    expect_ok(B.p, B.n, IDS, 6);
    ptb_tensor_file(&B, IDS, 6, 1); /* zip64 end records */
    expect_ok(B.p, B.n, IDS, 6);
    /* int32 storage, a view [1, 4) of it */
    static uint8_t pk[512];
    int32_t d32[5] = {7, -2, 11, 13, 17};
    size_t pl = ptb_tensor_pickle(pk, sizeof pk, "IntStorage", 5, 1, 3, 1);
    wrap(pk, pl, d32, sizeof d32);
    int64_t w32[3] = {-2, 11, 13};
    expect_ok(B.p, B.n, w32, 3);
    /* an empty tensor (size 0 over an empty storage): read, the map refuses it later */
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 0, 0, 0, 1);
    wrap(pk, pl, "", 0);
    expect_ok(B.p, B.n, NULL, 0);
    /* stride is irrelevant for one element */
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, 2, 1, 5);
    wrap(pk, pl, IDS, sizeof IDS);
    expect_ok(B.p, B.n, IDS + 2, 1);
}

/* a list of n ints in batches of 1000 (as pickle writes it), memoized */
static void test_list(void **st)
{
    (void)st;
    static uint8_t pk[1 << 20];
    const int n = 70000; /* more than the value table (65,536) */
    size_t k = 0;
    pk[k++] = 0x80, pk[k++] = 2, pk[k++] = ']', pk[k++] = 'q', pk[k++] = 0;
    for (int i = 0; i < n; i += 1000) {
        pk[k++] = '(';
        for (int j = i; j < i + 1000 && j < n; j++) {
            uint32_t x = (uint32_t)(j * 3);
            pk[k++] = 'J';
            memcpy(pk + k, &x, 4);
            k += 4;
        }
        pk[k++] = 'e';
    }
    pk[k++] = '.';
    wrap(pk, k, "", 0);
    int64_t *v = NULL, nv = 0;
    char err[256];
    assert_int_equal(pt_read_int_vector(B.p, B.n, &v, &nv, err, sizeof err), 0);
    assert_int_equal(nv, n);
    for (int i = 0; i < n; i++) assert_int_equal(v[i], (int64_t)i * 3);
    free(v);
    /* LONG1 negative and 8-byte values, APPEND, BINGET of the list */
    const uint8_t p3[] = {0x80, 2, ']', 'q', 7, 0x8a, 1, 0xFF, 'a', 0x8a, 8, 1, 0, 0, 0, 0, 0, 0, 0x40,
                          'a', 'K', 200, 'a', 'M', 0x34, 0x12, 'a', '.'};
    wrap(p3, sizeof p3, "", 0);
    int64_t w[4] = {-1, (int64_t)0x4000000000000001LL, 200, 0x1234};
    expect_ok(B.p, B.n, w, 4);
}

static void test_mutations(void **st)
{
    (void)st;
    ptb_tensor_file(&B, IDS, 6, 0);
    static uint8_t good[4096], m[4096];
    size_t n = B.n;
    assert_true(n < sizeof good);
    memcpy(good, B.p, n);
    int64_t *v;
    int64_t nv;
    char err[512];
    for (size_t cut = 0; cut < n; cut++) { /* every truncation fails */
        v = NULL;
        int rc = pt_read_int_vector(good, cut, &v, &nv, err, sizeof err);
        if (rc == 0) fprintf(stderr, "truncation at %zu of %zu parsed\n", cut, n);
        assert_int_equal(rc, -1);
        assert_true(err[0] != 0);
    }
    int accepted = 0;
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit <= 8; bit++) { /* bit 8: the byte set to 0xFF */
            memcpy(m, good, n);
            m[i] = bit == 8 ? 0xFF : (uint8_t)(m[i] ^ (1u << bit));
            if (m[i] == good[i]) continue;
            v = NULL;
            err[0] = 0;
            if (pt_read_int_vector(m, n, &v, &nv, err, sizeof err) == 0) {
                /* only fields the reader does not use may change (versions, flags, times, ...) */
                assert_int_equal(nv, 6);
                for (int j = 0; j < 6; j++) assert_int_equal(v[j], IDS[j]);
                free(v);
                accepted++;
            } else {
                assert_null(v);
                assert_true(err[0] != 0);
            }
        }
    }
    fprintf(stderr, "bit flips: %d of %zu accepted (unused header fields), the rest refused\n", accepted, n * 9);
}

static void hostile(const uint8_t *pk, size_t pl, const char *pat)
{
    wrap(pk, pl, IDS, sizeof IDS);
    expect_err(B.p, B.n, pat);
}

static void test_hostile_pickles(void **st)
{
    (void)st;
    static uint8_t pk[1 << 20];
    size_t k = 0;
    /* deep nesting: 200,000 MARKs */
    pk[k++] = 0x80, pk[k++] = 2;
    for (int i = 0; i < 200000; i++) pk[k++] = '(';
    pk[k++] = '.';
    hostile(pk, k, "nests deeper");
    /* 100,000 nested tuples ((((...)))) via TUPLE1: stays in the value table bound */
    k = 0;
    pk[k++] = 0x80, pk[k++] = 2, pk[k++] = ')';
    for (int i = 0; i < 100000; i++) pk[k++] = 0x85;
    pk[k++] = '.';
    hostile(pk, k, "more than 65536 objects");
    /* 9-item tuple */
    k = 0;
    pk[k++] = 0x80, pk[k++] = 2, pk[k++] = '(';
    for (int i = 0; i < 9; i++) pk[k++] = 'K', pk[k++] = 1;
    pk[k++] = 't', pk[k++] = '.';
    hostile(pk, k, "a tuple of 9 items");
    /* a huge string length */
    const uint8_t s1[] = {0x80, 2, 'X', 0xFF, 0xFF, 0xFF, 0x7F, 'a', '.'};
    hostile(s1, sizeof s1, "truncated pickle");
    const uint8_t s2[] = {0x80, 2, 'X', 0xFF, 0xFF, 0xFF, 0xFF, '.'};
    hostile(s2, sizeof s2, "string length");
    /* globals other than the four */
    const char *g = "\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00lsR.";
    hostile((const uint8_t *)g, strlen(g) , "os.system");
    const char *g2 = "\x80\x02" "cbuiltins\neval\n.";
    hostile((const uint8_t *)g2, strlen(g2), "builtins.eval");
    const char *g3 = "\x80\x02" "ctorch\nLongStorage\n)R.";
    hostile((const uint8_t *)g3, strlen(g3), "storage type called");
    /* dicts, INST, protocol 0/1 opcodes, BUILD, DUP */
    const uint8_t d1[] = {0x80, 2, '}', '.'};
    hostile(d1, sizeof d1, "a dict");
    const uint8_t o1[] = {0x80, 2, 'i', 'o', 's', '\n', 's', '\n', '.'};
    hostile(o1, sizeof o1, "opcode 0x69");
    const uint8_t o2[] = {0x80, 2, 'K', 1, '2', '.'};
    hostile(o2, sizeof o2, "opcode 0x32");
    const uint8_t o3[] = {0x80, 2, 'K', 1, 'b', '.'};
    hostile(o3, sizeof o3, "opcode 0x62");
    const uint8_t o4[] = {0x80, 9, 'K', 1, '.'};
    hostile(o4, sizeof o4, "pickle protocol 9");
    /* stack / memo misuse */
    const uint8_t u1[] = {0x80, 2, 'R', '.'};
    hostile(u1, sizeof u1, "stack underflow");
    const uint8_t u2[] = {0x80, 2, 'h', 3, '.'};
    hostile(u2, sizeof u2, "never set");
    const uint8_t u3[] = {0x80, 2, 'K', 1, 'r', 0xFF, 0xFF, 0xFF, 0xFF, '.'};
    hostile(u3, sizeof u3, "memo index");
    const uint8_t u4[] = {0x80, 2, 'K', 1, 'K', 2, '.'};
    hostile(u4, sizeof u4, "2 objects left");
    const uint8_t u5[] = {0x80, 2, 'K', 1};
    hostile(u5, sizeof u5, "no STOP");
    const uint8_t u6[] = {0x80, 2, 0x8a, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, '.'};
    hostile(u6, sizeof u6, "9 bytes");
    const uint8_t u7[] = {0x80, 2, '(', 't', 'e', '.'};
    hostile(u7, sizeof u7, "APPENDS without");
    const uint8_t u8[] = {0x80, 2, ']', '(', 'X', 1, 0, 0, 0, 'a', 'e', '.'};
    hostile(u8, sizeof u8, "the list holds a string");
    const uint8_t u9[] = {0x80, 2, 'K', 1, '(', 0x85, '.'};
    hostile(u9, sizeof u9, "stack underflow");
    const uint8_t u10[] = {0x80, 2, 'N', '.'};
    hostile(u10, sizeof u10, "holds None");
    const uint8_t u11[] = {0x80, 2, 'K', 1, 'Q', '.'};
    hostile(u11, sizeof u11, "persistent id other");
}

static void test_hostile_tensors(void **st)
{
    (void)st;
    static uint8_t pk[512];
    size_t pl;
    /* offset + size outside the storage; negative and huge element counts */
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, 4, 3, 1);
    hostile(pk, pl, "outside its storage");
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, -1, 3, 1);
    hostile(pk, pl, "outside its storage");
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 0x7FFFFFFF, 0, 0x7FFFFFFF, 1);
    hostile(pk, pl, "storage key, location or element count");
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, 0, 3, 2);
    hostile(pk, pl, "stride 2");
    /* the storage bytes differ from numel * 8 */
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 7, 0, 6, 1);
    hostile(pk, pl, "holds 48 bytes");
    /* wrong dtype */
    pl = ptb_tensor_pickle(pk, sizeof pk, "FloatStorage", 6, 0, 6, 1);
    hostile(pk, pl, "torch.FloatStorage");
    /* 2-D: rewrite TUPLE1 of the size as TUPLE2 over (offset, size) */
    pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, 0, 6, 1);
    uint8_t *t1 = memchr(pk + 60, 0x85, pl - 60);
    assert_non_null(t1);
    *t1 = 0x86;
    hostile(pk, pl, "_rebuild_tensor_v2 with 5 arguments");
}

static void test_zip(void **st)
{
    (void)st;
    expect_err((const uint8_t *)"hello world, not a zip file at all", 34, "no zip signature");
    const uint8_t legacy[] = {0x80, 2, 0x8a, 10, 'l', 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.',
                              0,    0, 0,    0,  0,   0,    0,    0,    0,    0,    0,    0};
    expect_err(legacy, sizeof legacy, "legacy");
    static uint8_t m[4096];
    ptb_tensor_file(&B, IDS, 6, 0);
    size_t n = B.n;
    memcpy(m, B.p, n);
    /* compressed (method 8) in the central directory */
    uint8_t *cd = NULL;
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(m + i, "PK\x01\x02", 4)) {
            cd = m + i;
            break;
        }
    assert_non_null(cd);
    cd[10] = 8;
    expect_err(m, n, "compressed (method 8)");
    cd[10] = 0;
    cd[8] = 1;
    expect_err(m, n, "encrypted");
    cd[8] = 0;
    /* the data of the first entry changed: CRC */
    memcpy(m, B.p, n);
    m[30 + 12] ^= 1;
    expect_err(m, n, "CRC-32 mismatch in the zip entry map/data.pkl");
    /* big-endian */
    ptb_entry e[3];
    static uint8_t pk[512];
    size_t pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 6, 0, 6, 1);
    e[0] = (ptb_entry){"a/data.pkl", pk, pl};
    e[1] = (ptb_entry){"a/byteorder", "big", 3};
    e[2] = (ptb_entry){"a/data/0", IDS, sizeof IDS};
    ptb_zip(&B, e, 3, 0);
    expect_err(B.p, B.n, "big-endian");
    /* no data.pkl; two; a missing storage; data.pkl two folders deep */
    e[1] = (ptb_entry){"a/data/0", IDS, sizeof IDS};
    ptb_zip(&B, e + 1, 1, 0);
    expect_err(B.p, B.n, "no PREFIX/data.pkl");
    e[1] = (ptb_entry){"b/data.pkl", pk, pl};
    ptb_zip(&B, e, 2, 0);
    expect_err(B.p, B.n, "more than one data.pkl");
    ptb_zip(&B, e, 1, 0);
    expect_err(B.p, B.n, "no storage a/data/0");
    e[0] = (ptb_entry){"a/b/data.pkl", pk, pl};
    ptb_zip(&B, e, 1, 0);
    expect_err(B.p, B.n, "no PREFIX/data.pkl");
    /* a file that does not exist */
    int64_t *v;
    int64_t nv;
    char err[256];
    assert_int_equal(pt_read_int_vector_file("/nonexistent/map.pt", &v, &nv, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
}

static void test_tokmap(void **st)
{
    (void)st;
    char err[256];
    const int64_t ids[4] = {3, 0, 7, 5};
    spec_tokmap *m = spec_tokmap_from_ids(ids, 4, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(spec_tokmap_bind(m, 7, err, sizeof err), -1); /* 7 is outside a vocabulary of 7 */
    assert_non_null(strstr(err, "entry 2 is 7, outside"));
    assert_int_equal(spec_tokmap_bind(m, 8, err, sizeof err), 0);
    assert_int_equal(spec_tokmap_bind(m, 8, err, sizeof err), 0);  /* again: the same vocabulary */
    assert_int_equal(spec_tokmap_bind(m, 9, err, sizeof err), -1); /* another one */
    const float lg0[8] = {9, 1, 8, 2, 7, 3, 6, 4};
    float lg[8];
    memcpy(lg, lg0, sizeof lg);
    spec_tokmap_mask(m, lg);
    for (int i = 0; i < 8; i++) {
        bool hot = i == 0 || i == 3 || i == 5 || i == 7;
        if (hot) assert_true(lg[i] == lg0[i]);
        else assert_true(isinf(lg[i]) && lg[i] < 0);
    }
    spec_tokmap_destroy(m);
    const int64_t dup[3] = {1, 2, 1};
    m = spec_tokmap_from_ids(dup, 3, err, sizeof err);
    assert_int_equal(spec_tokmap_bind(m, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "entry 2 repeats token id 1"));
    assert_int_equal(spec_tokmap_bind(m, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "3 ids, more than the target's vocabulary of 2"));
    spec_tokmap_destroy(m);
    const int64_t neg[2] = {1, -4};
    assert_null(spec_tokmap_from_ids(neg, 2, err, sizeof err));
    assert_non_null(strstr(err, "entry 1 is -4"));
    assert_null(spec_tokmap_from_ids(neg, 0, err, sizeof err));
    assert_non_null(strstr(err, "at least 1"));
}

/* fuzz_pt_reader's seeds: byte 0 even + a whole image, or odd + a pickle
 * (the fuzzer wraps it with a storage of 8 int64) */
/* the cut LM head (spec_tokmap_head over kern_mat_row_f32) gives the same
 * logits as the full head masked, for f32, bf16 (packed panels under the
 * ISA in use) and row-major Q8_0 heads of odd sizes */
static void test_cut_head(void **st)
{
    (void)st;
    enum { V = 301, K = 96, NH = 37 };
    static float w[V * K], x[K], full[V], cut[V], row[K];
    uint32_t seed = 12345;
    for (int i = 0; i < V * K; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f);
    }
    for (int i = 0; i < K; i++) x[i] = sinf((float)i * 0.37f);
    int64_t ids[NH];
    for (int i = 0; i < NH; i++) ids[i] = (i * 97 + 5) % V; /* distinct: 97 is prime to 301 */
    char err[256];
    spec_tokmap *m = spec_tokmap_from_ids(ids, NH, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(spec_tokmap_bind(m, V, err, sizeof err), 0);
    const int types[3] = {KERN_TYPE_F32, KERN_TYPE_BF16, KERN_TYPE_Q8_0};
    for (int t = 0; t < 3; t++) {
        kern_mat lm;
        assert_int_equal(kern_mat_init_kt(&lm, w, KERN_TYPE_F32, V, K, types[t], 0), 0);
        if (types[t] != KERN_TYPE_Q8_0) /* the stored values read back, from any layout */
            for (int r = 0; r < V; r += 50) {
                assert_int_equal(kern_mat_row_f32(&lm, r, row), 0);
                for (int c = 0; c < K; c++) {
                    float want = types[t] == KERN_TYPE_BF16 ? bf16_to_f32(f32_to_bf16(w[r * K + c])) : w[r * K + c];
                    assert_true(row[c] == want);
                }
            }
        assert_int_equal(kern_mat_row_f32(&lm, V, row), -1);
        void *scr = aligned_alloc(64, (kern_matmul_scratch(1, K) + 63) & ~(size_t)63);
        kern_matmul(full, x, 1, &lm, NULL, 0, 1, scr);
        spec_tokmap_mask(m, full);
        spec_tokmap_head h;
        assert_int_equal(spec_tokmap_head_init(&h, m, &lm), 0);
        spec_tokmap_head_logits(&h, m, x, cut);
        for (int i = 0; i < V; i++) {
            if (isinf(full[i])) assert_true(isinf(cut[i]) && cut[i] < 0);
            else if (cut[i] != full[i]) fail_msg("type %d id %d: cut %g full %g", types[t], i, cut[i], full[i]);
        }
        assert_int_equal(h.mat.n, NH);
        spec_tokmap_head_free(&h);
        free(scr);
        kern_mat_free(&lm);
    }
    spec_tokmap_destroy(m);
}

static int write_seed(const char *dir, const char *name, uint8_t mode, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(&mode, 1, 1, f) != 1 || fwrite(p, 1, n, f) != n;
    if (f) fclose(f);
    return bad;
}

static int write_seeds(const char *dir)
{
    int bad = 0;
    ptb_tensor_file(&B, IDS, 6, 0);
    bad |= write_seed(dir, "tensor", 0, B.p, B.n);
    ptb_tensor_file(&B, IDS, 6, 1);
    bad |= write_seed(dir, "tensor_zip64", 0, B.p, B.n);
    static uint8_t pk[512];
    size_t pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", 8, 1, 6, 1);
    bad |= write_seed(dir, "pickle_tensor", 1, pk, pl);
    const uint8_t list[] = {0x80, 2, ']', 'q', 0, '(', 'K', 5, 'M', 0x34, 0x12, 'J', 1, 0, 0, 0x80, 0x8a, 1, 0xFF, 'e', '.'};
    bad |= write_seed(dir, "pickle_list", 1, list, sizeof list);
    return bad;
}

int main(void)
{
    const char *seed = getenv("PT_SEED_DIR");
    if (seed) return write_seeds(seed);
    kernels_init(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),           cmocka_unit_test(test_list),
        cmocka_unit_test(test_mutations),       cmocka_unit_test(test_hostile_pickles),
        cmocka_unit_test(test_hostile_tensors), cmocka_unit_test(test_zip),
        cmocka_unit_test(test_tokmap),          cmocka_unit_test(test_cut_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
