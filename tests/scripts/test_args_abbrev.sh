#!/usr/bin/env bash
# test_args_abbrev — sglc resolves command-line options exactly as Python's
# argparse (allow_abbrev=True) does.  The reference is the real thing:
# /usr/bin/python3's argparse gets a parser with sglc's option strings in
# sglc's order (-h/--help, the server flags as `server-args --help` lists
# them, then the command's own options), each with its kind (flag, one
# value, a list); every probe command line goes through both, and the
# outcomes must agree:
#   - argparse sets option X to V  ->  sglc's JSON has X = V, or sglc
#     refuses X by its full name ("--tp-size is not supported by sglc yet")
#   - argparse: "ambiguous option: ..." / "argument -h/--help: ignored
#     explicit argument"  ->  the same text from sglc (exit 2); another
#     flag's "ignored explicit argument"  ->  sglc's "takes no value"
#   - argparse: "expected one argument" / "expected at least one
#     argument"  ->  sglc's "expects a value" / "expects at least one value"
#   - argparse shows the help  ->  so does sglc (exit 0, "usage:")
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SGLC=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
[ -x "$SGLC" ] || { echo "sglc binary not built: $SGLC"; exit 1; }
[ -x "$PY" ] || { echo "skip: no $PY"; exit 77; }
TMP=$(mktemp -d /tmp/sglc_abbrev.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

"$SGLC" server-args --help >"$TMP/help" || { echo "FAIL --help"; exit 1; }
"$SGLC" server-args --compact >"$TMP/defaults.json" 2>/dev/null || { echo "FAIL defaults"; exit 1; }

# One probe per line: the argv words, separated by '|'.
cat >"$TMP/probes" <<'EOF'
--mem-frac|0.8
--mem-fraction-static=0.7
--mem=0.5
--mem-fraction-stat|0.25
--chunk|512
--chunked-prefill-size|-1
--max|5
--max-t|5
--max-total-tokens|7|--max-r|3
--model|/m
--model-p|/m
--model-path=/x
--mod|/m
--en
--enable-mixed
--enable-lo
--enable-metrics
--disable-r
--disable|x
--h
--he
-h
-hx
-hh
-hhx
-h-x
-h=3
--help=x
--schedule-p|lpm
--sched|lpm
--log-level|-x
--log-level|--port
--tp|2
--tp-size|1
--dp|2
--ep|2
--tensor|2
--cuda-graph-m|8
--cuda-graph-bs|1|2|4
--cuda-graph|8
--attention-b|triton
--compact
--comp
--co
--conf
--dtype=float32
--dtyp=bfloat16
--json-model|{}
--port|-1
--host|--foo
--host|- x
--random-seed|-3
--tokenizer-mode|slow|--tok|/t
--skip-t
--skip-tokenizer-init=1
--bucket-time|0.1|0.2|-0.5
-x
--zzz
EOF

"$PY" - "$TMP/help" "$TMP/defaults.json" "$TMP/probes" >"$TMP/expect" <<'PYEOF'
import argparse, json, sys
help_path, defaults_path, probes_path = sys.argv[1:4]
lines = open(help_path).read().split('\n')
keys = list(json.load(open(defaults_path)).keys())   # table order
extras, server, section = [], [], 'extras'
for ln in lines:
    if ln.startswith('  -h, --help'):
        section = 'server'
        continue
    if not ln.startswith('  --'):
        continue
    body = ln.strip().split('  (')[0]            # drop "(not yet)" / "(ignored)"
    words = body.split(' ')
    opts, rest = [], []
    for w in words:
        if w.startswith('--') and not rest:
            opts.append(w.rstrip(','))
        else:
            rest.append(w)
    metavar = ' '.join(rest)
    kind = 'list' if '...' in metavar else ('flag' if not metavar else 'one')
    (extras if section == 'extras' else server).append((opts, kind))
assert len(server) == len(keys), (len(server), len(keys))

class Err(Exception):
    pass
class Help(Exception):
    pass
class P(argparse.ArgumentParser):
    def error(self, message):
        raise Err(message)
    def print_help(self, file=None):
        raise Help()
p = P(prog='sglc', allow_abbrev=True)
for (opts, kind), key in zip(server, keys):
    kw = {'dest': key}
    if kind == 'flag':
        kw['action'] = 'store_true'
    elif kind == 'list':
        kw['nargs'] = '*' if key == 'uvicorn_access_log_exclude_prefixes' else '+'
    p.add_argument(*opts, **kw)
for opts, kind in extras:
    p.add_argument(*opts, **({'action': 'store_true'} if kind == 'flag' else {}), dest='x_' + opts[0][2:])
for ln in open(probes_path).read().split('\n'):
    if not ln:
        continue
    argv = ln.split('|')
    try:
        ns = p.parse_args(argv)
    except Help:
        print(json.dumps({'argv': argv, 'help': True}))
        continue
    except Err as e:
        print(json.dumps({'argv': argv, 'error': str(e)}))
        continue
    except argparse.ArgumentError as e:
        print(json.dumps({'argv': argv, 'error': str(e)}))
        continue
    # the options argparse set, with the option string it matched
    set_ = {}
    for a in p._actions:
        if a.dest in ('help',) or a.dest.startswith('x_'):
            continue
        v = getattr(ns, a.dest)
        if v is not None and v is not False and v != a.default:
            set_[a.dest] = {'value': v, 'opts': a.option_strings}
    print(json.dumps({'argv': argv, 'set': set_}))
PYEOF
[ -s "$TMP/expect" ] || { echo "FAIL: the argparse reference produced nothing"; exit 1; }

fails=0
n=0
while IFS= read -r exp; do
  n=$((n + 1))
  mapfile -t argv < <(printf '%s' "$exp" | "$PY" -c 'import json,sys; print("\n".join(json.load(sys.stdin)["argv"]))')
  "$SGLC" server-args --compact "${argv[@]}" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  verdict=$(EXP="$exp" RC=$rc "$PY" - "$TMP/out" "$TMP/err" "$TMP/defaults.json" <<'PYEOF'
import json, os, sys
exp = json.loads(os.environ['EXP']); rc = int(os.environ['RC'])
out = open(sys.argv[1]).read(); err = open(sys.argv[2]).read()
defaults = json.load(open(sys.argv[3]))
def bad(msg):
    print('FAIL ' + msg + ' | rc=%d stderr=%r stdout=%r' % (rc, err.strip()[:300], out[:120])); sys.exit()
if exp.get('help'):
    if rc != 0 or not out.startswith('usage:'): bad('argparse shows the help')
    print('ok'); sys.exit()
if 'error' in exp:
    e = exp['error']
    if rc != 2: bad('argparse: ' + e)
    if 'ambiguous option' in e or e.startswith('argument -h/--help: ignored explicit argument'):
        if e not in err: bad('argparse: ' + e)
    elif 'ignored explicit argument' in e:
        if 'takes no value' not in err: bad('argparse: ' + e)
    elif 'expected one argument' in e:
        if 'expects a value' not in err: bad('argparse: ' + e)
    elif 'expected at least one argument' in e:
        if 'expects at least one value' not in err: bad('argparse: ' + e)
    elif 'unrecognized arguments' in e:
        if 'unrecognized argument' not in err and 'unexpected argument' not in err: bad('argparse: ' + e)
    else:
        bad('unexpected argparse error kind: ' + e)
    print('ok'); sys.exit()
# argparse accepted: sglc stores each value, or refuses the option by its full name
if rc == 0:
    got = json.loads(out)
    for k, s in exp['set'].items():
        v, g = s['value'], got.get(k)
        def same(a, b):
            if isinstance(a, list):
                return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
            if isinstance(a, bool) or isinstance(b, bool):
                return a == b
            try:
                return float(a) == float(b)
            except (TypeError, ValueError):
                return str(a) == str(b)
        if not same(v, g): bad('%s: argparse %r, sglc %r' % (k, v, g))
    print('ok'); sys.exit()
if rc == 2 and any(('%s is not supported by sglc yet' % o) in err or ('error: %s ' % o) in err or
                   ('error: %s:' % o) in err for s in exp['set'].values() for o in s['opts']):
    print('ok (refused by name)'); sys.exit()
bad('argparse accepted %r' % exp['set'])
PYEOF
)
  case "$verdict" in
    ok*) echo "ok   ${argv[*]}  ($verdict)";;
    *) echo "$verdict  <- ${argv[*]}"; fails=$((fails + 1));;
  esac
done <"$TMP/expect"

[ "$n" -ge 50 ] || { echo "FAIL: only $n probes ran"; exit 1; }
if [ "$fails" -ne 0 ]; then echo "$fails of $n probe(s) differ from argparse"; exit 1; fi
echo "all $n probes resolve as argparse does"
