/* TensorProto / SequenceProto / OptionalProto files → values (the ONNX
 * backend tests' input_N.pb and output_N.pb). */
#include "onnx/internal.h"
#include "core/mem.h"

#include <stdio.h>
#include <string.h>

typedef enum msg_kind { MSG_TENSOR, MSG_SEQUENCE, MSG_OPTIONAL } msg_kind;

static const char *msg_name(msg_kind k)
{
    return k == MSG_TENSOR ? "TensorProto" : k == MSG_SEQUENCE ? "SequenceProto" : "OptionalProto";
}

static const ProtobufCMessageDescriptor *msg_desc(msg_kind k)
{
    return k == MSG_TENSOR     ? &onnx__tensor_proto__descriptor
           : k == MSG_SEQUENCE ? &onnx__sequence_proto__descriptor
                               : &onnx__optional_proto__descriptor;
}

static tdm_status seq_from_proto(onnx_ctx *c, Onnx__SequenceProto *sp, tdm_tensor **out)
{
    tdm_status st;
    char what[160];
    *out = NULL;
    if (sp->n_sequence_values || sp->n_map_values || sp->n_optional_values ||
        (sp->has_elem_type && sp->elem_type >= ONNX__SEQUENCE_PROTO__DATA_TYPE__SEQUENCE))
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s holds a sequence of %s; tandem supports sequences of tensors",
                       c->fname,
                       sp->n_sequence_values || sp->elem_type == ONNX__SEQUENCE_PROTO__DATA_TYPE__SEQUENCE ? "sequences"
                       : sp->n_map_values || sp->elem_type == ONNX__SEQUENCE_PROTO__DATA_TYPE__MAP       ? "maps"
                       : sp->n_optional_values || sp->elem_type == ONNX__SEQUENCE_PROTO__DATA_TYPE__OPTIONAL
                           ? "optionals"
                           : "values of an unknown type");
    tdm_tensor *seq = NULL;
    size_t n = sp->n_tensor_values + sp->n_sparse_tensor_values;
    for (size_t i = 0; i < n; i++) {
        tdm_tensor *t;
        snprintf(what, sizeof what, "sequence item #%zu", i);
        st = i < sp->n_tensor_values
                 ? onnx_tensor_from_proto(c, sp->tensor_values[i], what, &t)
                 : onnx_sparse_from_proto(c, sp->sparse_tensor_values[i - sp->n_tensor_values], what, &t);
        if (st)
            goto fail;
        if (!seq && (st = tdm_sequence_create(t->dtype, &seq)) != TDM_OK) {
            tdm_tensor_destroy(t);
            st = err_set(c->e, st, "%s: out of memory", c->fname);
            goto fail;
        }
        if (t->dtype != seq->dtype) {
            st = err_set(c->e, TDM_E_MODEL, "%s: sequence item #%zu is of %s, item #0 of %s", c->fname, i,
                         tdm_dtype_name(t->dtype), tdm_dtype_name(seq->dtype));
            tdm_tensor_destroy(t);
            goto fail;
        }
        if ((st = tdm_sequence_append(seq, t)) != TDM_OK) {
            st = err_set(c->e, st, "%s: out of memory", c->fname);
            goto fail;
        }
    }
    if (!seq && (st = tdm_sequence_create(TDM_UNDEFINED, &seq)) != TDM_OK)
        return err_set(c->e, st, "%s: out of memory", c->fname);
    *out = seq;
    return TDM_OK;
fail:
    tdm_tensor_destroy(seq);
    return st;
}

static tdm_status opt_from_proto(onnx_ctx *c, Onnx__OptionalProto *op, tdm_tensor **out)
{
    tdm_status st;
    *out = NULL;
    if (op->map_value || op->optional_value)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s holds an optional %s, which tandem does not support", c->fname,
                       op->map_value ? "map" : "optional");
    if (op->tensor_value)
        return onnx_tensor_from_proto(c, op->tensor_value, "the optional's tensor", out);
    if (op->sparse_tensor_value)
        return onnx_sparse_from_proto(c, op->sparse_tensor_value, "the optional's tensor", out);
    if (op->sequence_value)
        return seq_from_proto(c, op->sequence_value, out);
    if ((st = tdm_none_create(out)) != TDM_OK)
        return err_set(c->e, st, "%s: out of memory", c->fname);
    return TDM_OK;
}

/* Decodes buf as message k. *decoded says whether protobuf accepted the bytes
 * as that message (with the fields that identify it). */
static tdm_status decode_as(onnx_ctx *c, const uint8_t *buf, size_t len, msg_kind k, int *decoded, tdm_tensor **out)
{
    size_t at;
    const char *why;
    *decoded = 0;
    onnx_pbcheck r = onnx_pb_check(buf, len, msg_desc(k), 0, &at, &why);
    if (r == ONNX_PB_MSG_DEPTH || r == ONNX_PB_GRAPH_DEPTH)
        return err_set(c->e, TDM_E_UNSUPPORTED, "%s nests protobuf messages too deep (at byte %zu)", c->fname, at);
    if (r != ONNX_PB_OK)
        return err_set(c->e, TDM_E_INPUT, "%s is not an ONNX %s (protobuf decoding failed at byte %zu: %s)", c->fname,
                       msg_name(k), at, why);
    ProtobufCMessage *msg = onnx_pb_unpack(msg_desc(k), buf, len);
    if (!msg)
        return err_set(c->e, TDM_E_INPUT, "%s is not an ONNX %s (protobuf decoding failed)", c->fname, msg_name(k));
    tdm_status st;
    if (k == MSG_TENSOR) {
        Onnx__TensorProto *tp = (Onnx__TensorProto *)msg;
        char what[96];
        if (tp->name && *tp->name)
            snprintf(what, sizeof what, "tensor '%.64s'", tp->name);
        else
            snprintf(what, sizeof what, "the tensor");
        *decoded = tp->has_data_type && !tp->segment;
        st = onnx_tensor_from_proto(c, tp, what, out);
    } else if (k == MSG_SEQUENCE) {
        Onnx__SequenceProto *sp = (Onnx__SequenceProto *)msg;
        *decoded = sp->has_elem_type;
        st = seq_from_proto(c, sp, out);
    } else {
        Onnx__OptionalProto *op = (Onnx__OptionalProto *)msg;
        *decoded = op->has_elem_type;
        st = opt_from_proto(c, op, out);
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    return st;
}

/* Whether bytes expected to hold a value of kind k (tensor or sequence)
 * hold an OptionalProto of that kind instead, as the ONNX test data store
 * a value declared optional(...): only fields 1-7 with their wire types, a
 * name without control characters, elem_type present, at most one value
 * field (once) that agrees with elem_type (or elem_type UNDEFINED, as onnx
 * 1.12 writes an absent one) and with k. The plain messages share field
 * numbers but do not qualify: a TensorProto's dims are field 1 as varints
 * and its data fields disagree with its data_type read as an elem_type; a
 * SequenceProto of tensors has elem_type TENSOR and field 3. */
static int looks_optional(const uint8_t *buf, size_t len, tdm_kind k)
{
    size_t pos = 0;
    onnx_pbfield f;
    const char *why;
    int r, has_elem = 0, n_values = 0;
    uint32_t field = 0;
    uint64_t elem = 0;
    while ((r = onnx_pb_next(buf, len, &pos, &f, &why)) > 0) {
        if (f.num == 1 && f.wire == PB_LEN) {
            for (size_t i = 0; i < f.len; i++)
                if (buf[f.data + i] < 0x20)
                    return 0; /* packed numbers, not a name */
        } else if (f.num == 2 && f.wire == PB_VARINT) {
            has_elem = 1;
            elem = f.v;
        } else if (f.num >= 3 && f.num <= 7 && f.wire == PB_LEN) {
            n_values++;
            field = f.num;
        } else {
            return 0;
        }
    }
    if (r < 0 || !has_elem || n_values > 1)
        return 0;
    if (elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__UNDEFINED)
        return !n_values || field == (k == TDM_KIND_SEQUENCE ? 5u : 3u) || (k == TDM_KIND_TENSOR && field == 4);
    if (!n_values)
        return k == TDM_KIND_SEQUENCE ? elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__SEQUENCE
                                      : elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__TENSOR ||
                                            elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__SPARSE_TENSOR;
    switch (field) {
    case 3: return k == TDM_KIND_TENSOR && elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__TENSOR;
    case 4: return k == TDM_KIND_TENSOR && elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__SPARSE_TENSOR;
    case 5: return k == TDM_KIND_SEQUENCE && elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__SEQUENCE;
    case 6: return elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__MAP;           /* refused with a sentence */
    default: return elem == ONNX__OPTIONAL_PROTO__DATA_TYPE__OPTIONAL;     /* refused with a sentence */
    }
}

/* optional: the value is declared optional(*expect). */
static tdm_status read_value(onnx_ctx *c, const uint8_t *buf, size_t len, const tdm_kind *expect, int optional,
                             tdm_tensor **out)
{
    int decoded;
    *out = NULL;
    if (len == 0)
        return err_set(c->e, TDM_E_INPUT, "%s is empty, not an ONNX TensorProto, SequenceProto or OptionalProto",
                       c->fname);
    if (expect) {
        msg_kind k = *expect == TDM_KIND_TENSOR ? MSG_TENSOR : *expect == TDM_KIND_SEQUENCE ? MSG_SEQUENCE : MSG_OPTIONAL;
        if (!optional || k == MSG_OPTIONAL || !looks_optional(buf, len, *expect))
            return decode_as(c, buf, len, k, &decoded, out);
        /* An optional of the expected kind (its tensor or sequence, or
         * absent); should that reading fail, the plain message's reading
         * is taken when it succeeds, else the optional's error stands. */
        tdm_err mine;
        tdm_err *saved = c->e;
        err_clear(&mine);
        c->e = &mine;
        tdm_status st = decode_as(c, buf, len, MSG_OPTIONAL, &decoded, out);
        c->e = saved;
        if (st == TDM_OK)
            return TDM_OK;
        if (decode_as(c, buf, len, k, &decoded, out) == TDM_OK)
            return TDM_OK;
        tdm_tensor_destroy(*out);
        *out = NULL;
        if (saved)
            *saved = mine;
        return st;
    }
    /* The three messages share field numbers; take the first reading that
     * decodes, identifies itself and converts. */
    tdm_err first;
    tdm_err *saved = c->e;
    tdm_status st0 = TDM_OK;
    int have_first = 0;
    for (int k = MSG_TENSOR; k <= MSG_OPTIONAL; k++) {
        tdm_err mine;
        err_clear(&mine);
        c->e = &mine;
        tdm_status st = decode_as(c, buf, len, (msg_kind)k, &decoded, out);
        c->e = saved;
        if (st == TDM_OK && decoded)
            return TDM_OK;
        tdm_tensor_destroy(*out);
        *out = NULL;
        if (decoded && !have_first) {
            first = mine;
            st0 = st;
            have_first = 1;
        }
    }
    if (have_first && st0 != TDM_OK) {
        if (saved)
            *saved = first;
        return st0;
    }
    return err_set(c->e, TDM_E_INPUT, "%s is not an ONNX TensorProto, SequenceProto or OptionalProto", c->fname);
}

/* A value file that is inconsistent is a bad input, not a bad model. */
static tdm_status as_input_error(tdm_err *e, tdm_status st)
{
    if (st != TDM_E_MODEL)
        return st;
    if (e)
        e->status = TDM_E_INPUT;
    return TDM_E_INPUT;
}

static tdm_status memory_value(tdm_err *e, const void *data, size_t size, const char *name, const tdm_kind *expect,
                               int optional, tdm_tensor **out)
{
    onnx_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.fname = name && *name ? name : "<memory>";
    tdm_status st = read_value(&c, data, data ? size : 0, expect, optional, out);
    onnx_ctx_free(&c);
    return as_input_error(e, st);
}

static tdm_status file_value(tdm_err *e, const char *path, const tdm_kind *expect, int optional, tdm_tensor **out)
{
    onnx_ctx c;
    const uint8_t *data;
    size_t size;
    int mapped;
    *out = NULL;
    if (!path || !*path)
        return err_set(e, TDM_E_USAGE, "no value file was given");
    memset(&c, 0, sizeof c);
    c.e = e;
    c.fname = onnx_basename(path);
    char *dir = onnx_dirname(path);
    if (!dir)
        return err_set(e, TDM_E_NOMEM, "out of memory");
    c.dir = dir;
    tdm_status st = onnx_file_read(e, &file_value_pb, path, &data, &size, &mapped);
    if (st == TDM_OK)
        st = read_value(&c, data, size, expect, optional, out);
    onnx_file_release(data, size, mapped);
    onnx_ctx_free(&c);
    mem_free(dir);
    return as_input_error(e, st);
}

tdm_status onnx_read_value(tdm_err *e, const char *path, const tdm_kind *expect, tdm_tensor **out)
{
    return file_value(e, path, expect, 0, out);
}

tdm_status onnx_read_optional(tdm_err *e, const char *path, tdm_kind kind, tdm_tensor **out)
{
    return file_value(e, path, &kind, 1, out);
}

tdm_status onnx_read_value_memory(tdm_err *e, const void *data, size_t size, const char *name,
                                  const tdm_kind *expect, tdm_tensor **out)
{
    return memory_value(e, data, size, name, expect, 0, out);
}

tdm_status onnx_read_optional_memory(tdm_err *e, const void *data, size_t size, const char *name, tdm_kind kind,
                                     tdm_tensor **out)
{
    return memory_value(e, data, size, name, &kind, 1, out);
}
