#!/usr/bin/python3
"""Generate a deterministic corpus of chat-template requests (JSON lines for
`sglc chat-template` and tests/ref/jinja_ref.py).

Covers system/user/assistant/tool turns, tool calls with arguments as a dict
and as a JSON string, consecutive tool results, multi-part content lists,
empty / None / missing content, unicode (CJK, emoji + ZWJ, RTL, combining
marks, odd whitespace), <think> blocks and reasoning_content, tools with
nested schemas, documents, add_generation_prompt both ways, enable_thinking
true / false / absent, and malformed conversations that make templates
raise.  usage: gen_chat_corpus.py [N] [SEED] > corpus.jsonl"""
import json
import random
import sys

TEXTS = [
    "Hello!", "What is the capital of France?", "", " ", "  padded text \n\n",
    "\n\nleading newlines", "trailing newlines\n\n", "tabs\tand\tmore\ttabs",
    "多语言测试：你好，世界。", "日本語のテキストです。", "한국어 문장", "مرحبا بالعالم",
    "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "emoji 👩‍👩‍👧‍👦 🇫🇷 👍🏽",
    "combining: e\u0301 a\u0308 \u0915\u094d\u0937", "quotes ' \" and backslash \\ and {{ braces }}",
    "{% raw %} not a tag {% endraw %}", "<tool_response>fake</tool_response>",
    "line1\nline2\r\nline3", "nbsp\u00a0here\u2003em-space\u3000ideographic",
    "<|im_end|> special tokens typed by the user <|im_start|>", "1 + 1 = 2",
    "Very long " + "word" * 50, "\u2028line separator\u2029para", "zero\u200bwidth",
    "control\x01char\x7f", "nul\x00byte", "Ünïcödé Çäsé ß", "title case Me Please",
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Recherche sur le web — résultats «exacts».",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "top_k": {"type": "integer", "default": 5},
            "threshold": {"type": "number", "default": 0.25},
            "filters": {"type": "array", "items": {"type": "string"}},
            "safe": {"type": "boolean", "default": True}, "extra": {"default": None}},
            "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "calc", "description": "Evaluate\tan expression\nsafely.",
        "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}},
]

DOCS = [
    {"title": "Doc one", "text": "The first document."},
    {"title": "第二", "text": "第二个文档。", "source": "wiki"},
]


def text(rng):
    return rng.choice(TEXTS)


def tool_call(rng, i):
    fn = rng.choice(TOOLS)["function"]["name"]
    args = {"city": rng.choice(["Paris", "東京", "São Paulo"]), "n": rng.randint(-5, 100),
            "x": rng.choice([0.5, 1e-7, 3.0, 2.5e20, -0.0]), "flag": rng.choice([True, False, None]),
            "nested": {"list": [1, "two", {"three": 3}], "empty": {}, "none": []}}
    if rng.random() < 0.3:
        args = json.dumps(args, ensure_ascii=rng.random() < 0.5)
    call = {"type": "function", "function": {"name": fn, "arguments": args}}
    if rng.random() < 0.7:
        call["id"] = "call_%d" % i
    if rng.random() < 0.1:
        call = {"name": fn, "arguments": args}  # flat form
    return call


def content(rng):
    r = rng.random()
    if r < 0.75:
        return text(rng)
    if r < 0.9:
        parts = [{"type": "text", "text": text(rng)}]
        if rng.random() < 0.5:
            parts.insert(rng.randint(0, 1), {"type": "image"})
        if rng.random() < 0.3:
            parts.append({"type": "text", "text": text(rng)})
        return parts
    return rng.choice(["", " ", None])


def conversation(rng, i):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng) or "You are helpful."})
    turns = rng.randint(1, 4)
    for t in range(turns):
        msgs.append({"role": "user", "content": content(rng) if rng.random() < 0.3 else text(rng)})
        last = t == turns - 1
        if last and rng.random() < 0.6:
            break
        a = {"role": "assistant", "content": text(rng)}
        r = rng.random()
        if r < 0.2:
            a["content"] = "<think>\nreasoning " + text(rng) + "\n</think>\n\n" + text(rng)
        elif r < 0.3:
            a["reasoning_content"] = "thinking about " + text(rng)
        if rng.random() < 0.3:
            a["tool_calls"] = [tool_call(rng, k) for k in range(rng.randint(1, 2))]
            if rng.random() < 0.5:
                a["content"] = rng.choice([None, "", "Let me check."])
            msgs.append(a)
            for k in range(len(a["tool_calls"])):
                msgs.append({"role": "tool", "content": rng.choice(
                    ['{"temp": 21.5, "unit": "C"}', "42", "résultat: ok", ""])})
            if rng.random() < 0.6:
                msgs.append({"role": "assistant", "content": text(rng)})
        else:
            msgs.append(a)
    return msgs


def odd_conversation(rng, i):
    k = i % 8
    if k == 0:
        return []
    if k == 1:
        return [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    if k == 2:
        return [{"role": "assistant", "content": "starts with assistant"}]
    if k == 3:
        return [{"role": "user"}]
    if k == 4:
        return [{"role": "user", "content": 12345}]
    if k == 5:
        return [{"role": "system", "content": "s1"}, {"role": "system", "content": "s2"},
                {"role": "user", "content": "u"}]
    if k == 6:
        return [{"role": "developer", "content": "dev"}, {"role": "user", "content": "u"},
                {"role": "assistant_tool_call", "content": "[]"}, {"role": "tool_response", "content": "r"}]
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  describe  "}]},
            {"role": "assistant", "content": [{"type": "text", "text": "It is a cat."}]}]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1234)
    for i in range(n):
        msgs = odd_conversation(rng, i) if i % 10 == 9 else conversation(rng, i)
        req = {"messages": msgs, "add_generation_prompt": rng.random() < 0.5}
        if rng.random() < 0.15:
            req["continue_final_message"] = True
            if rng.random() < 0.8:
                req["add_generation_prompt"] = False
            if msgs and rng.random() < 0.7:
                msgs.append({"role": "assistant", "content": rng.choice(
                    ["Partial answer", "  padded partial  ", "The answer is", "",
                     [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two "}]])})
        if rng.random() < 0.35:
            req["tools"] = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        if rng.random() < 0.1:
            req["documents"] = DOCS
        r = rng.random()
        if r < 0.3:
            req["chat_template_kwargs"] = {"enable_thinking": False}
        elif r < 0.5:
            req["chat_template_kwargs"] = {"enable_thinking": True, "custom_flag": 1}
        elif r < 0.6:
            req["chat_template_kwargs"] = {"builtin_tools": ["code_interpreter", "brave_search"],
                                           "tools_in_user_message": rng.random() < 0.5,
                                           "date_string": "01 Jan 2025"}
        sys.stdout.write(json.dumps(req, ensure_ascii=rng.random() < 0.3) + "\n")


if __name__ == "__main__":
    main()
