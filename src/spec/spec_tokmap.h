/* spec_tokmap — SGLang's --speculative-token-map (FR-Spec "hot" token
 * ids) for EAGLE / NEXTN heads.
 *
 * DESIGN
 * The file is a torch.save'd 1-D integer tensor (or list) of target token
 * ids, the "hot" vocabulary (util/pt_reader.h reads it).  SGLang cuts the
 * draft's LM head to those rows (head[hot]) and maps a draft index i back
 * to the target id hot[i] before verification.  Here the draft's logits
 * (over the target vocabulary) are masked to the hot rows (the others set
 * to -inf) before the draft picks: the same choice as SGLang's cut head
 * (the same dot products, already in target ids), and whatever picks from
 * the logits (argmax, a top-k) sees only tokens of the map.  The LM head
 * itself is still evaluated in full
 * (the target's head may be quantized or packed per ISA; cutting it is not
 * done yet), so the map restricts the drafts without saving compute.
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

#endif
