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
    EXIT_INTERNAL = 70 /* sysexits' EX_SOFTWARE */
};

/* The exit code for a library status. */
int cli_exit_code(tdm_status st);

/* Prints "tandem: <sentence>" on stderr. A sentence longer than about 200
 * characters is cut at a word and the rest follows on indented lines. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Reports a failed library call: prints the library's sentence (or the
 * status name when there is none), prefixed by `what` when it is not NULL,
 * and returns the exit code. */
int cli_fail(tdm_status st, const char *what, const char *msg);

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

/* RUN OPTIONS (runopts.c): --devices, --granularity, --fallback,
 * --max-fallback-ratio, --max-boundary-bytes, --pin, --plugin. Pointers
 * point into argv. */
typedef struct cli_runopts {
    const char *devices, *granularity, *fallback;
    double max_ratio;
    int has_ratio;
    long long max_bytes;
    int has_bytes;
    const char **pins;
    size_t n_pins;
    const char **plugins;
    size_t n_plugins;
} cli_runopts;

void cli_runopts_init(cli_runopts *o);
void cli_runopts_free(cli_runopts *o);
/* Returns 1 when argv[*i] is a run option (consumed, with its value;
 * *rc is 0, or an exit code after printing an error), 0 when it is not. */
int cli_runopts_parse(const char *cmd, int argc, char **argv, int *i, cli_runopts *o, int *rc);
/* Applies o to so; 0, or an exit code after printing an error. */
int cli_runopts_apply(const cli_runopts *o, tdm_session_options *so);
/* Prints a plan's policy violation (one sentence, then one line per
 * offending node) and returns EXIT_POLICY. */
int cli_policy_report(const tdm_plan *plan);
/* Reports a failed tdm_session_create: a policy violation lists every
 * offending node (planning again for the list); returns the exit code. */
int cli_session_fail(tdm_ctx *ctx, const tdm_model *m, const tdm_session_options *so, tdm_status st);
void usage_runopts(FILE *f);

/* Commands. argv[0] is the command name. */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_devices(int argc, char **argv);

/* Usage texts. */
void usage_main(FILE *f);
void usage_info(FILE *f);
void usage_run(FILE *f);
void usage_bench(FILE *f);
void usage_plan(FILE *f);
void usage_devices(FILE *f);

#endif
