/* Peak resident memory of loading one model, against its file size: the
 * loader must not hold the weights twice (limit: 1.3x the file size above
 * the process's baseline). Usage: loader_rss MODEL [LIMIT]. Exits 77 (skip)
 * when the model file is absent. */
#define _DEFAULT_SOURCE
#include "onnx/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

static long peak_kb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return -1;
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: loader_rss MODEL [LIMIT]\n");
        return 2;
    }
    double limit = argc > 2 ? atof(argv[2]) : 1.3;
    struct stat sb;
    if (stat(argv[1], &sb)) {
        printf("SKIP: %s is absent (run the model generator first)\n", argv[1]);
        return 77;
    }
    long base = peak_kb();
    tdm_err e;
    err_clear(&e);
    gr_model *m = NULL;
    tdm_status st = onnx_load_file(&e, argv[1], &m);
    long peak = peak_kb();
    if (st != TDM_OK) {
        printf("FAIL: loading %s: %s (%s)\n", argv[1], e.msg, tdm_status_str(st));
        printf("0 passed, 1 failed\n");
        return 1;
    }
    size_t params = 0, bytes = 0;
    for (int i = 0; i < m->main->n_values; i++)
        if (m->main->values[i].init) {
            params++;
            bytes += m->main->values[i].init->nbytes;
        }
    double fsize = (double)sb.st_size;
    double ratio = (double)(peak - base) * 1024.0 / fsize;
    printf("%s: %.1f MB file, %zu initializers (%.1f MB), %d nodes; peak RSS %.1f MB above a %.1f MB baseline: "
           "%.3fx the file size (limit %.2fx)\n",
           argv[1], fsize / 1e6, params, (double)bytes / 1e6, m->main->n_nodes, (double)(peak - base) * 1024.0 / 1e6,
           (double)base * 1024.0 / 1e6, ratio, limit);
    gr_model_free(m);
    int ok = ratio <= limit && bytes > 0;
    printf("%s\n%d passed, %d failed\n", ok ? "PASS" : "FAIL: too much memory", ok, !ok);
    return ok ? 0 : 1;
}
