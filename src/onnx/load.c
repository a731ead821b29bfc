/* ONNX model → graph IR.
 *
 * The model is not unpacked in one piece: protobuf-c copies every `bytes`
 * field, which would hold the weights twice. The ModelProto and its main
 * GraphProto are walked on the wire (after onnx_pb_check has vetted the
 * framing and nesting). Each initializer is unpacked on its own; its
 * raw_data stays in the file's mapping when onnx_can_map allows (paged in
 * only when a kernel reads it, dropped again once a kernel has packed it:
 * core/file.h file_map), else is read with pread() straight into the
 * buffer the tensor keeps;
 * each main-graph node (Constant nodes hold weights too) is unpacked on its
 * own and freed once converted; the file's pages are dropped as they are
 * consumed. The rest of both messages is unpacked from small copies. Peak
 * memory stays close to the size of the weights (resnet18: 1.01x). */
#include "onnx/internal.h"
#include "core/mem.h"
#include "ops/op.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* A growable byte buffer for the filtered copies. */
typedef struct bytebuf {
    uint8_t *p;
    size_t n, cap;
} bytebuf;

static int buf_put(bytebuf *b, const uint8_t *src, size_t n)
{
    size_t need;
    if (n == 0)
        return 0;
    if (mem_add(b->n, n, &need) || mem_grow((void **)&b->p, &b->cap, need, 1))
        return -1;
    memcpy(b->p + b->n, src, n);
    b->n = need;
    return 0;
}

/* An initializer converted before its graph is built. */
typedef struct pre_init {
    char *name;
    tdm_tensor *t;
} pre_init;

typedef struct load_state {
    onnx_ctx c;
    const uint8_t *data;
    size_t size;
    int mapped;
    file_map *map;      /* the model file's mapping, when mapped: raw data
                         * that onnx_can_map allows stay in it */
    int fd;             /* the file, for pread() of raw data; -1 if none */
    pre_init *inits;
    size_t n_inits, cap_inits;
    Onnx__NodeProto **nodes;  /* the main graph's nodes, unpacked one by one */
    size_t n_nodes, cap_nodes;
    const Onnx__ModelProto *mp; /* its local functions, while the graphs are built */
} load_state;

static tdm_status nomem(onnx_ctx *c) { return err_set(c->e, TDM_E_NOMEM, "%s: out of memory", c->fname); }

static char *strdup_or_empty(const char *s) { return mem_strdup(s ? s : ""); }

/* ---- types ---- */

static tdm_status tensor_type(onnx_ctx *c, int32_t elem, const Onnx__TensorShapeProto *shape, gr_type *t,
                              const char *what)
{
    if (elem < 0 || elem >= TDM_DTYPE_COUNT)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s has element type %d, which tandem does not know", c->fname,
                       what, (int)elem);
    t->dtype = (tdm_dtype)elem;
    if (!shape) {
        t->rank = -1;
        return TDM_OK;
    }
    if (shape->n_dim > TDM_MAX_RANK)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s has rank %zu; tandem handles tensors of rank up to %d",
                       c->fname, what, shape->n_dim, TDM_MAX_RANK);
    t->rank = (int)shape->n_dim;
    for (int i = 0; i < t->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
        t->dims[i].v = -1;
        t->dims[i].sym = NULL;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            /* -1 is how some exporters (PaddlePaddle's paddle2onnx among
             * them) write a dynamic dimension; onnxruntime reads it so. */
            if (d->dim_value < -1)
                return err_set(c->e, TDM_E_MODEL, "%s: %s has a negative dimension (%lld at axis %d)", c->fname, what,
                               (long long)d->dim_value, i);
            t->dims[i].v = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   *d->dim_param) {
            if (!(t->dims[i].sym = gr_intern(c->m, d->dim_param)))
                return nomem(c);
        }
    }
    return TDM_OK;
}

/* "maps", "sequences", … for messages. */
static const char *type_case_plural(Onnx__TypeProto__ValueCase k)
{
    switch (k) {
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: return "maps";
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: return "sparse tensors";
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: return "sequences";
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: return "optionals";
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: return "tensors";
    default: return "values of an unknown type";
    }
}

/* The items of seq(map(K, V)), as ZipMap makes: K int64 or string, V a
 * tensor type (float for ZipMap); the loader needs no more of maps. */
static tdm_status map_type(onnx_ctx *c, const Onnx__TypeProto__Map *mt, gr_type *t, int *present, const char *what)
{
    int k = mt->has_key_type ? mt->key_type : 0;
    const Onnx__TypeProto *vt = mt->value_type;
    if (k != TDM_INT64 && k != TDM_STRING)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s is a sequence of maps with %s keys; tandem supports int64 and "
                       "string keys", c->fname, what, dtype_valid(k) ? tdm_dtype_name((tdm_dtype)k) : "undefined");
    if (!vt || vt->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vt->tensor_type->has_elem_type ||
        !dtype_valid(vt->tensor_type->elem_type) || vt->tensor_type->elem_type == TDM_STRING)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s is a sequence of maps whose values are not numbers; tandem "
                       "supports maps of numeric values", c->fname, what);
    t->map_key = (tdm_dtype)k;
    t->dtype = (tdm_dtype)vt->tensor_type->elem_type;
    t->rank = -1;
    *present = 1;
    return TDM_OK;
}

/* TypeProto → gr_type: tensors, sequences of tensors or of maps, optionals
 * of tensors and sequences of tensors.
 * Returns TDM_OK with *present 0 when tp declares nothing. */
static tdm_status type_from_proto(onnx_ctx *c, const Onnx__TypeProto *tp, gr_type *t, int *present, const char *what)
{
    memset(t, 0, sizeof *t);
    t->rank = -1;
    *present = 0;
    if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
        return TDM_OK;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
        t->optional = 1;
        tp = tp->optional_type->elem_type;
        if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
            return err_set(c->e, TDM_E_MODEL, "%s: %s is an optional without an element type", c->fname, what);
    }
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
        t->kind = TDM_KIND_SEQUENCE;
        const Onnx__TypeProto *et = tp->sequence_type->elem_type;
        if (!et || et->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) {
            t->dtype = TDM_UNDEFINED;
            *present = 1;
            return TDM_OK;
        }
        if (et->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE && !t->optional)
            return map_type(c, et->map_type, t, present, what);
        if (et->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
            return err_set(c->e, TDM_E_UNSUPPORTED,
                           "%s: %s is a sequence of %s; tandem supports sequences of tensors and of maps", c->fname,
                           what, type_case_plural(et->value_case));
        tp = et;
    } else {
        t->kind = TDM_KIND_TENSOR;
    }
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s holds %s%s, which tandem does not support", c->fname, what,
                       t->optional ? "optional " : "", type_case_plural(tp->value_case));
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    tdm_status st = tensor_type(c, tt->has_elem_type ? tt->elem_type : 0, tt->shape, t, what);
    if (st == TDM_OK)
        *present = 1;
    return st;
}

static void type_from_tensor(const tdm_tensor *x, gr_type *t)
{
    memset(t, 0, sizeof *t);
    t->kind = TDM_KIND_TENSOR;
    t->dtype = x->dtype;
    t->rank = x->rank;
    for (int i = 0; i < x->rank; i++)
        t->dims[i].v = x->dims[i];
}

/* ---- graphs ---- */

static tdm_status build_graph(load_state *s, Onnx__GraphProto *gp, gr_graph *g, int take_pre);
static tdm_status build_nodes(load_state *s, Onnx__GraphProto *gp, gr_graph *g, int take_pre,
                              Onnx__NodeProto *const *nodes, size_t n_nodes);

static tdm_status add_initializer(load_state *s, gr_graph *g, const char *name, tdm_tensor *t)
{
    onnx_ctx *c = &s->c;
    int id;
    if (!name || !*name) {
        tdm_tensor_destroy(t);
        return err_set(c->e, TDM_E_MODEL, "%s: an initializer of graph '%.64s' has no name", c->fname,
                       g->name ? g->name : "");
    }
    int prev = gr_value_find(g, name);
    if (prev >= 0 && g->values[prev].init) {
        tdm_tensor_destroy(t);
        return err_set(c->e, TDM_E_MODEL, "%s: initializer '%.64s' is listed twice", c->fname, name);
    }
    tdm_status st = gr_value_get(c->e, g, name, &id);
    if (st) {
        tdm_tensor_destroy(t);
        return st;
    }
    gr_value *v = &g->values[id];
    v->init = t;
    v->is_initializer = 1;
    type_from_tensor(t, &v->type);
    v->has_type = 1;
    return TDM_OK;
}

static tdm_status set_declared_type(load_state *s, gr_graph *g, const Onnx__ValueInfoProto *vi, int id,
                                    const char *role)
{
    onnx_ctx *c = &s->c;
    char what[128];
    gr_type t;
    int present;
    snprintf(what, sizeof what, "%s '%.64s'", role, vi->name);
    tdm_status st = type_from_proto(c, vi->type, &t, &present, what);
    if (st || !present)
        return st;
    gr_value *v = &g->values[id];
    if (v->init) {
        /* the initializer's own type is exact; the declaration must agree */
        if (t.kind != TDM_KIND_TENSOR || (t.dtype != TDM_UNDEFINED && t.dtype != v->init->dtype))
            return err_set(c->e, TDM_E_MODEL, "%s: %s is declared as %s %s but its initializer holds %s", c->fname,
                           what, t.kind == TDM_KIND_TENSOR ? "a tensor of" : "a sequence of",
                           tdm_dtype_name(t.dtype), tdm_dtype_name(v->init->dtype));
        if (t.optional)
            v->type.optional = 1;
        return TDM_OK;
    }
    if (!v->has_type) {
        v->type = t;
        v->has_type = 1;
    }
    return TDM_OK;
}

static tdm_status fill_attr(load_state *s, gr_graph *g, const char *node, Onnx__AttributeProto *ap, gr_attr *a);

static tdm_status add_node(load_state *s, gr_graph *g, Onnx__NodeProto *np, size_t index)
{
    onnx_ctx *c = &s->c;
    int idx;
    if (!np->op_type || !*np->op_type)
        return err_set(c->e, TDM_E_MODEL, "%s: node #%zu ('%.64s') has no op_type", c->fname, index,
                       np->name ? np->name : "");
    if (np->n_input > INT_MAX || np->n_output > INT_MAX)
        return err_set(c->e, TDM_E_MODEL, "%s: node '%.64s' has too many inputs or outputs", c->fname,
                       np->name ? np->name : np->op_type);
    tdm_status st = gr_node_add(c->e, g, np->name, np->op_type, np->domain, (int)np->n_input,
                                (const char *const *)np->input, (int)np->n_output, (const char *const *)np->output, &idx);
    if (st)
        return st;
    gr_node *n = &g->nodes[idx];
    if (np->doc_string && *np->doc_string && !(n->doc = mem_strdup(np->doc_string)))
        return nomem(c);
    for (size_t k = 0; k < np->n_attribute; k++) {
        Onnx__AttributeProto *ap = np->attribute[k];
        const char *nname = g->nodes[idx].name;
        if (!ap->name || !*ap->name)
            return err_set(c->e, TDM_E_MODEL, "%s: node '%.64s' has an attribute without a name (#%zu)", c->fname,
                           nname, k);
        if (gr_attr_find(&g->nodes[idx], ap->name))
            return err_set(c->e, TDM_E_MODEL, "%s: node '%.64s' has attribute '%.64s' twice", c->fname, nname,
                           ap->name);
        gr_attr *a = gr_attr_add(c->e, g, idx, ap->name);
        if (!a)
            return c->e ? c->e->status : TDM_E_NOMEM;
        /* g->nodes may not move during fill_attr: subgraphs are other graphs */
        if ((st = fill_attr(s, g, nname, ap, a)) != TDM_OK)
            return st;
    }
    return TDM_OK;
}

static gr_attr_type attr_kind(const Onnx__AttributeProto *ap)
{
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return (gr_attr_type)ap->type;
    /* IR < 2 files carry no type: infer it from the field that is set */
    if (ap->t) return GA_TENSOR;
    if (ap->g) return GA_GRAPH;
    if (ap->sparse_tensor) return GA_SPARSE_TENSOR;
    if (ap->tp) return GA_TYPE_PROTO;
    if (ap->n_floats) return GA_FLOATS;
    if (ap->n_ints) return GA_INTS;
    if (ap->n_strings) return GA_STRINGS;
    if (ap->n_tensors) return GA_TENSORS;
    if (ap->n_graphs) return GA_GRAPHS;
    if (ap->n_sparse_tensors) return GA_SPARSE_TENSORS;
    if (ap->n_type_protos) return GA_TYPE_PROTOS;
    if (ap->has_s) return GA_STRING;
    if (ap->has_i) return GA_INT;
    if (ap->has_f) return GA_FLOAT;
    return GA_UNDEFINED;
}

static tdm_status subgraph(load_state *s, gr_graph *g, Onnx__GraphProto *gp, const char *what, gr_graph **out)
{
    onnx_ctx *c = &s->c;
    *out = NULL;
    if (!gp)
        return err_set(c->e, TDM_E_MODEL, "%s: %s has no graph", c->fname, what);
    if (g->depth + 1 > ONNX_MAX_GRAPH_DEPTH)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s nests subgraphs more than %d deep", c->fname, what,
                       ONNX_MAX_GRAPH_DEPTH);
    tdm_status st = gr_graph_new(c->e, c->m, g, gp->name, out);
    if (st)
        return st;
    return build_graph(s, gp, *out, 0);
}

static tdm_status fill_attr(load_state *s, gr_graph *g, const char *node, Onnx__AttributeProto *ap, gr_attr *a)
{
    onnx_ctx *c = &s->c;
    tdm_status st = TDM_OK;
    char what[200];
    snprintf(what, sizeof what, "node '%.64s' attribute '%.64s'", node, ap->name);
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return err_set(c->e, TDM_E_MODEL, "%s: %s refers to attribute '%.64s' of a function, outside any function",
                       c->fname, what, ap->ref_attr_name);
    gr_attr_type k = attr_kind(ap);
    a->type = k;
    switch (k) {
    case GA_FLOAT:
        a->f = ap->f;
        break;
    case GA_INT:
        a->i = ap->i;
        break;
    case GA_STRING:
        a->s_len = ap->s.len;
        if (!(a->s = ap->s.len ? mem_strndup((const char *)ap->s.data, ap->s.len) : mem_strdup("")))
            return nomem(c);
        break;
    case GA_TENSOR:
        if (!ap->t)
            return err_set(c->e, TDM_E_MODEL, "%s: %s of type TENSOR has no tensor", c->fname, what);
        return onnx_tensor_from_proto(c, ap->t, what, &a->t);
    case GA_SPARSE_TENSOR:
        if (!ap->sparse_tensor)
            return err_set(c->e, TDM_E_MODEL, "%s: %s of type SPARSE_TENSOR has no tensor", c->fname, what);
        return onnx_sparse_from_proto(c, ap->sparse_tensor, what, &a->t);
    case GA_GRAPH:
        return subgraph(s, g, ap->g, what, &a->g);
    case GA_TYPE_PROTO: {
        int present;
        if ((st = type_from_proto(c, ap->tp, &a->tp, &present, what)) != TDM_OK)
            return st;
        if (!present)
            return err_set(c->e, TDM_E_MODEL, "%s: %s of type TYPE_PROTO has no type", c->fname, what);
        break;
    }
    case GA_FLOATS:
        a->n = ap->n_floats;
        if (!(a->floats = mem_calloc(a->n ? a->n : 1, sizeof *a->floats)))
            return nomem(c);
        if (a->n)
            memcpy(a->floats, ap->floats, a->n * sizeof *a->floats);
        break;
    case GA_INTS:
        a->n = ap->n_ints;
        if (!(a->ints = mem_calloc(a->n ? a->n : 1, sizeof *a->ints)))
            return nomem(c);
        if (a->n)
            memcpy(a->ints, ap->ints, a->n * sizeof *a->ints);
        break;
    case GA_STRINGS:
        a->n = ap->n_strings;
        a->strings = mem_calloc(a->n ? a->n : 1, sizeof *a->strings);
        a->string_lens = mem_calloc(a->n ? a->n : 1, sizeof *a->string_lens);
        if (!a->strings || !a->string_lens)
            return nomem(c);
        for (size_t i = 0; i < a->n; i++) {
            const ProtobufCBinaryData *b = &ap->strings[i];
            a->string_lens[i] = b->len;
            if (!(a->strings[i] = b->len ? mem_strndup((const char *)b->data, b->len) : mem_strdup("")))
                return nomem(c);
        }
        break;
    case GA_TENSORS:
    case GA_SPARSE_TENSORS: {
        size_t n = k == GA_TENSORS ? ap->n_tensors : ap->n_sparse_tensors;
        a->n = n;
        if (!(a->tensors = mem_calloc(n ? n : 1, sizeof *a->tensors)))
            return nomem(c);
        for (size_t i = 0; i < n; i++) {
            char w2[240];
            snprintf(w2, sizeof w2, "%s tensor #%zu", what, i);
            st = k == GA_TENSORS ? onnx_tensor_from_proto(c, ap->tensors[i], w2, &a->tensors[i])
                                 : onnx_sparse_from_proto(c, ap->sparse_tensors[i], w2, &a->tensors[i]);
            if (st)
                return st;
        }
        break;
    }
    case GA_GRAPHS:
        a->n = ap->n_graphs;
        if (!(a->graphs = mem_calloc(a->n ? a->n : 1, sizeof *a->graphs)))
            return nomem(c);
        for (size_t i = 0; i < a->n; i++)
            if ((st = subgraph(s, g, ap->graphs[i], what, &a->graphs[i])) != TDM_OK)
                return st;
        break;
    case GA_TYPE_PROTOS:
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s: %s is a list of types, which tandem does not support", c->fname,
                       what);
    case GA_UNDEFINED:
        return err_set(c->e, TDM_E_MODEL, "%s: %s has neither a type nor a value", c->fname, what);
    default:
        return err_set(c->e, TDM_E_MODEL, "%s: %s has attribute type %d, which ONNX does not define", c->fname, what,
                       (int)k);
    }
    return TDM_OK;
}

/* A node tandem refuses by name (DictVectorizer: it takes a map), named
 * before the types it makes are read. */
static tdm_status refused_node(onnx_ctx *c, Onnx__NodeProto *const *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *why = nodes[i] ? op_refused(nodes[i]->domain, nodes[i]->op_type) : NULL;
        if (why)
            return err_set(c->e, TDM_E_UNSUPPORTED, "%s: node %s '%.64s' is not supported: %s", c->fname,
                           nodes[i]->op_type, nodes[i]->name ? nodes[i]->name : "", why);
    }
    return TDM_OK;
}

static tdm_status build_graph(load_state *s, Onnx__GraphProto *gp, gr_graph *g, int take_pre)
{
    onnx_ctx *c = &s->c;
    tdm_status st;
    char what[200];

    if (take_pre) {
        for (size_t i = 0; i < s->n_inits; i++) {
            tdm_tensor *t = s->inits[i].t;
            s->inits[i].t = NULL;
            if ((st = add_initializer(s, g, s->inits[i].name, t)) != TDM_OK)
                return st;
        }
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        tdm_tensor *t;
        snprintf(what, sizeof what, "initializer '%.64s'", tp->name ? tp->name : "");
        if ((st = onnx_tensor_from_proto(c, tp, what, &t)) != TDM_OK)
            return st;
        if ((st = add_initializer(s, g, tp->name, t)) != TDM_OK)
            return st;
    }
    for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
        Onnx__SparseTensorProto *sp = gp->sparse_initializer[i];
        const char *name = sp->values && sp->values->name ? sp->values->name : "";
        tdm_tensor *t;
        snprintf(what, sizeof what, "initializer '%.64s'", name);
        if ((st = onnx_sparse_from_proto(c, sp, what, &t)) != TDM_OK)
            return st;
        if ((st = add_initializer(s, g, name, t)) != TDM_OK)
            return st;
    }

    Onnx__NodeProto **fn_nodes = NULL, *const *nodes = gp->node;
    size_t n_fn = 0, n_nodes = gp->n_node;
    if (!take_pre && (st = onnx_fn_inline_copy(c, s->mp, gp->node, gp->n_node, &fn_nodes, &n_fn)) != TDM_OK)
        return st;
    if (fn_nodes) {
        nodes = fn_nodes;
        n_nodes = n_fn;
    }
    st = build_nodes(s, gp, g, take_pre, nodes, n_nodes);
    onnx_fn_nodes_free(fn_nodes, n_fn);
    return st;
}

/* build_graph's rest: its inputs, outputs, value types and nodes. */
static tdm_status build_nodes(load_state *s, Onnx__GraphProto *gp, gr_graph *g, int take_pre,
                              Onnx__NodeProto *const *nodes, size_t n_nodes)
{
    onnx_ctx *c = &s->c;
    tdm_status st;
    int id;
    if ((st = refused_node(c, nodes, n_nodes)) != TDM_OK ||
        (take_pre && (st = refused_node(c, s->nodes, s->n_nodes)) != TDM_OK))
        return st;
    if (!(g->inputs = mem_calloc(gp->n_input ? gp->n_input : 1, sizeof *g->inputs)) ||
        !(g->outputs = mem_calloc(gp->n_output ? gp->n_output : 1, sizeof *g->outputs)))
        return nomem(c);
    if (gp->n_input > INT_MAX || gp->n_output > INT_MAX)
        return err_set(c->e, TDM_E_MODEL, "%s: graph '%.64s' has too many inputs or outputs", c->fname,
                       g->name ? g->name : "");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name)
            return err_set(c->e, TDM_E_MODEL, "%s: input #%zu of graph '%.64s' has no name", c->fname, i,
                           g->name ? g->name : "");
        if ((st = gr_value_get(c->e, g, vi->name, &id)) != TDM_OK)
            return st;
        if (g->values[id].is_input)
            return err_set(c->e, TDM_E_MODEL, "%s: graph input '%.64s' is listed twice", c->fname, vi->name);
        if ((st = set_declared_type(s, g, vi, id, "graph input")) != TDM_OK)
            return st;
        /* an input with an initializer is a constant to tandem (IR < 4
         * lists every initializer as an input) */
        if (!g->values[id].init) {
            g->values[id].is_input = 1;
            g->inputs[g->n_inputs++] = id;
        }
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi->name || !*vi->name)
            return err_set(c->e, TDM_E_MODEL, "%s: output #%zu of graph '%.64s' has no name", c->fname, i,
                           g->name ? g->name : "");
        if ((st = gr_value_get(c->e, g, vi->name, &id)) != TDM_OK)
            return st;
        if ((st = set_declared_type(s, g, vi, id, "graph output")) != TDM_OK)
            return st;
        g->values[id].is_output = 1;
        g->outputs[g->n_outputs++] = id;
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        if (!vi->name || !*vi->name)
            continue; /* describes nothing */
        if ((st = gr_value_get(c->e, g, vi->name, &id)) != TDM_OK)
            return st;
        if ((st = set_declared_type(s, g, vi, id, "value")) != TDM_OK)
            return st;
    }
    for (size_t i = 0; i < n_nodes; i++)
        if ((st = add_node(s, g, nodes[i], i)) != TDM_OK)
            return st;
    if (take_pre) {
        for (size_t i = 0; i < s->n_nodes; i++) {
            if ((st = add_node(s, g, s->nodes[i], i)) != TDM_OK)
                return st;
            /* converted: its constants now belong to the IR */
            protobuf_c_message_free_unpacked(&s->nodes[i]->base, NULL);
            s->nodes[i] = NULL;
        }
    }
    return TDM_OK;
}

/* ---- the model ---- */

static tdm_status decode_fail(onnx_ctx *c, onnx_pbcheck r, size_t at, const char *why)
{
    if (r == ONNX_PB_GRAPH_DEPTH)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s nests subgraphs more than %d deep (at byte %zu)", c->fname,
                       ONNX_MAX_GRAPH_DEPTH, at);
    if (r == ONNX_PB_MSG_DEPTH)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s nests protobuf messages more than %d deep (at byte %zu)",
                       c->fname, ONNX_MAX_MSG_DEPTH, at);
    return err_set(c->e, TDM_E_MODEL, "%s is not an ONNX model (protobuf decoding failed at byte %zu: %s)", c->fname,
                   at, why);
}

static tdm_status fill_model(load_state *s, const Onnx__ModelProto *mp)
{
    onnx_ctx *c = &s->c;
    gr_model *m = c->m;
    m->ir_version = mp->ir_version;
    m->model_version = mp->model_version;
    if (!(m->producer_name = strdup_or_empty(mp->producer_name)) ||
        !(m->producer_version = strdup_or_empty(mp->producer_version)) || !(m->domain = strdup_or_empty(mp->domain)) ||
        !(m->doc = strdup_or_empty(mp->doc_string)))
        return nomem(c);
    if (mp->n_opset_import > INT_MAX || mp->n_metadata_props > INT_MAX)
        return err_set(c->e, TDM_E_MODEL, "%s has too many opset imports or metadata entries", c->fname);
    if (!(m->opsets = mem_calloc(mp->n_opset_import ? mp->n_opset_import : 1, sizeof *m->opsets)))
        return nomem(c);
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
        const char *d = os->domain && strcmp(os->domain, "ai.onnx") != 0 ? os->domain : "";
        if (!os->has_version || os->version < 0)
            return err_set(c->e, TDM_E_MODEL, "%s imports opset domain '%.64s' without a valid version", c->fname,
                           *d ? d : "ai.onnx");
        int64_t before = gr_opset_version(m, d);
        if (before == os->version) /* repeated as it was (skl2onnx 1.20 writes ai.onnx twice): as onnxruntime */
            continue;
        if (before >= 0)
            return err_set(c->e, TDM_E_MODEL, "%s imports opset domain '%.64s' twice, at versions %lld and %lld",
                           c->fname, *d ? d : "ai.onnx", (long long)before, (long long)os->version);
        if (!(m->opsets[m->n_opsets].domain = mem_strdup(d)))
            return nomem(c);
        m->opsets[m->n_opsets++].version = os->version;
    }
    if (!(m->metadata = mem_calloc(mp->n_metadata_props ? mp->n_metadata_props : 1, sizeof *m->metadata)))
        return nomem(c);
    for (size_t i = 0; i < mp->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *kv = mp->metadata_props[i];
        gr_kv *d = &m->metadata[m->n_metadata];
        d->key = strdup_or_empty(kv->key);
        d->value = strdup_or_empty(kv->value);
        m->n_metadata++;
        if (!d->key || !d->value)
            return nomem(c);
    }
    return TDM_OK;
}

/* Copies data[off, off+len) to a new buffer. From a file, the bytes are
 * read with pread(), so that they never become resident through the
 * mapping: the weights are in memory once. */
static uint8_t *copy_payload(load_state *s, size_t off, size_t len)
{
    uint8_t *d = mem_alloc(len);
    if (!d)
        return NULL;
    if (s->fd < 0 || onnx_file_pread(s->fd, d, len, off) != 0)
        memcpy(d, s->data + off, len);
    return d;
}

/* Converts the initializer whose TensorProto bytes are data[off, off+len):
 * its raw_data is copied straight out of the file, the other fields are
 * unpacked by protobuf-c from a small copy. */
static tdm_status take_initializer(load_state *s, size_t off, size_t len, size_t index)
{
    onnx_ctx *c = &s->c;
    char what[200];
    tdm_status st;
    bytebuf rest = {0};
    onnx_pbfield f, raw = {0};
    const char *why;
    int has_raw = 0;
    size_t pos = off;
    while (onnx_pb_next(s->data, off + len, &pos, &f, &why) > 0) {
        if (f.num == 9 && f.wire == PB_LEN) {
            raw = f; /* protobuf: the last occurrence wins */
            has_raw = 1;
        } else if (buf_put(&rest, s->data + f.start, f.end - f.start)) {
            mem_free(rest.p);
            return nomem(c);
        }
    }
    Onnx__TensorProto *tp = (Onnx__TensorProto *)onnx_pb_unpack(&onnx__tensor_proto__descriptor, rest.p, rest.n);
    mem_free(rest.p);
    if (!tp)
        return err_set(c->e, TDM_E_MODEL,
                       "%s is not an ONNX model (protobuf decoding failed in initializer #%zu at byte %zu)", c->fname,
                       index, off);
    if (has_raw && s->map && tp->has_data_type && onnx_can_map(tp->data_type, raw.data, raw.len)) {
        /* in place in the mapping: paged in when a kernel reads it */
        tp->has_raw_data = 1;
        tp->raw_data.len = raw.len;
        tp->raw_data.data = NULL;
        c->raw_map = s->map;
        c->raw_at = s->data + raw.data;
    } else if (has_raw) {
        tp->has_raw_data = 1;
        tp->raw_data.len = raw.len;
        tp->raw_data.data = raw.len ? copy_payload(s, raw.data, raw.len) : NULL;
        if (raw.len && !tp->raw_data.data) {
            tp->raw_data.len = 0;
            protobuf_c_message_free_unpacked(&tp->base, NULL);
            return err_set(c->e, TDM_E_NOMEM, "%s: out of memory reading %zu bytes of initializer #%zu", c->fname,
                           raw.len, index);
        }
    }
    if (s->mapped)
        onnx_file_drop(s->data, s->size, off, len);
    snprintf(what, sizeof what, "initializer '%.64s'", tp->name ? tp->name : "");
    tdm_tensor *t = NULL;
    char *name = NULL;
    st = onnx_tensor_from_proto(c, tp, what, &t);
    c->raw_map = NULL;
    c->raw_at = NULL;
    if (st != TDM_OK)
        goto done;
    if (!tp->name || !*tp->name) {
        st = err_set(c->e, TDM_E_MODEL, "%s: initializer #%zu of the main graph has no name", c->fname, index);
        goto done;
    }
    if (!(name = mem_strdup(tp->name)) ||
        mem_grow((void **)&s->inits, &s->cap_inits, s->n_inits + 1, sizeof *s->inits)) {
        st = nomem(c);
        goto done;
    }
    s->inits[s->n_inits].name = name;
    s->inits[s->n_inits].t = t;
    s->n_inits++;
    name = NULL;
    t = NULL;
done:
    mem_free(name);
    tdm_tensor_destroy(t);
    protobuf_c_message_free_unpacked(&tp->base, NULL);
    return st;
}

/* Unpacks the main graph's NodeProto at data[off, off+len). */
static tdm_status take_node(load_state *s, size_t off, size_t len)
{
    onnx_ctx *c = &s->c;
    if (mem_grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof *s->nodes))
        return nomem(c);
    Onnx__NodeProto *np = (Onnx__NodeProto *)onnx_pb_unpack(&onnx__node_proto__descriptor, s->data + off, len);
    if (!np)
        return err_set(c->e, TDM_E_MODEL, "%s is not an ONNX model (protobuf decoding failed in node #%zu at byte %zu)",
                       c->fname, s->n_nodes, off);
    s->nodes[s->n_nodes++] = np;
    return TDM_OK;
}

static tdm_status load_buffer(load_state *s, gr_model **out)
{
    onnx_ctx *c = &s->c;
    tdm_status st;
    size_t at = 0, pos;
    const char *why = "";
    bytebuf mbuf = {0}, gbuf = {0};
    Onnx__ModelProto *mp = NULL;
    Onnx__GraphProto *gp = NULL;
    size_t n_graph = 0, n_init = 0;
    onnx_pbfield f;

    *out = NULL;
    if (s->size == 0)
        return err_set(c->e, TDM_E_MODEL, "%s is empty, not an ONNX model", c->fname);
    onnx_pbcheck r = onnx_pb_check(s->data, s->size, &onnx__model_proto__descriptor, 0, &at, &why);
    if (r != ONNX_PB_OK)
        return decode_fail(c, r, at, why);
    if ((st = gr_model_new(c->e, &c->m)) != TDM_OK)
        return st;

    /* ModelProto: everything but the graph goes to a small copy */
    pos = 0;
    while (onnx_pb_next(s->data, s->size, &pos, &f, &why) > 0) {
        if (f.num != 7 && buf_put(&mbuf, s->data + f.start, f.end - f.start)) {
            st = nomem(c);
            goto fail;
        }
    }
    mp = (Onnx__ModelProto *)onnx_pb_unpack(&onnx__model_proto__descriptor, mbuf.p, mbuf.n);
    mem_free(mbuf.p);
    mbuf.p = NULL;
    if (!mp) {
        st = err_set(c->e, TDM_E_MODEL, "%s is not an ONNX model (protobuf decoding failed in ModelProto)", c->fname);
        goto fail;
    }
    if (!mp->has_ir_version) {
        st = err_set(c->e, TDM_E_MODEL, "%s is not an ONNX model (ModelProto.ir_version is missing)", c->fname);
        goto fail;
    }
    if (mp->ir_version >= 3 && mp->n_opset_import == 0) {
        st = err_set(c->e, TDM_E_MODEL, "%s has IR version %lld but no opset_import", c->fname,
                     (long long)mp->ir_version);
        goto fail;
    }
    if ((st = fill_model(s, mp)) != TDM_OK)
        goto fail;

    /* The graph field(s) (protobuf merges repeats): initializers one by one,
     * the rest into a small copy. */
    pos = 0;
    while (onnx_pb_next(s->data, s->size, &pos, &f, &why) > 0) {
        if (f.num != 7)
            continue;
        n_graph++;
        size_t gpos = f.data, gend = f.data + f.len;
        onnx_pbfield h;
        while (onnx_pb_next(s->data, gend, &gpos, &h, &why) > 0) {
            if (h.num == 5 && h.wire == PB_LEN) {
                if ((st = take_initializer(s, h.data, h.len, n_init++)) != TDM_OK)
                    goto fail;
                continue;
            }
            if (h.num == 1 && h.wire == PB_LEN) {
                /* nodes too may hold weights (Constant): unpack each on its own */
                if ((st = take_node(s, h.data, h.len)) != TDM_OK)
                    goto fail;
            } else if (buf_put(&gbuf, s->data + h.start, h.end - h.start)) {
                st = nomem(c);
                goto fail;
            }
            if (s->mapped)
                onnx_file_drop(s->data, s->size, h.start, h.end - h.start);
        }
    }
    if (!n_graph) {
        st = err_set(c->e, TDM_E_MODEL, "%s has no graph (ModelProto.graph is missing)", c->fname);
        goto fail;
    }
    gp = (Onnx__GraphProto *)onnx_pb_unpack(&onnx__graph_proto__descriptor, gbuf.p, gbuf.n);
    mem_free(gbuf.p);
    gbuf.p = NULL;
    if (!gp) {
        st = err_set(c->e, TDM_E_MODEL, "%s is not an ONNX model (protobuf decoding failed in its GraphProto)",
                     c->fname);
        goto fail;
    }
    if ((st = onnx_fn_inline(c, mp, &s->nodes, &s->n_nodes, &s->cap_nodes)) != TDM_OK)
        goto fail;
    s->mp = mp;
    if ((st = gr_graph_new(c->e, c->m, NULL, gp->name, &c->m->main)) != TDM_OK)
        goto fail;
    if ((st = build_graph(s, gp, c->m->main, 1)) != TDM_OK)
        goto fail;
    protobuf_c_message_free_unpacked(&gp->base, NULL);
    protobuf_c_message_free_unpacked(&mp->base, NULL);
    *out = c->m;
    c->m = NULL;
    return TDM_OK;
fail:
    mem_free(mbuf.p);
    mem_free(gbuf.p);
    if (gp)
        protobuf_c_message_free_unpacked(&gp->base, NULL);
    if (mp)
        protobuf_c_message_free_unpacked(&mp->base, NULL);
    gr_model_free(c->m);
    c->m = NULL;
    return st;
}

static void state_free(load_state *s)
{
    for (size_t i = 0; i < s->n_inits; i++) {
        mem_free(s->inits[i].name);
        tdm_tensor_destroy(s->inits[i].t);
    }
    mem_free(s->inits);
    for (size_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i])
            protobuf_c_message_free_unpacked(&s->nodes[i]->base, NULL);
    mem_free(s->nodes);
    onnx_ctx_free(&s->c);
}

tdm_status onnx_load_memory(tdm_err *e, const void *data, size_t size, const char *name, gr_model **out)
{
    load_state s;
    memset(&s, 0, sizeof s);
    *out = NULL;
    s.fd = -1;
    s.c.e = e;
    s.c.fname = name && *name ? name : "<memory>";
    s.data = data;
    s.size = data ? size : 0;
    tdm_status st = load_buffer(&s, out);
    state_free(&s);
    if (st == TDM_OK && (name && !((*out)->path = mem_strdup(name)))) {
        gr_model_free(*out);
        *out = NULL;
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    return st;
}

tdm_status onnx_load_file(tdm_err *e, const char *path, gr_model **out)
{
    load_state s;
    memset(&s, 0, sizeof s);
    *out = NULL;
    if (!path || !*path)
        return err_set(e, TDM_E_USAGE, "no model file was given");
    s.c.e = e;
    s.c.fname = onnx_basename(path);
    char *dir = onnx_dirname(path);
    char *pcopy = mem_strdup(path);
    if (!dir || !pcopy) {
        mem_free(dir);
        mem_free(pcopy);
        return err_set(e, TDM_E_NOMEM, "out of memory");
    }
    s.c.dir = dir;
    s.fd = -1;
    file_data fd;
    tdm_status st = file_load(e, &file_model, path, &fd);
    s.data = fd.data;
    s.size = fd.size;
    s.mapped = fd.mapped;
    if (st == TDM_OK && s.mapped) {
        s.fd = onnx_file_open(path);
        if (!(s.map = file_map_adopt(&fd)))
            st = err_set(e, TDM_E_NOMEM, "out of memory");
    }
    if (st == TDM_OK)
        st = load_buffer(&s, out);
    /* the tensors that stay in the mapping hold their references */
    file_map_unref(s.map);
    file_release(&fd);
    onnx_file_close(s.fd);
    state_free(&s);
    if (st != TDM_OK) {
        mem_free(dir);
        mem_free(pcopy);
        return st;
    }
    (*out)->path = pcopy;
    (*out)->dir = dir;
    return TDM_OK;
}
