#!/usr/bin/python3
"""Differential fuzzing of expressions: random Jinja expressions (and for
loops over them) rendered by jinja_ref.py and by `sglc chat-template`;
prints templates whose output or error-ness differ.  A development tool,
not part of make test.
usage: diff_expr.py SEED COUNT   (SGLC=path/to/sglc to pick a binary)"""
import json
import os
import random
import subprocess
import sys
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE)
import jinja_ref
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 500
ctx = {"messages": [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": " Hé!\n", "n": 3}],
       "s": "a,b c", "n": 7, "f": 2.5, "l": [3, 1, 2], "d": {"k": "v", "z": [1]}, "e": "", "z": 0}
req = json.dumps({"messages": ctx["messages"], "chat_template_kwargs": {k: v for k, v in ctx.items() if k != "messages"}})
VARS = ["messages", "s", "n", "f", "l", "d", "e", "z", "x", "messages[0]", "messages[1].content", "d.k", "l[0]", "loopless"]
LITS = ["1", "0", "-3", "2.5", "0.1", "1e3", "'a'", "''", "'a b'", "\"x'y\"", "none", "true", "false", "[]", "[1, 'a']", "{}", "{'a': 1}", "(1, 2)", "'É'"]
BIN = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or"]
FILT = ["length", "trim", "upper", "lower", "string", "list", "first", "last", "int", "float", "abs", "capitalize", "title",
        "tojson", "items", "default('D')", "join(',')", "sort", "reverse", "unique", "sum", "min", "max", "round", "e",
        "replace('a', 'b')", "map('string') | list", "select | list", "reject | list", "indent(2)", "wordcount", "center(7)",
        "dictsort", "batch(2)", "selectattr('role') | list", "map(attribute='role') | list", "format(1)", "count", "d(1, true)"]
TESTS = ["defined", "none", "string", "number", "mapping", "iterable", "sequence", "integer", "float", "boolean",
         "odd", "even", "divisibleby(2)", "eq(1)", "in([1, 'a'])", "lower", "upper", "true", "false", "callable", "undefined"]
METH = [".strip()", ".split()", ".split(',')", ".upper()", ".startswith('a')", ".endswith('!')", ".replace('a', 'X')",
        ".lstrip('a')", ".rstrip()", ".title()", ".find('b')", ".count('a')", ".get('k')", ".items() | list", ".keys() | list",
        ".values() | list", "[0]", "[-1]", "[1:]", "[::-1]", "[:2]", ".role", "['k']", "[5]", ".index(1)", ".isdigit()",
        ".format(1)", ".splitlines()", ".capitalize()", ".join(['1','2'])"]
def expr(d):
    r = rng.random()
    if d <= 0 or r < 0.25:
        return rng.choice(VARS + LITS)
    if r < 0.45:
        return "%s %s %s" % (expr(d - 1), rng.choice(BIN), expr(d - 1))
    if r < 0.6:
        return "(%s) | %s" % (expr(d - 1), rng.choice(FILT))
    if r < 0.7:
        return "(%s) is %s%s" % (expr(d - 1), rng.choice(["", "not "]), rng.choice(TESTS))
    if r < 0.82:
        return "(%s)%s" % (expr(d - 1), rng.choice(METH))
    if r < 0.9:
        return "%s if %s else %s" % (expr(d - 1), expr(d - 1), expr(d - 1))
    if r < 0.95:
        return "not %s" % expr(d - 1)
    return "[%s, %s]" % (expr(d - 1), expr(d - 1))
NAMES = ["a", "b", "ns.v", "it"]


def program(d):
    """random statements: set / namespace / if / for / macro, for scoping"""
    out = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if d <= 0 or r < 0.3:
            out.append("{{ %s }}" % rng.choice(["a", "b", "ns.v", "it", "loop.index if loop is defined else '-'",
                                                  "m(a) if m is defined else '?'", expr(1)]))
        elif r < 0.5:
            out.append("{%% set %s = %s %%}" % (rng.choice(["a", "b", "ns.v"]), rng.choice(
                ["a ~ 1", "b", "ns.v ~ 'x'", "it", expr(1), "(a | string) ~ (b | string)"])))
        elif r < 0.65:
            out.append("{%% if %s %%}%s{%% else %%}%s{%% endif %%}" % (expr(1), program(d - 1), program(d - 1)))
        elif r < 0.85:
            out.append("{%% for it in %s %%}%s{%% endfor %%}" % (rng.choice(["l", "messages", "[1, 2]", "s", "d"]),
                                                               program(d - 1)))
        else:
            out.append("{%% macro m(p, q=a) %%}%s[{{ p }}{{ q }}]{%% endmacro %%}" % program(d - 1))
    return "".join(out)


bad = 0
for i in range(N):
    src = "{{ %s }}" % expr(rng.randint(1, 3))
    if rng.random() < 0.2:
        src = "{%% for it in %s %%}{{ loop.index }}:{{ it }};{%% else %%}E{%% endfor %%}" % expr(2)
    elif rng.random() < 0.3:
        src = "{% set ns = namespace(v='') %}{% set a = 'A' %}" + program(3)
    try:
        import copy; ref = {"prompt": jinja_ref.compile_template(src).render(**copy.deepcopy(ctx))}
    except Exception as e:
        ref = {"error": "%s: %s" % (type(e).__name__, e)}
    p = subprocess.run([os.environ.get('SGLC', os.path.join(HERE, '..', '..', 'build', 'sglc')), 'chat-template', '--chat-template', src], input=req + '\n', capture_output=True, text=True)
    got = json.loads(p.stdout) if p.returncode == 0 else {"error": "LOAD " + p.stderr.strip()}
    if p.returncode not in (0, 1):
        print("CRASH", p.returncode, src); bad += 1; continue
    same = ('prompt' in ref and ref.get('prompt') == got.get('prompt')) or ('error' in ref and 'error' in got)
    if not same:
        if '0x7f' in ref.get('prompt', '') or 'generator object' in ref.get('prompt', ''): continue
        bad += 1
        print('DIFF %s\n   ref:  %r\n   sglc: %r' % (src, ref, got))
print('diffs', bad, 'of', N)
