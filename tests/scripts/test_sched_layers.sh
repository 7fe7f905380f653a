#!/usr/bin/env bash
# The scheduler's files include each other in one direction only (see the
# "Layers" section of src/sched/sched_impl.h): a file of layer L may
# include the internal header of a layer <= L, never one above it, so the
# include graph has no cycle.  Also: every src/sched file is in the list
# (a new file must be given a layer), and no file outside src/sched and
# tests/unit includes an internal header.  Pure grep: runs in a second.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$ROOT/src/sched
# bottom -> top; the public sched.h and the event accumulator sched_result.{c,h} sit
# outside the layers (sched.h may be included anywhere, sched_result.h by
# nothing here)
LAYERS="impl util policy event kv req grammar output retract batch inbox ctl step sched"
OUTSIDE="sched.h sched_result.h sched_result.c sched_args.c"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
layer_of() { # file name -> layer index, or -1
    local base=${1%.[ch]} i=0 l
    base=${base#sched_}
    [ "$base" = sched ] && base=sched
    for l in $LAYERS; do
        [ "$l" = "$base" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}
[ -d "$D" ] || { echo "skip: $D not found"; exit 77; }
n_files=0
for f in "$D"/*.[ch]; do
    name=$(basename "$f")
    case " $OUTSIDE " in *" $name "*) continue ;; esac
    n_files=$((n_files + 1))
    me=$(layer_of "$name")
    if [ "$me" -lt 0 ]; then
        fail "$name has no layer: add it to LAYERS here and to the list in sched_impl.h"
        continue
    fi
    while IFS= read -r inc; do
        [ -n "$inc" ] || continue
        case " $OUTSIDE " in *" $inc "*)
            [ "$inc" = sched.h ] || fail "$name includes $inc (outside the layers)"
            continue ;;
        esac
        other=$(layer_of "$inc")
        if [ "$other" -lt 0 ]; then
            fail "$name includes $inc, which has no layer"
        elif [ "$other" -gt "$me" ]; then
            fail "$name (layer $me) includes $inc (layer $other): upward include"
        fi
    done < <(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"sched/\([^"]*\)".*|\1|p' "$f")
done
[ "$n_files" -ge 10 ] || fail "only $n_files layered files found under $D"
# the internal headers stay inside the scheduler (and its unit tests)
internal=$(cd "$ROOT" && grep -rlE '#[[:space:]]*include[[:space:]]*"sched/sched_(impl|util|policy|event|kv|req|output|retract|batch|inbox|ctl|step)\.h"' \
    src tests bench 2>/dev/null | grep -vE '^(src/sched/|tests/unit/)' || true)
[ -z "$internal" ] || fail "internal scheduler headers included outside src/sched: $internal"
# the documented order is the order checked here
doc=$(sed -n 's|^ \* Layers (bottom to top): \(.*\)$|\1|p' "$D/sched_impl.h")
[ "$doc" = "$LAYERS" ] || fail "sched_impl.h documents layers '$doc', this script checks '$LAYERS'"
if [ "$fails" -eq 0 ]; then echo "ok   $n_files scheduler files include downward only"; exit 0; fi
exit 1
