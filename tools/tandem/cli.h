/* The tandem command-line tool: shared helpers. The tool is a client of
 * include/tandem/tandem.h only. */
#ifndef TDM_CLI_H
#define TDM_CLI_H

#include <tandem/tandem.h>

#include <stdio.h>

/* Exit codes (DESIGN.md "Command line"), plus 70 for a bug in tandem. */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 1,
    EXIT_INVALID = 2,  /* invalid or unsupported model or input */
    EXIT_POLICY = 3,
    EXIT_DEVICE = 4,
    EXIT_IO = 5,
    EXIT_ALERT = 6,    /* --alert-fallback-ratio exceeded (diagnostics) */
    EXIT_INTERNAL = 70 /* sysexits' EX_SOFTWARE */
};

/* The exit code for a library status. */
int cli_exit_code(tdm_status st);

/* Prints "tandem: <sentence>" on stderr. Long values in it are shortened
 * in the middle (tdm_sentence_shorten); a sentence still longer than about
 * 200 characters is cut at a word and the rest follows on indented lines. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Reports a failed library call: prints the library's sentence (or the
 * status name when there is none), prefixed by `what` when it is not NULL,
 * and returns the exit code. */
int cli_fail(tdm_status st, const char *what, const char *msg);

/* The temporary folder of `run --output-dir DIR` (tmpdir.c). Removes the
 * temporary folders in dir that provably belong to a tandem run that is
 * gone, then creates ".tandem-tmp-PID-XXXXXX" with an owner file in dir
 * (*out, malloc'd) and from then on records SIGINT, SIGTERM and SIGHUP
 * instead of dying; 0 or an exit code after printing an error. */
int cli_tmpdir_create(const char *dir, char **out);
/* 0, or 128 + the signal that arrived since cli_tmpdir_create. */
int cli_interrupted(void);
/* "SIGINT" for 130 (an exit code of cli_interrupted). */
const char *cli_signal_name(int code);
/* Restores the signal dispositions cli_tmpdir_create replaced. */
void cli_tmpdir_guard_end(void);
/* Removes a folder and everything inside it (symbolic links not followed). */
void cli_remove_tree(const char *dir);

/* Progress of a long loop (calibrate, profile, bench, report, audit), one
 * piece of code for all: when stderr is a terminal and the loop has run
 * for two seconds, one line "CMD: 45% [9/20] WHAT" on stderr, rewritten in
 * place with \r (at most ten times a second) and erased by
 * cli_progress_end. Nothing otherwise (logs and pipes stay clean), and
 * never on stdout. */
typedef struct cli_progress {
    const char *cmd;
    int tty;
    uint64_t start_ns, last_ns;
    size_t width; /* of the widest line shown; 0: nothing shown */
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *cmd);
/* done of total steps (total 0: unknown); what: the current step or NULL. */
void cli_progress_step(cli_progress *p, size_t done, size_t total, const char *what);
void cli_progress_end(cli_progress *p);
/* cli_progress_step as a tdm_calibrate progress callback (user: the
 * cli_progress). */
void cli_progress_fn(void *user, size_t done, size_t total, const char *what);

/* "NAME=VALUE" split at the last '=' (name copied into owned). */
typedef struct cli_kv {
    const char *name;
    const char *value;
    char *owned; /* the copy backing name */
} cli_kv;

/* "--opt VALUE" or "--opt=VALUE": 1 and *val set when argv[*i] is opt, 0
 * when it is not, -1 (after a message) when the value is missing. */
int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *opt, const char **val);
/* Splits s at its last '=' into out; -1 after a message when it has none. */
int cli_split_kv(const char *cmd, const char *opt, const char *s, cli_kv *out);
/* The worker thread count from --threads VALUE (val) or, when val is NULL,
 * from TANDEM_THREADS; 0 means the default. -1 after a message when the
 * value is not a number from 0 to 4096. */
int cli_threads(const char *cmd, const char *val, long long *out);
/* Appends v to the growable array *arr of *n entries; -1 when out of memory. */
int cli_push_str(const char ***arr, size_t *n, const char *v);
/* 0 when the n names of kv differ; else EXIT_USAGE after naming the first
 * repeated one ("CMD: input 'X' is given twice with OPT"). */
int cli_kv_unique(const char *cmd, const char *opt, const cli_kv *kv, size_t n);

/* Parses a non-negative decimal integer that fits in an int64; 0 on
 * success. */
int cli_parse_i64(const char *s, long long *out);

/* "float", "sequence<float>", "optional<float>"; into buf. */
const char *cli_type_str(tdm_kind kind, tdm_dtype dtype, char *buf, size_t size);
/* "[N, 3, 224, 224]" (symbols by name, "?" for an unnamed dynamic dim,
 * "[?…]" for an unknown rank); into buf. */
const char *cli_info_shape_str(const tdm_value_info *vi, char *buf, size_t size);
/* "2x3" ("scalar" for rank 0); into buf. */
const char *cli_shape_str(int rank, const int64_t *dims, char *buf, size_t size);

/* The highest rank --shape and the random inputs handle. */
#define CLI_MAX_RANK 64

/* Parses the value of `--shape NAME=VALUE`: "2x3x?" gives rank 2 and dims
 * {2, 3, -1} ('?' keeps a dimension), "" or "scalar" rank 0. dims has room
 * for CLI_MAX_RANK entries. Returns 0, or -1 after printing an error that
 * starts with "CMD: ". */
int cli_parse_dims(const char *cmd, const char *name, const char *value, int *rank, int64_t *dims);

/* splitmix64: the fixed-seed generator behind random inputs (seed 42). */
uint64_t cli_rng_next(uint64_t *state);

/* A fixed-seed random value for input vi (floats uniform in [-1, 1],
 * integers in [0, 10), random booleans, digit strings), drawn from *rng.
 * Its shape is the declared one with the dimensions of a --shape
 * (shape_rank >= 0; -1 entries keep the declared dimension) applied.
 * `filler` names what fills the input in error sentences ("--random").
 * Returns 0 and a new tensor in *out, or an exit code after printing an
 * error. */
int cli_random_input(const tdm_value_info *vi, int shape_rank, const int64_t *shape_dims, const char *filler,
                     uint64_t *rng, tdm_tensor **out);

/* IEEE half and bfloat16 <-> float (round to nearest even). */
float cli_f16_to_f32(uint16_t h);
uint16_t cli_f32_to_f16(float f);
float cli_bf16_to_f32(uint16_t b);
uint16_t cli_f32_to_bf16(float f);

/* A uint16 tensor given for an input declared bfloat16 holds its bits (how
 * .npy outputs and ONNX's test data store bfloat16; numpy has no such type):
 * *t becomes a bfloat16 tensor of the same bits. Anything else is left as
 * it is. Returns 0, or an exit code after printing an error. */
int cli_bf16_from_bits(const tdm_value_info *vi, tdm_tensor **t);

/* RUN OPTIONS (runopts.c): --devices, --granularity, --fallback,
 * --max-fallback-ratio, --max-boundary-bytes, --pin, --plugin. Pointers
 * point into argv. */
typedef struct cli_runopts {
    const char *devices;
    tdm_granularity granularity;   /* --granularity, when has_granularity */
    tdm_fallback_mode fallback;    /* --fallback, when has_fallback */
    int has_granularity, has_fallback;
    double max_ratio;
    int has_ratio;
    long long max_bytes;
    int has_bytes;
    const char **pins;
    size_t n_pins;
    const char **plugins;
    size_t n_plugins;
    const char *calibration;   /* --calibration FILE */
    double min_cosine, max_abs; /* --min-cosine, --max-abs */
    int has_min_cosine, has_max_abs;
    int no_fusion;              /* --no-fusion */
    tdm_verify_mode verify;     /* --verify off|first|every:N, when has_verify */
    int verify_every, has_verify;
    tdm_rescue_mode rescue;     /* --rescue off|safe|all, when has_rescue */
    int has_rescue;
    const char *bucket;         /* --bucket HxW[,HxW...] (NULL: off) */
    const char *bucket_pad;     /* --bucket-pad zero|edge (NULL: zero) */
    const char **cal_inputs;    /* --calibration-input SET, each a set */
    size_t n_cal_inputs;
    const char **binds;         /* --bind NAME=VALUE[,VALUE...] or NAME=FILE.npy */
    size_t n_binds;
} cli_runopts;

void cli_runopts_init(cli_runopts *o);
void cli_runopts_free(cli_runopts *o);
/* Returns 1 when argv[*i] is a run option (consumed, with its value;
 * *rc is 0, or an exit code after printing an error), 0 when it is not. */
int cli_runopts_parse(const char *cmd, int argc, char **argv, int *i, cli_runopts *o, int *rc);
/* Applies o to so; 0, or an exit code after printing an error. */
int cli_runopts_apply(const cli_runopts *o, tdm_session_options *so);
/* Applies --bind to so: each value in the element type of m's input (a
 * scalar, a comma list, or a .npy file): 0, or an exit code after an error
 * (EXIT_INVALID naming the inputs for a name that is not one). */
int cli_binds_apply(const cli_runopts *o, const tdm_model *m, tdm_session_options *so);
/* Applies the n --shape NAME=DxD values of shapes to so (cli_parse_dims,
 * tdm_session_options_set_shape) after checking that each names an input
 * of m: 0, or an exit code after printing an error (EXIT_INVALID listing
 * the inputs for a name that is not one). */
int cli_shapes_apply(const char *cmd, const tdm_model *m, const cli_kv *shapes, size_t n, tdm_session_options *so);
/* With --calibration: says on stderr how many of the file's entries match
 * the plan's model, as a warning when none or fewer than half do. */
void cli_calibration_note(const cli_runopts *o, const tdm_plan *plan);
/* The vnpu devices of plan that run nodes ("vnpu:a, vnpu:b" into buf; ""
 * when none) and how many: their measured times are this host emulating
 * them. *modeled_ms: the plan's estimate (vnpu nodes modeled), < 0 unknown. */
size_t cli_emulated(const tdm_plan *plan, char *buf, size_t size, double *modeled_ms);
/* The width of a device column for plan: its longest device name, at
 * least 6 ("device"), so that two long vnpu names never run together. */
size_t cli_device_width(const tdm_plan *plan);
/* msg on stderr after lead, in lines of at most 200 characters continued
 * after cont, cut at spaces only (never inside a number or a name). */
void cli_print_wrapped(const char *lead, const char *cont, const char *msg);
/* When the precision guard changed the plan: one line on stderr (how many
 * nodes moved, which first, what the guarded first run cost). */
void cli_guard_note(tdm_session *s);
/* The guard's figures (tdm_session_guard_json): nodes moved, the first
 * guarded run's extra ms (-1: none yet), the first moved node, whether a
 * check stayed unverified. 0 when the guard is not active. */
int cli_guard_figures(tdm_session *s, double *moved, double *extra_ms, char *first, size_t first_size, int *unverified);
/* Prints a plan's policy violation (one sentence, then one line per
 * offending node) and returns EXIT_POLICY. */
int cli_policy_report(const tdm_plan *plan);
/* Reports a failed tdm_session_create: a policy violation lists every
 * offending node (planning again for the list); returns the exit code. */
int cli_session_fail(tdm_ctx *ctx, const tdm_model *m, const tdm_session_options *so, tdm_status st);
void usage_runopts(FILE *f);

/* ADAPTATION OPTIONS (adaptopts.c) of run, bench and profile: --breaker
 * K,WINDOW_MS,COOLDOWN_MS, --adapt RATIO,N[,M], --plan-cache N,
 * --adaptation-json FILE. */
typedef struct cli_adaptopts {
    int faults;                  /* --breaker */
    double window_ms, cooldown_ms;
    int has_breaker;
    double ratio;                /* --adapt */
    int runs, min_runs, has_adapt;
    int cache;                   /* --plan-cache */
    int has_cache;
    const char *json;            /* --adaptation-json FILE */
} cli_adaptopts;

/* As cli_runopts_parse. */
int cli_adaptopts_parse(const char *cmd, int argc, char **argv, int *i, cli_adaptopts *o, int *rc);
/* Applies o to so; 0, or an exit code after printing an error. */
int cli_adaptopts_apply(const cli_adaptopts *o, tdm_session_options *so);
/* Writes the session's adaptation JSON to o->json when given; 0 or an
 * exit code. */
int cli_adaptopts_write(const cli_adaptopts *o, tdm_session *s);
void usage_adaptopts(FILE *f);

/* Commands. argv[0] is the command name. */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_calibrate(int argc, char **argv); /* cmd_calibrate.c */
void usage_calibrate(FILE *f);

/* Diagnostics (cmd_profile.c): what profile, compare, extract and report
 * share. Options: RUN OPTIONS, --input NAME=FILE, --shape NAME=DxD,
 * --threads N; inputs not given are fixed-seed random (as run --random). */
typedef struct diag_common {
    const char *model;
    cli_runopts ro;
    cli_adaptopts ao;        /* --breaker, --adapt, --plan-cache, --adaptation-json */
    const char **inputs, **shapes;
    size_t n_inputs, n_shapes;
    const char *threads_arg; /* --threads VALUE, or NULL: TANDEM_THREADS */
} diag_common;

typedef struct diag_setup {
    tdm_ctx *ctx;
    tdm_model *model;
    tdm_session_options *so;
    tdm_session *s;        /* planned with the RUN OPTIONS */
    tdm_tensor **ins;      /* model input order */
    size_t n_in, n_out;
} diag_setup;

void diag_common_init(diag_common *d);
void diag_common_free(diag_common *d);
/* 1 when argv[*i] is a shared option (consumed; *rc 0 or an exit code). */
int diag_common_opt(const char *cmd, int argc, char **argv, int *i, diag_common *d, int *rc);
/* Loads the model, makes the inputs, creates x->s; 0 or an exit code. */
int diag_open(const char *cmd, const diag_common *d, diag_setup *x);
/* Another session on x's model and inputs: devices (NULL: the RUN OPTIONS). */
int diag_session(const char *cmd, diag_setup *x, const diag_common *d, const char *devices, tdm_session **out);
/* Runs s once on x's inputs, dropping the outputs; 0 or an exit code. */
int diag_run(diag_setup *x, tdm_session *s);
void diag_close(diag_setup *x);

typedef struct diag_node {
    uint64_t calls, ns, bytes_in, bytes_out;
    double modeled_ms;
    int modeled, fallback;
} diag_node;
typedef struct diag_dev {
    uint64_t ns, nodes;
    double modeled_ms;
    int modeled;
} diag_dev;
typedef struct diag_trace_ev {
    int copy, device, from;
    size_t node;
    char *tensor;
    const char *direction;
    uint64_t start_ns, end_ns, bytes_in, bytes_out;
    double modeled_ms;
    double device_ms; /* measured by the device (OpenCL events), < 0: none */
} diag_trace_ev;
typedef struct diag_fault {
    char *node, *detail;
    int device;
    const char *reason;
} diag_fault;

/* Aggregates a session's events (diag_collect is the observer). */
typedef struct diag_collector {
    const tdm_plan *plan;
    int recording, keep_trace;
    size_t n_nodes, n_devs;
    diag_node *nodes;
    diag_dev *devs;
    uint64_t runs, wall_ns, node_ns, fallback_ns, copies, copy_bytes, copy_ns, t_origin;
    double copy_modeled_ms;
    int copy_modeled;
    double node_modeled_ms, fallback_modeled_ms; /* over nodes with a modeled figure */
    uint64_t modeled_nodes, node_events;
    diag_trace_ev *trace;
    size_t n_trace, cap_trace;
    diag_fault *faults;
    size_t n_faults, cap_faults;
    tdm_metrics *metrics;        /* fed too when not NULL */
    tdm_observer_fn chain;       /* called too when not NULL */
    void *chain_user;
} diag_collector;

int diag_collector_init(diag_collector *c, const tdm_plan *plan, int keep_trace);
void diag_collector_free(diag_collector *c);
/* Points c at plan, the session's plan after a run: the precision guard may
 * re-plan in the first run, and profile and report show the plan that
 * answers. Per-node figures already recorded are dropped when the node or
 * device count differs. 0, or -1 when out of memory. */
int diag_collector_rebind(diag_collector *c, const tdm_plan *plan);
void diag_collect(void *user, const tdm_event *ev);
/* Chrome trace-event JSON, Prometheus text, JSON-lines fallback log. */
int diag_write_trace(const diag_collector *c, const char *path);
int diag_write_metrics(const tdm_metrics *m, const char *path);
int diag_write_fallback_log(const diag_collector *c, const char *model, const char *path);
void diag_json_str(FILE *f, const char *s);
/* Fallback time on cpu over node time of the recorded runs. */
double diag_fallback_ratio(const diag_collector *c);
/* The same from the modeled figures; < 0 unless every node had one. */
double diag_fallback_ratio_modeled(const diag_collector *c);
/* Parses a ratio in [0, 1] for opt; 0 or EXIT_USAGE after an error. */
int diag_parse_ratio(const char *cmd, const char *opt, const char *val, double *out);

/* compare (cmd_compare.c): the plan against the cpu fp32 reference. */
typedef struct diag_cmp_row {
    size_t node;           /* plan node index */
    size_t order;          /* execution position */
    int compared;          /* outputs compared */
    double max_abs, rmse, cosine;
    int nonfinite;         /* NaN/Inf where the reference is finite */
    int crosses;
} diag_cmp_row;
typedef struct diag_cmp {
    diag_cmp_row *rows;    /* execution order */
    size_t n_rows, skipped, crossing;
    long first;            /* the first crossing row, -1: none */
} diag_cmp;
/* Runs x->s and a cpu session on x's inputs and compares every node
 * output; 0 or an exit code. */
int diag_compare(const char *cmd, diag_setup *x, const diag_common *d, double min_cos, int has_abs, double max_abs,
                 diag_cmp *res);
/* compare's and report's --min-cosine C and --max-abs A: 1 when argv[*i]
 * is one (consumed; *rc 0 or EXIT_USAGE). Each also sets the RUN OPTION of
 * that name in d->ro: one meaning, also for the precision trigger. */
int diag_threshold_opt(const char *cmd, int argc, char **argv, int *i, diag_common *d, double *min_cos,
                       int *has_abs, double *max_abs, int *rc);
diag_cmp_row *diag_cmp_worst(const diag_cmp *r);
void diag_cmp_free(diag_cmp *r);

/* --trace FILE, --metrics FILE, --fallback-log FILE, --alert-fallback-ratio R
 * on run (and bench: --metrics): parse, attach to a session before it runs,
 * write the files (and check the alert: EXIT_ALERT) after, free. */
typedef struct diag_flags {
    const char *trace, *metrics, *fallback_log;
    double alert;
    int has_alert;
    diag_collector *c;
    tdm_metrics *m;
} diag_flags;
int diag_flags_parse(const char *cmd, int argc, char **argv, int *i, diag_flags *f, int *rc);
int diag_flags_begin(diag_flags *f, tdm_session *s);
int diag_flags_end(diag_flags *f, const char *model);
void diag_flags_free(diag_flags *f, tdm_session *s);
#define DIAG_FLAGS_USAGE                                                                           \
    "  --trace FILE        Chrome trace-event JSON of the run(s) (Perfetto, chrome://tracing)\n"  \
    "  --metrics FILE      the run counters in Prometheus text format\n"                          \
    "  --fallback-log FILE JSON lines: one per fallback decision and per device fault\n"          \
    "  --alert-fallback-ratio R  exit 6 when the measured fallback ratio exceeds R\n"

int cmd_profile(int argc, char **argv);
int cmd_compare(int argc, char **argv);
void usage_profile(FILE *f);
void usage_compare(FILE *f);
int cmd_report(int argc, char **argv);
int cmd_extract(int argc, char **argv);
void usage_extract(FILE *f);
void usage_report(FILE *f);

/* Usage texts. */
void usage_main(FILE *f);
void usage_info(FILE *f);
void usage_run(FILE *f);
void usage_bench(FILE *f);
void usage_plan(FILE *f);
void usage_devices(FILE *f);

#endif
