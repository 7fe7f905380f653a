/* grammar_json_num — JSON Schema integer and number constraints as exact
 * digit-level grammars.
 *
 * DESIGN: a bound is turned into an exact decimal (sign, integer digits,
 * fraction digits) — from the integer jansson read, or from the shortest
 * text that reads back as the same double (so `0.1` stays 0.1, not
 * 0.1000000000000000055...).  Ranges are then built on digit strings of
 * any length (no int64 limits): a fixed-length range [x, y] splits at the
 * first differing digit into "x0 then >= rest", "a digit strictly
 * between, then anything" and "y0 then <= rest"; lengths between the
 * bounds' lengths are "any n digits".  Fractions compare as digit strings
 * padded with zeros, which gives the same three-way split without a
 * length.  The number of alternatives is linear in the bounds' digits.
 *
 * What is exact and what is not:
 *   - integer with minimum/maximum/exclusive* (draft-4 boolean exclusive
 *     forms too): exact over integer texts.  1.0 (an integer by the spec)
 *     is not generated: integers are written without a fraction.
 *   - number with bounds: exact in decimal over texts without an exponent;
 *     exponent forms (1e3) are not generated when a bound is present.  A
 *     validator comparing as binary doubles can disagree within one ulp
 *     of a bound (17+ significant digits).
 *   - multipleOf k (a positive integer, up to 10000) without bounds: exact
 *     (a remainder automaton, k rules); with bounds or a non-integer k it
 *     is an error naming the keyword.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_json_internal.h"

/* An exact decimal: -? i.f, i without leading zeros ("0" for zero), f
 * without trailing zeros ("" for none). */
typedef struct dec {
    bool neg;
    char i[GJS_MAX_DIGITS + 2];
    char f[GJS_MAX_DIGITS + 2];
} dec;

/* Parse decimal text (as printed by %g or %lld) into d.  -1 when it has
 * more digits than GJS_MAX_DIGITS. */
static int dec_parse(const char *t, dec *d)
{
    memset(d, 0, sizeof *d);
    if (*t == '-') d->neg = true, t++;
    else if (*t == '+') t++;
    char m[64];
    size_t nm = 0;
    long pos = -1;
    for (; *t && *t != 'e' && *t != 'E'; t++) {
        if (*t == '.') pos = (long)nm;
        else if (*t >= '0' && *t <= '9' && nm < sizeof m - 1) m[nm++] = *t;
    }
    m[nm] = 0;
    if (pos < 0) pos = (long)nm;
    if (*t == 'e' || *t == 'E') pos += strtol(t + 1, NULL, 10);
    if (pos > GJS_MAX_DIGITS || pos < -GJS_MAX_DIGITS) return -1;
    /* integer part: m[0..pos) padded with zeros */
    size_t ni = 0;
    for (long k = 0; k < pos; k++) {
        char ch = k < (long)nm ? m[k] : '0';
        if (ni == 0 && ch == '0') continue;
        d->i[ni++] = ch;
    }
    if (ni == 0) d->i[ni++] = '0';
    d->i[ni] = 0;
    size_t nf = 0;
    for (long k = pos; k < (long)nm; k++) d->f[nf++] = k < 0 ? '0' : m[k];
    while (nf > 0 && d->f[nf - 1] == '0') nf--;
    d->f[nf] = 0;
    if (!strcmp(d->i, "0") && nf == 0) d->neg = false;
    return 0;
}

/* A numeric keyword's value as an exact decimal.  0, or -1 (not a number). */
static int dec_from_json(gjs *c, json_t *v, const char *kw, dec *d)
{
    char t[64];
    if (json_is_integer(v)) {
        snprintf(t, sizeof t, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!isfinite(x)) return gjs_fail(c, "%s: not a finite number", kw);
        for (int p = 1; p <= 17; p++) {
            snprintf(t, sizeof t, "%.*g", p, x);
            if (strtod(t, NULL) == x) break;
        }
    } else {
        return gjs_fail(c, "%s: not a number", kw);
    }
    if (dec_parse(t, d) != 0) return gjs_fail(c, "%s: more than %d digits", kw, GJS_MAX_DIGITS);
    return 0;
}

/* Compare magnitudes of digit strings without leading zeros. */
static int ucmp(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb) return la < lb ? -1 : 1;
    int r = strcmp(a, b);
    return r < 0 ? -1 : r > 0;
}

/* Signed comparison of two decimals. */
static int dcmp(const dec *a, const dec *b)
{
    if (a->neg != b->neg) return a->neg ? -1 : 1;
    int r = ucmp(a->i, b->i);
    if (!r) r = strcmp(a->f, b->f) < 0 ? -1 : strcmp(a->f, b->f) > 0;
    return a->neg ? -r : r;
}

/* s += 1 / s -= 1 on a digit string (s > 0 for dec); room for one more digit. */
static void uinc(char *s)
{
    size_t n = strlen(s);
    for (size_t k = n; k-- > 0;) {
        if (s[k] < '9') { s[k]++; return; }
        s[k] = '0';
    }
    memmove(s + 1, s, n + 1);
    s[0] = '1';
}
static void udec(char *s)
{
    size_t n = strlen(s);
    for (size_t k = n; k-- > 0;) {
        if (s[k] > '0') { s[k]--; break; }
        s[k] = '9';
    }
    if (s[0] == '0' && s[1]) memmove(s, s + 1, n);
}

static bool all_of(const char *s, char ch)
{
    for (; *s; s++)
        if (*s != ch) return false;
    return true;
}

static void put_digits_any(strbuf *o, size_t n)
{
    if (n == 1) strbuf_puts(o, " [0-9]");
    else if (n > 1) strbuf_printf(o, " [0-9]{%zu}", n);
}

/* Strings of exactly strlen(s) digits that are >= s (ge) or <= s (le). */
static void tail_cmp(strbuf *o, const char *s, bool ge)
{
    size_t n = strlen(s);
    if (n == 0) return;
    if (all_of(s, ge ? '0' : '9')) { put_digits_any(o, n); return; }
    int d = s[0] - '0';
    strbuf_puts(o, " (");
    bool alt = false;
    if (ge ? d < 9 : d > 0) {
        if (ge) strbuf_printf(o, "[%d-9]", d + 1);
        else strbuf_printf(o, "[0-%d]", d - 1);
        put_digits_any(o, n - 1);
        alt = true;
    }
    if (alt) strbuf_puts(o, " | ");
    strbuf_printf(o, "\"%c\"", s[0]);
    tail_cmp(o, s + 1, ge);
    strbuf_puts(o, ")");
}

/* Digit strings of length n = strlen(x) = strlen(y) in [x, y] (x <= y). */
static void fixed_range(strbuf *o, const char *x, const char *y)
{
    size_t n = strlen(x), p = 0;
    while (p < n && x[p] == y[p]) p++;
    if (p > 0) {
        strbuf_puts(o, " ");
        gjs_put_lit(o, x, p);
    }
    if (p == n) return;
    x += p, y += p, n -= p;
    int a = x[0] - '0', b = y[0] - '0';
    bool lo_zero = all_of(x + 1, '0'), hi_nine = all_of(y + 1, '9');
    int mid_lo = lo_zero ? a : a + 1, mid_hi = hi_nine ? b : b - 1;
    strbuf_puts(o, " (");
    bool alt = false;
    if (!lo_zero) {
        strbuf_printf(o, "\"%c\"", x[0]);
        tail_cmp(o, x + 1, true);
        alt = true;
    }
    if (mid_lo <= mid_hi) {
        if (alt) strbuf_puts(o, " | ");
        if (mid_lo == mid_hi) strbuf_printf(o, "\"%d\"", mid_lo);
        else strbuf_printf(o, "[%d-%d]", mid_lo, mid_hi);
        put_digits_any(o, n - 1);
        alt = true;
    }
    if (!hi_nine) {
        if (alt) strbuf_puts(o, " | ");
        strbuf_printf(o, "\"%c\"", y[0]);
        tail_cmp(o, y + 1, false);
    }
    strbuf_puts(o, ")");
}

/* Non-negative integer texts (no leading zeros) in [a, b]; b NULL = no
 * upper bound.  Appends one parenthesized alternation; false (nothing
 * appended) when the range is empty. */
static bool uint_range(strbuf *o, const char *a, const char *b)
{
    if (b && ucmp(a, b) > 0) return false;
    size_t la = strlen(a), lb = b ? strlen(b) : la;
    char lo[GJS_MAX_DIGITS + 3], hi[GJS_MAX_DIGITS + 3];
    strbuf_puts(o, " (");
    for (size_t n = la; n <= lb; n++) {
        if (n > la) strbuf_puts(o, " |");
        if (n == la) strcpy(lo, a);
        else { memset(lo, '0', n); lo[0] = '1'; lo[n] = 0; }
        if (b && n == lb) strcpy(hi, b);
        else { memset(hi, '9', n); hi[n] = 0; }
        fixed_range(o, lo, hi);
    }
    if (!b) strbuf_printf(o, " | [1-9] [0-9]{%zu} [0-9]*", la);
    strbuf_puts(o, " )");
    return true;
}

/* Integers in [lo, hi] (NULL = unbounded), both already integral. */
static const char *int_range(gjs *c, const dec *lo, const dec *hi)
{
    if (lo && hi && dcmp(lo, hi) > 0) return gjs_unsat(c, "integer bounds: minimum > maximum"), NULL;
    strbuf b = {0};
    bool any = false;
    /* negative part: -m with m >= 1 */
    if (!lo || lo->neg) {
        char mlo[GJS_MAX_DIGITS + 3] = "1";
        if (hi && hi->neg) strcpy(mlo, hi->i);
        strbuf_puts(&b, "\"-\"");
        uint_range(&b, mlo, lo ? lo->i : NULL);
        any = true;
    }
    if (!hi || !hi->neg) {
        if (any) strbuf_puts(&b, " |");
        const char *plo = lo && !lo->neg ? lo->i : "0";
        uint_range(&b, plo, hi ? hi->i : NULL);
    }
    const char *r = b.oom ? NULL : gjs_rule(c, "int", b.p);
    free(b.p);
    return r;
}

/* ---- fractions: digit strings s compared as 0.s (padding with zeros) ---- */

static char *take(strbuf *b)
{
    if (b->oom) { free(b->p); return NULL; }
    return b->p;
}

/* "d" followed by X's strings (X's nonempty expression x, plus the empty
 * string when xe) — appended as one alternative; false when none. */
static bool put_then(strbuf *o, char d, char *x, bool xe, bool alt)
{
    if (!x && !xe) { free(x); return false; }
    if (alt) strbuf_puts(o, " | ");
    strbuf_printf(o, "\"%c\"", d);
    if (x) strbuf_printf(o, xe ? " (%s)?" : " (%s)", x);
    free(x);
    return true;
}

/* Nonempty s with 0.s >= 0.f (> when strict); *eok: the empty s (= 0)
 * qualifies too.  NULL = no nonempty string. */
static char *frac_ge(const char *f, bool strict, bool *eok)
{
    strbuf o = {0};
    if (!*f) {
        *eok = !strict;
        strbuf_puts(&o, strict ? "[0-9]* [1-9] [0-9]*" : "[0-9]+");
        return take(&o);
    }
    *eok = false;
    bool alt = false;
    if (f[0] < '9') strbuf_printf(&o, "[%c-9] [0-9]*", f[0] + 1), alt = true;
    bool xe;
    char *x = frac_ge(f + 1, strict, &xe);
    put_then(&o, f[0], x, xe, alt);
    return take(&o);
}

/* Nonempty s with 0.s <= 0.f (< when strict). */
static char *frac_le(const char *f, bool strict, bool *eok)
{
    strbuf o = {0};
    if (!*f) {
        *eok = !strict;
        if (strict) return NULL;
        strbuf_puts(&o, "\"0\"+");
        return take(&o);
    }
    *eok = true;
    bool alt = false;
    if (f[0] > '0') strbuf_printf(&o, "[0-%c] [0-9]*", f[0] - 1), alt = true;
    bool xe;
    char *x = frac_le(f + 1, strict, &xe);
    alt |= put_then(&o, f[0], x, xe, alt);
    if (!alt) { free(o.p); return NULL; }
    return take(&o);
}

/* Nonempty s with lo <= 0.s <= hi (strict flags per side); lo <= hi. */
static char *frac_between(const char *lo, bool lx, const char *hi, bool hx, bool *eok)
{
    strbuf o = {0};
    if (!*hi) {
        *eok = !*lo && !lx && !hx;
        if (!*eok) return NULL;
        strbuf_puts(&o, "\"0\"+");
        return take(&o);
    }
    *eok = !*lo && !lx;
    char a = *lo ? lo[0] : '0', b = hi[0];
    const char *lo1 = *lo ? lo + 1 : lo, *hi1 = hi + 1;
    bool alt = false, xe;
    if (a == b) {
        char *x = frac_between(lo1, lx, hi1, hx, &xe);
        alt = put_then(&o, a, x, xe, false);
    } else {
        char *x = frac_ge(lo1, lx, &xe);
        alt = put_then(&o, a, x, xe, false);
        if (a + 1 <= b - 1) {
            if (alt) strbuf_puts(&o, " | ");
            strbuf_printf(&o, "[%c-%c] [0-9]*", a + 1, b - 1);
            alt = true;
        }
        x = frac_le(hi1, hx, &xe);
        alt |= put_then(&o, b, x, xe, alt);
    }
    if (!alt) { free(o.p); return NULL; }
    return take(&o);
}

/* One alternative "INT-expr then a fraction in x (+ none when xe)". */
static bool put_int_frac(strbuf *o, const char *intexpr, char *x, bool xe, bool alt)
{
    if (!x && !xe) { free(x); return alt; }
    if (alt) strbuf_puts(o, " |");
    strbuf_printf(o, " %s", intexpr);
    if (x) strbuf_printf(o, xe ? " (\".\" (%s))?" : " \".\" (%s)", x);
    free(x);
    return true;
}

/* Magnitudes m (texts INT ("." FRAC)?) with L <= m <= H (strict flags),
 * H NULL = unbounded.  Appends alternatives; returns whether any. */
static bool mag_range(strbuf *o, const dec *L, bool lx, const dec *H, bool hx, bool alt)
{
    strbuf lit = {0};
    gjs_put_lit(&lit, L->i, strlen(L->i));
    bool xe;
    if (H && !strcmp(L->i, H->i)) {
        char *x = frac_between(L->f, lx, H->f, hx, &xe);
        alt = put_int_frac(o, lit.p, x, xe, alt);
        free(lit.p);
        return alt;
    }
    char *fx = frac_ge(L->f, lx, &xe);
    alt = put_int_frac(o, lit.p, fx, xe, alt);
    free(lit.p);
    char a[GJS_MAX_DIGITS + 3], b[GJS_MAX_DIGITS + 3];
    strcpy(a, L->i);
    uinc(a);
    bool mid = true;
    if (H) {
        strcpy(b, H->i);
        if (!strcmp(b, "0")) mid = false;
        else udec(b);
        if (mid && ucmp(a, b) > 0) mid = false;
    }
    if (mid) {
        strbuf m = {0};
        uint_range(&m, a, H ? b : NULL);
        strbuf_puts(&m, " (\".\" [0-9]+)?");
        if (alt) strbuf_puts(o, " |");
        strbuf_printf(o, "%s", m.p ? m.p : "");
        free(m.p);
        alt = true;
    }
    if (H) {
        strbuf hl = {0};
        gjs_put_lit(&hl, H->i, strlen(H->i));
        char *hxp = frac_le(H->f, hx, &xe);
        alt = put_int_frac(o, hl.p, hxp, xe, alt);
        free(hl.p);
    }
    return alt;
}

/* Numbers (no exponent) in the interval; either side may be absent. */
static const char *num_range(gjs *c, const dec *lo, bool lx, const dec *hi, bool hx)
{
    if (lo && hi) {
        int r = dcmp(lo, hi);
        if (r > 0 || (r == 0 && (lx || hx))) return gjs_unsat(c, "number bounds: empty range"), NULL;
    }
    strbuf b = {0};
    bool any = false;
    dec zero;
    dec_parse("0", &zero);
    /* negative part: "-" m, m > 0 */
    if (!lo || lo->neg) {
        strbuf n = {0};
        dec ml = zero, mh;
        bool mlx = true, mhx = false;
        if (hi && hi->neg) ml = *hi, ml.neg = false, mlx = hx;
        if (lo) mh = *lo, mh.neg = false, mhx = lx;
        if (mag_range(&n, &ml, mlx, lo ? &mh : NULL, mhx, false)) {
            strbuf_printf(&b, "\"-\" (%s )", n.p);
            any = true;
        }
        free(n.p);
    }
    if (!hi || !hi->neg) {
        dec pl = zero;
        bool plx = false;
        if (lo && !lo->neg) pl = *lo, plx = lx;
        strbuf p = {0};
        if (mag_range(&p, &pl, plx, hi, hx, false)) {
            if (any) strbuf_puts(&b, " | ");
            strbuf_printf(&b, "(%s )", p.p);
            any = true;
        }
        free(p.p);
    }
    if (!any) { free(b.p); return gjs_unsat(c, "number bounds: empty range"), NULL; }
    const char *r = b.oom ? NULL : gjs_rule(c, "num", b.p);
    free(b.p);
    if (!r && !c->failed) gjs_fail(c, "out of memory");
    return r;
}

/* Integers divisible by k (no bounds): states = remainder so far. */
static const char *int_multiple(gjs *c, long k)
{
    char base[32];
    snprintf(base, sizeof base, "mul%d", c->nrule++);
    strbuf b = {0};
    for (long r = 0; r < k; r++) {
        strbuf_printf(&b, "%sr%ld ::=", base, r);
        bool alt = false;
        if (r == 0) strbuf_puts(&b, " \"\""), alt = true;
        for (int d = 0; d <= 9; d++) {
            strbuf_printf(&b, "%s [%d] %sr%ld", alt ? " |" : "", d, base, (r * 10 + d) % k);
            alt = true;
        }
        strbuf_puts(&b, "\n");
    }
    strbuf_put(&c->rules, b.p ? b.p : "", b.len);
    free(b.p);
    strbuf body = {0};
    strbuf_puts(&body, "\"-\"? (\"0\"");
    for (int d = 1; d <= 9; d++) strbuf_printf(&body, " | [%d] %sr%ld", d, base, d % k);
    strbuf_puts(&body, ")");
    const char *r = gjs_rule(c, "int", body.p);
    free(body.p);
    return r;
}

/* Read minimum/maximum/exclusive* (2019+ numeric and draft-4 boolean
 * forms) into the tightest lower and upper bounds. */
static int read_bounds(gjs *c, json_t *s, dec *lo, bool *has_lo, bool *lx, dec *hi, bool *has_hi, bool *hx)
{
    *has_lo = *has_hi = *lx = *hx = false;
    json_t *v;
    dec t;
    if ((v = json_object_get(s, "minimum")) && json_is_number(v)) {
        if (dec_from_json(c, v, "minimum", lo)) return -1;
        *has_lo = true;
        json_t *e = json_object_get(s, "exclusiveMinimum");
        if (json_is_true(e)) *lx = true;
    }
    if ((v = json_object_get(s, "exclusiveMinimum")) && json_is_number(v)) {
        if (dec_from_json(c, v, "exclusiveMinimum", &t)) return -1;
        if (!*has_lo || dcmp(&t, lo) >= 0) *lo = t, *lx = true;
        *has_lo = true;
    }
    if ((v = json_object_get(s, "maximum")) && json_is_number(v)) {
        if (dec_from_json(c, v, "maximum", hi)) return -1;
        *has_hi = true;
        json_t *e = json_object_get(s, "exclusiveMaximum");
        if (json_is_true(e)) *hx = true;
    }
    if ((v = json_object_get(s, "exclusiveMaximum")) && json_is_number(v)) {
        if (dec_from_json(c, v, "exclusiveMaximum", &t)) return -1;
        if (!*has_hi || dcmp(&t, hi) <= 0) *hi = t, *hx = true;
        *has_hi = true;
    }
    return 0;
}

/* Round a bound to the nearest integer inside the range: up for a lower
 * bound, down for an upper one; exclusive integral bounds step by one. */
static void to_int_bound(dec *d, bool excl, bool lower)
{
    bool frac = d->f[0] != 0;
    d->f[0] = 0;
    /* truncation moved the value toward zero */
    bool step_away = frac && (lower ? !d->neg : d->neg);
    bool step_in = !frac && excl;
    if (step_away || step_in) {
        /* move one unit up (lower) or down (upper) */
        bool up = lower;
        if (d->neg == !up) uinc(d->i);
        else if (!strcmp(d->i, "0")) { d->neg = !up; strcpy(d->i, "1"); }
        else udec(d->i);
    }
    if (!strcmp(d->i, "0")) d->neg = false;
}

const char *gjs_number(gjs *c, json_t *s, bool is_int)
{
    dec lo, hi;
    bool has_lo, has_hi, lx, hx;
    if (read_bounds(c, s, &lo, &has_lo, &lx, &hi, &has_hi, &hx)) return NULL;
    json_t *mo = json_object_get(s, "multipleOf");
    if (mo && json_is_number(mo)) {
        double k = json_number_value(mo);
        if (k <= 0 || k != floor(k) || k > 10000)
            return gjs_fail(c, "multipleOf %g is not supported (only a positive integer up to 10000)", k), NULL;
        if (has_lo || has_hi)
            return gjs_fail(c, "multipleOf together with minimum/maximum is not supported"), NULL;
        if (k == 1) return gjs_basic(c, "integer");
        return int_multiple(c, (long)k);
    }
    if (is_int) {
        if (has_lo) to_int_bound(&lo, lx, true);
        if (has_hi) to_int_bound(&hi, hx, false);
        if (!has_lo && !has_hi) return gjs_basic(c, "integer");
        return int_range(c, has_lo ? &lo : NULL, has_hi ? &hi : NULL);
    }
    if (!has_lo && !has_hi) return gjs_basic(c, "number");
    return num_range(c, has_lo ? &lo : NULL, lx, has_hi ? &hi : NULL, hx);
}
