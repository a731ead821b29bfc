/* The protobuf wire format, walked by hand: protobuf-c unpacks whole
 * messages recursively and copies every `bytes` field, so the loader splits
 * a model into pieces itself and checks the nesting before protobuf-c sees
 * any of it. */
#include "onnx/internal.h"

#include <limits.h>

/* A varint of at most max bytes at buf[*pos, end). */
static int read_varint(const uint8_t *buf, size_t end, size_t *pos, int max, uint64_t *v)
{
    uint64_t x = 0;
    size_t p = *pos;
    for (int i = 0; i < max; i++) {
        if (p >= end)
            return -1;
        uint8_t b = buf[p++];
        if (i < 10)
            x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p;
            *v = x;
            return 0;
        }
    }
    return -1;
}

int onnx_pb_next(const uint8_t *buf, size_t end, size_t *pos, onnx_pbfield *f, const char **why)
{
    uint64_t tag, v;
    size_t p = *pos;
    if (p >= end)
        return 0;
    f->start = p;
    /* protobuf-c reads tags of at most 5 bytes (32 bits). */
    if (read_varint(buf, end, &p, 5, &tag) || tag > UINT32_MAX) {
        *why = "a field tag is cut short or too long";
        return -1;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (f->num == 0) {
        *why = "a field has number 0";
        return -1;
    }
    f->data = p;
    f->len = 0;
    f->v = 0;
    switch (f->wire) {
    case PB_VARINT:
        if (read_varint(buf, end, &p, 10, &v)) {
            *why = "a varint is cut short or longer than 10 bytes";
            return -1;
        }
        f->v = v;
        break;
    case PB_I64:
        if (end - p < 8) {
            *why = "a 64-bit field is cut short";
            return -1;
        }
        p += 8;
        break;
    case PB_I32:
        if (end - p < 4) {
            *why = "a 32-bit field is cut short";
            return -1;
        }
        p += 4;
        break;
    case PB_LEN:
        /* protobuf-c reads lengths of at most 5 bytes and up to INT_MAX. */
        if (read_varint(buf, end, &p, 5, &v)) {
            *why = "a length prefix is cut short or too long";
            return -1;
        }
        if (v > INT_MAX) {
            *why = "a field is longer than 2 GiB";
            return -1;
        }
        if (v > end - p) {
            *why = "a field runs past the end of its message";
            return -1;
        }
        f->data = p;
        f->len = (size_t)v;
        p += (size_t)v;
        break;
    default:
        *why = f->wire == 3 || f->wire == 4 ? "it holds a protobuf group" : "a field has an invalid wire type";
        return -1;
    }
    f->end = p;
    *pos = p;
    return 1;
}

/* The wire type a field of this protobuf-c type is written with. */
static int field_wire(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_BOOL:
    case PROTOBUF_C_TYPE_ENUM:
        return PB_VARINT;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return PB_I32;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return PB_I64;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return PB_LEN;
    }
    return PB_LEN;
}

typedef struct check_frame {
    const ProtobufCMessageDescriptor *d;
    size_t end;
} check_frame;

onnx_pbcheck onnx_pb_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *d, int graph_depth,
                           size_t *at, const char **why)
{
    check_frame stack[ONNX_MAX_MSG_DEPTH + 1];
    int top = 0;
    size_t pos = 0;
    stack[0].d = d;
    stack[0].end = len;
    if (d == &onnx__graph_proto__descriptor)
        graph_depth++;
    for (;;) {
        onnx_pbfield f;
        int r = onnx_pb_next(buf, stack[top].end, &pos, &f, why);
        if (r < 0) {
            *at = pos;
            return ONNX_PB_MALFORMED;
        }
        if (r == 0) {
            if (top == 0)
                return ONNX_PB_OK;
            if (stack[top].d == &onnx__graph_proto__descriptor)
                graph_depth--;
            top--;
            continue;
        }
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(stack[top].d, f.num);
        if (!fd)
            continue; /* unknown field: protobuf-c keeps its bytes, does not parse them */
        int want = field_wire(fd);
        if (f.wire != want) {
            /* repeated scalars may also come packed */
            if (!(f.wire == PB_LEN && fd->label == PROTOBUF_C_LABEL_REPEATED && want != PB_LEN)) {
                *at = f.start;
                *why = "a field has the wrong wire type";
                return ONNX_PB_MALFORMED;
            }
            if ((want == PB_I32 && f.len % 4) || (want == PB_I64 && f.len % 8)) {
                *at = f.start;
                *why = "a packed field has a length that is not a whole number of elements";
                return ONNX_PB_MALFORMED;
            }
            continue;
        }
        if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        /* descend into the submessage: its fields are read next */
        if (top == ONNX_MAX_MSG_DEPTH) {
            *at = f.start;
            *why = "messages are nested too deep";
            return ONNX_PB_MSG_DEPTH;
        }
        const ProtobufCMessageDescriptor *sub = fd->descriptor;
        if (sub == &onnx__graph_proto__descriptor && ++graph_depth > ONNX_MAX_GRAPH_DEPTH + 1) {
            *at = f.start;
            *why = "subgraphs are nested too deep";
            return ONNX_PB_GRAPH_DEPTH;
        }
        top++;
        stack[top].d = sub;
        stack[top].end = f.end;
        pos = f.data;
    }
}

ProtobufCMessage *onnx_pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len)
{
    /* protobuf-c reads from buf and never writes it. */
    return protobuf_c_message_unpack(d, NULL, len, len ? buf : (const uint8_t *)"");
}
