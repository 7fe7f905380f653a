/* args_internal — what args.c (the core) lends the other files of
 * src/args/ (args_cli.c, args_print.c).  Not for use outside the module:
 * the public interface is args.h.
 *
 * DESIGN: one direction only: args_cli.c and args_print.c include this
 * header and call into args.c; args.c calls neither of them. */
#ifndef SGLC_ARGS_INTERNAL_H
#define SGLC_ARGS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "args/args.h"

/* A typed value in flight, converted from text but not stored yet; owns
 * s and l (freed by args_apply_tval whatever it returns). */
typedef struct args_tval {
    bool none;
    char *s;     /* STR, CHOICE, JSON: owned */
    int i;
    double f;
    bool b;
    json_t *l;   /* lists: owned JSON array */
} args_tval;

/* snprintf into err (no-op when err is NULL or errlen 0). */
void args_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

bool args_kind_is_list(enum args_kind k);

/* Full-string finite float (no leading space, no trailing junk).  False
 * on a bad number. */
bool args_parse_float(const char *s, double *out);

/* Is `s` one of the choices "a|b|c"? */
bool args_choice_ok(const char *choices, const char *s);

/* "a|b|c" as argparse shows it: "{a,b,c}" into out (size n). */
void args_choices_display(const char *choices, char *out, size_t n);

/* Convert the text form of a value (n items for lists, 1 otherwise; for
 * BOOL n == 0 means "flag present") into *out.  disp names the flag in
 * messages.  ARGS_OK, or an ARGS_E* code with the message in err (out
 * then owns nothing). */
int args_tval_from_text(const args_spec *sp, const char *disp, const char *const *vals, int n,
                        args_tval *out, char *err, size_t errlen);

/* Store a converted value into a, after the support-status gate ("not
 * supported yet" unless equal to the default; "ignored" warns), and
 * record its source.  Consumes *v.  ARGS_OK or ARGS_EUSAGE with err. */
int args_apply_tval(args_server *a, const args_spec *sp, const char *disp, args_tval *v,
                    enum args_source src, char *err, size_t errlen);

/* Iterate the flags of a spec ("--a --b"): returns the next flag word
 * (without "--") and its length in *len, or NULL at the end; *cursor
 * starts at sp->flags. */
const char *args_next_flag(const char **cursor, size_t *len);

/* "; did you mean '--x'?" for a near miss of name (nlen bytes, dashes
 * allowed) among the server flags (when `server`) and the extra options,
 * else "" (out: size n). */
void args_suggest(const char *name, size_t nlen, bool server, const args_extra *extra, char *out, size_t n);

/* Is id in ids (terminated by ARG_COUNT)? */
bool args_id_listed(const int *ids, int id);

/* Does this extra option take a value on the command line? */
bool args_extra_takes_value(const args_extra *e);

#endif
