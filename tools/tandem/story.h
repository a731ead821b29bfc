/* The story of a plan, told from its ledger (story.c): fallback nodes
 * counted by reason code and by op type and grouped by both, the model's
 * dynamic inputs, and the short summary plan and run open with. Shared by
 * plan, run and audit so that they count alike. */
#ifndef TDM_CLI_STORY_H
#define TDM_CLI_STORY_H

#include <tandem/tandem.h>

#include <stddef.h>
#include <stdio.h>

struct cJSON;

typedef struct story_count {
    char *name;            /* a reason code or an op type */
    size_t count;
} story_count;

/* Fallback nodes of one op type and reason code. */
typedef struct story_group {
    char *op, *reason, *node, *detail; /* node, detail: the group's first node's */
    size_t model;          /* the model of the first node (audit) */
    size_t count;
    double ms;             /* modeled time of these nodes where they run */
} story_group;

/* What a plan did with the nodes it could have put on device: on it, pinned
 * elsewhere by the user, or off it (fallback) by reason and op type. */
typedef struct story_tally {
    size_t nodes, on_device, off_device, pinned;
    double off_ms;
    story_count *reasons;  /* largest first */
    size_t n_reasons;
    story_count *ops;      /* largest first */
    size_t n_ops;
    story_group *groups;   /* largest first */
    size_t n_groups;
} story_tally;

/* The ledger's "rescue" section counted: attempts, those kept per rule and
 * the nodes they became (story_rescues_count), and the one-line account
 * plan and audit print ("" when nothing was tried). */
#define STORY_MAX_RULES 16
typedef struct story_rescues {
    size_t tried, kept, became, n_rules;
    char mode[16];
    char rules[STORY_MAX_RULES][96]; /* a plugin's is "plugin:<device>:<name>" */
    size_t counts[STORY_MAX_RULES];
} story_rescues;
void story_rescues_count(story_rescues *r, const struct cJSON *root);
void story_rescues_line(const story_rescues *r, char *out, size_t size);

/* Counts the ledger's "nodes" array against device (the first of the
 * plan's devices): a node is a fallback when it runs elsewhere and the user
 * did not pin it there (reason USER). model is stored in the groups.
 * Returns 0, or -1 when out of memory (t keeps what it had; free it). */
int story_tally_nodes(story_tally *t, const struct cJSON *nodes, const char *device, size_t model);
void story_tally_free(story_tally *t);

/* Adds count nodes to the group of op and reason in *groups (a new group
 * keeps node and detail); -1 when out of memory. */
int story_add_group(story_group **groups, size_t *n, size_t model, const char *op, const char *reason,
                    const char *node, const char *detail, size_t count, double ms);
/* Sorts groups largest first (then by reason and op). */
void story_sort_groups(story_group *groups, size_t n);
void story_groups_free(story_group *groups, size_t n);

/* Counts name in *c (a new entry the first time); -1 when out of memory
 * (*c keeps what it had). story_counts_sort: largest first, then by name. */
int story_count_add(story_count **c, size_t *n, const char *name);
void story_counts_sort(story_count *c, size_t n);
void story_counts_free(story_count *c, size_t n);

/* "312 SHAPE_UNSUPPORTED, 18 MEMORY" (count_first) or "Conv 100, Mul 50"
 * into buf, at most top entries (0: all) and "+N more". */
void story_counts_str(const story_count *c, size_t n, size_t top, int count_first, char *buf, size_t size);

/* The model's inputs with dynamic dimensions for which fixed(name, arg)
 * returns 0: "x [N, 3, ?, ?]" joined by ", " (as_flags 0), "'x' (?x3x?x?)"
 * joined by ", " (as_flags 2) or "--shape x=1x3xHxW" examples joined by " "
 * (as_flags 1); "" when none.
 * NULL when out of memory; free() it. */
char *story_dynamic_inputs(const tdm_model *m, int (*fixed)(const char *name, void *arg), void *arg, int as_flags);

/* The summary plan opens with, from the plan's ledger (JSON text), on f:
 * placement, fallbacks by reason and op type, partitions, boundary bytes,
 * the estimate against all-cpu (cpu_ms < 0: unknown), the policy and
 * hints. dyn: the dynamic inputs no --shape fixes (story_dynamic_inputs,
 * as_flags 2), shape_flags: the same as --shape examples. Returns 0, or -1
 * when the ledger cannot be read or out of memory. */
int story_print_plan(FILE *f, const char *ledger, double cpu_ms, const char *dyn, const char *shape_flags);

/* One line for stderr when any node fell back or was pinned: "placement:
 * 18 of 330 nodes on vnpu:edge-npu, 312 on cpu — SHAPE_UNSUPPORTED 312
 * (Conv 100, ...); `tandem plan` tells why"; "" when neither happened.
 * Returns 0, or -1 when the ledger cannot be read or out of memory. */
int story_placement_line(const char *ledger, char *out, size_t size);

/* The placement line of the plan on stderr (after "tandem: "), when there
 * is one. */
void story_placement_note(const tdm_plan *plan);

/* The model's estimated time all on cpu (same --shape values as so, taken
 * by the caller), < 0 when it cannot be planned or has no full estimate. */
double story_all_cpu_ms(tdm_ctx *ctx, const tdm_model *m, tdm_session_options *cpu_so);

/* b bytes as "512 B", "1.5 KiB", "3.0 MiB" or "1.25 GiB" in buf; buf. */
const char *story_bytes_str(double b, char *buf, size_t size);

/* A copy of s ("" for NULL), NULL when out of memory; free() it. */
char *story_strdup(const char *s);

/* The model's input names, "'x', 'y'" ("none"), into buf; the index of
 * input name, -1 when the model has none of that name. */
void cli_list_inputs(const tdm_model *m, char *buf, size_t size);
int cli_find_input(const tdm_model *m, const char *name);

#endif
