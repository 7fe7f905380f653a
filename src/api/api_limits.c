/* api_limits — SGLang's context-length checks and --allow-auto-truncate.
 *
 * DESIGN: SGLang checks lengths twice.  The tokenizer manager
 * (_validate_one_request) compares with the model's context length: an
 * input of context_len tokens or more is cut to context_len (or refused),
 * and a max_new_tokens that would run past context_len is lowered to
 * context_len - input (or refused).  The scheduler (validate_input_length)
 * then compares with max_req_input_len (context or KV pool, minus a small
 * reserve): an input at or over it is cut to it (or refused with "Use a
 * shorter input or enable --allow-auto-truncate.").  Both run here, on the
 * parsed request, before it reaches the scheduler; the messages and the
 * warnings are SGLang's.  Only input_ids are cut (the tail goes, as
 * `del input_ids[n:]`). */
#include <inttypes.h>
#include <stdio.h>

#include "api/api_ops.h"
#include "util/log.h"

int api_limits_apply(sched_req_spec *sp, bool max_new_given, int64_t context_len,
                     int64_t max_req_input_len, bool allow, char *err, size_t errlen)
{
    int64_t n = sp->n_input;
    if (context_len > 0 && n >= context_len) {
        if (!allow) {
            snprintf(err, errlen,
                     "The input (%" PRId64 " tokens) is longer than the model's context length (%" PRId64
                     " tokens).",
                     n, context_len);
            return -1;
        }
        log_warn("The input (%" PRId64 " tokens) is longer than the model's context length (%" PRId64
                 " tokens). Truncating the input.",
                 n, context_len);
        sp->n_input = n = context_len;
    }
    /* SGLang reads max_new_tokens from the request's own dict: a default
     * (absent) one is not checked here (the scheduler bounds it) */
    if (context_len > 0 && max_new_given && sp->params.has_max_new_tokens &&
        sp->params.max_new_tokens + n > context_len) {
        int64_t mn = sp->params.max_new_tokens;
        if (!allow) {
            snprintf(err, errlen,
                     "Requested token count exceeds the model's maximum context length of %" PRId64
                     " tokens. You requested a total of %" PRId64 " tokens: %" PRId64
                     " tokens from the input messages and %" PRId64
                     " tokens for the completion. Please reduce the number of tokens in the input "
                     "messages or the completion to fit within the limit.",
                     context_len, mn + n, n, mn);
            return -1;
        }
        log_warn("Requested token count (%" PRId64 " input + %" PRId64
                 " new) exceeds the model's context length (%" PRId64 " tokens). Truncating max_new_tokens.",
                 n, mn, context_len);
        sp->params.max_new_tokens = context_len - n > 0 ? context_len - n : 0;
    }
    if (max_req_input_len > 0 && n >= max_req_input_len) {
        if (!allow) {
            snprintf(err, errlen,
                     "Input length (%" PRId64 " tokens) exceeds the maximum allowed length (%" PRId64
                     " tokens). Use a shorter input or enable --allow-auto-truncate.",
                     n, max_req_input_len);
            return -1;
        }
        log_warn("Request length is longer than the KV cache pool size or the max context length. "
                 "Truncated. len(req.origin_input_ids)=%" PRId64 ", max_req_input_len=%" PRId64 ".",
                 n, max_req_input_len);
        sp->n_input = max_req_input_len;
    }
    return 0;
}
