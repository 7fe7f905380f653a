#!/usr/bin/env python3
"""JSONSchemaBench: compile rate and validity of random constrained outputs.

Picks --limit schemas evenly spaced over the sorted corpus (all when 0),
runs one `sglc grammar-sample --schemas-from LIST` over them (random
tokens drawn from each schema's mask: a random-weight model), and checks
every finished output with an independent validator, python3-jsonschema
(the validator class the schema's $schema names, default 2020-12, with
its format checker).  Reports the compile rate, how many schemas had at
least one finished output validated, and every invalid output.

Passes when: compile rate >= --min-compile, zero invalid outputs, and at
least --min-validated schemas validated.  Schemas the validator itself
cannot use (it raises on the schema) are counted apart, not as invalid.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (tools/install-deps.sh)")
    sys.exit(77)


def pick(root, limit, exclude=0):
    files = []
    for d in sorted(os.listdir(root)):
        p = os.path.join(root, d)
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".json")]
    if exclude:
        skip = set(pick(root, exclude))
        files = [f for f in files if f not in skip]
    if limit and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return files


def validator_for(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    fc = getattr(cls, "FORMAT_CHECKER", None) or jsonschema.FormatChecker()
    return cls(schema, format_checker=fc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="jsonschemabench folder")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", "build/sglc"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--n", type=int, default=2, help="samples per schema")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--min-compile", type=float, default=0.85)
    ap.add_argument("--min-validated", type=int, default=0)
    ap.add_argument("--exclude-pick", type=int, default=0,
                    help="leave out the schemas a --limit of this size picks (a disjoint second run)")
    ap.add_argument("--shard", default="0/1", help="K/N: only every N-th picked schema from the K-th (parallel runs)")
    ap.add_argument("--show-errors", type=int, default=0, help="print the N most common compile errors")
    a = ap.parse_args()

    files = pick(a.bench, a.limit, a.exclude_pick)
    k, nsh = (int(x) for x in a.shard.split("/"))
    files = files[k::nsh]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(files) + "\n")
        lst = f.name
    t0 = time.time()
    p = subprocess.Popen([a.sglc, "grammar-sample", "--schemas-from", lst, "--tokenizer-path", a.tokenizer,
                          "--n", str(a.n), "--seed", str(a.seed), "--max-tokens", str(a.max_tokens)],
                         stdout=subprocess.PIPE, text=True)
    compiled = total = validated_schemas = outputs = unfinished = invalid = unusable = 0
    errors = collections.Counter()
    per_cat = collections.defaultdict(lambda: [0, 0])
    bad = []
    tmax = []
    for line in p.stdout:
        r = json.loads(line)
        total += 1
        cat = os.path.basename(os.path.dirname(r["file"]))
        per_cat[cat][1] += 1
        if not r["compiled"]:
            errors[r.get("error", "")[:90]] += 1
            continue
        compiled += 1
        per_cat[cat][0] += 1
        tmax.append(r.get("translate_ms", 0) + r.get("compile_ms", 0))
        fin = [s for s in r["samples"] if s["finished"]]
        unfinished += len(r["samples"]) - len(fin)
        if not fin:
            continue
        try:
            schema = json.load(open(r["file"]))
            v = validator_for(schema)
        except Exception as e:  # the validator cannot use this schema
            unusable += 1
            continue
        checked = False
        for s in fin:
            outputs += 1
            try:
                inst = json.loads(s["text"])
            except Exception as e:
                invalid += 1
                bad.append((r["file"], "not JSON: %s" % e, s["text"][:300]))
                continue
            try:
                errs = list(v.iter_errors(inst))
            except Exception as e:
                unusable += 1
                continue
            checked = True
            if errs:
                invalid += 1
                bad.append((r["file"], errs[0].message[:200], s["text"][:300]))
                print("INVALID %s: %s" % (r["file"], errs[0].message[:200]), flush=True)
        validated_schemas += checked
        if total % 100 == 0:
            print("  ... %d schemas: compiled %d, validated %d outputs over %d schemas, invalid %d, unfinished %d"
                  % (total, compiled, outputs, validated_schemas, invalid, unfinished), flush=True)
    p.wait()
    os.unlink(lst)
    dt = time.time() - t0
    for cat, (c, n) in sorted(per_cat.items()):
        print("  %-16s compiled %4d / %4d" % (cat, c, n))
    if a.show_errors:
        for e, k in errors.most_common(a.show_errors):
            print("  %5d  %s" % (k, e))
    for f, why, text in bad:
        print("INVALID %s: %s\n    %r" % (f, why, text))
    tmax.sort()
    p99 = tmax[int(0.99 * (len(tmax) - 1))] if tmax else 0
    rate = compiled / total if total else 0
    print("schemas %d, compiled %d (%.1f%%), translate+compile p99 %.1f ms; outputs validated %d over %d schemas, "
          "invalid %d, unfinished (cap %d tokens) %d, validator could not use %d; %.0f s"
          % (total, compiled, 100 * rate, p99, outputs, validated_schemas, invalid, a.max_tokens, unfinished, unusable, dt))
    ok = p.returncode == 0 and rate >= a.min_compile and invalid == 0 and validated_schemas >= a.min_validated
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
