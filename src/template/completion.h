/* completion — code-completion (fill-in-the-middle) prompt templates, as
 * SGLang's --completion-template.
 *
 * DESIGN: a completion template is four facts: the FIM begin / middle /
 * end tokens and where the middle token goes.  /v1/completions with a
 * non-empty `suffix` turns (prompt, suffix) into one prompt:
 *
 *   MIDDLE:  <begin> prompt <middle> suffix <end>     (deepseek_coder)
 *   END:     <begin> prompt <end> suffix <middle>     (star_coder, qwen_coder)
 *
 * Built-ins carry SGLang's names and tokens; any other value of
 * --completion-template is read as a JSON file {"name", "fim_begin_token",
 * "fim_middle_token", "fim_end_token", "fim_position": "MIDDLE"|"END"}. */
#ifndef SGLC_TEMPLATE_COMPLETION_H
#define SGLC_TEMPLATE_COMPLETION_H

#include <stddef.h>

typedef enum tmpl_fim_position { TMPL_FIM_MIDDLE = 0, TMPL_FIM_END = 1 } tmpl_fim_position;

typedef struct tmpl_completion {
    char *name;              /* owned */
    char *begin, *middle, *end; /* owned FIM tokens */
    tmpl_fim_position pos;
} tmpl_completion;

/* Load a built-in by name, or a JSON file.  0, or -1 with a message in err
 * (unknown name and unreadable file both list the built-in names). */
int tmpl_completion_load(const char *name_or_file, tmpl_completion *out, char *err, size_t errlen);
void tmpl_completion_free(tmpl_completion *c);
/* NULL-terminated list of built-in names. */
const char *const *tmpl_completion_builtin_names(void);
/* The FIM prompt (malloc'd, NUL-terminated; length in *out_len), or NULL
 * when out of memory.  An empty suffix returns the prompt unchanged, as
 * SGLang does. */
char *tmpl_completion_prompt(const tmpl_completion *c, const char *prompt, size_t prompt_len,
                             const char *suffix, size_t suffix_len, size_t *out_len);

#endif
