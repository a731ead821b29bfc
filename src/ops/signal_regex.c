/* RegexFullMatch (opset 20): whether each string matches an RE2 pattern
 * as a whole. The pattern is translated to a POSIX extended expression and
 * run by the C library's regex (glibc's, with its \b and \B word
 * boundaries). What the translation cannot express the same way is
 * refused with a sentence, never matched differently: flags and
 * look-arounds ((?...) other than (?:), \p, \x, \Q, \A, \z, back-references,
 * \D, \S or \W inside a bracket, and strings with bytes beyond ASCII
 * (RE2 matches UTF-8 characters where the C locale sees bytes); so are the
 * forms RE2 and the ONNX reference (Python's re) read differently: [:alpha:]
 * classes and braces that start no repetition. Lazy quantifiers become
 * greedy ones (the same full matches). */
#include "ops/signal.h"
#include "core/mem.h"

#include <regex.h>
#include <stdio.h>
#include <string.h>

typedef struct rx_buf {
    char *s;
    size_t n, cap;
} rx_buf;

static int rx_put(rx_buf *b, const char *s)
{
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        size_t cap = (b->n + k + 1) * 2;
        char *p = mem_realloc(b->s, cap);
        if (!p)
            return -1;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
    return 0;
}

static int rx_putc(rx_buf *b, char c)
{
    char s[2] = {c, 0};
    return rx_put(b, s);
}

/* A valid RE2 repetition {n}, {n,} or {n,m} at p; its length, else 0. */
static size_t rx_repeat(const char *p)
{
    const char *q = p + 1;
    if (*q < '0' || *q > '9')
        return 0;
    while (*q >= '0' && *q <= '9')
        q++;
    if (*q == ',') {
        q++;
        while (*q >= '0' && *q <= '9')
            q++;
    }
    return *q == '}' ? (size_t)(q - p + 1) : 0;
}

/* The bracket expression at *pp ('[' ... ']') into b; advances *pp. */
static int rx_bracket(const char **pp, rx_buf *b, const char **why)
{
    const char *p = *pp + 1;
    int neg = *p == '^', rbr = 0, dash = 0, caret = 0;
    rx_buf body = {0};
    if (neg)
        p++;
    if (*p == ']') {
        rbr = 1;
        p++;
    }
    int rc = 0;
    for (; *p && *p != ']' && !rc; p++) {
        if (p[0] == '[' && p[1] == ':') {
            /* RE2 reads [:alpha:] as a class, the ONNX reference (Python's re) as characters */
            *why = "a [:class:] (RE2 and the ONNX reference read it differently)";
            rc = 1;
            break;
        }
        if (*p == '\\') {
            char c = *++p;
            const char *cls = c == 'd' ? "[:digit:]" : c == 's' ? "[:space:]" : c == 'w' ? "[:alnum:]_" : NULL;
            if (cls) {
                rc = rx_put(&body, cls) ? -1 : 0;
            } else if (c == ']') {
                rbr = 1;
            } else if (c == '-') {
                dash = 1;
            } else if (c == '^') {
                caret = 1;
            } else if (c == 'n' || c == 't' || c == 'r' || c == 'f' || c == 'v') {
                rc = rx_putc(&body, c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'f' ? '\f' : '\v') ? -1 : 0;
            } else if (c && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
                rc = rx_putc(&body, c) ? -1 : 0; /* an escaped punctuation character is itself */
            } else {
                *why = "an escape inside a bracket expression that POSIX cannot express";
                rc = 1;
            }
            continue;
        }
        if (*p == '-' && (p[1] == ']' || p == *pp + 1 + neg + rbr)) {
            dash = 1;
            continue;
        }
        if (*p == '^') {
            caret = 1;
            continue;
        }
        rc = rx_putc(&body, *p) ? -1 : 0;
    }
    if (!rc && *p != ']') {
        *why = "an unterminated bracket expression";
        rc = 1;
    }
    if (!rc && !body.n && !rbr && !dash && !caret) {
        *why = "an empty bracket expression";
        rc = 1;
    }
    if (!rc && (rx_put(b, neg ? "[^" : "[") || (rbr && rx_putc(b, ']')) || (body.n && rx_put(b, body.s)) ||
                (caret && rx_putc(b, '^')) || (dash && rx_putc(b, '-')) || rx_putc(b, ']')))
        rc = -1;
    mem_free(body.s);
    *pp = p;
    return rc;
}

/* RE2 pattern → POSIX ERE matching the whole string. Returns 0, -1 when
 * out of memory, 1 with *why for what cannot be translated. */
static int rx_translate(const char *re, rx_buf *b, const char **why)
{
    if (rx_put(b, "^("))
        return -1;
    int after_quant = 0;
    for (const char *p = re; *p; p++) {
        int rc = 0, quant = 0;
        char c = *p;
        if (c == '\\') {
            char e = *++p;
            const char *map = e == 'd' ? "[0-9]" : e == 'D' ? "[^0-9]" : e == 's' ? "[[:space:]]"
                            : e == 'S' ? "[^[:space:]]" : e == 'w' ? "[[:alnum:]_]" : e == 'W' ? "[^[:alnum:]_]"
                            : e == 'b' ? "\\b" : e == 'B' ? "\\B" : e == 'n' ? "\n" : e == 't' ? "\t"
                            : e == 'r' ? "\r" : e == 'f' ? "\f" : e == 'v' ? "\v" : NULL;
            if (map) {
                rc = rx_put(b, map);
            } else if (e && strchr(".[]()*+?{}|^$\\", e)) {
                char s[3] = {'\\', e, 0};
                rc = rx_put(b, s);
            } else if (e && !((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))) {
                rc = rx_putc(b, e);
            } else {
                *why = e ? "an escape (\\p, \\x, \\Q, \\A, \\z or a back-reference) POSIX cannot express"
                         : "a trailing backslash";
                return 1;
            }
        } else if (c == '[') {
            rc = rx_bracket(&p, b, why);
        } else if (c == '(' && p[1] == '?') {
            if (p[2] != ':') {
                *why = "a group with flags or a look-around ((?...))";
                return 1;
            }
            p += 2;
            rc = rx_putc(b, '(');
        } else if (c == '.') {
            rc = rx_put(b, "[^\n]"); /* RE2's . does not match a newline */
        } else if (c == '?' && after_quant) {
            continue; /* lazy: the same full matches */
        } else if (c == '{') {
            size_t k = rx_repeat(p);
            if (k) {
                char rep[64];
                if (k >= sizeof rep) {
                    *why = "a repetition count too long";
                    return 1;
                }
                memcpy(rep, p, k);
                rep[k] = 0;
                rc = rx_put(b, rep);
                p += k - 1;
                quant = 1;
            } else {
                /* RE2 reads x{,2} as text, the ONNX reference (Python's re) as a repetition */
                *why = "a brace that starts no {n}, {n,} or {n,m} repetition";
                return 1;
            }
        } else {
            quant = c == '*' || c == '+' || c == '?';
            rc = rx_putc(b, c);
        }
        if (rc)
            return rc;
        after_quant = quant;
    }
    return rx_put(b, ")$") ? -1 : 0;
}

tdm_status op_run_RegexFullMatch(op_ctx *ctx)
{
    const tdm_tensor *x = ctx->in[0];
    if (!x || x->kind != TDM_KIND_TENSOR || x->dtype != TDM_STRING)
        return op_fail(ctx, TDM_E_RUNTIME, "input X must be a string tensor");
    const char *pat = gr_attr_str(ctx->node, "pattern", NULL);
    if (!pat)
        return op_fail(ctx, TDM_E_MODEL, "attribute pattern is missing");
    rx_buf b = {0};
    const char *why = NULL;
    int rc = rx_translate(pat, &b, &why);
    if (rc) {
        mem_free(b.s);
        return rc < 0 ? op_fail(ctx, TDM_E_NOMEM, "out of memory")
                      : op_fail(ctx, TDM_E_UNSUPPORTED, "pattern '%s' has %s", pat, why);
    }
    regex_t re;
    int err = regcomp(&re, b.s, REG_EXTENDED | REG_NOSUB);
    mem_free(b.s);
    if (err) {
        char msg[128];
        regerror(err, &re, msg, sizeof msg);
        return op_fail(ctx, TDM_E_MODEL, "pattern '%s' is not a valid expression: %s", pat, msg);
    }
    tdm_status st = op_out(ctx, 0, TDM_BOOL, x->rank, x->dims);
    char *const *s = x->data;
    for (size_t i = 0; !st && i < x->count; i++) {
        const char *v = s[i] ? s[i] : "";
        for (const unsigned char *q = (const unsigned char *)v; *q && !st; q++)
            if (*q >= 0x80)
                st = op_fail(ctx, TDM_E_UNSUPPORTED,
                             "string %zu has bytes beyond ASCII, which the POSIX matcher would not read as RE2 does",
                             i);
        if (!st)
            ((uint8_t *)ctx->out[0]->data)[i] = regexec(&re, v, 0, NULL, 0) == 0;
    }
    regfree(&re);
    return st;
}

tdm_status op_infer_RegexFullMatch(op_infer_ctx *ctx)
{
    op_infer_copy(ctx, 0, 0);
    ctx->out[0].kind = TDM_KIND_TENSOR;
    ctx->out[0].dtype = TDM_BOOL;
    return TDM_OK;
}
