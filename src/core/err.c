#include "core/err.h"
#include "core/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------- shortening values */

/* A value longer than VALUE_MAX bytes keeps its first KEEP_HEAD and last
 * KEEP_TAIL bytes around an ellipsis: enough to recognise a path or a name,
 * short enough that the sentence's reason stays within ~200 characters. */
#define VALUE_MAX 64
#define KEEP_HEAD 40
#define KEEP_TAIL 20
#define ELLIPSIS "\xe2\x80\xa6" /* U+2026 */

typedef struct sbuf {
    char *d;
    size_t size, len; /* len < size always */
} sbuf;

static int is_cont(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->len + n >= b->size) { /* full: cut before a whole character */
        n = b->size - 1 - b->len;
        while (n > 0 && is_cont(s[n]))
            n--;
    }
    memcpy(b->d + b->len, s, n);
    b->len += n;
    b->d[b->len] = '\0';
}

/* s[0, n): verbatim when short, else head + "…" + tail, cut at UTF-8
 * character boundaries. */
static void put_value(sbuf *b, const char *s, size_t n)
{
    if (n <= VALUE_MAX) {
        put(b, s, n);
        return;
    }
    size_t h = KEEP_HEAD, t = n - KEEP_TAIL;
    while (h > 0 && is_cont(s[h]))
        h--;
    while (t < n && is_cont(s[t]))
        t++;
    put(b, s, h);
    put(b, ELLIPSIS, sizeof ELLIPSIS - 1);
    put(b, s + t, n - t);
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t'; }
/* what may stand before an opening quote and after a closing one */
static int opens(char c) { return is_space(c) || c == '(' || c == '[' || c == '=' || c == ',' || c == ':'; }
static int closes(char c) { return c == '\0' || is_space(c) || strchr(",.:;)]!?", c) != NULL; }

/* The closing quote of the quote at s[i], or 0 when s[i] opens none. */
static size_t quote_end(const char *s, size_t i)
{
    char q = s[i];
    if ((q != '\'' && q != '"') || (i > 0 && !opens(s[i - 1])))
        return 0;
    for (size_t j = i + 1; s[j]; j++)
        if (s[j] == q && closes(s[j + 1]))
            return j;
    return 0;
}

size_t tdm_sentence_shorten(char *dst, size_t size, const char *sentence)
{
    if (!dst || size == 0)
        return 0;
    sbuf b = {dst, size, 0};
    dst[0] = '\0';
    if (!sentence)
        return 0;
    const char *s = sentence;
    size_t i = 0;
    while (s[i]) {
        size_t j = quote_end(s, i);
        if (j) { /* a quoted value: shorten inside the quotes */
            put(&b, s + i, 1);
            put_value(&b, s + i + 1, j - i - 1);
            put(&b, s + j, 1);
            i = j + 1;
        } else if (is_space(s[i])) {
            put(&b, s + i, 1);
            i++;
        } else { /* a run without spaces, up to a quoted value */
            size_t k = i + 1;
            while (s[k] && !is_space(s[k]) && !quote_end(s, k))
                k++;
            put_value(&b, s + i, k - i);
            i = k;
        }
    }
    return b.len;
}

/* vsnprintf into stack (of n bytes) or, when it does not fit, into a new
 * buffer (freed by the caller when the result is not stack); a sentence
 * that cannot be allocated is cut at n - 1 bytes. */
static char *vformat(char *stack, size_t n, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int need = vsnprintf(stack, n, fmt, ap);
    char *big = NULL;
    if (need >= 0 && (size_t)need >= n && (big = mem_alloc((size_t)need + 1)) != NULL)
        vsnprintf(big, (size_t)need + 1, fmt, ap2);
    va_end(ap2);
    return big ? big : stack;
}

tdm_status err_set(tdm_err *e, tdm_status status, const char *fmt, ...)
{
    if (!e)
        return status;
    e->status = status;
    char stack[TDM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    char *full = vformat(stack, sizeof stack, fmt, ap);
    va_end(ap);
    tdm_sentence_shorten(e->msg, sizeof e->msg, full);
    if (full != stack)
        mem_free(full);
    return status;
}

void err_prefix(tdm_err *e, const char *fmt, ...)
{
    if (!e)
        return;
    char stack[TDM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    char *head = vformat(stack, sizeof stack, fmt, ap);
    va_end(ap);
    /* e->msg is short already; only a long head needs the heap */
    char joined[2 * TDM_ERR_MAX];
    size_t hl = strlen(head), ol = strlen(e->msg);
    char *both = hl + ol < sizeof joined ? joined : mem_alloc(hl + ol + 1);
    if (both) {
        memcpy(both, head, hl);
        memcpy(both + hl, e->msg, ol + 1);
        tdm_sentence_shorten(e->msg, sizeof e->msg, both);
        if (both != joined)
            mem_free(both);
    }
    if (head != stack)
        mem_free(head);
}

void err_clear(tdm_err *e)
{
    if (!e)
        return;
    e->status = TDM_OK;
    e->msg[0] = '\0';
}

const char *tdm_status_str(tdm_status status)
{
    /* No default: the compiler flags a status missing here. */
    switch (status) {
    case TDM_OK: return "TDM_OK";
    case TDM_E_USAGE: return "TDM_E_USAGE";
    case TDM_E_MODEL: return "TDM_E_MODEL";
    case TDM_E_UNSUPPORTED: return "TDM_E_UNSUPPORTED";
    case TDM_E_INPUT: return "TDM_E_INPUT";
    case TDM_E_IO: return "TDM_E_IO";
    case TDM_E_NOMEM: return "TDM_E_NOMEM";
    case TDM_E_DEVICE: return "TDM_E_DEVICE";
    case TDM_E_POLICY: return "TDM_E_POLICY";
    case TDM_E_RUNTIME: return "TDM_E_RUNTIME";
    case TDM_E_INTERNAL: return "TDM_E_INTERNAL";
    }
    return "TDM_E_UNKNOWN";
}
