/* template — a Jinja2 engine for Hugging Face chat templates.
 *
 * DESIGN: chat templates are Jinja2 source stored in tokenizer_config.json.
 * transformers renders them with an ImmutableSandboxedEnvironment
 * (trim_blocks=True, lstrip_blocks=True, loopcontrols extension) plus the
 * helpers raise_exception, strftime_now and its own tojson filter
 * (json.dumps with ensure_ascii=False).  This module reproduces that
 * environment byte for byte for the subset of Jinja2 that chat templates
 * use: if/elif/else, for (loop.*, else, inline if, break/continue,
 * recursive), set (incl. namespace attributes and block set), macro/call,
 * filter blocks, with, generation blocks (rendered as plain bodies), raw;
 * the full expression grammar with Python semantics for str/int/float/list/
 * dict; the common filters, tests, Python string and dict methods (see
 * docs/notes/tmpl.md).  Unsupported constructs (include/import/extends,
 * unknown filters or tests) fail at compile time.
 *
 * Values are the engine's own tagged type (template_impl.h); inputs arrive
 * as jansson json_t and are converted once per render.  Everything a render
 * allocates comes from one arena freed when the render ends, capped by
 * tmpl_limits so a hostile template cannot exhaust memory, loop forever or
 * recurse without bound: each such case is an error string, never a crash.
 *
 * Ownership: tmpl_compile returns a tmpl_template owned by the caller
 * (tmpl_destroy); it is immutable after compile, so one compiled template
 * may be rendered by many threads at once.  Strings returned through
 * char ** out-parameters are malloc'd and owned by the caller (free()). */
#ifndef SGLC_TEMPLATE_TEMPLATE_H
#define SGLC_TEMPLATE_TEMPLATE_H

#include <stddef.h>

#include <jansson.h>

typedef struct tmpl_template tmpl_template;

/* Bounds applied to one render.  Zero fields take the defaults below. */
typedef struct tmpl_limits {
    size_t max_output;  /* bytes of rendered text (default 64 MiB) */
    size_t max_memory;  /* bytes of arena memory (default 512 MiB) */
    size_t max_steps;   /* loop iterations + calls (default 10,000,000) */
    int max_depth;      /* nested macro calls / filter blocks (default 64) */
} tmpl_limits;

/* Compile Jinja2 source (len bytes, need not be NUL-terminated).  On
 * success returns 0 and *out; on a syntax error returns -1 and sets *err to
 * "line L, column C: message" (malloc'd). */
int tmpl_compile(const char *src, size_t len, tmpl_template **out, char **err);
void tmpl_destroy(tmpl_template *t);

/* Render with the top-level variables of `vars` (a JSON object, borrowed:
 * messages, tools, add_generation_prompt, bos_token, ...).  limits may be
 * NULL.  On success returns 0 and *out (NUL-terminated, *out_len bytes); on
 * a runtime error (raise_exception, undefined value misuse, type error,
 * limits) returns -1 and *err. */
int tmpl_render(const tmpl_template *t, const json_t *vars, const tmpl_limits *limits, char **out,
                size_t *out_len, char **err);

/* ---- chat templates as transformers applies them ------------------------ */

/* A chat template with the special tokens it is rendered with. */
typedef struct tmpl_chat {
    tmpl_template *tmpl;   /* owned */
    json_t *special;       /* owned: {"bos_token": "...", "eos_token": ..., ...} */
    char *source;          /* owned: the template source text */
} tmpl_chat;

/* Built-in templates usable as --chat-template NAME. */
const char *tmpl_builtin_source(const char *name);
/* NULL-terminated list of built-in names. */
const char *const *tmpl_builtin_names(void);

/* Load the chat template of a Hugging Face folder.  `override` (may be
 * NULL) is a built-in name, a path to a file, or inline Jinja source, and
 * replaces the folder's template.  `name` (may be NULL) selects one of a
 * list of named templates in tokenizer_config.json (default "default").
 * Special tokens come from tokenizer_config.json (and
 * special_tokens_map.json when present).  Also reads chat_template.jinja
 * when the folder has one and the config has no template.  Returns 0, or
 * -1 with *err. */
int tmpl_chat_load(tmpl_chat *c, const char *dir, const char *override, const char *name,
                   char **err);
void tmpl_chat_free(tmpl_chat *c);

/* Render like transformers' apply_chat_template(messages, tools=tools,
 * documents=documents, add_generation_prompt=agp, **kwargs) with the
 * special tokens map merged under kwargs.  tools/documents/kwargs may be
 * NULL (tools and documents then render as None).  Returns 0 with *out
 * (and *out_len when out_len is non-NULL: the prompt may hold NUL bytes when
 * the messages do), or -1 with *err. */
int tmpl_chat_render(const tmpl_chat *c, const json_t *messages, const json_t *tools,
                     const json_t *documents, int add_generation_prompt, const json_t *kwargs,
                     char **out, size_t *out_len, char **err);

/* transformers' continue_final_message: cut the rendered prompt right after
 * the final message's text (the last "text" part when content is a list),
 * so the model continues that message.  Works in place on prompt[0..*len);
 * returns 0, or -1 with *err when the final message has no text or the
 * template did not render it.  (tmpl_chat_prompt below refuses
 * add_generation_prompt together with it, as transformers does.) */
int tmpl_continue_final_message(const json_t *messages, char *prompt, size_t *len, char **err);

/* One chat request's prompt, as transformers' apply_chat_template(messages,
 * tools=, documents=, add_generation_prompt=, continue_final_message=,
 * tokenize=False, **kwargs): refuses continue_final_message together with
 * add_generation_prompt (transformers' ValueError, same words), renders with
 * tmpl_chat_render, then applies tmpl_continue_final_message when asked.
 * The one implementation for the OpenAI chat route and `sglc
 * chat-template` (so both build the same prompt from one conversation).
 * Returns 0 with *out / *out_len (as tmpl_chat_render), or -1 with *err. */
int tmpl_chat_prompt(const tmpl_chat *c, const json_t *messages, const json_t *tools,
                     const json_t *documents, int add_generation_prompt, int continue_final_message,
                     const json_t *kwargs, char **out, size_t *out_len, char **err);

/* ---- SGLang's content-format handling ------------------------------------ */

/* How a template expects message["content"]: as a string, or as OpenAI's
 * list of parts.  Detected as SGLang does (after vLLM): the template has a
 * for-loop over message/msg/m ["content"] (through filters, tests or
 * slices) -> OPENAI, else STRING. */
typedef enum tmpl_content_format {
    TMPL_CONTENT_STRING = 0,
    TMPL_CONTENT_OPENAI = 1,
} tmpl_content_format;

tmpl_content_format tmpl_detect_content_format(const tmpl_template *t);

/* SGLang's per-message preprocessing before templating: keys whose value is
 * null are dropped; a list content becomes, for STRING, the text parts
 * joined by " " (images etc. dropped), for OPENAI, the parts with
 * image_url / video_url / audio_url replaced by {"type": "image"|"video"|
 * "audio"} and their URLs appended to `media` (may be NULL) as
 * {"type": ..., "url": ...}.  Returns a new message (caller decrefs), NULL
 * when msg is not an object. */
json_t *tmpl_process_message(const json_t *msg, tmpl_content_format fmt, json_t *media);

#endif
