/* Writing ONNX protobuf, the loader's counterpart: host tensors as
 * TensorProto, values as the TensorProto, SequenceProto or OptionalProto
 * files of the ONNX node tests, and one node of a graph as a one-node
 * ModelProto (the minimal reproductions of src/report/extract.c). All built
 * with the protobuf-c messages of onnx.proto and packed.
 * Every allocation of a message tree goes into a small list freed after
 * packing. Assumes a little-endian host for raw_data, as the loader does
 * on the machines tandem supports. */
#include "onnx/onnx.h"
#include "core/mem.h"

#include "onnx.pb-c.h"

#include <string.h>

typedef struct wlist {
    void **p;
    size_t n, cap;
    int oom;
} wlist;

static void *wl_alloc(wlist *a, size_t n, size_t size)
{
    void *p;
    if (a->oom || mem_grow((void **)&a->p, &a->cap, a->n + 1, sizeof *a->p) || !(p = mem_calloc(n ? n : 1, size))) {
        a->oom = 1;
        return NULL;
    }
    a->p[a->n++] = p;
    return p;
}

static void wl_free(wlist *a)
{
    for (size_t k = 0; k < a->n; k++)
        mem_free(a->p[k]);
    mem_free(a->p);
}

static Onnx__TensorProto *tensor_proto(wlist *a, tdm_err *e, const tdm_tensor *t, const char *name, tdm_status *st)
{
    *st = TDM_OK;
    if (t->kind != TDM_KIND_TENSOR) {
        *st = err_set(e, TDM_E_UNSUPPORTED, "'%s' is not a tensor; only tensors are written as TensorProto", name);
        return NULL;
    }
    if (dtype_packed_bits(t->dtype)) {
        *st = err_set(e, TDM_E_UNSUPPORTED, "'%s' has %d-bit elements, which the writer does not pack", name,
                      dtype_packed_bits(t->dtype));
        return NULL;
    }
    Onnx__TensorProto *tp = wl_alloc(a, 1, sizeof *tp);
    int64_t *dims = wl_alloc(a, (size_t)t->rank + 1, sizeof *dims);
    if (!tp || !dims) {
        *st = err_set(e, TDM_E_NOMEM, "out of memory");
        return NULL;
    }
    onnx__tensor_proto__init(tp);
    tp->name = (char *)name;
    tp->n_dims = (size_t)t->rank;
    for (int k = 0; k < t->rank; k++)
        dims[k] = t->dims[k];
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    if (t->dtype == TDM_STRING) {
        size_t n = tdm_tensor_count(t);
        ProtobufCBinaryData *sd = wl_alloc(a, n + 1, sizeof *sd);
        if (!sd) {
            *st = err_set(e, TDM_E_NOMEM, "out of memory");
            return NULL;
        }
        char *const *s = (char *const *)t->data;
        for (size_t k = 0; k < n; k++) {
            sd[k].data = (uint8_t *)(s[k] ? s[k] : "");
            sd[k].len = s[k] ? strlen(s[k]) : 0;
        }
        tp->n_string_data = n;
        tp->string_data = sd;
    } else {
        tp->has_raw_data = 1;
        tp->raw_data.data = (uint8_t *)t->data;
        tp->raw_data.len = t->nbytes;
    }
    return tp;
}

static tdm_status pack_message(tdm_err *e, const ProtobufCMessage *m, void **bytes, size_t *size)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = mem_alloc(n ? n : 1);
    if (!buf)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    *size = protobuf_c_message_pack(m, buf);
    *bytes = buf;
    return TDM_OK;
}

tdm_status onnx_write_tensor(tdm_err *e, const tdm_tensor *t, const char *name, void **bytes, size_t *size)
{
    wlist a = {NULL, 0, 0, 0};
    tdm_status st;
    *bytes = NULL;
    *size = 0;
    Onnx__TensorProto *tp = tensor_proto(&a, e, t, name ? name : "", &st);
    if (tp)
        st = pack_message(e, &tp->base, bytes, size);
    wl_free(&a);
    return st;
}

/* The items of a sequence as a SequenceProto of tensors (unnamed). */
static Onnx__SequenceProto *sequence_proto(wlist *a, tdm_err *e, const tdm_tensor *seq, const char *name,
                                           tdm_status *st)
{
    Onnx__SequenceProto *sp = wl_alloc(a, 1, sizeof *sp);
    Onnx__TensorProto **items = wl_alloc(a, seq->n_items + 1, sizeof *items);
    if (!sp || !items) {
        *st = err_set(e, TDM_E_NOMEM, "out of memory");
        return NULL;
    }
    onnx__sequence_proto__init(sp);
    sp->name = (char *)name;
    sp->has_elem_type = 1;
    sp->elem_type = ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR;
    for (size_t k = 0; k < seq->n_items; k++) {
        if (!(items[k] = tensor_proto(a, e, seq->items[k], name, st)))
            return NULL;
        items[k]->name = NULL;
    }
    sp->n_tensor_values = seq->n_items;
    sp->tensor_values = items;
    return sp;
}

tdm_status onnx_write_value(tdm_err *e, const tdm_tensor *v, const char *name, int optional, tdm_kind kind,
                            void **bytes, size_t *size)
{
    wlist a = {NULL, 0, 0, 0};
    tdm_status st = TDM_OK;
    *bytes = NULL;
    *size = 0;
    if (!name)
        name = "";
    Onnx__TensorProto *tp = NULL;
    Onnx__SequenceProto *sp = NULL;
    if (v->kind == TDM_KIND_TENSOR)
        tp = tensor_proto(&a, e, v, name, &st);
    else if (v->kind == TDM_KIND_SEQUENCE)
        sp = sequence_proto(&a, e, v, name, &st);
    if (st)
        goto done;
    if (optional || v->kind == TDM_KIND_NONE) {
        /* The value inside an OptionalProto; an absent one has none. */
        Onnx__OptionalProto op = ONNX__OPTIONAL_PROTO__INIT;
        op.name = (char *)name;
        op.has_elem_type = 1;
        op.elem_type = v->kind == TDM_KIND_SEQUENCE || (v->kind == TDM_KIND_NONE && kind == TDM_KIND_SEQUENCE)
                           ? ONNX__OPTIONAL_PROTO__DATA_TYPE__SEQUENCE
                           : ONNX__OPTIONAL_PROTO__DATA_TYPE__TENSOR;
        if (tp)
            tp->name = NULL;
        if (sp)
            sp->name = NULL;
        op.tensor_value = tp;
        op.sequence_value = sp;
        st = pack_message(e, &op.base, bytes, size);
    } else if (tp || sp) {
        st = pack_message(e, tp ? &tp->base : &sp->base, bytes, size);
    } else {
        st = err_set(e, TDM_E_UNSUPPORTED, "'%s' is neither a tensor nor a sequence", name);
    }
done:
    wl_free(&a);
    return st;
}

static Onnx__TypeProto *type_proto(wlist *a, const gr_type *gt, const tdm_tensor *t)
{
    Onnx__TypeProto *tp = wl_alloc(a, 1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = wl_alloc(a, 1, sizeof *tt);
    Onnx__TensorShapeProto *sh = wl_alloc(a, 1, sizeof *sh);
    if (!tp || !tt || !sh)
        return NULL;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tdm_dtype dt = t ? t->dtype : gt->dtype;
    int rank = t ? t->rank : gt->rank;
    if (dt != TDM_UNDEFINED) {
        tt->has_elem_type = 1;
        tt->elem_type = (int32_t)dt;
    }
    if (rank < 0)
        return tp;
    Onnx__TensorShapeProto__Dimension **dims = wl_alloc(a, (size_t)rank + 1, sizeof *dims);
    if (!dims)
        return NULL;
    for (int k = 0; k < rank; k++) {
        Onnx__TensorShapeProto__Dimension *d = wl_alloc(a, 1, sizeof *d);
        if (!d)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        int64_t v = t ? t->dims[k] : gt->dims[k].v;
        if (v >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v;
        } else if (!t && gt->dims[k].sym) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)gt->dims[k].sym;
        }
        dims[k] = d;
    }
    sh->n_dim = (size_t)rank;
    sh->dim = dims;
    tt->shape = sh;
    return tp;
}

static Onnx__ValueInfoProto *value_info(wlist *a, const char *name, const gr_type *gt, const tdm_tensor *t)
{
    Onnx__ValueInfoProto *vi = wl_alloc(a, 1, sizeof *vi);
    if (!vi)
        return NULL;
    onnx__value_info_proto__init(vi);
    vi->name = (char *)name;
    vi->type = type_proto(a, gt, t);
    return vi->type ? vi : NULL;
}

/* An input that the node model carries as an initializer: a constant of
 * the graph, not a graph input (as tdm_plan_node_input_is_constant). */
static int is_constant(const gr_graph *g, int v)
{
    return v >= 0 && g->values[v].init != NULL && !g->values[v].is_input;
}

tdm_status onnx_write_node_model(tdm_err *ep, const gr_model *gm, const gr_graph *g, size_t i,
                                 const tdm_tensor *const *inputs, void **bytes, size_t *size)
{
    wlist a = {NULL, 0, 0, 0};
    tdm_status st = TDM_OK;
    char label[256];
    const gr_node *n = &g->nodes[i];
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
    Onnx__NodeProto *nodes[1] = {&node};
    Onnx__OperatorSetIdProto ops[2] = {ONNX__OPERATOR_SET_ID_PROTO__INIT, ONNX__OPERATOR_SET_ID_PROTO__INIT};
    Onnx__OperatorSetIdProto *opsp[2] = {&ops[0], &ops[1]};
    char **in_names = wl_alloc(&a, (size_t)n->n_inputs + 1, sizeof *in_names);
    char **out_names = wl_alloc(&a, (size_t)n->n_outputs + 1, sizeof *out_names);
    Onnx__AttributeProto **attrs = wl_alloc(&a, (size_t)n->n_attrs + 1, sizeof *attrs);
    Onnx__ValueInfoProto **gin = wl_alloc(&a, (size_t)n->n_inputs + 1, sizeof *gin);
    Onnx__ValueInfoProto **gout = wl_alloc(&a, (size_t)n->n_outputs + 1, sizeof *gout);
    Onnx__TensorProto **inits = wl_alloc(&a, (size_t)n->n_inputs + 1, sizeof *inits);
    if (a.oom)
        goto nomem;
    node.name = n->name;
    node.op_type = n->op_type;
    node.domain = n->domain && *n->domain ? n->domain : NULL;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        in_names[k] = v >= 0 ? g->values[v].name : "";
        if (v < 0)
            continue;
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= n->inputs[j] == v;
        if (dup)
            continue;
        if (is_constant(g, v)) {
            if (!(inits[graph.n_initializer] = tensor_proto(&a, ep, g->values[v].init, g->values[v].name, &st))) {
                if (!st)
                    goto nomem;
                goto fail;
            }
            graph.n_initializer++;
        } else {
            const tdm_tensor *t = inputs ? inputs[k] : NULL;
            if (!(gin[graph.n_input++] = value_info(&a, g->values[v].name, &g->values[v].type, t)))
                goto nomem;
        }
    }
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        out_names[k] = v >= 0 ? g->values[v].name : "";
        if (v >= 0 && !(gout[graph.n_output++] = value_info(&a, g->values[v].name, &g->values[v].type, NULL)))
            goto nomem;
    }
    for (int k = 0; k < n->n_attrs; k++) {
        const gr_attr *at = &n->attrs[k];
        Onnx__AttributeProto *x = wl_alloc(&a, 1, sizeof *x);
        if (!x)
            goto nomem;
        onnx__attribute_proto__init(x);
        x->name = at->name;
        x->has_type = 1;
        x->type = (Onnx__AttributeProto__AttributeType)at->type;
        switch (at->type) {
        case GA_FLOAT: x->has_f = 1; x->f = at->f; break;
        case GA_INT: x->has_i = 1; x->i = at->i; break;
        case GA_STRING:
            x->has_s = 1;
            x->s.data = (uint8_t *)at->s;
            x->s.len = at->s_len;
            break;
        case GA_TENSOR:
            if (!(x->t = tensor_proto(&a, ep, at->t, "", &st))) {
                if (!st)
                    goto nomem;
                goto fail;
            }
            break;
        case GA_FLOATS: x->n_floats = at->n; x->floats = at->floats; break;
        case GA_INTS: x->n_ints = at->n; x->ints = at->ints; break;
        case GA_STRINGS: {
            ProtobufCBinaryData *sd = wl_alloc(&a, at->n + 1, sizeof *sd);
            if (!sd)
                goto nomem;
            for (size_t j = 0; j < at->n; j++) {
                sd[j].data = (uint8_t *)at->strings[j];
                sd[j].len = at->string_lens ? at->string_lens[j] : strlen(at->strings[j]);
            }
            x->n_strings = at->n;
            x->strings = sd;
            break;
        }
        case GA_TENSORS: {
            Onnx__TensorProto **ts = wl_alloc(&a, at->n + 1, sizeof *ts);
            if (!ts)
                goto nomem;
            for (size_t j = 0; j < at->n; j++)
                if (!(ts[j] = tensor_proto(&a, ep, at->tensors[j], "", &st))) {
                    if (!st)
                        goto nomem;
                    goto fail;
                }
            x->n_tensors = at->n;
            x->tensors = ts;
            break;
        }
        case GA_UNDEFINED:
        case GA_GRAPH:
        case GA_GRAPHS:
        case GA_SPARSE_TENSOR:
        case GA_SPARSE_TENSORS:
        case GA_TYPE_PROTO:
        case GA_TYPE_PROTOS:
            st = err_set(ep, TDM_E_UNSUPPORTED,
                         "node %s has attribute '%s' of a kind (subgraph, sparse tensor or type) that a one-node "
                         "reproduction does not carry",
                         gr_node_label(n, label, sizeof label), at->name);
            goto fail;
        }
        attrs[node.n_attribute++] = x;
    }
    node.n_input = (size_t)n->n_inputs;
    node.input = in_names;
    node.n_output = (size_t)n->n_outputs;
    node.output = out_names;
    node.attribute = attrs;
    graph.name = "tandem_extract";
    graph.n_node = 1;
    graph.node = nodes;
    graph.input = gin;
    graph.output = gout;
    graph.initializer = inits;
    ops[0].domain = n->domain && *n->domain ? n->domain : "";
    ops[0].has_version = 1;
    ops[0].version = n->opset > 0 ? n->opset : n->version;
    model.n_opset_import = 1;
    if (n->domain && *n->domain) {
        /* the default domain too, at the model's version when it imports one */
        ops[1].domain = "";
        ops[1].has_version = 1;
        ops[1].version = 13;
        for (int k = 0; gm && k < gm->n_opsets; k++)
            if (!gm->opsets[k].domain || !*gm->opsets[k].domain)
                ops[1].version = gm->opsets[k].version;
        model.n_opset_import = 2;
    }
    model.opset_import = opsp;
    model.has_ir_version = 1;
    model.ir_version = gm && gm->ir_version > 0 ? gm->ir_version : 8;
    model.producer_name = "tandem extract";
    model.producer_version = TDM_VERSION_STRING;
    model.graph = &graph;
    st = pack_message(ep, &model.base, bytes, size);
    wl_free(&a);
    return st;
nomem:
    st = err_set(ep, TDM_E_NOMEM, "out of memory");
fail:
    wl_free(&a);
    return st;
}
