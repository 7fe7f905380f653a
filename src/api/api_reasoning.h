/* api_reasoning — SGLang's reasoning parsers (--reasoning-parser) as
 * output parsers (api_output.h): the text between a model's think tags
 * becomes reasoning pieces, the rest stays content.
 *
 * DESIGN
 *   One state machine for every detector (SGLang's
 *   BaseReasoningFormatDetector), parameterized by a table row: the start
 *   and end tags, an optional tool-call start that also ends reasoning
 *   (kept in the content), force_reasoning (the output begins inside the
 *   reasoning, no start tag needed) and how the request turns thinking on
 *   (always / chat_template_kwargs.enable_thinking, default on /
 *   chat_template_kwargs.thinking, default off).
 *   The start tag is recognized only at the head of the output (repeated
 *   start tags are all dropped); everything after the end tag is content.
 *   A tail that may be the beginning of a tag is held back until the next
 *   delta decides it, so the pieces of any split of a text concatenate to
 *   the pieces of the whole text fed at once.  stream_reasoning false:
 *   reasoning is held and sent as one piece at the end tag (or at the
 *   final call when the output ends inside the reasoning).
 *   gpt-oss (harmony, SGLang's GptOssDetector over its HarmonyParser): the
 *   output is messages [<|start|>ROLE]<|channel|>CHANNEL[ to=R][
 *   <|constrain|>json]<|message|>BODY<|end|> | <|return|> | <|call|>;
 *   the analysis channel's body is reasoning, the final channel's body is
 *   content (frame markers dropped), a message with a recipient (to=, a
 *   tool call) is passed on raw as content for the gpt-oss tool-call
 *   parser, other commentary is content.  Text outside any message is
 *   content.  Same hold-back rule (api_reasoning_harmony.c).
 *
 * Ownership: a parser owns its state; the table rows are static. */
#ifndef SGLC_API_REASONING_H
#define SGLC_API_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api_output.h"

typedef enum {
    API_THINK_ALWAYS = 0,        /* reasoning parsed for every request */
    API_THINK_ENABLE_THINKING,   /* unless chat_template_kwargs.enable_thinking is false */
    API_THINK_EXPLICIT_THINKING, /* only when chat_template_kwargs.thinking is true */
} api_think_mode;

typedef struct api_reasoning_spec {
    const char *name;            /* SGLang's --reasoning-parser name */
    const char *start, *end;     /* think tags */
    const char *tool_start;      /* NULL, or a tag that also ends reasoning */
    bool force;                  /* force_reasoning */
    api_think_mode mode;
    bool harmony;                /* gpt-oss: harmony channels, not tags (below) */
} api_reasoning_spec;

/* The row of a parser name (case-insensitive); NULL when unknown. */
const api_reasoning_spec *api_reasoning_find(const char *name);

/* Whether a request's reasoning is parsed: enable_thinking / thinking are
 * the chat_template_kwargs values (-1 absent, 0 false, 1 true). */
bool api_reasoning_enabled(const api_reasoning_spec *d, int enable_thinking, int thinking);

/* A new parser for one request slot (NULL on OOM); register it with
 * api_output_add_parser. */
api_output_parser *api_reasoning_parser_new(const api_reasoning_spec *d, bool stream_reasoning);
/* The harmony parser (api_reasoning_harmony.c); api_reasoning_parser_new
 * gives it for a row with harmony set. */
api_output_parser *api_reasoning_harmony_new(const api_reasoning_spec *d, bool stream_reasoning);

/* One-shot: split a whole text (SGLang's /separate_reasoning).
 * *text_out / *reasoning_out malloc'd.  0 or -1 (OOM). */
int api_reasoning_separate(const api_reasoning_spec *d, const char *text, size_t len, char **text_out,
                           char **reasoning_out);

#endif
