/* api_toolcall — SGLang's tool-call parsers (--tool-call-parser) as
 * output parsers (api_output.h): the model's own tool-call syntax in the
 * generated text becomes tool-call pieces, the rest stays content.
 *
 * DESIGN
 *   One state machine per output format (api_toolcall_fmt.c), fed the
 *   content deltas in order.  Every decision is made only when the bytes
 *   seen so far settle it whatever follows (a tail that may begin a
 *   marker is held; a call body is held until its name is complete), so
 *   any split of a text gives the pieces of the whole text fed at once.
 *   The non-streaming parse (api_toolcall_parse, /parse_function_call) is
 *   the same machine fed the whole text: the two cannot disagree.
 *   Per call, the machine emits one API_PIECE_TOOL_NAME piece (the name,
 *   as soon as it is complete) and then API_PIECE_TOOL_CALL pieces, the
 *   argument fragments, which join to the call's `arguments` string.
 *   Formats whose arguments are JSON in the text (hermes/qwen, llama3,
 *   mistral, deepseekv3/v31, kimi_k2, gpt-oss) stream the argument bytes
 *   as they arrive, verbatim; the XML and Python formats (qwen3_coder,
 *   glm45, pythonic) emit each parameter, converted to JSON, when it is
 *   complete.
 *   Normal text: whitespace right before a call, between calls and after
 *   the last one is dropped (SGLang strips the normal text around calls).
 *   A call to a name that is not among the request's tools is dropped
 *   (as SGLang).  A body that breaks before its name is complete is
 *   given back as text; one that breaks after keeps the call with the
 *   arguments sent so far ("{}" if none) and the rest goes on as text.
 *   tool_choice required / named: SGLang constrains the output to a JSON
 *   array of {"name", "parameters"} objects (api_toolcall_schema) and
 *   parses it with its JSON-array parser whatever --tool-call-parser is:
 *   api_toolcall_find("json_array").
 *
 * Ownership: a parser owns its state and a reference to the tools list. */
#ifndef SGLC_API_TOOLCALL_H
#define SGLC_API_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "api/api_output.h"

typedef struct api_toolcall_format api_toolcall_format;

/* The format of a parser name (SGLang's --tool-call-parser names:
 * llama3, pythonic, qwen, qwen25, qwen3_coder, mistral, hermes,
 * deepseekv3, deepseekv31, gpt-oss, kimi_k2, glm45; and "json_array", the
 * format of tool_choice required / named).  NULL when unknown. */
const api_toolcall_format *api_toolcall_find(const char *name);
const char *api_toolcall_format_name(const api_toolcall_format *f);

/* A new parser for one request slot (NULL on OOM).  tools: the request's
 * OpenAI `tools` list (borrowed, a reference is taken; NULL or empty =
 * any name is accepted). */
api_output_parser *api_toolcall_parser_new(const api_toolcall_format *f, const json_t *tools);

/* The whole-text parse (SGLang's detect_and_parse): *normal (malloc'd)
 * the normal text, *calls a new array of {"tool_index", "name",
 * "parameters" (the arguments string)}.  0 or -1 (OOM). */
int api_toolcall_parse(const api_toolcall_format *f, const json_t *tools, const char *text, size_t len,
                       char **normal, json_t **calls);

/* Gather the pieces of a parse into normal text + calls, as
 * api_toolcall_parse returns them.  0 or -1 (OOM). */
int api_toolcall_collect(const api_pieces *ps, char **normal, json_t **calls);

/* SGLang's get_json_schema_constraint: the JSON schema of the output for
 * tool_choice "required" (named NULL: any of the tools) or a named
 * function: an array (minItems 1; maxItems 1 when !parallel) of
 * {"name": <enum of the name(s)>, "parameters": <the tool's parameters
 * schema>}.  New object; NULL when named is not among the tools or on
 * OOM. */
json_t *api_toolcall_schema(const json_t *tools, const char *named, bool parallel);

/* SGLang's structural tag for tool_choice "auto" when a tool is strict
 * (get_structure_tag over each detector's structure_info): {"type":
 * "structural_tag", "structures": [{"begin", "schema", "end"}, ...],
 * "triggers": [...]}, one structure per tool (schema: its parameters when
 * strict, else {}).  NULL for formats whose arguments are not JSON
 * between a begin and an end (pythonic, qwen3_coder, glm45, gpt-oss,
 * json_array) or on OOM.  Put on requests by api_chat_tools_strict_tag. */
json_t *api_toolcall_structural_tag(const api_toolcall_format *f, const json_t *tools);

/* The tool of a name in an OpenAI tools list (its "function" object, or
 * the entry itself when it has no "function"), or NULL. */
const json_t *api_toolcall_tool(const json_t *tools, const char *name);

#endif
