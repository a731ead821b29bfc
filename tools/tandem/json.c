/* A small streaming JSON writer. */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void jw_init(jw *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
}

static void indent(jw *w)
{
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
}

/* Separator and indentation before a value or a key. */
static void before_item(jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth > 0) {
        int lvl = w->depth - 1 < JW_MAX_DEPTH ? w->depth - 1 : JW_MAX_DEPTH - 1;
        if (w->count[lvl]++ > 0)
            fputs(w->inline_[lvl] ? ", " : ",", w->f);
        if (!w->inline_[lvl])
            indent(w);
    }
}

static void jw_open(jw *w, char c, int inl)
{
    before_item(w);
    fputc(c, w->f);
    if (w->depth < JW_MAX_DEPTH) {
        w->count[w->depth] = 0;
        /* Inside a one-line array everything stays on the line. */
        w->inline_[w->depth] = inl || (w->depth > 0 && w->inline_[w->depth - 1]);
    }
    w->depth++;
}

static void jw_close(jw *w, char c)
{
    w->depth--;
    int lvl = w->depth < JW_MAX_DEPTH ? w->depth : JW_MAX_DEPTH - 1;
    if (w->count[lvl] > 0 && !w->inline_[lvl])
        indent(w);
    fputc(c, w->f);
}

void jw_obj_begin(jw *w) { jw_open(w, '{', 0); }
void jw_obj_end(jw *w) { jw_close(w, '}'); }
void jw_arr_begin(jw *w) { jw_open(w, '[', 0); }
void jw_arr_begin_inline(jw *w) { jw_open(w, '[', 1); }
void jw_arr_end(jw *w) { jw_close(w, ']'); }

/* Length of a valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    uint32_t v;
    if (c < 0x80)
        return 1;
    if ((c >> 5) == 6) {
        n = 2;
        v = c & 0x1F;
    } else if ((c >> 4) == 14) {
        n = 3;
        v = c & 0x0F;
    } else if ((c >> 3) == 30) {
        n = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[k] & 0x3F);
    }
    /* Overlong forms, surrogates and values beyond U+10FFFF are invalid. */
    if ((n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    return n;
}

static void put_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            s++;
        } else if (c < 0x20 || c == 0x7F) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\r': fputs("\\r", f); break;
            case '\t': fputs("\\t", f); break;
            case '\b': fputs("\\b", f); break;
            case '\f': fputs("\\f", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            s++;
        } else if (c < 0x80) {
            fputc((int)c, f);
            s++;
        } else {
            size_t n = utf8_len(s);
            if (n == 0) {
                fputs("\\ufffd", f);
                s++;
            } else {
                fwrite(s, 1, n, f);
                s += n;
            }
        }
    }
    fputc('"', f);
}

void jw_key(jw *w, const char *key)
{
    before_item(w);
    put_string(w->f, key ? key : "");
    fputs(": ", w->f);
    w->after_key = 1;
}

void jw_str(jw *w, const char *s)
{
    before_item(w);
    if (s)
        put_string(w->f, s);
    else
        fputs("null", w->f);
}

void jw_int(jw *w, long long v)
{
    before_item(w);
    fprintf(w->f, "%lld", v);
}

void jw_uint(jw *w, unsigned long long v)
{
    before_item(w);
    fprintf(w->f, "%llu", v);
}

void jw_num(jw *w, double v)
{
    before_item(w);
    if (isnan(v) || isinf(v))
        fputs("null", w->f);
    else {
        /* The shortest of %.15g / %.17g that reads back exactly. */
        char buf[40];
        snprintf(buf, sizeof buf, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, sizeof buf, "%.17g", v);
        fputs(buf, w->f);
    }
}

void jw_bool(jw *w, int v)
{
    before_item(w);
    fputs(v ? "true" : "false", w->f);
}

void jw_null(jw *w)
{
    before_item(w);
    fputs("null", w->f);
}

void jw_kstr(jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    jw_str(w, s);
}

void jw_kuint(jw *w, const char *key, unsigned long long v)
{
    jw_key(w, key);
    jw_uint(w, v);
}

void jw_knum(jw *w, const char *key, double v)
{
    jw_key(w, key);
    jw_num(w, v);
}

void jw_finish(jw *w) { fputc('\n', w->f); }
