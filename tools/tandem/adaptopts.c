/* ADAPTATION OPTIONS of run, bench and profile (cli.h): the circuit
 * breaker, re-planning with measured costs, the plan cache per input
 * shape, and the adaptation JSON (tdm_session_adaptation_json). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses up to max comma-separated numbers; returns the count, -1 on a
 * malformed list. */
static int numbers(const char *val, double *out, int max)
{
    int n = 0;
    const char *p = val;
    while (*p) {
        char *end = NULL;
        if (n == max)
            return -1;
        double d = strtod(p, &end);
        if (end == p || !(d == d))
            return -1;
        out[n++] = d;
        if (*end == ',' && end[1])
            p = end + 1;
        else if (!*end)
            p = end;
        else
            return -1;
    }
    return n;
}

int cli_adaptopts_parse(const char *cmd, int argc, char **argv, int *i, cli_adaptopts *o, int *rc)
{
    const char *val;
    int r;
    double v[3];
    *rc = 0;
    if ((r = cli_opt_value(cmd, argc, argv, i, "--breaker", &val)) != 0) {
        int n = r > 0 ? numbers(val, v, 3) : -1;
        if (r < 0 || n != 3 || !(v[0] >= 1 && v[0] <= 1e6 && v[0] == (double)(int)v[0]) || !(v[1] >= 0) || !(v[2] >= 0)) {
            if (r > 0)
                cli_error("%s: --breaker expects K,WINDOW_MS,COOLDOWN_MS (K >= 1 faults within WINDOW_MS open it; "
                          "a probe after COOLDOWN_MS), not '%s'",
                          cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->faults = (int)v[0];
        o->window_ms = v[1];
        o->cooldown_ms = v[2];
        o->has_breaker = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--adapt", &val)) != 0) {
        int n = r > 0 ? numbers(val, v, 3) : -1;
        if (n == 2)
            v[2] = 10;
        if (r < 0 || n < 2 || !(v[0] >= 1 && v[0] <= 1e6) || !(v[1] >= 1 && v[1] <= 1e6 && v[1] == (double)(int)v[1]) ||
            !(v[2] >= 1 && v[2] <= 1e9 && v[2] == (double)(int)v[2])) {
            if (r > 0)
                cli_error("%s: --adapt expects RATIO,N[,M] (re-plan when a partition takes >= RATIO times its "
                          "estimate in N consecutive runs, at most once per M runs; e.g. 1.5,3,10), not '%s'",
                          cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->ratio = v[0];
        o->runs = (int)v[1];
        o->min_runs = (int)v[2];
        o->has_adapt = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--plan-cache", &val)) != 0) {
        long long n = 0;
        if (r < 0 || cli_parse_i64(val, &n) || n < 0 || n > 4096) {
            if (r > 0)
                cli_error("%s: --plan-cache expects a number of plans from 0 to 4096, not '%s'", cmd, val);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->cache = (int)n;
        o->has_cache = 1;
        return 1;
    }
    if ((r = cli_opt_value(cmd, argc, argv, i, "--adaptation-json", &val)) != 0) {
        if (r < 0 || !*val) {
            if (r > 0)
                cli_error("%s: --adaptation-json needs a file name ('-': standard output)", cmd);
            *rc = EXIT_USAGE;
            return 1;
        }
        o->json = val;
        return 1;
    }
    return 0;
}

int cli_adaptopts_apply(const cli_adaptopts *o, tdm_session_options *so)
{
    tdm_status st;
    if (o->has_breaker && (st = tdm_session_options_set_breaker(so, o->faults, o->window_ms, o->cooldown_ms)) != TDM_OK)
        return cli_fail(st, NULL, "--breaker: the value is not accepted");
    if (o->has_adapt && (st = tdm_session_options_set_adaptation(so, o->ratio, o->runs, o->min_runs)) != TDM_OK)
        return cli_fail(st, NULL, "--adapt: the value is not accepted");
    if (o->has_cache && (st = tdm_session_options_set_plan_cache(so, o->cache)) != TDM_OK)
        return cli_fail(st, NULL, "--plan-cache: the value is not accepted");
    return 0;
}

int cli_adaptopts_write(const cli_adaptopts *o, tdm_session *s)
{
    if (!o->json || !s)
        return 0;
    char *json = NULL;
    tdm_status st = tdm_session_adaptation_json(s, &json);
    if (st)
        return cli_fail(st, NULL, "cannot describe the adaptation");
    int to_stdout = strcmp(o->json, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(o->json, "w");
    if (!f) {
        tdm_free(json);
        cli_error("cannot write the adaptation JSON to '%s': %s", o->json, strerror(errno));
        return EXIT_IO;
    }
    int bad = fputs(json, f) < 0 || fputc('\n', f) == EOF;
    if (!to_stdout)
        bad |= fclose(f) != 0;
    tdm_free(json);
    if (bad) {
        cli_error("cannot write the adaptation JSON to '%s'", o->json);
        return EXIT_IO;
    }
    return 0;
}

void usage_adaptopts(FILE *f)
{
    fputs("adaptation options (long-lived sessions):\n"
          "  --breaker K,WINDOW_MS,COOLDOWN_MS\n"
          "                         circuit breaker: a run hitting a device fault is re-executed\n"
          "                         on cpu (DEVICE_FAULT) and returns correct outputs; K faults\n"
          "                         within WINDOW_MS send every run to cpu; after COOLDOWN_MS one\n"
          "                         run probes the devices again (e.g. 3,10000,1000)\n"
          "  --adapt RATIO,N[,M]    re-plan with measured costs when a partition on a device takes\n"
          "                         >= RATIO times its estimate in N consecutive runs, at most once\n"
          "                         per M runs (default 10); adopted only when >= 10 % cheaper\n"
          "                         (e.g. 1.5,3)\n"
          "  --plan-cache N         plan per input-shape signature, N plans kept (LRU); a shape\n"
          "                         whose placement differs is reported (shape-dependent fallback)\n"
          "  --adaptation-json FILE the breaker, re-planning and plan-cache state and decisions\n"
          "                         after the runs, as JSON ('-': standard output)\n",
          f);
}
