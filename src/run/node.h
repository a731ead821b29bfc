/* The node runner: running one node on one device, builtin or plugin, with
 * its copies. The heterogeneous executor (hexec.c) and calibration
 * (calibrate.c) run every node through it; the all-cpu executor (exec.c)
 * and constant folding (graph/fold.c) build the same op_ctx through
 * op_ctx_init (ops/op.h), the one place an op_ctx is made.
 *
 * Errors are left unprefixed for a built-in device (the caller names the
 * node its own way); a device used through the public ABI fails with
 * "device 'D' failed on node N: why" (TDM_E_DEVICE). */
#ifndef TDM_RUN_NODE_H
#define TDM_RUN_NODE_H

#include "devices/device_internal.h"
#include "run/exec.h"

/* Runs node on built-in device di (ext->run_host) on in[] (node->n_inputs
 * entries, NULL for an omitted input) into out[] (node->n_outputs new
 * tensors, allocated here). scope: the run's scope (its callbacks serve
 * subgraphs and constant inputs), or NULL. On failure out[] is cleared. */
tdm_status node_run_builtin(tdm_err *e, const dev_instance *di, const gr_node *node, exec_scope *scope,
                            const tdm_tensor *const *in, tdm_tensor **out, int threads, uint64_t *rng);

/* Runs node (desc: its description for the ABI) on a device used through
 * the public ABI (plugins, OpenCL) on device buffers in[] into out[] (run()
 * allocates them; out[] zeroed by the caller). On failure frees what run()
 * allocated. dev_ms (may be NULL) receives the device's own time of the run
 * (dev_last_run_ms: waits for what run() enqueued), -1 when it has no
 * timer. */
tdm_status node_run_plugin(tdm_err *e, const dev_instance *di, const gr_node *node, const tdm_node_desc *desc,
                           const tdm_device_tensor *in, tdm_device_tensor *out, double *dev_ms);

/* node_run_plugin on host tensors: in[] (tensors, or NULL) copied to new
 * device buffers, the node run, its outputs copied back into new host
 * tensors out[] (node->n_outputs; NULL for an output the device did not
 * produce), every device buffer freed. *ms: the device's own time when it
 * has a timer, else the wall time of run(). */
tdm_status node_run_plugin_host(tdm_err *e, const dev_instance *di, const gr_node *node, const tdm_node_desc *desc,
                                const tdm_tensor *const *in, tdm_tensor **out, double *ms);

#endif
