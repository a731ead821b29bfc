/* tandem logs FILE|DIR... [--json] [--top N] [--bucket hour|day|month]
 *
 * Fallback analysis over many runs (seeds 004 and 000 §7.6): reads the
 * JSON-lines fallback logs of `run/profile --fallback-log`, the ledgers of
 * `run --ledger` and `plan --json`, and `profile --json` documents, from any
 * number of runs, models, devices and hosts, and reports how often fallbacks
 * trigger over time, their reasons, op types, models, devices and hosts, the
 * time the fallback nodes took, the fallback ratio, and the groups to fix
 * first (op type x reason x device, by cost then count) with a hint. */
#define _POSIX_C_SOURCE 200809L
#include "audit.h"
#include "cli.h"
#include "json.h"
#include "logs.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void usage_logs(FILE *f)
{
    fputs("usage: tandem logs FILE|DIR... [--json] [--top N] [--bucket hour|day|month]\n"
          "\n"
          "Fallback analysis over many runs. Reads fallback logs (the JSON lines of\n"
          "`run/profile --fallback-log FILE`), ledgers (`run --ledger FILE`, `plan --json`)\n"
          "and profiles (`profile --json`); a folder is read recursively for *.jsonl and\n"
          "*.json. Reports fallbacks per time bucket (the records' \"time\", else the file's\n"
          "modification time), by reason code, op type, model, device and host, the cost\n"
          "after fallback (the measured ms of a log or profile, else the ledger's modeled\n"
          "ms), the fallback ratio of the ledgers (estimated time) and profiles (measured),\n"
          "device faults, and the top offenders: op type x reason x device (the device that\n"
          "refused the node), ranked by cost then count, with a hint. A run's log and its\n"
          "ledger both count: give one of them per run. A file is read once.\n"
          "\n"
          "  --json          print one JSON document on stdout instead\n"
          "  --top N         top offenders shown (default 10, 0: all)\n"
          "  --bucket B      time bucket: hour, day or month (default: by the span, hour\n"
          "                  up to 2 days, day up to 92 days, month beyond)\n"
          "\n"
          "A file that is none of these, or a log line that is not a record, gets one\n"
          "sentence on stderr and is skipped; the report covers the rest and the exit code\n"
          "is then 2 (5 when a file is missing or unreadable).\n",
          f);
}

/* ------------------------------------------------------------- reading */

#define LOGS_MAX_FILE ((size_t)1 << 30)
#define LOGS_MAX_DEPTH 64
#define LOGS_MAX_BUCKETS 100000

const char *logs_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *logs_read_file(const char *path, size_t *len, int *rc)
{
    struct stat st;
    *rc = EXIT_IO;
    if (stat(path, &st) != 0) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_error("'%s' is not a regular file", path);
        return NULL;
    }
    if ((unsigned long long)st.st_size > LOGS_MAX_FILE) {
        cli_error("'%s' is larger than 1 GiB", path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
        n += r;
        if (n == cap - 1) { /* the file grew since stat */
            char *nb = cap <= LOGS_MAX_FILE ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        cli_error(buf ? "cannot read '%s'" : "'%s' does not fit in memory", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    *rc = 0;
    return buf;
}

/* One fallback (or device fault) of one run. */
typedef struct lg_rec {
    char *model, *node, *op, *device, *reason, *detail, *host;
    long long time;                  /* seconds since 1970 UTC; -1: none */
    double measured_ms, modeled_ms;  /* < 0: not given */
    int fault;                       /* a device_fault event */
} lg_rec;

/* Fallback ratios of several plans or runs. */
typedef struct lg_ratio {
    size_t n;
    double sum, max;
} lg_ratio;

/* Adds the ratio o holds at key; 1 when it holds one. */
static int ratio_add(lg_ratio *r, const cJSON *o, const char *key)
{
    double v = audit_jnum(o, key, -1);
    if (v < 0)
        return 0;
    r->n++;
    r->sum += v;
    if (v > r->max)
        r->max = v;
    return 1;
}

static double ratio_mean(const lg_ratio *r) { return r->n ? r->sum / (double)r->n : NAN; }

typedef struct lg {
    lg_rec *recs;
    size_t n, cap;
    size_t files, logs, ledgers, profiles, lines;
    size_t plan_nodes, plan_fallbacks;         /* ledgers */
    lg_ratio est;                              /* ledgers' estimated-time ratio */
    lg_ratio meas;                             /* profiles' measured ratio */
    int rc;                                    /* the exit code so far */
    struct lg_seen {
        dev_t dev;
        ino_t ino;
    } *seen;                                   /* the files read, once each */
    size_t n_seen;
} lg;

static void lg_bad(lg *g, int rc)
{
    if (g->rc == 0 || rc == EXIT_IO)
        g->rc = rc;
}

static char *dup_s(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* 1970-01-01 + days for a civil date (Howard Hinnant's days_from_civil). */
static long long days_from_civil(long long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

/* "2026-12-04T14:20:51Z" -> seconds; -1 when s is not that form. */
static long long parse_time(const char *s)
{
    int y, mo, d, h, mi, sec, used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 || used != 19)
        return -1;
    if (strcmp(s + used, "Z") != 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    return days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec;
}

/* Appends a record; -1 when out of memory. */
/* arr (n entries of size bytes used of *cap) with room for one more: arr
 * itself or a larger copy; NULL when out of memory or the size overflows. */
static void *grow(void *arr, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return arr;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc < *cap || nc > SIZE_MAX / size)
        return NULL;
    void *p = realloc(arr, nc * size);
    if (p)
        *cap = nc;
    return p;
}

static int lg_add(lg *g, const char *model, const char *node, const char *op, const char *device,
                  const char *reason, const char *detail, const char *host, long long t, double measured,
                  double modeled, int fault)
{
    lg_rec *recs = grow(g->recs, &g->cap, g->n, sizeof *g->recs, 64);
    if (!recs)
        return -1;
    g->recs = recs;
    lg_rec *r = &g->recs[g->n];
    r->model = dup_s(logs_base(model));
    r->node = dup_s(node);
    r->op = dup_s(op);
    r->device = dup_s(device);
    r->reason = dup_s(reason);
    r->detail = dup_s(detail);
    r->host = dup_s(host);
    r->time = t;
    r->measured_ms = measured;
    r->modeled_ms = modeled;
    r->fault = fault;
    g->n++;
    if (!r->model || !r->node || !r->op || !r->device || !r->reason || !r->detail || !r->host)
        return -1;
    return 0;
}

static void lg_free(lg *g)
{
    for (size_t k = 0; k < g->n; k++) {
        lg_rec *r = &g->recs[k];
        free(r->model);
        free(r->node);
        free(r->op);
        free(r->device);
        free(r->reason);
        free(r->detail);
        free(r->host);
    }
    free(g->recs);
    free(g->seen);
}

/* The first entry of the "devices" array: the device a fallback left. */
static const char *first_device(const cJSON *root)
{
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    return cJSON_IsString(d) ? d->valuestring : "";
}

/* A ledger (run --ledger, plan --json): every node placed off the first
 * device for a reason other than a --pin is a fallback; cost is modeled. */
static int read_ledger(lg *g, const cJSON *root, long long mtime)
{
    const char *model = audit_jstr(root, "model"), *pref = first_device(root);
    const cJSON *n, *sum = cJSON_GetObjectItemCaseSensitive(root, "summary");
    size_t fb = 0;
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(root, "nodes"))
    {
        const char *dev = audit_jstr(n, "device"), *reason = audit_jstr(n, "reason");
        if (strcmp(dev, pref) == 0 || strcmp(reason, "USER") == 0)
            continue;
        fb++;
        if (lg_add(g, model, audit_jstr(n, "name"), audit_jstr(n, "op"), pref, reason, audit_jstr(n, "detail"), "",
                   mtime, -1, audit_jnum(n, "estimated_ms", -1), 0))
            return -1;
    }
    g->ledgers++;
    if (ratio_add(&g->est, sum, "fallback_ratio")) {
        g->plan_nodes += (size_t)audit_jnum(sum, "nodes", 0);
        g->plan_fallbacks += fb;
    }
    return 0;
}

/* A profile (profile --json): nodes marked "fallback"; cost is measured. */
static int read_profile(lg *g, const cJSON *root, long long mtime)
{
    const char *model = audit_jstr(root, "model"), *pref = first_device(root);
    const cJSON *n;
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(root, "nodes"))
    {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "fallback")))
            continue;
        double per_call = audit_jnum(n, "modeled_ms_per_call", -1), calls = audit_jnum(n, "calls", 0);
        if (lg_add(g, model, audit_jstr(n, "node"), audit_jstr(n, "op"), pref, audit_jstr(n, "reason"), "", "", mtime,
                   audit_jnum(n, "total_ms", -1), per_call >= 0 ? per_call * calls : -1, 0))
            return -1;
    }
    g->profiles++;
    ratio_add(&g->meas, root, "fallback_ratio");
    return 0;
}

/* One line of a fallback log; 1 when it is not a record. */
static int read_log_line(lg *g, const char *line, size_t len, long long mtime)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (!cJSON_IsObject(o) || !cJSON_IsString(ev)) {
        cJSON_Delete(o);
        return 1;
    }
    long long t = parse_time(audit_jstr(o, "time"));
    if (t < 0)
        t = mtime;
    int rc = 0;
    if (strcmp(ev->valuestring, "fallback") == 0) {
        const char *pref = audit_jstr(o, "preferred");
        rc = lg_add(g, audit_jstr(o, "model"), audit_jstr(o, "node"), audit_jstr(o, "op"),
                    *pref ? pref : audit_jstr(o, "device"), audit_jstr(o, "reason"), audit_jstr(o, "detail"),
                    audit_jstr(o, "host"), t, audit_jnum(o, "total_ms", -1), audit_jnum(o, "modeled_ms", -1), 0);
    } else if (strcmp(ev->valuestring, "device_fault") == 0) {
        rc = lg_add(g, audit_jstr(o, "model"), audit_jstr(o, "node"), "", audit_jstr(o, "device"), "DEVICE_FAULT",
                    audit_jstr(o, "detail"), audit_jstr(o, "host"), t, -1, -1, 1);
    }
    g->lines++;
    cJSON_Delete(o);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* JSON lines: every non-blank line a record. */
static int read_log(lg *g, const char *path, const char *text, size_t len, long long mtime)
{
    size_t lineno = 0, bad = 0, good = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        lineno++;
        const char *q = p;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < e) {
            int r = read_log_line(g, p, (size_t)(e - p), mtime);
            if (r < 0)
                return -1;
            if (r > 0) {
                if (bad++ == 0)
                    cli_error("%s:%zu is not a fallback-log record (a JSON object with \"event\"); line skipped",
                              path, lineno);
            } else {
                good++;
            }
        }
        p = e + (nl != NULL);
    }
    if (bad > 1)
        cli_error("%s: %zu more lines that are not records skipped", path, bad - 1);
    if (bad)
        lg_bad(g, EXIT_INVALID);
    if (good || !bad)
        g->logs++;
    return 0;
}

/* One file: a log (.jsonl, or lines that are not one JSON document), a
 * ledger or a profile. Returns -1 only when out of memory. */
static int read_one(lg *g, const char *path)
{
    size_t len = 0;
    int rc = 0;
    char *text = logs_read_file(path, &len, &rc);
    if (!text) {
        lg_bad(g, rc);
        return 0;
    }
    struct stat st;
    long long mtime = -1;
    if (stat(path, &st) == 0) {
        mtime = (long long)st.st_mtime;
        for (size_t k = 0; k < g->n_seen; k++)
            if (g->seen[k].dev == st.st_dev && g->seen[k].ino == st.st_ino) {
                free(text); /* given twice, or also inside a folder given */
                return 0;
            }
        struct lg_seen *ns = realloc(g->seen, (g->n_seen + 1) * sizeof *ns);
        if (!ns) {
            free(text);
            return -1;
        }
        g->seen = ns;
        g->seen[g->n_seen++] = (struct lg_seen){st.st_dev, st.st_ino};
    }
    g->files++;
    int r = 0;
    cJSON *root = ends_with(path, ".jsonl") ? NULL : cJSON_ParseWithLength(text, len);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    if (root && cJSON_IsObject(root) && cJSON_IsArray(nodes) &&
        cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "devices"))) {
        const cJSON *n0 = cJSON_GetArrayItem(nodes, 0);
        if (cJSON_GetObjectItemCaseSensitive(root, "iterations") || cJSON_GetObjectItemCaseSensitive(n0, "fallback"))
            r = read_profile(g, root, mtime);
        else
            r = read_ledger(g, root, mtime);
    } else if (root && cJSON_IsObject(root) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "event"))) {
        r = read_log(g, path, text, len, mtime); /* a log of one line */
    } else if (root) {
        cli_error("'%s' is JSON but neither a ledger, a profile nor a fallback log (no \"nodes\" and \"devices\", "
                  "no \"event\"); skipped",
                  path);
        g->files--;
        lg_bad(g, EXIT_INVALID);
    } else if (ends_with(path, ".json")) {
        cli_error("'%s' is not valid JSON (a ledger or profile was expected); skipped", path);
        g->files--;
        lg_bad(g, EXIT_INVALID);
    } else {
        size_t before = g->logs;
        r = read_log(g, path, text, len, mtime);
        if (g->logs == before)
            g->files--;
    }
    cJSON_Delete(root);
    free(text);
    return r;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder, recursively: its *.jsonl and *.json files in name order. */
static int read_dir(lg *g, const char *dir, int depth)
{
    if (depth > LOGS_MAX_DEPTH) {
        cli_error("'%s' is nested more than %d folders deep; skipped", dir, LOGS_MAX_DEPTH);
        lg_bad(g, EXIT_INVALID);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        cli_error("cannot read the folder '%s': %s", dir, strerror(errno));
        lg_bad(g, EXIT_IO);
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int oom = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and hidden files such as temporaries */
        char **nn = grow(names, &cap, n, sizeof *names, 16);
        if (!nn) {
            oom = 1;
            break;
        }
        names = nn;
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            oom = 1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t k = 0; k < n && !oom; k++) {
        struct stat st;
        if (stat(names[k], &st) != 0)
            continue; /* a dangling link or a file removed meanwhile */
        if (S_ISDIR(st.st_mode))
            oom = read_dir(g, names[k], depth + 1) != 0;
        else if (S_ISREG(st.st_mode) && (ends_with(names[k], ".jsonl") || ends_with(names[k], ".json")))
            oom = read_one(g, names[k]) != 0;
    }
    for (size_t k = 0; k < n; k++)
        free(names[k]);
    free(names);
    return oom ? -1 : 0;
}

/* --------------------------------------------------------- aggregating */

/* Records grouped by a key. */
typedef struct lg_group {
    const char *key;             /* borrowed from a record, or a bucket label */
    const lg_rec *first;         /* the first record of the group */
    size_t count, costed;
    double cost_ms;
} lg_group;

typedef struct lg_groups {
    lg_group *g;
    size_t n, cap;
} lg_groups;

/* The record's cost: measured ms when given, else modeled; < 0 none. */
static double rec_cost(const lg_rec *r) { return r->measured_ms >= 0 ? r->measured_ms : r->modeled_ms; }

static void group_count(lg_group *g, const lg_rec *r)
{
    double c = rec_cost(r);
    g->count++;
    if (c >= 0) {
        g->cost_ms += c;
        g->costed++;
    }
}

/* Adds r to the group of key (key1 x key2 x key3 when those are given). */
static int group_add(lg_groups *gs, const lg_rec *r, const char *key, const char *key2, const char *key3)
{
    lg_group *g = NULL;
    for (size_t k = 0; k < gs->n && !g; k++) {
        const lg_rec *f = gs->g[k].first;
        if (strcmp(gs->g[k].key, key) == 0 &&
            (!key2 || (strcmp(f->reason, key2) == 0 && strcmp(f->device, key3) == 0)))
            g = &gs->g[k];
    }
    if (!g) {
        lg_group *all = grow(gs->g, &gs->cap, gs->n, sizeof *gs->g, 16);
        if (!all)
            return -1;
        gs->g = all;
        g = &gs->g[gs->n++];
        memset(g, 0, sizeof *g);
        g->key = key;
        g->first = r;
    }
    group_count(g, r);
    return 0;
}

/* By count, then cost, then key. */
static int by_count(const void *a, const void *b)
{
    const lg_group *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    if (x->cost_ms != y->cost_ms)
        return x->cost_ms < y->cost_ms ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* By cost, then count, then op, reason and device. */
static int by_cost(const void *a, const void *b)
{
    const lg_group *x = a, *y = b;
    if (x->cost_ms != y->cost_ms)
        return x->cost_ms < y->cost_ms ? 1 : -1;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    int c = strcmp(x->key, y->key);
    if (!c)
        c = strcmp(x->first->reason, y->first->reason);
    return c ? c : strcmp(x->first->device, y->first->device);
}

enum { BK_HOUR, BK_DAY, BK_MONTH };
static const char *const bucket_name[] = {"hour", "day", "month"};

/* The label of the bucket holding t, into buf (BUCKET_LEN). */
#define BUCKET_LEN 24
static void bucket_label(int bk, long long t, char *buf)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm)) {
        snprintf(buf, BUCKET_LEN, "?");
        return;
    }
    strftime(buf, BUCKET_LEN, bk == BK_HOUR ? "%Y-%m-%dT%H:00Z" : bk == BK_DAY ? "%Y-%m-%d" : "%Y-%m", &tm);
}

/* "2026-12-04T14:20:51Z" for t, into buf (BUCKET_LEN). */
static void time_label(long long t, char *buf)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm))
        strftime(buf, BUCKET_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, BUCKET_LEN, "?");
}

/* The number of the hour, day or month since 1970 that holds t (>= 0). */
static long long bucket_no(int bk, long long t)
{
    if (bk == BK_HOUR)
        return t / 3600;
    if (bk == BK_DAY)
        return t / 86400;
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm))
        return 0;
    return (long long)(tm.tm_year + 1900) * 12 + tm.tm_mon;
}

/* The start of the bucket after the one holding t. */
static long long bucket_next(int bk, long long t)
{
    if (bk == BK_HOUR)
        return t - ((t % 3600) + 3600) % 3600 + 3600;
    if (bk == BK_DAY)
        return t - ((t % 86400) + 86400) % 86400 + 86400;
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm))
        return t + 31 * 86400LL;
    int y = tm.tm_year + 1900, m = tm.tm_mon + 2; /* 1-based, next month */
    if (m > 12) {
        m = 1;
        y++;
    }
    return days_from_civil(y, (unsigned)m, 1) * 86400;
}

typedef struct lg_report {
    lg_groups reason, op, model, device, host, top, faults;
    lg_groups time;       /* keys point into labels */
    char (*labels)[BUCKET_LEN];
    size_t n_labels;
    int bucket;
    long long first, last;
    size_t fallbacks, faults_n, measured_n, modeled_n, timed;
    double measured_ms, modeled_ms;
} lg_report;

static void report_free(lg_report *p)
{
    lg_groups *all[] = {&p->reason, &p->op, &p->model, &p->device, &p->host, &p->top, &p->faults, &p->time};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        free(all[k]->g);
    free(p->labels);
}

/* The buckets from the first record's to the last's, empty ones too; 0,
 * -1 when out of memory, EXIT_USAGE when there would be too many. */
static int report_time(lg_report *p, const lg *g)
{
    if (!p->timed)
        return 0;
    long long span = p->last - p->first;
    if (p->bucket < 0)
        p->bucket = span <= 2 * 86400 ? BK_HOUR : span <= 92 * 86400LL ? BK_DAY : BK_MONTH;
    long long b0 = bucket_no(p->bucket, p->first), nb = bucket_no(p->bucket, p->last) - b0 + 1;
    if (nb > LOGS_MAX_BUCKETS) {
        char a[BUCKET_LEN], b[BUCKET_LEN];
        time_label(p->first, a);
        time_label(p->last, b);
        cli_error("logs: the records span %s to %s, %lld %ss: more than %d buckets; choose a larger --bucket", a, b,
                  nb, bucket_name[p->bucket], LOGS_MAX_BUCKETS);
        return EXIT_USAGE;
    }
    size_t n = (size_t)nb;
    if (!(p->labels = calloc(n, sizeof *p->labels)) || !(p->time.g = calloc(n, sizeof *p->time.g)))
        return -1;
    long long t = p->first;
    for (size_t k = 0; k < n; k++, t = bucket_next(p->bucket, t)) {
        bucket_label(p->bucket, t, p->labels[k]);
        p->time.g[k].key = p->labels[k];
    }
    p->n_labels = p->time.n = p->time.cap = n;
    for (size_t i = 0; i < g->n; i++) {
        const lg_rec *r = &g->recs[i];
        if (r->fault || r->time < 0)
            continue;
        lg_group *b = &p->time.g[bucket_no(p->bucket, r->time) - b0];
        if (!b->first)
            b->first = r;
        group_count(b, r);
    }
    return 0;
}

static int report_build(lg_report *p, const lg *g, int bucket)
{
    memset(p, 0, sizeof *p);
    p->bucket = bucket;
    p->first = p->last = -1;
    for (size_t i = 0; i < g->n; i++) {
        const lg_rec *r = &g->recs[i];
        if (r->fault) {
            p->faults_n++;
            if (group_add(&p->faults, r, r->device, NULL, NULL))
                return -1;
            continue;
        }
        p->fallbacks++;
        if (r->measured_ms >= 0) {
            p->measured_n++;
            p->measured_ms += r->measured_ms;
        }
        if (r->modeled_ms >= 0) {
            p->modeled_n++;
            p->modeled_ms += r->modeled_ms;
        }
        if (r->time >= 0) {
            p->timed++;
            if (p->first < 0 || r->time < p->first)
                p->first = r->time;
            if (r->time > p->last)
                p->last = r->time;
        }
        if (group_add(&p->reason, r, r->reason, NULL, NULL) || group_add(&p->op, r, r->op, NULL, NULL) ||
            group_add(&p->model, r, r->model, NULL, NULL) || group_add(&p->device, r, r->device, NULL, NULL) ||
            group_add(&p->host, r, *r->host ? r->host : "(not recorded)", NULL, NULL) ||
            group_add(&p->top, r, r->op, r->reason, r->device))
            return -1;
    }
    lg_groups *counted[] = {&p->reason, &p->op, &p->model, &p->device, &p->host, &p->faults};
    for (size_t k = 0; k < sizeof counted / sizeof counted[0]; k++)
        if (counted[k]->n > 1)
            qsort(counted[k]->g, counted[k]->n, sizeof *counted[k]->g, by_count);
    if (p->top.n > 1)
        qsort(p->top.g, p->top.n, sizeof *p->top.g, by_cost);
    return report_time(p, g);
}

/* The distinct models of a top group's records. */
static size_t group_models(const lg *g, const lg_group *x, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        const lg_rec *r = &g->recs[i];
        if (r->fault || strcmp(r->op, x->first->op) != 0 || strcmp(r->reason, x->first->reason) != 0 ||
            strcmp(r->device, x->first->device) != 0)
            continue;
        size_t k = 0;
        while (k < n && strcmp(out[k], r->model) != 0)
            k++;
        if (k == n && n < max)
            out[n++] = r->model;
    }
    return n;
}

/* ------------------------------------------------------------ printing */

#define MAX_MODELS 8

static void print_groups(const char *title, const lg_groups *gs)
{
    if (!gs->n)
        return;
    printf("\n%s:\n", title);
    for (size_t k = 0; k < gs->n; k++) {
        const lg_group *x = &gs->g[k];
        printf("  %-28s %7zu", x->key, x->count);
        if (x->costed)
            printf("  %10.3f ms", x->cost_ms);
        putchar('\n');
    }
}

static void print_text(const lg *g, const lg_report *p, size_t top)
{
    printf("fallback analysis: %zu file%s (%zu fallback log%s, %zu ledger%s, %zu profile%s): %zu fallbacks, %zu "
           "device faults\n",
           g->files, g->files == 1 ? "" : "s", g->logs, g->logs == 1 ? "" : "s", g->ledgers,
           g->ledgers == 1 ? "" : "s", g->profiles, g->profiles == 1 ? "" : "s", p->fallbacks, p->faults_n);
    printf("  %zu models, %zu devices, %zu hosts", p->model.n, p->device.n, p->host.n);
    if (p->timed) {
        char a[BUCKET_LEN], b[BUCKET_LEN];
        time_label(p->first, a);
        time_label(p->last, b);
        printf("; from %s to %s", a, b);
    }
    putchar('\n');
    if (g->est.n)
        printf("fallback ratio (ledgers, estimated time): %zu plan%s, mean %.3f, max %.3f; %zu of %zu nodes fell "
               "back\n",
               g->est.n, g->est.n == 1 ? "" : "s", ratio_mean(&g->est), g->est.max, g->plan_fallbacks, g->plan_nodes);
    if (g->meas.n)
        printf("fallback ratio (profiles, measured): %zu run%s, mean %.3f, max %.3f\n", g->meas.n,
               g->meas.n == 1 ? "" : "s", ratio_mean(&g->meas), g->meas.max);
    printf("cost after fallback: %.3f ms measured (%zu records), %.3f ms modeled (%zu records)\n", p->measured_ms,
           p->measured_n, p->modeled_ms, p->modeled_n);
    if (p->time.n) {
        printf("\nfallbacks per %s:\n", bucket_name[p->bucket]);
        for (size_t k = 0; k < p->time.n; k++) {
            const lg_group *x = &p->time.g[k];
            printf("  %-20s %7zu", x->key, x->count);
            if (x->costed)
                printf("  %10.3f ms", x->cost_ms);
            putchar('\n');
        }
    }
    print_groups("by reason", &p->reason);
    print_groups("by op type", &p->op);
    print_groups("by model", &p->model);
    print_groups("by device (the device that refused)", &p->device);
    print_groups("by host", &p->host);
    print_groups("device faults by device", &p->faults);
    size_t n = top && top < p->top.n ? top : p->top.n;
    if (n)
        printf("\ntop offenders (op type x reason x device, by cost then count):\n");
    for (size_t k = 0; k < n; k++) {
        const lg_group *x = &p->top.g[k];
        const char *models[MAX_MODELS];
        size_t nm = group_models(g, x, models, MAX_MODELS);
        char h[512];
        audit_hint(x->first->reason, x->first->op, x->first->detail, x->first->device, NULL, h, sizeof h);
        printf("  %zu. %s  %s  %s: %zu fallbacks", k + 1, x->key, x->first->reason, x->first->device, x->count);
        if (x->costed)
            printf(", %.3f ms", x->cost_ms);
        printf(", in ");
        for (size_t m = 0; m < nm; m++)
            printf("%s%s", m ? ", " : "", models[m]);
        putchar('\n');
        if (*x->first->detail)
            printf("     e.g. %s: %s\n", x->first->node, x->first->detail);
        if (*h)
            printf("     hint: %s\n", h);
    }
}

static void json_groups(jw *w, const char *key, const lg_groups *gs, const char *name)
{
    jw_key(w, key);
    jw_arr_begin(w);
    for (size_t k = 0; k < gs->n; k++) {
        jw_obj_begin(w);
        jw_key(w, name);
        jw_str(w, gs->g[k].key);
        jw_kuint(w, "count", gs->g[k].count);
        jw_knum(w, "cost_ms", gs->g[k].cost_ms);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

static void print_json(const lg *g, const lg_report *p, size_t top)
{
    jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_key(&w, "files");
    jw_obj_begin(&w);
    jw_kuint(&w, "read", g->files);
    jw_kuint(&w, "fallback_logs", g->logs);
    jw_kuint(&w, "ledgers", g->ledgers);
    jw_kuint(&w, "profiles", g->profiles);
    jw_kuint(&w, "log_records", g->lines);
    jw_obj_end(&w);
    jw_kuint(&w, "fallbacks", p->fallbacks);
    jw_kuint(&w, "device_faults", p->faults_n);
    jw_key(&w, "cost_ms");
    jw_obj_begin(&w);
    jw_knum(&w, "measured", p->measured_ms);
    jw_kuint(&w, "measured_records", p->measured_n);
    jw_knum(&w, "modeled", p->modeled_ms);
    jw_kuint(&w, "modeled_records", p->modeled_n);
    jw_obj_end(&w);
    jw_key(&w, "fallback_ratio");
    jw_obj_begin(&w);
    jw_kuint(&w, "plans", g->est.n);
    jw_knum(&w, "estimated_mean", ratio_mean(&g->est)); /* null when none */
    jw_knum(&w, "estimated_max", g->est.n ? g->est.max : NAN);
    jw_kuint(&w, "plan_nodes", g->plan_nodes);
    jw_kuint(&w, "plan_fallback_nodes", g->plan_fallbacks);
    jw_kuint(&w, "measured_runs", g->meas.n);
    jw_knum(&w, "measured_mean", ratio_mean(&g->meas));
    jw_knum(&w, "measured_max", g->meas.n ? g->meas.max : NAN);
    jw_obj_end(&w);
    jw_key(&w, "over_time");
    jw_obj_begin(&w);
    jw_kstr(&w, "bucket", p->time.n ? bucket_name[p->bucket] : NULL);
    char a[BUCKET_LEN] = "", b[BUCKET_LEN] = "";
    if (p->timed) {
        time_label(p->first, a);
        time_label(p->last, b);
    }
    jw_kstr(&w, "first", p->timed ? a : NULL);
    jw_kstr(&w, "last", p->timed ? b : NULL);
    json_groups(&w, "buckets", &p->time, "bucket");
    jw_obj_end(&w);
    json_groups(&w, "by_reason", &p->reason, "reason");
    json_groups(&w, "by_op", &p->op, "op");
    json_groups(&w, "by_model", &p->model, "model");
    json_groups(&w, "by_device", &p->device, "device");
    json_groups(&w, "by_host", &p->host, "host");
    json_groups(&w, "device_faults_by_device", &p->faults, "device");
    jw_key(&w, "top");
    jw_arr_begin(&w);
    size_t n = top && top < p->top.n ? top : p->top.n;
    for (size_t k = 0; k < n; k++) {
        const lg_group *x = &p->top.g[k];
        const char *models[MAX_MODELS];
        size_t nm = group_models(g, x, models, MAX_MODELS);
        char h[512];
        audit_hint(x->first->reason, x->first->op, x->first->detail, x->first->device, NULL, h, sizeof h);
        jw_obj_begin(&w);
        jw_kstr(&w, "op", x->key);
        jw_kstr(&w, "reason", x->first->reason);
        jw_kstr(&w, "device", x->first->device);
        jw_kuint(&w, "count", x->count);
        jw_knum(&w, "cost_ms", x->cost_ms);
        jw_key(&w, "models");
        jw_arr_begin_inline(&w);
        for (size_t m = 0; m < nm; m++)
            jw_str(&w, models[m]);
        jw_arr_end(&w);
        jw_kstr(&w, "example_node", x->first->node);
        jw_kstr(&w, "detail", x->first->detail);
        jw_kstr(&w, "hint", *h ? h : NULL);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
}

/* ------------------------------------------------------------- command */

int cmd_logs(int argc, char **argv)
{
    const char *cmd = "logs";
    const char **paths = NULL;
    size_t n_paths = 0;
    long long top = 10;
    int json = 0, bucket = -1, rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *val = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_logs(stdout);
            free(paths);
            return EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--top", &val)) != 0) {
            if (r < 0 || cli_parse_i64(val, &top) != 0) {
                if (r > 0)
                    cli_error("logs: --top expects a number of groups, not '%s'", val);
                free(paths);
                return EXIT_USAGE;
            }
        } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--bucket", &val)) != 0) {
            bucket = r < 0 ? -2 : strcmp(val, "hour") == 0 ? BK_HOUR : strcmp(val, "day") == 0 ? BK_DAY
                                                            : strcmp(val, "month") == 0        ? BK_MONTH
                                                                                               : -2;
            if (bucket == -2) {
                if (r > 0)
                    cli_error("logs: --bucket is hour, day or month, not '%s'", val);
                free(paths);
                return EXIT_USAGE;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_error("logs: unknown option '%s'; `tandem logs --help` lists them", argv[i]);
            free(paths);
            return EXIT_USAGE;
        } else if (cli_push_str(&paths, &n_paths, argv[i]) != 0) {
            free(paths);
            return cli_fail(TDM_E_NOMEM, "logs", NULL);
        }
    }
    if (!n_paths) {
        cli_error("logs: no FILE or DIR given; `tandem logs --help` describes the command");
        return EXIT_USAGE;
    }
    lg g;
    memset(&g, 0, sizeof g);
    int oom = 0;
    for (size_t k = 0; k < n_paths && !oom; k++) {
        struct stat st;
        if (stat(paths[k], &st) != 0) {
            cli_error("cannot read '%s': %s", paths[k], strerror(errno));
            lg_bad(&g, EXIT_IO);
        } else if (S_ISDIR(st.st_mode)) {
            oom = read_dir(&g, paths[k], 0) != 0;
        } else {
            oom = read_one(&g, paths[k]) != 0;
        }
    }
    lg_report p;
    memset(&p, 0, sizeof p);
    int built = oom ? -1 : report_build(&p, &g, bucket); /* -1: out of memory; > 0 an exit code */
    if (built < 0) {
        rc = cli_fail(TDM_E_NOMEM, "logs", NULL);
    } else if (built > 0) {
        rc = built;
    } else if (!g.files) {
        cli_error("logs: no fallback log, ledger or profile was read from the %zu path%s given", n_paths,
                  n_paths == 1 ? "" : "s");
        rc = g.rc ? g.rc : EXIT_IO;
    } else {
        if (json)
            print_json(&g, &p, (size_t)top);
        else
            print_text(&g, &p, (size_t)top);
        rc = g.rc;
    }
    report_free(&p);
    lg_free(&g);
    free(paths);
    return rc;
}
