/* Calibration files (`tandem calibrate`, tdm_calibrate) and the precision
 * trigger (--calibration FILE). Running the calibration is run/calibrate.h's
 * job; this header holds what the planner needs: node signatures, the
 * figures two tensors compare by, reading the files.
 *
 * Calibration runs the model once in the graph's order on cpu in fp32 (the
 * reference), keeping each value until its last reader, and for every node:
 *   time      cpu (and any device with a host path that is not modeled):
 *             the median of `repeat` runs of the node on the reference
 *             inputs; vnpu: its modeled estimate_ms; devices used through
 *             the public ABI (opencl, plugins): the median of `repeat` runs
 *             of the node on the device (inputs copied to device buffers,
 *             run(), outputs copied back; the time is the device's own timer
 *             for OpenCL — profiling events —, else the wall time of run();
 *             "timer": "device" or "wall", and their estimate_ms as
 *             "estimate_ms" when they give one).
 *   error     on every non-cpu device that supports the node (host path,
 *             or through the public ABI as for the time): the node run alone
 *             on the reference inputs, its outputs
 *             against the reference outputs — max |diff|, RMSE, cosine;
 *             non-finite device values where the reference is finite give
 *             cosine 0 and max_abs null ("nonfinite": true).
 *   chain     the same figures for the value the device computes when every
 *             node it supports runs on it, fed by its own earlier outputs
 *             (nodes it does not support run on cpu): the error that builds
 *             up along the chain.
 * and for every non-cpu device, the copy cost: per copy and per byte
 * (vnpu: modeled from copy_ms; plugins: measured with 4 KiB and 4 MiB
 * copies through buffer_alloc/copy_to_device/copy_to_host) and, through the
 * ABI, "round_trip_ms" (the median over its nodes of a run's wall time less
 * its device time and copies: what one partition costs beyond its nodes).
 * tdm_calibrate then runs the model in two all-cpu sessions (default
 * threads) and adds per entry cpu's "fused_ms" (fusion on: the node as a
 * fused cpu partition runs it, Winograd and the chain it heads; the mean
 * over the entry's nodes the fusion does not swallow) and "threaded_ms"
 * (fusion off: the node run unfused), which replace cpu's "ms" as its
 * estimates (plan_node_est_in says which applies).
 *
 * The file (JSON): {"tandem_calibration": 1, "model", "machine": {hostname,
 * os, cpu, cores}, "devices": [{name, kind, precision, copy: {per_copy_ms,
 * per_byte_ms, modeled}}], "inputs": [{name, shape}], "repeat",
 * "nodes": {KEY: {"op", "signature", "names": [...], "devices": {DEVICE:
 * {"supported", "ms", "modeled", "error": {max_abs, rmse, cosine},
 * "chain": {...}}}}}}. KEY is the node signature: op type, domain, opset,
 * attributes, input dtypes and shapes and a hash of constant inputs (the
 * weights), hashed (FNV-1a 64) as "OP:16hex" — it does not contain node
 * names, so it survives renaming. Nodes with equal keys are merged keeping
 * the worst figures.
 *
 * Precision trigger (plan.c, apply_precision): with a calibration file, a
 * node whose figures on device D are outside the thresholds (cosine below
 * min_cosine, default 0.99; max_abs above max_abs when set) is refused by D
 * with reason PRECISION and the figures. A node within bounds alone whose
 * chain figures cross the threshold while those of every producer on the
 * chain are within is the point where accumulated error crosses it: it is
 * refused too (PRECISION, "accumulated error"), and listed in the ledger's
 * "precision" section. Nodes missing from the file are left alone and
 * counted. */
#ifndef TDM_PLAN_CALIB_H
#define TDM_PLAN_CALIB_H

#include "plan/plan.h"

/* The node signature: *key "OP:16hex" (key_size >= 96) and, when readable
 * is not NULL, the readable signature text (mem_alloc'ed). contents: 1
 * hashes the bytes of constant inputs into it (the calibration file's
 * keys); 0 leaves them out, reading no weight (the guard's probe keys its
 * entries by node name: issue 20 item 5). */
tdm_status plan_node_signature(tdm_err *e, const tdm_node_desc *d, int contents, char *key, size_t key_size,
                               char **readable);

/* The figures of a tensor against its reference: max |diff|, RMSE, cosine;
 * non-finite values where the reference is finite give cosine 0 and max_abs
 * INFINITY (nonfinite 1). valid 0: not comparable (not tensors, strings). */
typedef struct calib_metrics {
    int valid;
    double max_abs, rmse, cosine;
    int nonfinite;
} calib_metrics;
void calib_compare(const tdm_tensor *ref, const tdm_tensor *got, calib_metrics *m);
/* acc becomes the worst of acc and m (several outputs of a node). */
void calib_merge_metrics(calib_metrics *acc, const calib_metrics *m);
/* "f32", "f16", "bf16", … as the signatures and the files name them. */
const char *calib_dtype_name(tdm_dtype dt);
/* The number member name of JSON object o, INFINITY for null, else dflt. */
struct cJSON;
double calib_json_num(const struct cJSON *o, const char *name, double dflt);

/* Figures of one (node signature, device) from a file. */
typedef struct calib_figs {
    int has_error, has_chain, has_ms, measured;
    double cosine, max_abs, rmse;       /* max_abs INFINITY: non-finite */
    double chain_cosine, chain_max_abs, chain_rmse;
    double ms;
    /* the reference's range at this node (device-independent): max |x| of
     * its float inputs (constants included) and outputs, and the fraction
     * of nonzero outputs that round to zero in float16 / bfloat16 */
    int has_range;
    double in_max, out_max, flush_fp16, flush_bf16;
} calib_figs;

typedef struct calib_data calib_data;
tdm_status calib_load(tdm_err *e, const char *path, calib_data **out);
/* The same from a calibration JSON text (the precision guard's probe);
 * name is used in messages. */
tdm_status calib_load_text(tdm_err *e, const char *name, const char *text, calib_data **out);
/* 1 and *out filled when the file has figures for key on device. */
int calib_find(const calib_data *c, const char *key, const char *device, calib_figs *out);
/* Marks the file's entry for key (if any) as matching a node of the model. */
void calib_match(calib_data *c, const char *key);
/* The file's entries, and how many of them calib_match marked. */
void calib_counts(const calib_data *c, size_t *entries, size_t *matched);
void calib_free(calib_data *c);
/* cpu's time for key in a whole-model session with fusion ("fused_ms":
 * what the node costs when a fused cpu partition runs it); 0 when none. */
int calib_find_fused(const calib_data *c, const char *key, double *ms);
/* A device's measured copy figures and per-partition round trip (devices
 * through the ABI: the median of wall - device time - copies over its
 * nodes run alone); 0 when the file does not name the device. */
typedef struct calib_dev_costs {
    int has_copy;
    double to_device_copy_ms, to_device_byte_ms, to_host_copy_ms, to_host_byte_ms;
    double round_trip_ms; /* < 0: none */
} calib_dev_costs;
int calib_device_costs(const calib_data *c, const char *device, calib_dev_costs *out);

/* The end-to-end rule on one output: 1 (breach, *why says how) when got has
 * non-finite values where ref's are finite, a cosine below min_cosine, or —
 * when scores is set and the output is float, rank 1..3, last axis >= 2 —
 * a top-1 along the
 * last axis that differs from ref's at any position where ref's winner
 * leads by more than 1e-6 of the row's largest |x| (a classifier's answer
 * is cpu's even when its top two are 3e-4 apart). *cosine: the cosine. */
int plan_output_check(const tdm_tensor *ref, const tdm_tensor *got, int scores, double min_cosine, double *cosine,
                      char *why, size_t why_size);

#endif
