/* cli_gguf — what the commands take from a GGUF file besides the weights:
 * its tokenizer (tokenizer.ggml.*) and chat template
 * (tokenizer.chat_template).
 *
 * DESIGN: the tokenizer is built by the tokenizer module from a
 * tok_vocab_spec filled here from the metadata (tokenizer/tok_vocab_spec.h;
 * while that module is not in the build, a GGUF tokenizer is refused with
 * a message asking for --tokenizer-path).  The chat template is loaded as
 * an inline template with bos/eos/unk/pad token strings taken from the
 * vocabulary, as transformers passes them from the tokenizer.
 */
#ifndef SGLC_CLI_GGUF_H
#define SGLC_CLI_GGUF_H

#include <stdbool.h>

#include "template/template.h"
#include "tokenizer/tokenizer.h"

/* The tokenizer of GGUF file `path` into *out.  When !required and the
 * file has no usable tokenizer, *out = NULL and 0.  -1 after printing the
 * error. */
int cli_tokenizer_load_gguf(const char *path, bool required, tok_tokenizer **out);

/* The chat template of GGUF file `path` (or `override`: a built-in name,
 * file or inline template, as --chat-template) into *c.  0, or -1 with
 * *err (malloc'd; "no chat template" when the file has none). */
int cli_gguf_chat_load(tmpl_chat *c, const char *path, const char *override, char **err);

#endif
