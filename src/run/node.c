/* The node runner (node.h). */
#include "run/node.h"
#include "core/mem.h"
#include "core/tensor.h"
#include "run/observe.h"

#include <string.h>

static double now_ms(void) { return (double)obs_now_ns() / 1e6; }

tdm_status node_run_builtin(tdm_err *e, const dev_instance *di, const gr_node *node, exec_scope *scope,
                            const tdm_tensor *const *in, tdm_tensor **out, int threads, uint64_t *rng)
{
    tdm_status st = op_out_shells(e, node->n_outputs, out);
    if (st)
        return st;
    op_ctx ctx;
    op_ctx_init(&ctx, node, in, out, e, scope ? &scope->caller : NULL, threads, rng);
    if ((st = di->ext->run_host(di->dev.ctx, &ctx)) != TDM_OK)
        for (int i = 0; i < node->n_outputs; i++) {
            tdm_tensor_destroy(out[i]);
            out[i] = NULL;
        }
    return st;
}

tdm_status node_run_plugin(tdm_err *e, const dev_instance *di, const gr_node *node, const tdm_node_desc *desc,
                           const tdm_device_tensor *in, tdm_device_tensor *out, double *dev_ms)
{
    const tdm_device_iface *f = di->dev.iface;
    char label[256], msg[512];
    msg[0] = '\0';
    if (dev_ms)
        *dev_ms = -1;
    tdm_status st = f->run(di->dev.ctx, desc, in, out, msg, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    if (st) {
        for (int i = 0; i < node->n_outputs; i++)
            if (out[i].buf) {
                f->buffer_free(di->dev.ctx, out[i].buf);
                out[i].buf = NULL;
            }
        return err_set(e, TDM_E_DEVICE, "device '%s' failed on node %s: %s", di->name,
                       gr_node_label(node, label, sizeof label), msg[0] ? msg : tdm_status_str(st));
    }
    if (dev_ms)
        *dev_ms = dev_last_run_ms(di);
    return TDM_OK;
}

tdm_status node_run_plugin_host(tdm_err *e, const dev_instance *di, const gr_node *node, const tdm_node_desc *desc,
                                const tdm_tensor *const *in, tdm_tensor **out, double *ms)
{
    const tdm_device_iface *f = di->dev.iface;
    tdm_device_tensor *din = mem_calloc((size_t)node->n_inputs + 1, sizeof *din);
    tdm_device_tensor *dout = mem_calloc((size_t)node->n_outputs + 1, sizeof *dout);
    tdm_status st = TDM_OK;
    char label[256];
    *ms = -1;
    for (int o = 0; o < node->n_outputs; o++)
        out[o] = NULL;
    if (!din || !dout) {
        st = err_set(e, TDM_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < node->n_inputs; i++) {
        const tdm_tensor *t = in[i];
        if (!t || t->kind != TDM_KIND_TENSOR)
            continue;
        size_t bytes = t->nbytes;
        din[i].dtype = t->dtype;
        din[i].rank = t->rank;
        for (int r = 0; r < t->rank && r < 16; r++)
            din[i].dims[r] = t->dims[r];
        din[i].bytes = bytes;
        if (f->buffer_alloc(di->dev.ctx, bytes ? bytes : 1, &din[i].buf) != TDM_OK ||
            (bytes && f->copy_to_device(di->dev.ctx, din[i].buf, t->data, bytes) != TDM_OK)) {
            st = err_set(e, TDM_E_DEVICE, "device '%s' failed on node %s: cannot copy input %d to the device",
                         di->name, gr_node_label(node, label, sizeof label), i);
            goto done;
        }
    }
    double t0 = now_ms(), dm;
    if ((st = node_run_plugin(e, di, node, desc, din, dout, &dm)) != TDM_OK)
        goto done;
    *ms = dm >= 0 ? dm : now_ms() - t0;
    for (int o = 0; o < node->n_outputs; o++) {
        const tdm_device_tensor *x = &dout[o];
        if (!x->buf)
            continue;
        if ((st = tensor_new(e, x->dtype, x->rank, x->dims, &out[o])) != TDM_OK)
            goto done;
        size_t bytes = out[o]->nbytes;
        if (bytes != x->bytes && x->bytes) {
            st = err_set(e, TDM_E_DEVICE, "device '%s' failed on node %s: output %d has %zu bytes, its shape needs %zu",
                         di->name, gr_node_label(node, label, sizeof label), o, x->bytes, bytes);
            goto done;
        }
        if (bytes && f->copy_to_host(di->dev.ctx, out[o]->data, x->buf, bytes) != TDM_OK) {
            st = err_set(e, TDM_E_DEVICE, "device '%s' failed on node %s: cannot copy output %d to the host",
                         di->name, gr_node_label(node, label, sizeof label), o);
            goto done;
        }
    }
done:
    for (int i = 0; din && i < node->n_inputs; i++)
        if (din[i].buf)
            f->buffer_free(di->dev.ctx, din[i].buf);
    for (int o = 0; dout && o < node->n_outputs; o++)
        if (dout[o].buf)
            f->buffer_free(di->dev.ctx, dout[o].buf);
    if (st)
        for (int o = 0; o < node->n_outputs; o++) {
            tdm_tensor_destroy(out[o]);
            out[o] = NULL;
        }
    mem_free(din);
    mem_free(dout);
    return st;
}
