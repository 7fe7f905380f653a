#!/usr/bin/env python3
"""JSON-Schema-Test-Suite through `sglc grammar-check --json-schema FILE`.

For every group (one schema, several instances) of the chosen drafts the
schema is written to a file and grammar-check is run once: each instance
is sent as two candidate outputs, its compact and its pretty (indent 2)
serialization, one JSON string per line.  A group whose schema does not
compile (exit 3) is counted per keyword as "not compiled" and left out of
the score.  For compiled groups an instance is right when both forms give
the expected answer (valid -> accepted, invalid -> rejected).

The score is over the keywords in scope (every test file not listed in
OUT_OF_SCOPE); the run passes at --min-right (0.95 by default).  Prints a
table per keyword and, with --list-wrong, each wrong instance.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# Keywords (test files) this engine does not claim: the translator refuses
# them (dependentSchemas, multipleOf ...; not, if/then/else, contains,
# minContains, maxContains and uniqueItems are in scope: exact where
# expressible, refused otherwise) or
# they need what a grammar over the text cannot give (remote documents,
# $dynamicRef, unevaluated*, vocabularies).  Keep in step with
# docs/notes/schema.md.
OUT_OF_SCOPE = {
    "dependentSchemas", "dependencies", "unevaluatedItems", "unevaluatedProperties",
    "dynamicRef", "recursiveRef", "refRemote", "vocabulary", "id", "anchor",
    "multipleOf", "maxProperties", "propertyNames", "content",
}

DRAFTS = ["draft2020-12", "draft2019-09", "draft7", "draft6", "draft4"]


def run_group(checker, schema, texts, timeout):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
        path = f.name
    try:
        inp = "".join(json.dumps(t) + "\n" for t in texts)
        p = subprocess.run(checker + ["--json-schema", path], input=inp, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    finally:
        os.unlink(path)
    if p.returncode == 3:
        return None, (p.stderr.strip().splitlines() or ["exit 3"])[-1]
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip()[-200:])
    out = []
    for line in p.stdout.splitlines():
        out.append(bool(json.loads(line).get("accepted")))
    if len(out) != len(texts):
        return None, "answered %d of %d lines" % (len(out), len(texts))
    return out, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True, help="JSON-Schema-Test-Suite/tests")
    ap.add_argument("--checker", default=None, help="command before --json-schema (default: $SGLC_BIN grammar-check)")
    ap.add_argument("--drafts", default="draft2020-12", help="comma-separated, or 'all'")
    ap.add_argument("--min-right", type=float, default=0.95)
    ap.add_argument("--list-wrong", action="store_true")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    checker = a.checker.split() if a.checker else [os.environ.get("SGLC_BIN", "build/sglc"), "grammar-check"]
    drafts = DRAFTS if a.drafts == "all" else a.drafts.split(",")
    rows = {}
    wrong = []
    tot_right = tot = 0
    for d in drafts:
        dd = os.path.join(a.suite, d)
        if not os.path.isdir(dd):
            continue
        for fn in sorted(os.listdir(dd)):
            if not fn.endswith(".json"):
                continue
            kw = fn[:-5]
            groups = json.load(open(os.path.join(dd, fn)))
            r = rows.setdefault((d, kw), {"groups": 0, "compiled": 0, "tests": 0, "right": 0, "skipped_tests": 0})
            for g in groups:
                r["groups"] += 1
                texts = []
                for t in g["tests"]:
                    texts.append(json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False))
                    texts.append(json.dumps(t["data"], indent=2, ensure_ascii=False))
                got, err = run_group(checker, g["schema"], texts, a.timeout)
                if got is None:
                    r["skipped_tests"] += len(g["tests"])
                    if a.list_wrong and kw not in OUT_OF_SCOPE:
                        print("  not compiled: %s/%s: %s: %s" % (d, kw, g["description"], err))
                    continue
                r["compiled"] += 1
                for i, t in enumerate(g["tests"]):
                    ok = got[2 * i] == t["valid"] and got[2 * i + 1] == t["valid"]
                    r["tests"] += 1
                    r["right"] += ok
                    if not ok:
                        wrong.append((d, kw, g["description"], t["description"], t["valid"], got[2 * i], got[2 * i + 1]))
                if kw not in OUT_OF_SCOPE:
                    pass
            if kw not in OUT_OF_SCOPE:
                tot += r["tests"]
                tot_right += r["right"]
    print("%-14s %-24s %7s %9s %6s %6s %8s %s" % ("draft", "keyword", "groups", "compiled", "tests", "right", "skipped", "scope"))
    for (d, kw), r in sorted(rows.items()):
        print("%-14s %-24s %7d %9d %6d %6d %8d %s" % (d, kw, r["groups"], r["compiled"], r["tests"], r["right"],
                                                    r["skipped_tests"], "out" if kw in OUT_OF_SCOPE else "in"))
    if a.list_wrong:
        for w in wrong:
            if w[1] not in OUT_OF_SCOPE:
                print("  wrong: %s/%s: %s / %s: valid=%s compact=%s pretty=%s" % w)
    frac = tot_right / tot if tot else 0.0
    print("in scope: %d of %d instances right (%.1f%%) over compiled groups; need %.0f%%"
          % (tot_right, tot, 100 * frac, 100 * a.min_right))
    return 0 if tot > 0 and frac >= a.min_right else 1


if __name__ == "__main__":
    sys.exit(main())
