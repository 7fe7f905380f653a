#!/usr/bin/python3
"""Compare `sglc chat-template` output with tests/ref/jinja_ref.py output.
usage: compare_chat.py NAME SGLC_OUT REF_OUT REQUESTS
Prompts must be byte-identical; where the reference raised, sglc must
return an error too, and for raise_exception (jinja2 TemplateError) the
message must be the same.  Prints mismatches; exit 1 if any."""
import json
import sys

name, a_path, b_path, req_path = sys.argv[1:5]
a = [json.loads(l) for l in open(a_path, encoding="utf-8")]
b = [json.loads(l) for l in open(b_path, encoding="utf-8")]
reqs = [l.rstrip("\n") for l in open(req_path, encoding="utf-8") if l.strip()]
bad = 0
if len(a) != len(b) or len(a) != len(reqs):
    print("%s: line count differs: sglc %d, ref %d, requests %d" % (name, len(a), len(b), len(reqs)))
    sys.exit(1)
for i, (x, y) in enumerate(zip(a, b)):
    ok = True
    if "prompt" in y:
        ok = x.get("prompt") == y["prompt"]
    else:
        ok = "error" in x
        if ok and y.get("kind") == "TemplateError":
            ok = x["error"] == y["error"]
    if not ok:
        bad += 1
        if bad <= 3:
            print("%s: request %d differs\n  request: %s\n  sglc: %r\n  ref:  %r"
                  % (name, i + 1, reqs[i][:400], json.dumps(x, ensure_ascii=False)[:800],
                     json.dumps(y, ensure_ascii=False)[:800]))
n_prompt = sum(1 for y in b if "prompt" in y)
print("%-48s %4d requests: %4d prompts, %4d errors, %d mismatches"
      % (name, len(b), n_prompt, len(b) - n_prompt, bad))
sys.exit(1 if bad else 0)
