/* sampling_params — SGLang's SamplingParams: the JSON object, defaults,
 * normalisation and verify() with SGLang's exact error messages.
 *
 * DESIGN
 * Parsing and validation are separate, as in SGLang:
 *   sampling_params_from_json()  type checks (clear messages of our own,
 *                                since Python would just crash later) and
 *                                SGLang's __post_init__ normalisation:
 *                                null -> default, temperature in [0, 1e-6)
 *                                -> greedy (temperature 1, top_k 1),
 *                                top_k -1 -> SAMPLING_TOP_K_ALL;
 *   sampling_params_verify()     SamplingParams.verify(vocab_size): range
 *                                checks, messages copied from SGLang,
 *                                numbers printed the way Python prints them
 *                                (an int stays "-1", a float is "-1.0",
 *                                "1e-05", ...).
 * Unknown keys are refused as msgspec/Python refuse unexpected keyword
 * arguments.  Grammar fields (json_schema, regex, ebnf, structural_tag)
 * are parsed and stored verbatim (at most one may be set); the scheduler
 * compiles them (src/grammar/grammar_queue.h) or, with
 * --grammar-backend none, refuses them.
 *
 * Defaults (SGLang): max_new_tokens 128, temperature 1.0, top_p 1.0,
 * top_k -1 (all), min_p 0, penalties 0 / 0 / 1.0, min_new_tokens 0, n 1,
 * ignore_eos false, skip_special_tokens true,
 * spaces_between_special_tokens true, no_stop_trim false.
 *
 * Ownership: every pointer in sampling_params is owned by it and freed by
 * sampling_params_free(); init/free are the caller-owned pair. */
#ifndef SGLC_SAMPLING_PARAMS_H
#define SGLC_SAMPLING_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SAMPLING_TOP_K_ALL (1 << 30)
#define SAMPLING_EPS 1e-6

typedef struct {
    int32_t token;
    float bias;
} sampling_logit_bias;

/* Fields whose JSON value was an integer, for Python-style printing. */
enum {
    SP_INT_TEMPERATURE = 1 << 0,
    SP_INT_TOP_P = 1 << 1,
    SP_INT_MIN_P = 1 << 2,
    SP_INT_FREQUENCY = 1 << 3,
    SP_INT_PRESENCE = 1 << 4,
    SP_INT_REPETITION = 1 << 5,
};

typedef struct sampling_params {
    bool has_max_new_tokens;     /* false: null = no limit but the context */
    int64_t max_new_tokens;
    char **stop;                 /* (n_stop) owned strings */
    int n_stop;
    char **stop_regex;           /* (n_stop_regex) owned strings */
    int n_stop_regex;
    int32_t *stop_token_ids;     /* (n_stop_token_ids) owned, unique, in input order */
    int n_stop_token_ids;
    double temperature;          /* after normalisation: greedy -> 1.0 with top_k 1 */
    double top_p;
    int64_t top_k;               /* SAMPLING_TOP_K_ALL = whole vocabulary */
    double min_p;
    double frequency_penalty;
    double presence_penalty;
    double repetition_penalty;
    int64_t min_new_tokens;
    int64_t n;
    char *json_schema;           /* owned or NULL; grammar strings kept verbatim */
    char *regex;
    char *ebnf;
    char *structural_tag;
    bool json_strict;            /* not a wire field: OpenAI response_format json_schema
                                  * strict=true (additionalProperties false by default) */
    bool json_compact;           /* not a wire field: JSON without whitespace (the schema of a
                                  * forced tool call: tool_choice required / named, or of
                                  * the strict tools' structural tag under auto) */
    bool ignore_eos;
    bool skip_special_tokens;
    bool spaces_between_special_tokens;
    bool no_stop_trim;
    char *custom_params;         /* owned JSON text of the object, or NULL */
    bool has_stream_interval;
    int64_t stream_interval;
    sampling_logit_bias *logit_bias; /* (n_logit_bias) owned; keys as given */
    int n_logit_bias;
    bool has_sampling_seed;
    uint64_t sampling_seed;      /* the JSON integer, two's complement if negative */
    unsigned given_as_int;       /* SP_INT_* bits */
} sampling_params;

/* Defaults as SGLang. */
void sampling_params_init(sampling_params *p);
void sampling_params_free(sampling_params *p);

/* Fill p (initialised by this call) from a JSON object (NULL or JSON null
 * = all defaults).  Returns 0, or -1 with a message in err (p is then
 * freed and re-initialised: always safe to free again). */
int sampling_params_from_json(sampling_params *p, const json_t *obj, char *err, size_t errlen);

/* Parse JSON text then sampling_params_from_json. */
int sampling_params_parse(sampling_params *p, const char *text, size_t len, char *err, size_t errlen);

/* SGLang's SamplingParams.verify(vocab_size).  Returns 0, or -1 with
 * SGLang's message in err. */
int sampling_params_verify(const sampling_params *p, int64_t vocab_size, char *err, size_t errlen);

/* Checks of sglc's own beyond verify() (n >= 1, stream_interval >= 1).
 * Returns 0 or -1 with a message in err. */
int sampling_params_check_supported(const sampling_params *p, char *err, size_t errlen);

/* The grammar field that is set (json_schema, regex, ebnf, structural_tag
 * in that order, SGLang's precedence) and its name; NULL when none. */
const char *sampling_params_grammar(const sampling_params *p, const char **name);

/* Greedy as SGLang decides it: top_k <= 1. */
static inline bool sampling_params_is_greedy(const sampling_params *p) { return p->top_k <= 1; }

/* Format x as Python's repr(float) does ("1.0", "0.1", "1e-05", "inf").
 * Returns buf. */
char *sampling_py_float(double x, char *buf, size_t len);

#endif
