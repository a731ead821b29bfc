/* The device registry: the devices a session runs on, in priority order,
 * as the planner (src/plan) and the executor (src/run) see them.
 *
 * A device instance is the public ABI (include/tandem/device.h: iface +
 * ctx) plus what tandem knows about it: its name, its kind and, for the
 * built-in devices, an internal extension the executor uses instead of the
 * public run() (built-ins compute on host tensors with the CPU kernels).
 *
 *   cpu            every op of the op table at the model's opset, input-0
 *                  dtype in the op's mask; unlimited memory; host buffers.
 *                  Its public run() returns TDM_E_UNSUPPORTED: the executor
 *                  runs cpu nodes through ext->run_host.
 *   vnpu:PROFILE   a virtual NPU from a JSON profile (profiles/README.md):
 *                  PROFILE is a shipped profile name ("edge-npu",
 *                  "server-npu", "fp32-all", embedded in the library) or a
 *                  path to a .json file (it contains '/' or ends in .json).
 *                  Memory is host memory it accounts for (buffer_alloc and
 *                  ext->reserve fail with TDM_E_DEVICE past capacity);
 *                  numerics are real (ext->run_host rounds float inputs and
 *                  outputs to the profile precision); estimate_ms/copy_ms
 *                  are modeled (*modeled = 1). Its public run() returns
 *                  TDM_E_UNSUPPORTED like cpu's.
 *   opencl[:N]     the OpenCL device (src/devices/opencl, ocl_device_open):
 *                  real device buffers, used through the public iface
 *                  (ext == NULL); when tandem was built without OpenCL or no
 *                  device exists → TDM_E_DEVICE with the reason.
 *   plugins        shared libraries loaded by path (dev_plugin_load); used
 *                  through the public iface only (ext == NULL).
 *
 * Thread safety: supports(), estimate_ms(), copy_ms() and run_host() of
 * the built-in devices may be called from several threads at once; vnpu
 * accounting (buffer_alloc/free, reserve/release) is locked. */
#ifndef TDM_DEVICES_DEVICE_INTERNAL_H
#define TDM_DEVICES_DEVICE_INTERNAL_H

#include "tandem/device.h"
#include "core/err.h"
#include "graph/graph.h"
#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>

typedef enum dev_kind {
    DEV_KIND_CPU = 0,
    DEV_KIND_VNPU = 1,
    DEV_KIND_PLUGIN = 2,
    DEV_KIND_OPENCL = 3      /* src/devices/opencl: public iface only (ext NULL) */
} dev_kind;

/* "cpu", "vnpu", "plugin", "opencl". */
const char *dev_kind_str(dev_kind kind);

/* Internal extension of a built-in device (cpu, vnpu). */
enum { DEV_FUSION_NONE = 0, DEV_FUSION_EPILOGUE = 1 };

typedef struct dev_ext {
    /* Runs one node on host tensors. op is prepared by the executor exactly
     * as for op_table[node->op].run (node, version, in, out shells, err,
     * scope, threads, rng); the device calls the kernel itself (vnpu: on
     * inputs rounded to its precision, then rounds float outputs in place).
     * On failure returns a status with a sentence in op->err. */
    tdm_status (*run_host)(void *ctx, op_ctx *op);

    /* Accounts bytes of device memory held by host-resident tensors
     * (no allocation). reserve fails with TDM_E_DEVICE and the sentence
     * "vnpu:edge-npu is out of memory: N bytes requested, M free" in e;
     * release gives bytes back. cpu: always succeeds. */
    tdm_status (*reserve)(void *ctx, size_t bytes, tdm_err *e);
    void (*release)(void *ctx, size_t bytes);

    /* Element type the device computes floats in: TDM_FLOAT (cpu, fp32
     * profiles), TDM_FLOAT16 or TDM_BFLOAT16. */
    tdm_dtype precision;

    /* Element type float and double tensors are stored in on the device
     * (TDM_FLOAT16 or TDM_BFLOAT16 halve a float tensor), which memory
     * accounting uses (dev_stored_bytes); TDM_UNDEFINED or TDM_FLOAT: the
     * model's own sizes. */
    tdm_dtype storage;

    /* The estimate of a node as a fused program runs it (cpu: the fast
     * kernels, Winograd convolution), which the planner uses for the nodes
     * of a cpu partition its fusion does not swallow; NULL: estimate_ms. */
    double (*estimate_fused_ms)(void *ctx, const tdm_node_desc *node, int *modeled);

    /* What the device's compiler fuses within one of its partitions
     * (a vnpu profile's "fusion"): DEV_FUSION_NONE, every node its own
     * launch; DEV_FUSION_EPILOGUE, the chains of graph/fuse.h whose head
     * is a Conv, ConvTranspose, Gemm or MatMul (fuse_plan_build_heads).
     * cpu fuses by its own executor and leaves this 0. */
    int fusion;

    /* The estimate of a node fused into its producer's launch (fusion
     * EPILOGUE): no launch overhead, no round trip of the chain's values
     * through memory; mem_inputs bit i set: input i is read from memory
     * (an operand of the chain, not one of its values). NULL: 0. */
    double (*estimate_fused_away_ms)(void *ctx, const tdm_node_desc *node, uint32_t mem_inputs, int *modeled);

    /* Modeled cost of one partition's round trip on the device (submit,
     * synchronise), in ms, added once per partition to the estimates. */
    double partition_ms;

    /* Operator types the device declares precision-sensitive (a vnpu
     * profile's "precision_sensitive"): the planner keeps them off it unless
     * calibration or the precision guard's probe shows them safe there. */
    const char *const *sensitive;
    size_t n_sensitive;

    /* 1: a vnpu profile with "quantized": nodes with a QDQ group
     * (graph/qdq.h, node->qdq not wrapped) run as int8 x int8 -> int32. */
    int quantized;

    /* The image sizes a static-shape device was compiled for (a vnpu
     * profile's "image_sizes": H, W pairs, as Ascend's dynamic_image_size
     * lists them): a model's 4-D inputs must have one of them there, and
     * `--bucket profile` pads images to them. NULL, 0: any size. */
    const int64_t (*image_sizes)[2];
    size_t n_image_sizes;
} dev_ext;

/* One device instance. */
typedef struct dev_instance {
    tdm_device dev;          /* iface + ctx (owned: destroyed by dev_list_close) */
    char *name;              /* "cpu", "vnpu:edge-npu", the plugin's name() */
    dev_kind kind;
    const dev_ext *ext;      /* NULL for plugins and opencl: use dev.iface->run */
    struct dev_plugin *plugin; /* the loaded library (plugins only, owned) */
    /* How many times slower the device runs than it estimates (>= 1; 0
     * counts as 1): run-time adaptation multiplies the node times it
     * measures on the device by it (dev_slowdown). Fault injection's slow=F
     * sets it; every other device leaves it 0. */
    double slowdown;
} dev_instance;

/* The devices of a session in priority order; cpu is always last, once. */
typedef struct dev_list {
    dev_instance *items;
    size_t n;
} dev_list;

/* Opens the devices named in spec, a comma-separated priority list
 * ("vnpu:edge-npu,opencl:1,cpu", "example:ARGS"; NULL or "" means: every
 * loaded plugin in load order, then cpu). cpu is appended when absent and
 * must be last when given; a name given twice or an empty entry is refused
 * (TDM_E_USAGE).
 *
 * Plugins: the libraries in plugin_paths, then those in the environment
 * variable TANDEM_PLUGINS (colon-separated paths; read here, so the caller
 * passes only its --plugin paths) are loaded first. A list entry NAME[:ARGS]
 * names a plugin when NAME equals the device name its init("") reports or
 * the library's file stem (libfoo-dev.so → "foo-dev"); the plugin's init
 * then receives ARGS. A plugin not named in a non-empty spec stays unused,
 * but one whose api_version tandem does not accept (newer than its own, or
 * 0) is refused even then.
 *
 * Unknown names, unavailable devices ("opencl is not available: …"), bad
 * profiles and plugin failures → TDM_E_DEVICE (TDM_E_USAGE for a malformed
 * list) with one sentence in e; *out is NULL on failure. */
tdm_status dev_list_open(tdm_err *e, const char *spec, const char *const *plugin_paths, size_t n_plugins,
                         dev_list **out);
/* Destroys every device (iface->destroy), unloads plugins. NULL: no-op. */
void dev_list_close(dev_list *l);

/* Opens one device by list entry ("cpu", "vnpu:edge-npu",
 * "vnpu:/path/p.json", "opencl:1"; not plugins) into *out (owned by the caller: free
 * with dev_instance_close). */
tdm_status dev_open(tdm_err *e, const char *entry, dev_instance *out);
void dev_instance_close(dev_instance *d);

/* ---- plugins ---- */

typedef struct dev_plugin dev_plugin;

/* dlopens path and resolves TDM_DEVICE_PLUGIN_SYMBOL. A missing file, a
 * library that does not load or lacks the symbol → TDM_E_DEVICE with a
 * sentence naming the file. */
tdm_status dev_plugin_load(tdm_err *e, const char *path, dev_plugin **out);
/* Calls the plugin's init with args into out (kind PLUGIN, name from
 * iface->name, ext NULL, plugin NOT set: the caller keeps the dev_plugin).
 * An iface of an older api_version (>= 1) is accepted: tandem reads only
 * the members its version has (dev_last_run_ms). One newer than
 * TDM_DEVICE_API_VERSION, or 0, is refused: "plugin libfoo.so was built for
 * device API 4, tandem speaks 3" (TDM_E_DEVICE); its ctx is destroyed when
 * the version is newer (destroy sits where ours does), left alone for 0.
 * A table lacking a required
 * member (name, supports, buffers, copies, run) is refused too. */
tdm_status dev_plugin_open(tdm_err *e, dev_plugin *p, const char *args, dev_instance *out);
/* The library's path as given, and its file stem ("libfoo.so" → "foo"). */
const char *dev_plugin_path(const dev_plugin *p);
const char *dev_plugin_stem(const dev_plugin *p);
void dev_plugin_unload(dev_plugin *p);

/* ---- node descriptions ---- */

/* ---- listing (`tandem devices [--json]`) ---- */

typedef struct dev_info {
    char name[128];          /* "cpu", "vnpu:edge-npu", "opencl", the plugin's name */
    char kind[16];           /* "cpu", "vnpu", "opencl", "plugin" */
    int available;
    char description[256];   /* one line, from the device (or the reason's subject) */
    char why_not[256];       /* "" when available: one sentence */
    uint64_t memory_bytes;   /* capacity; UINT64_MAX: unlimited; 0: unknown */
    char precision[8];       /* "fp32", "fp16", "bf16", "" unknown */
    char source[512];        /* "builtin", "embedded", a profile or plugin path */
} dev_info;

/* Every known device kind: cpu; vnpu with each shipped profile; opencl
 * (unavailable, with the reason); each plugin of plugin_paths and
 * TANDEM_PLUGINS (available, or why not: load failure, version mismatch).
 * *out is an array of *n entries the caller frees with mem_free(). Fails
 * only on out of memory. */
tdm_status dev_list_known(tdm_err *e, const char *const *plugin_paths, size_t n_plugins, dev_info **out,
                          size_t *n);

/* ---- the built-in devices (src/devices/cpu, src/devices/vnpu) ---- */

/* The cpu device (ctx is NULL; free with dev_instance_close). */
tdm_status dev_cpu_open(tdm_err *e, dev_instance *out);

/* Names of the profiles embedded in the library, NULL-terminated. */
const char *const *vnpu_shipped_profiles(void);

/* Opens vnpu:PROFILE (PROFILE: a shipped name or a .json path). Bad
 * profiles → TDM_E_DEVICE with "FILE: json.path why" in e. */
tdm_status vnpu_open(tdm_err *e, const char *profile, dev_instance *out);

/* Parses a profile from text (used by vnpu_open and the fuzzer); label
 * prefixes messages ("edge-npu.json"). On success *ctx is a vnpu context
 * for the vnpu iface (free with vnpu_ctx_free). */
struct vnpu_ctx;
tdm_status vnpu_parse(tdm_err *e, const char *label, const char *text, size_t len, struct vnpu_ctx **ctx);
void vnpu_ctx_free(struct vnpu_ctx *c);

/* Fault injection (src/devices/faulty.c): "faulty:INNER?fail_p=0.1&seed=7"
 * wraps the built-in device INNER and fails its node runs on schedule
 * (args is the text after "faulty:"). */
tdm_status dev_faulty_open(tdm_err *e, const char *args, dev_instance *out);

/* ---- helpers shared by the devices (src/devices/common.c) ---- */

/* Modeled work of a node: floating-point operations (Conv, ConvTranspose,
 * Gemm, MatMul exact from the shapes: 2 per multiply-add; other ops one per
 * output element) and bytes read plus written (inputs and outputs). An
 * unknown dimension counts as 1. */
double dev_node_flops(const tdm_node_desc *n);
double dev_node_bytes(const tdm_node_desc *n);
/* The bytes of the inputs i of n with bit i of mask set (i < 32). */
double dev_inputs_bytes(const tdm_node_desc *n, uint32_t mask);
/* The output tile of the Winograd convolution cpu's kernel runs node n
 * with when the session runs fused (op_conv_winograd_tile: 4 or 2), 0 when
 * n is not a Conv it takes (unknown shapes included). */
int dev_conv_winograd_tile(const tdm_node_desc *n);

/* Bytes a tensor of dtype that takes bytes on the host occupies on device
 * di: a float or double tensor at the device's storage type
 * (dev_ext.storage); every other tensor, and every tensor on a device
 * without an extension (plugins, opencl), at its own size. */
size_t dev_stored_bytes(const dev_instance *di, tdm_dtype dtype, size_t bytes);

/* Fills out with reason and a printf-style sentence; returns reason. */
tdm_reason dev_verdict(tdm_verdict *out, tdm_reason reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The device's own time of its last run() (the ABI's last_run_ms, read
 * only from a table of version 2 or later), -1 when it has no timer or does
 * not know. dev_has_run_timer: 1 when the device has the timer. */
double dev_last_run_ms(const dev_instance *di);
int dev_has_run_timer(const dev_instance *di);

/* The device's own rewrite of a node it refuses (the ABI's rewrite, read
 * only from a table of version 3 or later; plugin.c): dev_has_rewrite 1
 * when it has one; dev_rewrite_get 1 with *out filled (zeroed first), 0
 * none, < 0 failed; every 1 is followed by one dev_rewrite_release. */
int dev_has_rewrite(const dev_instance *di);
int dev_rewrite_get(const dev_instance *di, const tdm_node_desc *node, tdm_rewrite *out);
void dev_rewrite_release(const dev_instance *di, tdm_rewrite *rw);

/* di->slowdown as a factor (>= 1). */
double dev_slowdown(const dev_instance *di);

/* A tdm_tensor_desc's shape as "1x3x?x?" ("scalar", "?" for unknown rank). */
const char *dev_shape_str(const tdm_tensor_desc *t, char *buf, size_t size);

#endif
