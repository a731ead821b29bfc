/* A small streaming JSON writer with proper string escaping (invalid UTF-8
 * becomes U+FFFD, so the output is always valid JSON). Pretty-printed with
 * two-space indentation. */
#ifndef TDM_CLI_JSON_H
#define TDM_CLI_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

typedef struct jw {
    FILE *f;
    int depth;
    int count[JW_MAX_DEPTH];  /* items written at each level */
    int inline_[JW_MAX_DEPTH]; /* level written on one line */
    int after_key;
} jw;

void jw_init(jw *w, FILE *f);
void jw_obj_begin(jw *w);
void jw_obj_end(jw *w);
void jw_arr_begin(jw *w);
void jw_arr_end(jw *w);
/* An array written on one line ([1, 2, "N"]); for short scalar lists. */
void jw_arr_begin_inline(jw *w);
void jw_key(jw *w, const char *key);
void jw_str(jw *w, const char *s); /* NULL writes null */
void jw_int(jw *w, long long v);
void jw_uint(jw *w, unsigned long long v);
void jw_num(jw *w, double v); /* NaN and infinities write null */
void jw_bool(jw *w, int v);
void jw_null(jw *w);
/* A key and its value in one call. */
void jw_kstr(jw *w, const char *key, const char *s);
void jw_kuint(jw *w, const char *key, unsigned long long v);
void jw_knum(jw *w, const char *key, double v);
/* Ends the document with a newline. */
void jw_finish(jw *w);

#endif
