/* pt_build — write torch.save images in memory for test_pt_reader and
 * fuzz_pt_reader: stored zip entries (CRC-32, optional zip64 end records)
 * and the pickle torch.save writes for a 1-D tensor.  Header-only, static:
 * the two test programs include it. */
#ifndef SGLC_TESTS_PT_BUILD_H
#define SGLC_TESTS_PT_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct ptb {
    uint8_t p[1 << 20];
    size_t n;
    int overflow;
} ptb;

static void ptb_put(ptb *b, const void *d, size_t n)
{
    if (b->n + n > sizeof b->p) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void ptb_u8(ptb *b, unsigned v)
{
    uint8_t x = (uint8_t)v;
    ptb_put(b, &x, 1);
}
static void ptb_u16(ptb *b, unsigned v) { ptb_u8(b, v & 0xFF), ptb_u8(b, (v >> 8) & 0xFF); }
static void ptb_u32(ptb *b, uint32_t v) { ptb_u16(b, v & 0xFFFF), ptb_u16(b, v >> 16); }
static void ptb_u64(ptb *b, uint64_t v) { ptb_u32(b, (uint32_t)v), ptb_u32(b, (uint32_t)(v >> 32)); }

static uint32_t ptb_crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

typedef struct ptb_entry {
    const char *name;
    const void *data;
    size_t len;
} ptb_entry;

/* A zip of stored entries into b (reset).  zip64: saturated EOCD fields
 * and the zip64 record + locator, as large files have. */
static void ptb_zip(ptb *b, const ptb_entry *e, int n, int zip64)
{
    size_t off[16];
    b->n = 0;
    b->overflow = 0;
    for (int i = 0; i < n && i < 16; i++) {
        off[i] = b->n;
        ptb_u32(b, 0x04034b50u), ptb_u16(b, 20), ptb_u16(b, 0), ptb_u16(b, 0), ptb_u16(b, 0), ptb_u16(b, 0);
        ptb_u32(b, ptb_crc(e[i].data, e[i].len)), ptb_u32(b, (uint32_t)e[i].len), ptb_u32(b, (uint32_t)e[i].len);
        ptb_u16(b, (unsigned)strlen(e[i].name)), ptb_u16(b, 0);
        ptb_put(b, e[i].name, strlen(e[i].name));
        ptb_put(b, e[i].data, e[i].len);
    }
    size_t cd = b->n;
    for (int i = 0; i < n && i < 16; i++) {
        ptb_u32(b, 0x02014b50u), ptb_u16(b, 20), ptb_u16(b, 20), ptb_u16(b, 0), ptb_u16(b, 0), ptb_u16(b, 0),
            ptb_u16(b, 0);
        ptb_u32(b, ptb_crc(e[i].data, e[i].len)), ptb_u32(b, (uint32_t)e[i].len), ptb_u32(b, (uint32_t)e[i].len);
        ptb_u16(b, (unsigned)strlen(e[i].name)), ptb_u16(b, 0), ptb_u16(b, 0), ptb_u16(b, 0), ptb_u16(b, 0);
        ptb_u32(b, 0), ptb_u32(b, (uint32_t)off[i]);
        ptb_put(b, e[i].name, strlen(e[i].name));
    }
    size_t cds = b->n - cd;
    if (zip64) {
        size_t r = b->n;
        ptb_u32(b, 0x06064b50u), ptb_u64(b, 44), ptb_u16(b, 45), ptb_u16(b, 45), ptb_u32(b, 0), ptb_u32(b, 0);
        ptb_u64(b, (uint64_t)n), ptb_u64(b, (uint64_t)n), ptb_u64(b, cds), ptb_u64(b, cd);
        ptb_u32(b, 0x07064b50u), ptb_u32(b, 0), ptb_u64(b, r), ptb_u32(b, 1);
    }
    ptb_u32(b, 0x06054b50u), ptb_u16(b, 0), ptb_u16(b, 0);
    ptb_u16(b, zip64 ? 0xFFFF : (unsigned)n), ptb_u16(b, zip64 ? 0xFFFF : (unsigned)n);
    ptb_u32(b, zip64 ? 0xFFFFFFFFu : (uint32_t)cds), ptb_u32(b, zip64 ? 0xFFFFFFFFu : (uint32_t)cd), ptb_u16(b, 0);
}

/* torch.save's pickle of a 1-D tensor over storage `stype` (LongStorage,
 * IntStorage), key "0", numel elements, at offset with size and stride. */
static size_t ptb_tensor_pickle(uint8_t *out, size_t cap, const char *stype, long numel, long offset, long size,
                                long stride)
{
    static ptb b; /* (1 MiB: not on the stack) */
    b.n = 0;
    b.overflow = 0;
    const char *g = "ctorch._utils\n_rebuild_tensor_v2\n";
    ptb_u8(&b, 0x80), ptb_u8(&b, 2);
    ptb_put(&b, g, strlen(g));
    ptb_u8(&b, 'q'), ptb_u8(&b, 0), ptb_u8(&b, '('), ptb_u8(&b, '(');
    ptb_u8(&b, 'X'), ptb_u32(&b, 7), ptb_put(&b, "storage", 7), ptb_u8(&b, 'q'), ptb_u8(&b, 1);
    char gs[64];
    snprintf(gs, sizeof gs, "ctorch\n%s\n", stype);
    ptb_put(&b, gs, strlen(gs));
    ptb_u8(&b, 'q'), ptb_u8(&b, 2);
    ptb_u8(&b, 'X'), ptb_u32(&b, 1), ptb_put(&b, "0", 1);
    ptb_u8(&b, 'X'), ptb_u32(&b, 3), ptb_put(&b, "cpu", 3);
    ptb_u8(&b, 'J'), ptb_u32(&b, (uint32_t)numel);
    ptb_u8(&b, 't'), ptb_u8(&b, 'Q');
    ptb_u8(&b, 'J'), ptb_u32(&b, (uint32_t)offset);
    ptb_u8(&b, 'J'), ptb_u32(&b, (uint32_t)size), ptb_u8(&b, 0x85);
    ptb_u8(&b, 'J'), ptb_u32(&b, (uint32_t)stride), ptb_u8(&b, 0x85);
    ptb_u8(&b, 0x89);
    ptb_put(&b, "ccollections\nOrderedDict\n", 25);
    ptb_u8(&b, 'q'), ptb_u8(&b, 3), ptb_u8(&b, ')'), ptb_u8(&b, 'R');
    ptb_u8(&b, 't'), ptb_u8(&b, 'R'), ptb_u8(&b, '.');
    if (b.n > cap) return 0;
    memcpy(out, b.p, b.n);
    return b.n;
}

/* A whole torch.save image of the int64 ids (n) into b. */
static void ptb_tensor_file(ptb *b, const int64_t *ids, long n, int zip64)
{
    static uint8_t pk[512];
    size_t pl = ptb_tensor_pickle(pk, sizeof pk, "LongStorage", n, 0, n, 1);
    ptb_entry e[3] = {{"map/data.pkl", pk, pl}, {"map/byteorder", "little", 6},
                      {"map/data/0", ids, sizeof(int64_t) * (size_t)n}};
    ptb_zip(b, e, 3, zip64);
}

#endif
