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

/* IEEE half and bfloat16 <-> float (round to nearest even). */
float cli_f16_to_f32(uint16_t h);
uint16_t cli_f32_to_f16(float f);
float cli_bf16_to_f32(uint16_t b);
uint16_t cli_f32_to_bf16(float f);

/* Commands. argv[0] is the command name. */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* Usage texts. */
void usage_main(FILE *f);
void usage_info(FILE *f);
void usage_run(FILE *f);

#endif
