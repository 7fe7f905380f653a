#!/usr/bin/python3
"""Differential fuzzing of the lexer: random templates mixing text with
spaces/tabs/newlines/unicode spaces and tags with -/+ whitespace control,
comments and raw blocks, rendered by jinja_ref.py and by sglc.  A
development tool, not part of make test.
usage: diff_whitespace.py SEED COUNT"""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE)
import jinja_ref
rng = random.Random(int(sys.argv[1]))
N = int(sys.argv[2])
ctx = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}], "n": 2}
req = json.dumps({"messages": ctx["messages"], "chat_template_kwargs": {"n": 2}})
TXT = ["", " ", "  ", "\n", "\n\n", " \n ", "\t", "x", " y ", "\n  ", "  \n", "\r\n", "\u00a0", "\u3000\n"]
def sign(block=True):
    return rng.choice(["", "", "-", "+"] if block else ["", "", "-"])
def text():
    return "".join(rng.choice(TXT) for _ in range(rng.randint(0, 3)))
def stmt(d):
    r = rng.random()
    if d <= 0 or r < 0.3:
        return text() + "{{%s %s %s}}" % (sign(False), rng.choice(["n", "'v'", "messages[0].role", "loop.index if loop is defined else 0"]), sign(False))
    if r < 0.5:
        return "{%%%s if %s %s%%}%s%s{%%%s else %s%%}%s{%%%s endif %s%%}" % (sign(), rng.choice(["true", "n > 5"]), sign(), text(), body(d - 1), sign(), sign(), body(d - 1), sign(), sign())
    if r < 0.65:
        return "{%%%s for m in messages %s%%}%s%s{%%%s endfor %s%%}" % (sign(), sign(), text(), body(d - 1), sign(), sign())
    if r < 0.75:
        return "{#%s c %s#}" % (sign(), sign())
    if r < 0.85:
        return "{%%%s set q = %d %s%%}" % (sign(), rng.randint(0, 9), sign())
    if r < 0.92:
        return "{%%%s raw %s%%}%s{{ r }}%s{%%%s endraw %s%%}" % (sign(), sign(), text(), text(), sign(), sign())
    return text()
def body(d):
    return "".join(text() + stmt(d) + text() for _ in range(rng.randint(1, 3)))
bad = 0
CUR = os.path.join(tempfile.mkdtemp(), 'cur.jinja')
for i in range(N):
    src = body(3)
    try:
        ref = {"prompt": jinja_ref.compile_template(src).render(**copy.deepcopy(ctx))}
    except Exception as e:
        ref = {"error": "%s: %s" % (type(e).__name__, e)}
    open(CUR, 'w').write(src)
    p = subprocess.run([os.environ.get('SGLC', os.path.join(HERE, '..', '..', 'build', 'sglc')), 'chat-template', '--chat-template', CUR], input=req + '\n', capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print("CRASH", p.returncode, repr(src)); bad += 1; continue
    got = json.loads(p.stdout) if p.returncode == 0 else {"error": "LOAD " + p.stderr.strip()}
    same = ('prompt' in ref and ref.get('prompt') == got.get('prompt')) or ('error' in ref and 'error' in got)
    if not same:
        bad += 1
        if bad <= 5: print('DIFF %r\n   ref:  %r\n   sglc: %r' % (src, ref, got))
print('diffs', bad, 'of', N)
