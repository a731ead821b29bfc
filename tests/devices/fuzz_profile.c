/* libFuzzer target: the vnpu profile parser, then supports() and the
 * estimates of a parsed profile on a few fixed nodes. */
#include "devices/device_internal.h"
#include "devices/vnpu/vnpu.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void probe(struct vnpu_ctx *c)
{
    static const int64_t xd[] = {1, 8, 16, 16}, wd[] = {8, 1, 3, 3}, yd[] = {1, 8, 14, 14};
    static const int64_t dil[] = {2, 2};
    tdm_tensor_desc in[2] = {{"x", TDM_FLOAT, 4, xd, NULL}, {"w", TDM_FLOAT, 4, wd, NULL}};
    tdm_tensor_desc out[1] = {{"y", TDM_FLOAT, 4, yd, NULL}};
    tdm_attr_desc attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].name = "group";
    attrs[0].type = TDM_ATTR_INT;
    attrs[0].i = 8;
    attrs[1].name = "dilations";
    attrs[1].type = TDM_ATTR_INTS;
    attrs[1].n = 2;
    attrs[1].ints = dil;
    attrs[2].name = "mode";
    attrs[2].type = TDM_ATTR_STRING;
    attrs[2].s = "linear";
    static const char *const ops[] = {"Conv", "Resize", "Relu", "LayerNormalization", "Add"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        tdm_node_desc n = {"n", ops[k], "", 13, 2, in, 1, out, 3, attrs};
        tdm_verdict v;
        vnpu_iface.supports(c, &n, &v);
        int modeled;
        (void)vnpu_iface.estimate_ms(c, &n, &modeled);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdm_err e;
    struct vnpu_ctx *c = NULL;
    if (vnpu_parse(&e, "fuzz.json", (const char *)data, size, &c) == TDM_OK) {
        probe(c);
        vnpu_ctx_free(c);
    }
    return 0;
}
