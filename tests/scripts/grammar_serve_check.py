#!/usr/bin/python3
"""Checks of constrained decoding against a running `sglc serve` (driven by
tests/scripts/test_grammar_serve.sh, which starts the server).

Every output is checked by an independent reference: Python's `re` for
regular expressions, `jsonschema` (Debian's python3-jsonschema) for JSON
Schema, a small recursive-descent check for the EBNF used, json.loads for
JSON mode.  Prints one "ok   name" / "FAIL name: why" line per check and
exits 1 if any failed.

usage: grammar_serve_check.py URL MODE      MODE = main | sp | none
  main  every check (a byte-level vocabulary that can spell JSON)
  sp    regex and EBNF only (TinyStories' SentencePiece vocabulary: no '{')
  none  a server started with --grammar-backend none
"""
import json
import re
import sys
import threading
import urllib.error
import urllib.request

import jsonschema

URL, MODE = sys.argv[1], sys.argv[2]
fails = 0


def post(path, body, timeout=300):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def get(path):
    with urllib.request.urlopen(URL + path, timeout=60) as r:
        return r.read().decode()


def check(name, cond, why=""):
    global fails
    if cond:
        print("ok   " + name)
    else:
        fails += 1
        print("FAIL %s: %s" % (name, why))


def gen(sp, text="Once upon a time", **kw):
    body = {"text": text, "sampling_params": sp}
    body.update(kw)
    return post("/generate", body)


def err_msg(d):
    if isinstance(d, dict):
        if isinstance(d.get("error"), dict):
            return d["error"].get("message", "")
        return d.get("message") or d.get("error") or json.dumps(d)
    return str(d)


if MODE == "none":
    st, d = gen({"regex": "[ab]+", "max_new_tokens": 8})
    check("--grammar-backend none: regex -> 400 with SGLang's message",
          st == 400 and "not supported when the server is launched with --grammar-backend none" in err_msg(d),
          "%s %s" % (st, d))
    st, d = post("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                          "response_format": {"type": "json_object"}, "max_tokens": 8})
    check("--grammar-backend none: response_format json_object -> 400", st == 400, "%s %s" % (st, d))
    st, d = gen({"max_new_tokens": 8, "temperature": 0})
    check("--grammar-backend none: unconstrained request works", st == 200 and d["meta_info"]["completion_tokens"] == 8,
          "%s %s" % (st, d))
    sys.exit(1 if fails else 0)

EBNF = 'root ::= "The " animal " is " color "." \nanimal ::= "cat" | "dog" | "bird"\ncolor ::= "red" | "blue" | "green"'
if MODE == "sp":
    for i, pat in enumerate([r"(yes|no|maybe) [0-9]{2}", r"[A-Z][a-z]{2,7}\."]):
        st, d = gen({"regex": pat, "max_new_tokens": 32, "sampling_seed": i})
        check("sentencepiece vocab: regex %d matches, finish stop" % i,
              st == 200 and re.fullmatch(pat, d["text"]) is not None and d["meta_info"]["finish_reason"]["type"] == "stop",
              "%s %s" % (st, d))
    st, d = gen({"ebnf": EBNF, "max_new_tokens": 32, "sampling_seed": 1})
    check("sentencepiece vocab: ebnf sentence", st == 200 and re.fullmatch(
        r"The (cat|dog|bird) is (red|blue|green)\.", d["text"]) is not None, "%s %s" % (st, d))
    st, d = gen({"json_schema": '{"type": "object"}', "max_new_tokens": 8})
    check("vocabulary without '{': json_schema is a 400 naming the dead end",
          st == 400 and "allows no token of the model's vocabulary" in err_msg(d), "%s %s" % (st, d))
    sys.exit(1 if fails else 0)

# ---- regex ------------------------------------------------------------------
for i, pat in enumerate([r"(yes|no|maybe)[0-9]{2}", r"[a-z]{3,8}@[a-z]{2,5}\.(com|org)", r"\d{3}-\d{4}"]):
    for seed in (1, 2):
        st, d = gen({"regex": pat, "max_new_tokens": 64, "temperature": 1.0, "sampling_seed": seed})
        ok = st == 200 and re.fullmatch(pat, d.get("text", "")) is not None
        fr = d.get("meta_info", {}).get("finish_reason", {}) if st == 200 else {}
        check("regex %d seed %d: output matches (re.fullmatch), finish stop" % (i, seed),
              ok and fr.get("type") == "stop", "%s %r %s" % (st, d.get("text") if st == 200 else d, fr))

# ---- EBNF -------------------------------------------------------------------
for seed in (1, 2, 3):
    st, d = gen({"ebnf": EBNF, "max_new_tokens": 64, "sampling_seed": seed})
    t = d.get("text", "") if st == 200 else ""
    check("ebnf seed %d: output is a sentence of the grammar" % seed,
          re.fullmatch(r"The (cat|dog|bird) is (red|blue|green)\.", t) is not None, "%s %r" % (st, d))

# ---- JSON Schema ------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    },
    "required": ["name", "ok", "color"],
    "additionalProperties": False,
}
for seed in (1, 2, 3):
    st, d = gen({"json_schema": json.dumps(SCHEMA), "max_new_tokens": 200, "sampling_seed": seed})
    why = "%s %r" % (st, d)
    good = False
    if st == 200 and d["meta_info"]["finish_reason"]["type"] == "stop":
        try:
            jsonschema.validate(json.loads(d["text"]), SCHEMA)
            good = True
        except Exception as e:  # noqa: BLE001
            why = "%s: %r" % (e, d["text"])
    check("json_schema seed %d: valid instance (jsonschema), finish stop" % seed, good, why)

# greedy, with logprobs: masked distribution (every finite top logprob is a token the grammar allows)
st, d = gen({"regex": "[0-9]{3}", "max_new_tokens": 16, "temperature": 0}, return_logprob=True,
            top_logprobs_num=5, return_text_in_logprobs=True)
ok = st == 200 and re.fullmatch("[0-9]{3}", d["text"]) is not None
bad = []
if ok:
    eos = d["output_ids"][-1] if d["meta_info"]["finish_reason"].get("matched") == d["output_ids"][-1] else None
    for step in d["meta_info"]["output_top_logprobs"]:
        for lp, tid, txt in step:
            if lp is not None and lp > -1e30 and tid != eos and not re.fullmatch(r"\s*[0-9]*", txt or ""):
                bad.append((lp, tid, txt))
    chosen = [x[0] for x in d["meta_info"]["output_token_logprobs"]]
    ok = all(c <= 0 for c in chosen) and not bad
check("logprobs are of the masked distribution (top tokens all allowed)", ok, "%s %s bad=%s" % (st, d, bad[:3]))

# ---- errors -------------------------------------------------------------------
st, d = gen({"json_schema": "{not json", "max_new_tokens": 8})
check("bad schema -> 400 'Failed to compile json grammar: ...'",
      st == 400 and err_msg(d).startswith("Failed to compile json grammar: "), "%s %s" % (st, d))
st, d = gen({"regex": "(ab", "max_new_tokens": 8})
check("bad regex -> 400 'Failed to compile regex grammar: ...'",
      st == 400 and err_msg(d).startswith("Failed to compile regex grammar: "), "%s %s" % (st, d))
st, d = gen({"ebnf": "root ::= undefined_rule", "max_new_tokens": 8})
check("bad ebnf -> 400 'Failed to compile ebnf grammar: ...'",
      st == 400 and err_msg(d).startswith("Failed to compile ebnf grammar: "), "%s %s" % (st, d))
st, d = gen({"regex": "a+", "ebnf": 'root ::= "a"', "max_new_tokens": 8})
check("two grammars -> 400 (SGLang's message)",
      st == 400 and "Only one of regex, json_schema, or ebnf can be set." in err_msg(d), "%s %s" % (st, d))
st, d = gen({"json_schema": "{not json", "max_new_tokens": 8})
check("the same bad schema again (cached failure) -> 400", st == 400, "%s %s" % (st, d))

# a bad schema while another request runs: that one completes untouched
ALONE = {"max_new_tokens": 48, "temperature": 1.0, "sampling_seed": 7, "ignore_eos": True}
st0, alone = gen(ALONE, text="The little dog")
res = {}


def run(key, sp, text):
    res[key] = gen(sp, text=text)


th = threading.Thread(target=run, args=("long", ALONE, "The little dog"))
th.start()
stb, db = gen({"json_schema": '{"type": "object", "properties": {"a": {"$ref": "#/nope"}}}', "max_new_tokens": 8})
th.join()
stl, dl = res["long"]
check("bad schema 400 while a concurrent request completes with its own output",
      stb == 400 and stl == 200 and dl["text"] == alone["text"] and dl["meta_info"]["completion_tokens"] == 48,
      "%s %s / %s %s" % (stb, db, stl, dl.get("text") if stl == 200 else dl))

# a constrained and an unconstrained request in one batch: the unconstrained output equals running it alone
res.clear()
ths = [threading.Thread(target=run, args=("free", ALONE, "The little dog")),
       threading.Thread(target=run, args=("json", {"json_schema": json.dumps(SCHEMA), "max_new_tokens": 200,
                                                   "sampling_seed": 3}, "Once upon a time"))]
for t in ths:
    t.start()
for t in ths:
    t.join()
stf, df = res["free"]
stj, dj = res["json"]
okj = stj == 200
if okj:
    try:
        jsonschema.validate(json.loads(dj["text"]), SCHEMA)
    except Exception:  # noqa: BLE001
        okj = False
check("constrained + unconstrained together: unconstrained output identical to alone, constrained valid",
      stf == 200 and df["text"] == alone["text"] and okj, "%s %r vs %r / %s %s" % (stf, df.get("text"), alone.get("text"),
                                                                                 stj, dj))

# n > 1 with a grammar: every sibling valid
st, d = gen({"regex": "(red|green|blue)-[0-9]", "max_new_tokens": 16, "n": 3, "sampling_seed": 5})
ok = st == 200 and isinstance(d, list) and len(d) == 3 and all(
    re.fullmatch("(red|green|blue)-[0-9]", x["text"]) for x in d)
check("n=3 with a regex: every sibling matches", ok, "%s %s" % (st, d))

# streaming with a grammar: chunks concatenate to a valid output
req = urllib.request.Request(URL + "/generate", data=json.dumps(
    {"text": "Once", "stream": True, "sampling_params": {"regex": "[A-Z][a-z]{2,6} [0-9]{2}", "max_new_tokens": 32,
                                                        "sampling_seed": 9}}).encode(),
    headers={"Content-Type": "application/json"})
last = None
with urllib.request.urlopen(req, timeout=120) as r:
    for line in r:
        line = line.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            last = json.loads(line[6:])
check("streaming with a regex: final text matches",
      last is not None and re.fullmatch("[A-Z][a-z]{2,6} [0-9]{2}", last["text"]) is not None, str(last))

# ---- OpenAI routes ----------------------------------------------------------------
msgs = [{"role": "user", "content": "Tell me about a cat."}]
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 200, "seed": 1,
                                      "response_format": {"type": "json_schema", "json_schema": {
                                          "name": "cat", "schema": SCHEMA, "strict": True}}})
ok = st == 200
why = "%s %s" % (st, d)
if ok:
    try:
        jsonschema.validate(json.loads(d["choices"][0]["message"]["content"]), SCHEMA)
        ok = d["choices"][0]["finish_reason"] == "stop"
    except Exception as e:  # noqa: BLE001
        ok, why = False, "%s %s" % (e, d)
check("chat response_format json_schema (strict): valid, finish_reason stop", ok, why)
st, d = post("/v1/completions", {"model": "tiny", "prompt": "A story:", "max_tokens": 200, "seed": 2,
                                 "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}})
ok = st == 200
why = "%s %s" % (st, d)
if ok:
    try:
        jsonschema.validate(json.loads(d["choices"][0]["text"]), SCHEMA)
    except Exception as e:  # noqa: BLE001
        ok, why = False, "%s %s" % (e, d)
check("completions response_format json_schema: valid", ok, why)
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 60, "seed": 3,
                                      "response_format": {"type": "json_object"}})
ok = st == 200
why = "%s %s" % (st, d)
if ok and d["choices"][0]["finish_reason"] == "stop":
    try:
        ok = isinstance(json.loads(d["choices"][0]["message"]["content"]), dict)
    except Exception as e:  # noqa: BLE001
        ok, why = False, "%s %s" % (e, d)
elif ok:  # json mode cannot force an end: a length finish must still be a JSON prefix that opened an object
    ok = d["choices"][0]["message"]["content"].lstrip().startswith("{")
check("chat response_format json_object: a JSON object", ok, why)
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 32, "seed": 4,
                                      "regex": "(Yes|No), [a-z]{2,8}\\."})
check("chat regex extra: output matches",
      st == 200 and re.fullmatch(r"(Yes|No), [a-z]{2,8}\.", d["choices"][0]["message"]["content"]) is not None,
      "%s %s" % (st, d))
st, d = post("/v1/completions", {"model": "tiny", "prompt": "Pick:", "max_tokens": 32, "seed": 5, "ebnf": EBNF})
check("completions ebnf extra: output is a sentence of the grammar",
      st == 200 and re.fullmatch(r"The (cat|dog|bird) is (red|blue|green)\.", d["choices"][0]["text"]) is not None,
      "%s %s" % (st, d))
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 8,
                                      "response_format": {"type": "xml"}})
check("response_format unknown type -> 400", st == 400, "%s %s" % (st, d))

# structural tag: free text until the trigger, then begin + schema + end
STAG = {"type": "structural_tag", "structures": [{"begin": "<f=pick>", "schema": {
    "type": "object", "properties": {"c": {"enum": ["a", "b"]}}, "required": ["c"], "additionalProperties": False},
    "end": "</f>"}], "triggers": ["<f="]}
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 64, "seed": 6,
                                      "response_format": STAG})
ok = st == 200
why = "%s %s" % (st, d)
if ok:
    txt = d["choices"][0]["message"]["content"] or ""
    pos = 0
    while ok and (k := txt.find("<f=", pos)) >= 0:
        m = re.match(r'<f=pick>(\{.*?\})</f>', txt[k:])
        if m:
            ok = json.loads(m.group(1)).get("c") in ("a", "b")
        else:  # only a structure cut by max_tokens may be unfinished
            ok = d["choices"][0]["finish_reason"] == "length" and txt.find("<f=", k + 3) < 0
        pos = k + 3
check("structural_tag: every trigger is followed by begin + valid JSON + end", ok, why)

# structural tag, xgrammar's "format" form.  Random weights rarely write a trigger by themselves, so these
# formats make the tags happen: a reasoning tag, then at least one tool tag, then free text with triggers
PICK = {"type": "object", "properties": {"c": {"enum": ["a", "b"]}}, "required": ["c"]}
TAGS = [{"type": "tag", "begin": "<f=pick>", "content": {"type": "json_schema", "json_schema": PICK}, "end": "</f>"},
        {"type": "tag", "begin": "<f=none>", "content": {"type": "const_string", "value": "X"}, "end": ["</f>", "</F>"]}]


def tag_at(txt, k):
    """The end of a valid tag starting at txt[k], or -1."""
    m = re.match(r'<f=pick>(\{.*?\})</f>', txt[k:], re.S)
    if m:
        try:
            jsonschema.validate(json.loads(m.group(1)), PICK)
            return k + m.end()
        except (ValueError, jsonschema.ValidationError):
            return -1
    m = re.match(r'<f=none>X</[fF]>', txt[k:])
    return k + m.end() if m else -1


FMT = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
    {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
    {"type": "triggered_tags", "triggers": ["<f="], "tags": TAGS, "at_least_one": True, "excludes": ["STOP"]}]}}
for seed in (7, 8):
    st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 96, "seed": seed,
                                          "temperature": 1.0, "response_format": FMT})
    ok, why = st == 200, "%s %s" % (st, d)
    if ok:
        txt = d["choices"][0]["message"]["content"] or ""
        e = txt.find("</think>")
        ok = txt.startswith("<think>") and e >= 0
        pos = tag_at(txt, e + 8) if ok else -1
        ok = ok and pos >= 0 and "STOP" not in txt[pos:]
        while ok and (k := txt.find("<f=", pos)) >= 0:
            pos = tag_at(txt, k)
            ok = pos >= 0
        why = repr(txt)
    check("structural_tag format (seed %d): <think>..</think>, a tag, then only valid tags" % seed, ok, why)
SEP = {"type": "structural_tag", "format": {"type": "tags_with_separator", "tags": TAGS, "separator": ",",
                                             "at_least_one": True}}
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 64, "seed": 9,
                                      "response_format": SEP})
ok, why = st == 200, "%s %s" % (st, d)
if ok:
    txt = d["choices"][0]["message"]["content"] or ""
    pos = tag_at(txt, 0)
    while ok and pos >= 0 and pos < len(txt):
        pos = tag_at(txt, pos + 1) if txt[pos] == "," else -1
    ok = pos == len(txt)
    why = repr(txt)
check("structural_tag tags_with_separator: tag (, tag)* and nothing else", ok, why)
st, d = post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 8, "response_format":
                                      {"type": "structural_tag", "format": {"type": "or", "elements": [
                                          {"type": "any_text"}, {"type": "const_string", "value": "a"}]}}})
check("structural_tag format mixing unlimited and limited elements -> 400 naming it",
      st == 400 and "structural_tag" in err_msg(d) and "unlimited" in err_msg(d), "%s %s" % (st, d))

# metrics
m = get("/metrics")
check("/metrics has sglang:num_grammar_queue_reqs", re.search(r"^sglang:num_grammar_queue_reqs\{.*\} 0", m, re.M) is not None,
      "\n".join(l for l in m.splitlines() if "grammar" in l) or m[:300])

sys.exit(1 if fails else 0)
