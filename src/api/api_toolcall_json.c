/* api_toolcall_json — an incremental (push) JSON value validator for the
 * tool-call parsers' argument values (api_toolcall_impl.h tc_jpush).
 *
 * DESIGN: a byte-at-a-time state machine with a container stack, so a
 * value streamed in N chunks costs O(its length), not O(length * N) as a
 * rescan would; its verdict on every byte depends only on the bytes
 * before it, so any split of the input gives the same end or error
 * position.  A number is complete when the byte after it arrives (or at
 * final, when it ends the input). */
#include "api/api_toolcall_impl.h"

#include <string.h>

enum {
    J_VALUE = 0, J_OBJ_FIRST, J_OBJ_KEY, J_COLON, J_ARR_FIRST, J_AFTER, J_STR, J_ESC, J_HEX, J_NUM, J_LIT, J_DONE
};
/* number sub-states: after '-', after a leading 0, in the integer, after
 * '.', in the fraction, after 'e', after the exponent sign, in the exponent */
enum { N_SIGN = 0, N_ZERO, N_INT, N_FRAC0, N_FRAC, N_EXP0, N_EXPSIGN, N_EXP };

static bool jws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool num_terminal(int sub) { return sub == N_ZERO || sub == N_INT || sub == N_FRAC || sub == N_EXP; }

void tc_jpush_init(tc_jpush *j) { memset(j, 0, sizeof *j); }

/* A value just ended: the container continues, or the top value is done. */
static void value_end(tc_jpush *j) { j->st = j->depth ? J_AFTER : J_DONE; }

int tc_jpush_feed(tc_jpush *j, const char *s, size_t n, bool final, size_t *used)
{
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        switch (j->st) {
        case J_DONE: *used = i; return 1;
        case J_VALUE:
            if (jws(c)) break;
            if (c == '"') j->st = J_STR, j->key = false;
            else if (c == '{' || c == '[') {
                if (j->depth >= (int)sizeof j->stk) goto bad;
                j->stk[j->depth++] = c == '{' ? 'o' : 'a';
                j->st = c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
            } else if (c == '-') j->st = J_NUM, j->sub = N_SIGN;
            else if (digit(c)) j->st = J_NUM, j->sub = c == '0' ? N_ZERO : N_INT;
            else if (c == 't' || c == 'f' || c == 'n') {
                j->lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
                j->st = J_LIT, j->sub = 1;
            } else goto bad;
            break;
        case J_OBJ_FIRST:
            if (jws(c)) break;
            if (c == '}') {
                j->depth--;
                value_end(j);
            } else if (c == '"') j->st = J_STR, j->key = true;
            else goto bad;
            break;
        case J_OBJ_KEY:
            if (jws(c)) break;
            if (c != '"') goto bad;
            j->st = J_STR, j->key = true;
            break;
        case J_COLON:
            if (jws(c)) break;
            if (c != ':') goto bad;
            j->st = J_VALUE;
            break;
        case J_ARR_FIRST:
            if (jws(c)) break;
            if (c == ']') {
                j->depth--;
                value_end(j);
                break;
            }
            j->st = J_VALUE;
            continue; /* this byte begins the first element */
        case J_AFTER:
            if (jws(c)) break;
            if (c == ',') j->st = j->stk[j->depth - 1] == 'o' ? J_OBJ_KEY : J_VALUE;
            else if ((c == '}' && j->stk[j->depth - 1] == 'o') || (c == ']' && j->stk[j->depth - 1] == 'a')) {
                j->depth--;
                value_end(j);
            } else goto bad;
            break;
        case J_STR:
            if (c == '"') {
                if (j->key) j->st = J_COLON;
                else value_end(j);
            } else if (c == '\\') j->st = J_ESC;
            else if ((unsigned char)c < 0x20) goto bad;
            break;
        case J_ESC:
            if (c == 'u') j->st = J_HEX, j->sub = 0;
            else if (c && strchr("\"\\/bfnrt", c)) j->st = J_STR;
            else goto bad;
            break;
        case J_HEX:
            if (!(digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) goto bad;
            if (++j->sub == 4) j->st = J_STR;
            break;
        case J_LIT:
            if (c != j->lit[j->sub]) goto bad;
            if (!j->lit[++j->sub]) value_end(j);
            break;
        case J_NUM:
            switch (j->sub) {
            case N_SIGN:
                if (!digit(c)) goto bad;
                j->sub = c == '0' ? N_ZERO : N_INT;
                break;
            case N_ZERO:
            case N_INT:
                if (digit(c) && j->sub == N_INT) break;
                if (c == '.') j->sub = N_FRAC0;
                else if (c == 'e' || c == 'E') j->sub = N_EXP0;
                else goto num_end;
                break;
            case N_FRAC0:
                if (!digit(c)) goto bad;
                j->sub = N_FRAC;
                break;
            case N_FRAC:
                if (digit(c)) break;
                if (c == 'e' || c == 'E') j->sub = N_EXP0;
                else goto num_end;
                break;
            case N_EXP0:
                if (c == '+' || c == '-') j->sub = N_EXPSIGN;
                else if (digit(c)) j->sub = N_EXP;
                else goto bad;
                break;
            case N_EXPSIGN:
                if (!digit(c)) goto bad;
                j->sub = N_EXP;
                break;
            case N_EXP:
                if (!digit(c)) goto num_end;
                break;
            }
            break;
        num_end: /* the byte after the number: the number ends, the byte is seen again */
            value_end(j);
            continue;
        }
        i++;
    }
    if (j->st == J_DONE) {
        *used = n;
        return 1;
    }
    if (final && j->st == J_NUM && j->depth == 0 && num_terminal(j->sub)) {
        j->st = J_DONE;
        *used = n;
        return 1;
    }
    *used = n;
    return 0;
bad:
    *used = i;
    return -1;
}
