/* api_score — SGLang's scoring routes: /v1/score (label-token
 * probabilities after query + item, one pass for many items with
 * --multi-item-scoring-delimiter), /v1/rerank and /v1/classify (also
 * /classify) for *ForSequenceClassification models.  The routes live in
 * api_score.c; this header is the serving configuration they read. */
#ifndef SGLC_API_SCORE_H
#define SGLC_API_SCORE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct api_score_model {
    int n_labels;                /* 0: not a sequence classifier (/classify and /v1/rerank 400) */
    const char *const *labels;   /* (n_labels) id2label, borrowed for the server's life */
    bool mi_on;                  /* --multi-item-scoring-delimiter given */
    int32_t mi_delim;            /* its token id */
} api_score_model;

#endif
