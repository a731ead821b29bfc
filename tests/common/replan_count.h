/* An event hook for tests: counts TDM_EVENT_REPLAN and keeps the last one's
 * sentence (its on_event, with an obs_count as user data). */
#ifndef TDM_TESTS_REPLAN_COUNT_H
#define TDM_TESTS_REPLAN_COUNT_H

#include <tandem/tandem.h>

#include <stdio.h>

typedef struct obs_count {
    int replans;
    char last[1200];
} obs_count;

static void on_event(void *user, const tdm_event *ev)
{
    obs_count *c = user;
    if (ev->kind == TDM_EVENT_REPLAN) {
        c->replans++;
        snprintf(c->last, sizeof c->last, "%s", ev->detail ? ev->detail : "");
    }
}

#endif
