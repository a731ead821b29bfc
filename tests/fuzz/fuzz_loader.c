/* libFuzzer target for the ONNX loader: every input is tried as a model
 * (onnx_load_memory) and as a value file (onnx_read_value_memory, as each
 * kind of message). A failure must come with a sentence naming the input;
 * a success must be a consistent IR. Anything else aborts, which libFuzzer
 * reports as a crash. */
#include "onnx/onnx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                                                     \
    do {                                                                                                               \
        if (!(c))                                                                                                      \
            abort();                                                                                                   \
    } while (0)

static volatile unsigned sink;

static void touch_tensor(const tdm_tensor *t)
{
    if (!t)
        return;
    REQUIRE(t->rank >= 0 && t->rank <= TDM_MAX_RANK);
    if (t->kind == TDM_KIND_SEQUENCE) {
        for (size_t i = 0; i < t->n_items; i++)
            touch_tensor(t->items[i]);
        return;
    }
    if (t->kind != TDM_KIND_TENSOR)
        return;
    size_t count;
    REQUIRE(shape_count(t->rank, t->dims, &count) == 0 && count == t->count);
    REQUIRE(t->data != NULL);
    if (t->dtype == TDM_STRING) {
        for (size_t i = 0; i < t->count; i++)
            sink += (unsigned)strlen(tensor_str(t, i));
        return;
    }
    REQUIRE(t->nbytes == t->count * tdm_dtype_size(t->dtype));
    const uint8_t *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++) /* ASan checks every byte is ours */
        sink += p[i];
}

static void check_graph(const gr_graph *g)
{
    for (int i = 0; i < g->n_values; i++) {
        REQUIRE(g->values[i].name != NULL);
        REQUIRE(gr_value_find(g, g->values[i].name) == i);
        touch_tensor(g->values[i].init);
    }
    for (int i = 0; i < g->n_inputs; i++)
        REQUIRE(g->inputs[i] >= 0 && g->inputs[i] < g->n_values && g->values[g->inputs[i]].is_input);
    for (int i = 0; i < g->n_outputs; i++)
        REQUIRE(g->outputs[i] >= 0 && g->outputs[i] < g->n_values && g->values[g->outputs[i]].is_output);
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        REQUIRE(n->name && n->op_type && n->domain);
        for (int k = 0; k < n->n_inputs; k++)
            REQUIRE(n->inputs[k] >= -1 && n->inputs[k] < g->n_values);
        for (int k = 0; k < n->n_outputs; k++)
            REQUIRE(n->outputs[k] >= -1 && n->outputs[k] < g->n_values);
        for (int a = 0; a < n->n_attrs; a++) {
            const gr_attr *at = &n->attrs[a];
            touch_tensor(at->t);
            if (at->g) {
                REQUIRE(at->g->parent == g && at->g->depth == g->depth + 1);
                check_graph(at->g);
            }
            for (size_t k = 0; at->tensors && k < at->n; k++)
                touch_tensor(at->tensors[k]);
            for (size_t k = 0; at->graphs && k < at->n; k++)
                check_graph(at->graphs[k]);
            for (size_t k = 0; at->strings && k < at->n; k++)
                sink += (unsigned)strlen(at->strings[k]);
        }
    }
}

static void check_error(const tdm_err *e, tdm_status st)
{
    REQUIRE(st != TDM_OK && st != TDM_E_INTERNAL);
    REQUIRE(e->status == st);
    REQUIRE(strstr(e->msg, "fuzz.") != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    tdm_status st = onnx_load_memory(&e, data, size, "fuzz.onnx", &m);
    if (st == TDM_OK) {
        REQUIRE(m && m->main);
        check_graph(m->main);
    } else {
        REQUIRE(m == NULL);
        check_error(&e, st);
    }
    gr_model_free(m);

    static const tdm_kind kinds[] = {TDM_KIND_TENSOR, TDM_KIND_SEQUENCE, TDM_KIND_NONE};
    for (int k = -1; k < 3; k++) {
        tdm_tensor *t = NULL;
        err_clear(&e);
        st = onnx_read_value_memory(&e, data, size, "fuzz.pb", k < 0 ? NULL : &kinds[k], &t);
        if (st == TDM_OK)
            touch_tensor(t);
        else
            check_error(&e, st);
        tdm_tensor_destroy(t);
    }
    /* as a value declared optional(tensor) and optional(sequence) */
    for (int k = 0; k < 2; k++) {
        tdm_tensor *t = NULL;
        err_clear(&e);
        st = onnx_read_optional_memory(&e, data, size, "fuzz.pb", kinds[k], &t);
        if (st == TDM_OK)
            touch_tensor(t);
        else
            check_error(&e, st);
        tdm_tensor_destroy(t);
    }
    return 0;
}
