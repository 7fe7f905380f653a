/* multi_item — SGLang's multi-item scoring attention
 * (--multi-item-scoring-delimiter): one prompt
 *
 *   query <d> item1 <d> item2 ... <d> itemN <d>
 *
 * scores N items in one pass, each item seeing the query and itself only.
 *
 * DESIGN: no attention kernel knows this mask.  A sequence of the batch
 * that is a whole prefill (no cached prefix, as SGLang's requirement of
 * no radix cache and no chunked prefill guarantees) and holds the
 * delimiter is rewritten, before the forward, into sub-sequences over the
 * same rows:
 *   - the query rows [0, d0) (d0 = the first delimiter): causal as usual;
 *   - each segment k = [d_k, d_k+1) -- a delimiter and the item after it
 *     (the last one: the final delimiter alone) -- as a sequence whose
 *     slot list is the query's slots followed by the segment's own, so its
 *     rows attend to the whole query and, causally, their own segment.
 * Rows, tokens, logit rows and the KV slots written are unchanged; in
 * its sub-sequence a segment row's kv position is d0 + j (j = its offset
 * in the segment: what the sub-sequence's kv length says), and rope turns
 * it by d0 - 1 + j (model_batch.rope_pos), as SGLang's FlashInfer path
 * rewrites the positions: each delimiter at the query's last position,
 * the item's tokens from d0 on.  The scores SGLang reads are the logits
 * of the row before each delimiter: item k's last token, which sees the
 * query, delimiter k and item k.
 * The slots of the whole prompt keep its K/V; a request that then decodes
 * past the prompt attends to all of it causally (scoring requests do not:
 * max_new_tokens 0). */
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"

void model_set_multi_item_delimiter(model *m, int32_t id)
{
    m->mi_on = id >= 0;
    m->mi_delim = id;
}

void model_mi_buf_free(model_mi_buf *mb)
{
    if (!mb) return;
    free(mb->start), free(mb->kvl), free(mb->rl), free(mb->pos), free(mb->rpos), free(mb->slot_mem);
    free((void *)mb->slots);
    memset(mb, 0, sizeof *mb);
}

/* Does sequence s qualify, and where is its first delimiter?  -1 if not. */
static int first_delim(const model_batch *b, int s, int32_t delim)
{
    int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
    if (b->seq_kv_len[s] != n) return -1; /* cached prefix or chunk: not a whole prompt */
    for (int i = 0; i < n; i++)
        if (b->tokens[r0 + i] == delim) return i;
    return -1;
}

int model_mi_split(const model_batch *b, int32_t delim, model_batch *out, model_mi_buf *mb)
{
    memset(mb, 0, sizeof *mb);
    int n_seq = 0, any = 0;
    size_t n_slot = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int d0 = first_delim(b, s, delim);
        if (d0 < 0) {
            n_seq++;
            continue;
        }
        any = 1;
        int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
        n_seq += d0 > 0;
        for (int i = d0; i < n; i++) {
            if (b->tokens[r0 + i] != delim) continue;
            int e = i + 1;
            while (e < n && b->tokens[r0 + e] != delim) e++;
            n_seq++;
            n_slot += (size_t)d0 + (size_t)(e - i);
        }
    }
    if (!any) return 0;
    mb->start = malloc(sizeof(int32_t) * (size_t)(n_seq + 1));
    mb->kvl = malloc(sizeof(int32_t) * (size_t)n_seq);
    mb->rl = malloc(sizeof(int32_t) * (size_t)n_seq);
    mb->slots = malloc(sizeof(int32_t *) * (size_t)n_seq);
    mb->pos = malloc(sizeof(int32_t) * (size_t)b->n_tokens);
    mb->rpos = malloc(sizeof(int32_t) * (size_t)b->n_tokens);
    mb->slot_mem = malloc(sizeof(int32_t) * (n_slot ? n_slot : 1));
    if (!mb->start || !mb->kvl || !mb->rl || !mb->slots || !mb->pos || !mb->rpos || !mb->slot_mem) {
        model_mi_buf_free(mb);
        return -1;
    }
    memcpy(mb->pos, b->positions, sizeof(int32_t) * (size_t)b->n_tokens);
    for (int t = 0; t < b->n_tokens; t++) mb->rpos[t] = b->rope_pos ? b->rope_pos[t] : b->positions[t];
    int ns = 0;
    size_t used = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int r0 = b->seq_start[s], n = b->seq_start[s + 1] - r0;
        int rope = b->seq_rope_len ? b->seq_rope_len[s] : b->seq_kv_len[s];
        int d0 = first_delim(b, s, delim);
        if (d0 != 0) { /* the whole sequence, or its query rows */
            mb->start[ns] = r0;
            mb->kvl[ns] = d0 < 0 ? b->seq_kv_len[s] : d0;
            mb->rl[ns] = rope;
            mb->slots[ns++] = b->seq_slots[s];
        }
        if (d0 < 0) continue;
        for (int i = d0; i < n; i++) {
            if (b->tokens[r0 + i] != delim) continue;
            int e = i + 1;
            while (e < n && b->tokens[r0 + e] != delim) e++;
            int32_t *sl = mb->slot_mem + used;
            memcpy(sl, b->seq_slots[s], sizeof(int32_t) * (size_t)d0);
            memcpy(sl + d0, b->seq_slots[s] + i, sizeof(int32_t) * (size_t)(e - i));
            used += (size_t)d0 + (size_t)(e - i);
            for (int j = 0; j < e - i; j++) {
                mb->pos[r0 + i + j] = d0 + j;
                mb->rpos[r0 + i + j] = d0 - 1 + j; /* SGLang's: the delimiter at the query's end */
            }
            mb->start[ns] = r0 + i;
            mb->kvl[ns] = d0 + (e - i);
            mb->rl[ns] = rope;
            mb->slots[ns++] = sl;
        }
    }
    mb->start[ns] = b->n_tokens;
    *out = *b;
    out->positions = mb->pos;
    out->rope_pos = mb->rpos;
    out->n_seqs = ns;
    out->seq_start = mb->start;
    out->seq_kv_len = mb->kvl;
    out->seq_rope_len = mb->rl;
    out->seq_slots = mb->slots;
    return 1;
}
