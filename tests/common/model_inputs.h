/* Shared by the tests that run a real model (tests/plan, tests/plan/cost, tests/run):
 * reads a reference inputs list (lines NAME=FILE.npy, as scripts/refs.sh
 * writes them) and loads each file into the slot of the model input of
 * that name. */
#ifndef TDM_TEST_MODEL_INPUTS_H
#define TDM_TEST_MODEL_INPUTS_H

#include <tandem/tandem.h>

#include <stdio.h>
#include <string.h>

/* 0 when every listed input loaded, 77 when the list is missing (the data
 * is not generated: the test is skipped), 1 with a FAIL line otherwise. */
static int test_load_inputs(tdm_ctx *c, const tdm_model *model, const char *list, tdm_tensor **slots, size_t n)
{
    FILE *f = fopen(list, "r");
    if (!f)
        return 77;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strrchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        for (size_t k = 0; k < n; k++) {
            tdm_value_info vi;
            tdm_model_input(model, k, &vi);
            if (strcmp(vi.name, line) == 0 && tdm_value_load(c, eq + 1, NULL, &slots[k]) != TDM_OK) {
                printf("FAIL: %s: %s\n", eq + 1, tdm_ctx_error(c));
                fclose(f);
                return 1;
            }
        }
    }
    fclose(f);
    return 0;
}

#endif
