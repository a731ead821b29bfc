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
 *   subgraphs    a body node's subgraph (If branches, a Loop or Scan body)
 *                is copied with every name in it renamed as the body's
 *                are: its own values (inputs, initializers, node outputs)
 *                "<call>/fn/<name>", so two calls' copies never share a
 *                name and none shadows the caller's; its references to
 *                the body's values (outer scope) what those became — a
 *                formal input the call's actual value, a formal output the
 *                call's output. A function body sees nothing but its
 *                inputs, so no name in it can mean the caller's scope:
 *                the renaming is total. Attribute references in the
 *                subgraph's nodes are resolved too; calls in it are
 *                expanded when the subgraph is loaded. A sparse
 *                initializer in such a subgraph is refused; quantization
 *                annotations are not copied.
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

/* Temporaries a view of a body node holds (freed once it is packed). */
typedef struct fn_tmp {
    void **p;
    size_t n, cap;
} fn_tmp;

/* p kept in t (freed with it); NULL when p is NULL or on out of memory. */
static void *keep(fn_tmp *t, void *p)
{
    if (p && mem_grow((void **)&t->p, &t->cap, t->n + 1, sizeof *t->p)) {
        mem_free(p);
        return NULL;
    }
    if (p)
        t->p[t->n++] = p;
    return p;
}

static void tmp_free(fn_tmp *t)
{
    for (size_t k = 0; k < t->n; k++)
        mem_free(t->p[k]);
    mem_free(t->p);
    memset(t, 0, sizeof *t);
}

/* What a view of a body node is made for: the function, the call, its
 * name, the temporaries. */
typedef struct fn_view {
    onnx_ctx *c;
    const Onnx__FunctionProto *f;
    const Onnx__NodeProto *call;
    const char *prefix;
    fn_tmp t;
} fn_view;

static Onnx__NodeProto *view_node(fn_view *v, const Onnx__NodeProto *bn, size_t index, int top, tdm_status *st);

/* names[0, n) through actual() (kept in v->t); NULL on out of memory. */
static char **view_names(fn_view *v, char *const *names, size_t n)
{
    char **out = keep(&v->t, mem_calloc(n + 1, sizeof *out));
    for (size_t k = 0; out && k < n; k++)
        if (!(out[k] = keep(&v->t, actual(v->f, v->call, v->prefix, names[k]))))
            return NULL;
    return out;
}

static Onnx__ValueInfoProto **view_infos(fn_view *v, Onnx__ValueInfoProto *const *vi, size_t n)
{
    Onnx__ValueInfoProto **out = keep(&v->t, mem_calloc(n + 1, sizeof *out));
    for (size_t k = 0; out && k < n; k++) {
        if (!(out[k] = keep(&v->t, mem_alloc(sizeof *out[k]))))
            return NULL;
        *out[k] = *vi[k];
        if (!(out[k]->name = keep(&v->t, actual(v->f, v->call, v->prefix, vi[k]->name))))
            return NULL;
    }
    return out;
}

/* A view of subgraph g of a body node: every name in it through actual()
 * — its own values (inputs, initializers, node outputs) get the call's
 * prefix as the body's do, and its references to the body's values (outer
 * scope) become what those became: a formal input the call's actual
 * input, a formal output the call's output. Nodes in it viewed in turn. */
static Onnx__GraphProto *view_graph(fn_view *v, const Onnx__GraphProto *g, tdm_status *st)
{
    Onnx__GraphProto *out = keep(&v->t, mem_alloc(sizeof *out));
    if (!out)
        return NULL;
    *out = *g;
    if (g->n_sparse_initializer) {
        *st = err_set(v->c->e, TDM_E_UNSUPPORTED,
                      "%s: function '%.64s' holds a subgraph with a sparse initializer; it is not inlined",
                      v->c->fname, v->f->name);
        return NULL;
    }
    out->n_quantization_annotation = 0; /* annotations name values; not carried into the copy */
    out->quantization_annotation = NULL;
    if (!(out->node = keep(&v->t, mem_calloc(g->n_node + 1, sizeof *out->node))) ||
        !(out->input = view_infos(v, g->input, g->n_input)) || !(out->output = view_infos(v, g->output, g->n_output)) ||
        !(out->value_info = view_infos(v, g->value_info, g->n_value_info)) ||
        !(out->initializer = keep(&v->t, mem_calloc(g->n_initializer + 1, sizeof *out->initializer))))
        return NULL;
    for (size_t k = 0; k < g->n_initializer; k++) {
        if (!(out->initializer[k] = keep(&v->t, mem_alloc(sizeof *out->initializer[k]))))
            return NULL;
        *out->initializer[k] = *g->initializer[k];
        if (!(out->initializer[k]->name = keep(&v->t, actual(v->f, v->call, v->prefix, g->initializer[k]->name))))
            return NULL;
    }
    for (size_t k = 0; k < g->n_node; k++)
        if (!(out->node[k] = view_node(v, g->node[k], k, 0, st)))
            return NULL;
    return out;
}

/* A view of body node bn (of the body itself: top, or of one of its
 * subgraphs) for the call: named "<call>/fn/<node>" (an unnamed node of
 * the body "<call>/fn/<Op>_<index>", of a subgraph left unnamed), values
 * through actual(), attribute references resolved, subgraphs viewed.
 * NULL with *st set (out of memory, or a refusal). */
static Onnx__NodeProto *view_node(fn_view *v, const Onnx__NodeProto *bn, size_t index, int top, tdm_status *st)
{
    Onnx__NodeProto *view = keep(&v->t, mem_alloc(sizeof *view));
    size_t len = strlen(v->prefix) + (bn->name ? strlen(bn->name) : 0) + (bn->op_type ? strlen(bn->op_type) : 0) + 32;
    char *name = keep(&v->t, mem_alloc(len));
    Onnx__AttributeProto *attrs = keep(&v->t, mem_calloc(bn->n_attribute + 1, sizeof *attrs));
    Onnx__AttributeProto **ap = keep(&v->t, mem_calloc(bn->n_attribute + 1, sizeof *ap));
    *st = TDM_OK;
    if (!view || !name || !attrs || !ap)
        goto nomem;
    *view = *bn;
    if (bn->name && *bn->name)
        snprintf(name, len, "%s/fn/%s", v->prefix, bn->name);
    else if (top)
        snprintf(name, len, "%s/fn/%s_%zu", v->prefix, bn->op_type ? bn->op_type : "node", index);
    else
        name[0] = '\0';
    if (!(view->input = view_names(v, bn->input, bn->n_input)) ||
        !(view->output = view_names(v, bn->output, bn->n_output)))
        goto nomem;
    size_t na = 0;
    for (size_t k = 0; k < bn->n_attribute; k++) {
        const Onnx__AttributeProto *a = bn->attribute[k];
        if (a->ref_attr_name && *a->ref_attr_name) {
            const Onnx__AttributeProto *r = resolve(v->f, v->call, a->ref_attr_name);
            if (!r)
                continue; /* not given and no default: the attribute is absent */
            attrs[na] = *r;
            attrs[na].name = a->name;
            attrs[na].ref_attr_name = NULL;
        } else {
            attrs[na] = *a;
        }
        if (attrs[na].g && !(attrs[na].g = view_graph(v, attrs[na].g, st)))
            goto fail;
        if (attrs[na].n_graphs) {
            Onnx__GraphProto **gs = keep(&v->t, mem_calloc(attrs[na].n_graphs + 1, sizeof *gs));
            if (!gs)
                goto nomem;
            for (size_t j = 0; j < attrs[na].n_graphs; j++)
                if (!(gs[j] = view_graph(v, attrs[na].graphs[j], st)))
                    goto fail;
            attrs[na].graphs = gs;
        }
        ap[na] = &attrs[na];
        na++;
    }
    view->name = name;
    view->attribute = ap;
    view->n_attribute = na;
    return view;
nomem:
    *st = nomem(v->c);
    return NULL;
fail:
    if (!*st)
        *st = nomem(v->c);
    return NULL;
}

/* Body node bn of f copied for call (named prefix): a new NodeProto (packed
 * from a view that borrows its strings, then unpacked: an owned copy). */
static tdm_status copy_node(fn_state *s, const Onnx__FunctionProto *f, const Onnx__NodeProto *call,
                            const char *prefix, const Onnx__NodeProto *bn, size_t index, Onnx__NodeProto **out)
{
    fn_view v = {s->c, f, call, prefix, {0}};
    tdm_status st;
    Onnx__NodeProto *view = view_node(&v, bn, index, 1, &st);
    *out = NULL;
    if (view && !(*out = owned_copy(view)))
        st = nomem(s->c);
    tmp_free(&v.t);
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
