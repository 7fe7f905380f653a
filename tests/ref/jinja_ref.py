#!/usr/bin/python3
"""Reference chat-template renderer: Debian's python3-jinja2 set up the way
Hugging Face transformers sets it up (chat_template_utils.py):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols, a {% generation %} tag]), its tojson filter
(json.dumps with ensure_ascii=False), raise_exception and strftime_now
globals, and render(messages=..., tools=..., documents=...,
add_generation_prompt=..., **special_tokens_map, **chat_template_kwargs).

Same command line and I/O as `sglc chat-template` (continue_final_message
applies transformers' post-processing):
  jinja_ref.py --tokenizer-path DIR [--chat-template FILE_OR_SOURCE]
               [--hf-chat-template-name NAME]  < requests.jsonl > out.jsonl
Output lines: {"prompt": ...} or {"error": "...", "kind": "<exception class>"}.

strftime_now honours SGLC_FIXED_DATE (YYYY-MM-DD[THH:MM[:SS]]) exactly as
sglc does, so date-dependent templates compare."""
import argparse
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """transformers' AssistantTracker: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def now():
    fixed = os.environ.get("SGLC_FIXED_DATE")
    if fixed:
        for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
            try:
                return datetime.strptime(fixed, fmt)
            except ValueError:
                pass
        raise ValueError("bad SGLC_FIXED_DATE")
    return datetime.now()


def strftime_now(format):
    return now().strftime(format)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def special_tokens(dirpath):
    out = {}
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        p = os.path.join(dirpath, fname)
        if not os.path.exists(p):
            continue
        cfg = json.load(open(p, encoding="utf-8"))
        for k in SPECIAL:
            if k in cfg:
                t = token_text(cfg[k])
                if t:
                    out[k] = t
                else:
                    out.pop(k, None)
        if isinstance(cfg.get("additional_special_tokens"), list):
            lst = [t for t in map(token_text, cfg["additional_special_tokens"]) if t is not None]
            if lst:
                out["additional_special_tokens"] = lst
            else:
                out.pop("additional_special_tokens", None)
    return out


def load_source(args):
    if args.chat_template:
        if os.path.isfile(args.chat_template):
            return open(args.chat_template, encoding="utf-8").read()
        return args.chat_template
    cfg = json.load(open(os.path.join(args.tokenizer_path, "tokenizer_config.json"), encoding="utf-8"))
    ct = cfg.get("chat_template")
    if ct is None:
        return open(os.path.join(args.tokenizer_path, "chat_template.jinja"), encoding="utf-8").read()
    if isinstance(ct, list):
        want = args.hf_chat_template_name or "default"
        for e in ct:
            if e.get("name") == want:
                return e["template"]
        raise SystemExit("no template named " + want)
    return ct


def continue_final(req, rendered_chat):
    """transformers' continue_final_message post-processing (render_jinja_template)."""
    final_message = req["messages"][-1]["content"]
    if isinstance(final_message, (list, tuple)):
        for content_block in reversed(final_message):
            if "text" in content_block:
                final_message = content_block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but we could not find any text to continue")
    if final_message.strip() not in rendered_chat:
        raise ValueError("continue_final_message is set but the final message does not appear in the chat")
    final_msg_loc = rendered_chat.rindex(final_message.strip())
    if rendered_chat[final_msg_loc: final_msg_loc + len(final_message.lstrip())] == final_message:
        return rendered_chat[: final_msg_loc + len(final_message.lstrip())]
    return rendered_chat[: final_msg_loc + len(final_message.strip())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-path")
    ap.add_argument("--chat-template")
    ap.add_argument("--hf-chat-template-name")
    args = ap.parse_args()
    special = special_tokens(args.tokenizer_path) if args.tokenizer_path else {}
    try:
        tmpl = compile_template(load_source(args))
        compile_error = None
    except Exception as e:  # syntax errors: every request fails
        tmpl, compile_error = None, e
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            if compile_error:
                raise compile_error
            if req.get("continue_final_message") and req.get("add_generation_prompt"):
                # apply_chat_template refuses this before rendering
                raise ValueError("continue_final_message and add_generation_prompt are not compatible.")
            kwargs = dict(special)
            kwargs.update(req.get("chat_template_kwargs") or {})
            prompt = tmpl.render(messages=req["messages"], tools=req.get("tools"),
                                 documents=req.get("documents"),
                                 add_generation_prompt=bool(req.get("add_generation_prompt", False)),
                                 **kwargs)
            if req.get("continue_final_message"):
                prompt = continue_final(req, prompt)
            out = {"prompt": prompt}
        except Exception as e:
            out = {"error": str(e), "kind": type(e).__name__}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
