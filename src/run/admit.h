/* Admission: concurrent runs of one session share its devices' memory.
 *
 * A device with a memory capacity (a vnpu profile's memory_bytes, an
 * OpenCL device, a plugin reporting memory_capacity) accounts the tensors
 * every run holds on it; without admission, runs that each fit alone fail
 * together ("vnpu:edge-npu is out of memory: …") when their sum does not.
 * Admission sits in front of the executor: before a run starts, its need
 * on each such device is taken from the plan it runs — every tensor the
 * run may hold there at once (the copies to the device and the outputs of
 * its nodes, at the device's storage type), an upper bound of what the
 * executor reserves, capped at the capacity (a tensor of unknown size makes
 * the need the whole capacity: the run has the device to itself). The run
 * is admitted when its need fits beside the runs already admitted on every
 * device; otherwise it waits.
 *
 * Fairness: first come, first served. Each waiting run holds a ticket; only
 * the oldest ticket may be admitted, so a large run is never overtaken
 * forever by small ones. As every need is at most the capacity, the oldest
 * run is admitted at the latest when the runs ahead of it end: no run that
 * would succeed alone fails for lack of memory, and none waits forever.
 *
 * The queue is bounded: a run arriving when max_queue runs already wait is
 * refused at once with TDM_E_DEVICE and a sentence naming the device and the
 * bound (max_queue 0: no run waits; one that does not fit at once is
 * refused). A run that does not fit even alone is admitted with the device
 * to itself and fails in the executor with the sentence it always had.
 *
 * Every run that waited, and every refusal, is reported to the session's
 * observer as TDM_EVENT_ADMIT (start..end: the wait; device: the device
 * whose memory it waited for; bytes_in: its need there; status 0 or the
 * refusal's, detail its sentence), which tdm_metrics counts
 * (tandem_run_admission_*). */
#ifndef TDM_RUN_ADMIT_H
#define TDM_RUN_ADMIT_H

#include "plan/plan.h"

#include <stdint.h>

/* Runs that may wait at once unless the session options say otherwise. */
#define ADMIT_DEFAULT_QUEUE 64

typedef struct admit_ctl admit_ctl;

/* One admitted run: what it holds (filled by admit_enter). */
typedef struct admit_ticket {
    uint64_t *held;    /* per device of the controller; NULL: nothing held */
} admit_ticket;

/* The controller for the devices of plan (its device list, by name): *out
 * is NULL when no device but cpu has a finite capacity (nothing to admit).
 * max_queue < 0 means ADMIT_DEFAULT_QUEUE. */
tdm_status admit_create(tdm_err *e, const tdm_plan *plan, int max_queue, admit_ctl **out);
void admit_free(admit_ctl *a);

/* Waits until a run of plan (the session's plan or one of its variants,
 * whose devices carry the same names) may start, then holds its need.
 * a NULL: admits at once. fn/user: the session's observer (fn may be NULL).
 * On refusal returns TDM_E_DEVICE with the sentence in e; nothing is held. */
tdm_status admit_enter(tdm_err *e, admit_ctl *a, const tdm_plan *plan, tdm_observer_fn fn, void *user,
                       admit_ticket *t);
/* Gives back what t holds (a NULL or t empty: no-op). */
void admit_leave(admit_ctl *a, admit_ticket *t);

#endif
