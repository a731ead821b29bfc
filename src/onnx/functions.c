/* Model-local functions (ModelProto.functions) inlined at load, as
 * onnxruntime does (issue 18).
 *
 * Rules:
 *   which calls  a node whose (domain, op_type) names a function of the
 *                model ("" and "ai.onnx" are one domain), in the main
 *                graph or in a subgraph (If/Loop bodies: their node list
 *                is copied with the calls expanded, onnx_fn_inline_copy).
 *   the body     each node of the function is copied in the call's place,
 *                named "<call>/fn/<node>" ("<call>/fn/<Op>_<k>" when
 *                unnamed; the call itself "<Op>_<index>" when unnamed);
 *                a formal input is the call's actual input (missing: ""),
 *                a formal output the call's output, any other value
 *                "<call>/fn/<name>".
 *   attributes   one with ref_attr_name takes the call's attribute of that
 *                name, else the function's default (attribute_proto), else
 *                it is left out (as ONNX says).
 *   nesting      a copied node that calls a function is expanded in turn,
 *                at most FN_MAX_DEPTH deep; a function that calls itself
 *                (directly or through others) is refused with a sentence.
 *                A body node holding a subgraph is refused.
 *   record       every call of the main graph expanded is listed in
 *                gr_model.fn_calls (the planner shows them as
 *                "function-inline" attempts); calls inside subgraphs are not.
 * The body's opset_import is not compared with the model's. */
#include "onnx/internal.h"
#include "core/mem.h"

#include <stdio.h>
#include <string.h>

enum { FN_MAX_DEPTH = 16 };

typedef struct fn_list {
    Onnx__NodeProto **nodes;
    size_t n, cap;
} fn_list;

typedef struct fn_state {
    onnx_ctx *c;
    const Onnx__ModelProto *mp;
    const Onnx__FunctionProto *stack[FN_MAX_DEPTH + 1];
    int depth;
    int record;        /* list the calls in gr_model.fn_calls (main graph only) */
    fn_list out;
} fn_state;

static const char *dom(const char *d)
{
    return !d || strcmp(d, "ai.onnx") == 0 ? "" : d;
}

static const Onnx__FunctionProto *fn_find(const Onnx__ModelProto *mp, const Onnx__NodeProto *np)
{
    if (!np->op_type)
        return NULL;
    for (size_t k = 0; k < mp->n_functions; k++) {
        const Onnx__FunctionProto *f = mp->functions[k];
        if (f->name && strcmp(f->name, np->op_type) == 0 && strcmp(dom(f->domain), dom(np->domain)) == 0)
            return f;
    }
    return NULL;
}

static tdm_status nomem(onnx_ctx *c) { return err_set(c->e, TDM_E_NOMEM, "%s: out of memory", c->fname); }

static int push(fn_list *l, Onnx__NodeProto *np)
{
    if (mem_grow((void **)&l->nodes, &l->cap, l->n + 1, sizeof *l->nodes))
        return -1;
    l->nodes[l->n++] = np;
    return 0;
}

static void list_free(fn_list *l)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->nodes[k])
            protobuf_c_message_free_unpacked(&l->nodes[k]->base, NULL);
    mem_free(l->nodes);
    memset(l, 0, sizeof *l);
}

/* The actual name of body value name in call (prefix: the call's name); a
 * new string. */
static char *actual(const Onnx__FunctionProto *f, const Onnx__NodeProto *call, const char *prefix, const char *name)
{
    if (!name || !*name)
        return mem_strdup("");
    for (size_t i = 0; i < f->n_input; i++)
        if (strcmp(f->input[i], name) == 0)
            return mem_strdup(i < call->n_input ? call->input[i] : "");
    for (size_t j = 0; j < f->n_output; j++)
        if (strcmp(f->output[j], name) == 0 && j < call->n_output && *call->output[j])
            return mem_strdup(call->output[j]);
    size_t len = strlen(prefix) + strlen(name) + 8;
    char *b = mem_alloc(len);
    if (b)
        snprintf(b, len, "%s/fn/%s", prefix, name);
    return b;
}

static const Onnx__AttributeProto *resolve(const Onnx__FunctionProto *f, const Onnx__NodeProto *call, const char *ref)
{
    for (size_t k = 0; k < call->n_attribute; k++)
        if (call->attribute[k]->name && strcmp(call->attribute[k]->name, ref) == 0)
            return call->attribute[k];
    for (size_t k = 0; k < f->n_attribute_proto; k++)
        if (f->attribute_proto[k]->name && strcmp(f->attribute_proto[k]->name, ref) == 0)
            return f->attribute_proto[k];
    return NULL;
}

static void free_strs(char **s, size_t n)
{
    for (size_t k = 0; s && k < n; k++)
        mem_free(s[k]);
    mem_free(s);
}

/* An owned copy of view (packed, then unpacked); NULL on out of memory. */
static Onnx__NodeProto *owned_copy(const Onnx__NodeProto *view)
{
    size_t sz = protobuf_c_message_get_packed_size(&view->base);
    uint8_t *buf = mem_alloc(sz ? sz : 1);
    Onnx__NodeProto *np = NULL;
    if (buf) {
        protobuf_c_message_pack(&view->base, buf);
        np = (Onnx__NodeProto *)onnx_pb_unpack(&onnx__node_proto__descriptor, buf, sz);
    }
    mem_free(buf);
    return np;
}

/* Body node bn of f copied for call (named prefix): a new NodeProto (packed
 * from a view that borrows its strings, then unpacked: an owned copy). */
static tdm_status copy_node(fn_state *s, const Onnx__FunctionProto *f, const Onnx__NodeProto *call,
                            const char *prefix, const Onnx__NodeProto *bn, size_t index, Onnx__NodeProto **out)
{
    onnx_ctx *c = s->c;
    Onnx__NodeProto view = *bn;
    char **in = mem_calloc(bn->n_input + 1, sizeof *in), **outs = mem_calloc(bn->n_output + 1, sizeof *outs);
    Onnx__AttributeProto *attrs = mem_calloc(bn->n_attribute + 1, sizeof *attrs);
    Onnx__AttributeProto **ap = mem_calloc(bn->n_attribute + 1, sizeof *ap);
    char *name = NULL;
    tdm_status st = TDM_OK;
    size_t len = strlen(prefix) + (bn->name ? strlen(bn->name) : 0) + (bn->op_type ? strlen(bn->op_type) : 0) + 32;
    *out = NULL;
    if (!in || !outs || !attrs || !ap || !(name = mem_alloc(len)))
        goto nomem;
    if (bn->name && *bn->name)
        snprintf(name, len, "%s/fn/%s", prefix, bn->name);
    else
        snprintf(name, len, "%s/fn/%s_%zu", prefix, bn->op_type ? bn->op_type : "node", index);
    for (size_t k = 0; k < bn->n_input; k++)
        if (!(in[k] = actual(f, call, prefix, bn->input[k])))
            goto nomem;
    for (size_t k = 0; k < bn->n_output; k++)
        if (!(outs[k] = actual(f, call, prefix, bn->output[k])))
            goto nomem;
    size_t na = 0;
    for (size_t k = 0; k < bn->n_attribute; k++) {
        const Onnx__AttributeProto *a = bn->attribute[k];
        if (a->g || a->n_graphs) {
            st = err_set(c->e, TDM_E_UNSUPPORTED,
                         "%s: function '%.64s' holds a subgraph in node '%.64s' (attribute '%.64s'); "
                         "functions with subgraphs are not inlined yet",
                         c->fname, f->name, bn->name ? bn->name : "", a->name ? a->name : "");
            goto done;
        }
        if (a->ref_attr_name && *a->ref_attr_name) {
            const Onnx__AttributeProto *v = resolve(f, call, a->ref_attr_name);
            if (!v)
                continue; /* not given and no default: the attribute is absent */
            attrs[na] = *v;
            attrs[na].name = a->name;
            attrs[na].ref_attr_name = NULL;
            ap[na] = &attrs[na];
        } else {
            ap[na] = bn->attribute[k];
        }
        na++;
    }
    view.name = name;
    view.input = in;
    view.output = outs;
    view.attribute = ap;
    view.n_attribute = na;
    if (!(*out = owned_copy(&view)))
        goto nomem;
    goto done;
nomem:
    st = nomem(c);
done:
    free_strs(in, bn->n_input);
    free_strs(outs, bn->n_output);
    mem_free(attrs);
    mem_free(ap);
    mem_free(name);
    return st;
}

static tdm_status record(fn_state *s, const Onnx__FunctionProto *f, const char *call, int *slot)
{
    gr_model *m = s->c->m;
    gr_fn_call *grown = mem_realloc(m->fn_calls, ((size_t)m->n_fn_calls + 1) * sizeof *grown);
    if (!grown)
        return nomem(s->c);
    m->fn_calls = grown;
    gr_fn_call *r = &m->fn_calls[m->n_fn_calls];
    memset(r, 0, sizeof *r);
    size_t len = strlen(dom(f->domain)) + strlen(f->name) + 2;
    if (!(r->node = mem_strdup(call)) || !(r->function = mem_alloc(len))) {
        mem_free(r->node);
        return nomem(s->c);
    }
    snprintf(r->function, len, "%s%s%s", dom(f->domain), *dom(f->domain) ? ":" : "", f->name);
    r->depth = s->depth;
    *slot = m->n_fn_calls++;
    return TDM_OK;
}

/* The body of f in place of call (named prefix), into s->out. */
static tdm_status expand(fn_state *s, const Onnx__FunctionProto *f, const Onnx__NodeProto *call, const char *prefix)
{
    onnx_ctx *c = s->c;
    tdm_status st;
    int slot = 0;
    for (int d = 0; d < s->depth; d++)
        if (s->stack[d] == f)
            return err_set(c->e, TDM_E_UNSUPPORTED,
                           "%s: function '%.64s' calls itself (through node '%.200s'); recursive functions are "
                           "not supported",
                           c->fname, f->name, prefix);
    if (s->depth >= FN_MAX_DEPTH)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: node '%.200s' nests function calls more than %d deep", c->fname,
                       prefix, FN_MAX_DEPTH);
    if (s->record && (st = record(s, f, prefix, &slot)) != TDM_OK)
        return st;
    size_t before = s->out.n;
    s->stack[s->depth++] = f;
    for (size_t k = 0; k < f->n_node; k++) {
        Onnx__NodeProto *np = NULL;
        if ((st = copy_node(s, f, call, prefix, f->node[k], k, &np)) != TDM_OK)
            break;
        const Onnx__FunctionProto *g = fn_find(s->mp, np);
        if (g) {
            st = expand(s, g, np, np->name);
            protobuf_c_message_free_unpacked(&np->base, NULL);
        } else if (push(&s->out, np)) {
            protobuf_c_message_free_unpacked(&np->base, NULL);
            st = nomem(c);
        }
        if (st)
            break;
    }
    /* an output that is one of the function's inputs: an Identity */
    for (size_t j = 0; !st && j < f->n_output && j < call->n_output; j++) {
        size_t i = 0;
        while (i < f->n_input && strcmp(f->input[i], f->output[j]) != 0)
            i++;
        if (i == f->n_input || !*call->output[j])
            continue;
        Onnx__NodeProto view = ONNX__NODE_PROTO__INIT, *np;
        char name[300], *in = i < call->n_input ? call->input[i] : "", *out = call->output[j];
        snprintf(name, sizeof name, "%.200s/fn/output_%zu", prefix, j);
        view.name = name;
        view.op_type = "Identity";
        view.n_input = view.n_output = 1;
        view.input = &in;
        view.output = &out;
        if (!(np = owned_copy(&view)) || push(&s->out, np)) {
            if (np)
                protobuf_c_message_free_unpacked(&np->base, NULL);
            st = nomem(c);
        }
    }
    s->depth--;
    if (s->record)
        c->m->fn_calls[slot].n_nodes = (int)(s->out.n - before);
    return st;
}

static tdm_status check_functions(onnx_ctx *c, const Onnx__ModelProto *mp)
{
    for (size_t k = 0; k < mp->n_functions; k++) {
        const Onnx__FunctionProto *f = mp->functions[k];
        if (!f->name || !*f->name)
            return err_set(c->e, TDM_E_MODEL, "%s: function #%zu has no name", c->fname, k);
        for (size_t j = 0; j < k; j++)
            if (strcmp(mp->functions[j]->name, f->name) == 0 &&
                strcmp(dom(mp->functions[j]->domain), dom(f->domain)) == 0)
                return err_set(c->e, TDM_E_MODEL, "%s defines function '%.64s' (domain '%.64s') twice", c->fname,
                               f->name, dom(f->domain));
    }
    return TDM_OK;
}

/* The calls among nodes[0, n) expanded into s->out; own: the nodes are
 * moved there (or freed, for a call, entries set to NULL), else copied. */
static tdm_status expand_all(fn_state *s, Onnx__NodeProto **nodes, size_t n, int own)
{
    tdm_status st;
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto *np = nodes[i];
        const Onnx__FunctionProto *f = fn_find(s->mp, np);
        if (!f) {
            Onnx__NodeProto *x = own ? np : owned_copy(np);
            if (!x || push(&s->out, x)) {
                if (x && !own)
                    protobuf_c_message_free_unpacked(&x->base, NULL);
                return nomem(s->c);
            }
            if (own)
                nodes[i] = NULL;
            continue;
        }
        char unnamed[128];
        const char *prefix = np->name;
        if (!prefix || !*prefix) {
            snprintf(unnamed, sizeof unnamed, "%.64s_%zu", np->op_type, i);
            prefix = unnamed;
        }
        if ((st = expand(s, f, np, prefix)) != TDM_OK)
            return st;
        if (own) {
            protobuf_c_message_free_unpacked(&np->base, NULL);
            nodes[i] = NULL;
        }
    }
    return TDM_OK;
}

tdm_status onnx_fn_inline(onnx_ctx *c, const Onnx__ModelProto *mp, Onnx__NodeProto ***nodes, size_t *n_nodes,
                          size_t *cap_nodes)
{
    fn_state s = {c, mp, {0}, 0, 1, {0}};
    tdm_status st;
    if (!mp->n_functions)
        return TDM_OK;
    if ((st = check_functions(c, mp)) != TDM_OK || (st = expand_all(&s, *nodes, *n_nodes, 1)) != TDM_OK) {
        list_free(&s.out);
        return st;
    }
    mem_free(*nodes);
    *nodes = s.out.nodes;
    *n_nodes = s.out.n;
    *cap_nodes = s.out.cap;
    return TDM_OK;
}

tdm_status onnx_fn_inline_copy(onnx_ctx *c, const Onnx__ModelProto *mp, Onnx__NodeProto *const *nodes, size_t n,
                               Onnx__NodeProto ***out, size_t *n_out)
{
    fn_state s = {c, mp, {0}, 0, 0, {0}};
    tdm_status st;
    size_t i = 0;
    *out = NULL;
    *n_out = 0;
    while (mp && i < n && !fn_find(mp, nodes[i]))
        i++;
    if (!mp || i == n)
        return TDM_OK;
    if ((st = expand_all(&s, (Onnx__NodeProto **)nodes, n, 0)) != TDM_OK) {
        list_free(&s.out);
        return st;
    }
    *out = s.out.nodes;
    *n_out = s.out.n;
    return TDM_OK;
}

void onnx_fn_nodes_free(Onnx__NodeProto **nodes, size_t n)
{
    fn_list l = {nodes, n, n};
    list_free(&l);
}
