/* Static types: the small algebra the inference driver and the infer hooks
 * share (unknown, from a constant, merge, printing). */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

void gr_type_unknown(gr_type *t)
{
    memset(t, 0, sizeof *t);
    t->kind = TDM_KIND_TENSOR;
    t->dtype = TDM_UNDEFINED;
    t->rank = -1;
}

void gr_type_from_tensor(gr_type *t, const tdm_tensor *v)
{
    gr_type_unknown(t);
    if (!v)
        return;
    t->kind = v->kind;
    t->dtype = v->dtype;
    if (v->kind == TDM_KIND_TENSOR) {
        t->rank = v->rank;
        for (int i = 0; i < v->rank && i < TDM_MAX_RANK; i++)
            t->dims[i] = (gr_dim){v->dims[i], NULL};
    } else if (v->kind == TDM_KIND_NONE) {
        t->optional = 1;
    } else if (v->kind == TDM_KIND_MAP && v->n_items == 2) {
        t->map_key = v->items[0]->dtype;
    } else if (v->kind == TDM_KIND_SEQUENCE && v->n_items && v->items[0]->kind == TDM_KIND_MAP &&
               v->items[0]->n_items == 2) {
        t->map_key = v->items[0]->items[0]->dtype;
    }
}

int gr_type_is_unknown(const gr_type *t) { return t->dtype == TDM_UNDEFINED && t->rank < 0; }

int gr_type_static_dims(const gr_type *t, int64_t *dims)
{
    if (t->kind != TDM_KIND_TENSOR || t->rank < 0 || t->rank > TDM_MAX_RANK)
        return -1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i].v < 0)
            return -1;
        if (dims)
            dims[i] = t->dims[i].v;
    }
    return 0;
}

int gr_type_merge(gr_type *a, const gr_type *b)
{
    if (gr_type_is_unknown(b)) {
        a->optional |= b->optional;
        return 0;
    }
    if (gr_type_is_unknown(a)) {
        int opt = a->optional;
        *a = *b;
        a->optional |= opt;
        return 0;
    }
    if (a->kind != b->kind && a->kind != TDM_KIND_NONE && b->kind != TDM_KIND_NONE)
        return -1;
    if (a->dtype != TDM_UNDEFINED && b->dtype != TDM_UNDEFINED && a->dtype != b->dtype)
        return -1;
    if (a->map_key != TDM_UNDEFINED && b->map_key != TDM_UNDEFINED && a->map_key != b->map_key)
        return -1;
    if (a->map_key == TDM_UNDEFINED)
        a->map_key = b->map_key;
    if (a->rank >= 0 && b->rank >= 0 && a->rank != b->rank)
        return -1;
    for (int i = 0; a->rank >= 0 && b->rank >= 0 && i < a->rank; i++)
        if (a->dims[i].v >= 0 && b->dims[i].v >= 0 && a->dims[i].v != b->dims[i].v)
            return -1;
    /* No contradiction: take what b knows and a does not. */
    if (a->kind == TDM_KIND_NONE && b->kind != TDM_KIND_NONE)
        a->kind = b->kind;
    if (a->dtype == TDM_UNDEFINED)
        a->dtype = b->dtype;
    if (a->rank < 0 && b->rank >= 0) {
        a->rank = b->rank;
        memcpy(a->dims, b->dims, sizeof(gr_dim) * (size_t)b->rank);
    } else if (b->rank >= 0) {
        for (int i = 0; i < a->rank; i++) {
            if (a->dims[i].v < 0 && b->dims[i].v >= 0)
                a->dims[i] = b->dims[i];
            else if (a->dims[i].v < 0 && !a->dims[i].sym && b->dims[i].sym)
                a->dims[i].sym = b->dims[i].sym;
        }
    }
    a->optional |= b->optional;
    return 0;
}

const char *gr_type_str(const gr_type *t, char *buf, size_t size)
{
    size_t off = 0;
    int n;
    if (!size)
        return buf;
    buf[0] = '\0';
    if (t->kind == TDM_KIND_NONE && t->dtype == TDM_UNDEFINED) {
        snprintf(buf, size, "none");
        return buf;
    }
    if (t->map_key != TDM_UNDEFINED) {
        snprintf(buf, size, "%smap(%s,%s)", t->kind == TDM_KIND_SEQUENCE ? "seq " : "", tdm_dtype_name(t->map_key),
                 t->dtype == TDM_UNDEFINED ? "?" : tdm_dtype_name(t->dtype));
        return buf;
    }
    n = snprintf(buf, size, "%s%s", t->kind == TDM_KIND_SEQUENCE ? "seq " : "",
                 t->dtype == TDM_UNDEFINED ? "?" : tdm_dtype_name(t->dtype));
    if (n < 0 || (size_t)n >= size)
        return buf;
    off = (size_t)n;
    if (t->rank < 0) {
        snprintf(buf + off, size - off, "[?]");
        return buf;
    }
    n = snprintf(buf + off, size - off, "[");
    for (int i = 0; n >= 0 && off + (size_t)n < size && i < t->rank; i++) {
        off += (size_t)n;
        if (t->dims[i].v >= 0)
            n = snprintf(buf + off, size - off, i ? ",%lld" : "%lld", (long long)t->dims[i].v);
        else
            n = snprintf(buf + off, size - off, i ? ",%s" : "%s", t->dims[i].sym ? t->dims[i].sym : "?");
    }
    if (n >= 0 && off + (size_t)n < size) {
        off += (size_t)n;
        snprintf(buf + off, size - off, "]");
    }
    return buf;
}
