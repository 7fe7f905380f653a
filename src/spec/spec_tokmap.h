/* spec_tokmap — SGLang's --speculative-token-map (FR-Spec "hot" token
 * ids) for EAGLE / NEXTN heads.
 *
 * DESIGN
 * The file is a torch.save'd 1-D integer tensor (or list) of target token
 * ids, the "hot" vocabulary (util/pt_reader.h reads it).  SGLang cuts the
 * draft's LM head to those rows (head[hot]) and maps a draft index i back
 * to the target id hot[i] before verification.  Here too: the target's
 * LM head rows hot[] are read back (kern_mat_row_f32: any float panel
 * layout, or raw blocks of a row-major quantized head) into a head of n
 * rows (spec_tokmap_head), the draft step runs that one (n/vocab of the
 * LM head's work), and its logits are scattered into a target-vocabulary
 * row with -inf elsewhere, so whatever picks from the logits (argmax, a
 * top-k) sees target ids, only those of the map.  Where the head cannot
 * be read back (a repacked quantized head, TP) the full head runs and is
 * masked (spec_tokmap_mask): the same logits, without the saving.
 *
 * Checked at start-up: 1 <= n <= vocab, every id in [0, vocab), no
 * duplicates.  EAGLE3 heads carry their own map (d2t): SGLang ignores the
 * flag for them with a warning, and so does sglc (cli_spec.c).
 *
 * Ownership: spec_tokmap_load allocates, spec_tokmap_destroy frees. */
#ifndef SGLC_SPEC_TOKMAP_H
#define SGLC_SPEC_TOKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef struct spec_tokmap {
    int32_t *hot;         /* (n) target ids, owned */
    int n;
    unsigned char *is_hot; /* (vocab) 1 = in the map; owned, set by spec_tokmap_bind */
    int vocab;
} spec_tokmap;

/* Read the token map at path.  NULL with the reason in err (the reader's
 * message: not a torch.save file, not a 1-D integer tensor, ...). */
spec_tokmap *spec_tokmap_load(const char *path, char *err, size_t errlen);
/* The same over ids already in memory (n entries).  NULL with err. */
spec_tokmap *spec_tokmap_from_ids(const int64_t *ids, int64_t n, char *err, size_t errlen);
/* Check m against a target of vocab ids and build its mask: 0, or -1 with
 * err (an id out of range, a duplicate, more ids than the vocabulary).
 * Binding again to another vocabulary size is refused. */
int spec_tokmap_bind(spec_tokmap *m, int vocab, char *err, size_t errlen);
/* logits (m->vocab) of ids outside the map set to -inf.  m must be bound. */
void spec_tokmap_mask(const spec_tokmap *m, float *logits);
void spec_tokmap_destroy(spec_tokmap *m);

/* The LM head cut to a map's rows. */
typedef struct spec_tokmap_head {
    kern_mat mat;  /* (n, k) rows hot[] of the target's LM head; owned (kern_mat_free) */
    float *lg;     /* (n) logits of the hot rows */
    void *scr;     /* kern_matmul scratch for one row */
} spec_tokmap_head;
/* Build h from lm (borrowed; the target's LM head, n = vocab rows) for the
 * bound map m.  0 built; 1 lm's layout cannot be read back (h stays empty:
 * mask the full head instead); -1 out of memory. */
int spec_tokmap_head_init(spec_tokmap_head *h, const spec_tokmap *m, const kern_mat *lm);
/* logits (m->vocab) of x (k): the cut head's values at the hot ids, -inf
 * elsewhere (one thread). */
void spec_tokmap_head_logits(spec_tokmap_head *h, const spec_tokmap *m, const float *x, float *logits);
void spec_tokmap_head_free(spec_tokmap_head *h);

#endif
