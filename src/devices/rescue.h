/* Which rewrite rules (graph/rewrite.h) a device wants the rescue pass
 * (plan/rescue.h) to try on the nodes it rejects. A vnpu profile lists them
 * under "rescue" (absent: every rule; [] : none); cpu wants none (it runs
 * every op); OpenCL and plugins get every rule (the rescue pass keeps only
 * rewrites whose every node the device says it supports). */
#ifndef TDM_DEVICES_RESCUE_H
#define TDM_DEVICES_RESCUE_H

#include "devices/device_internal.h"

/* 1 when device di wants rule tried. */
int dev_rescue_wants(const dev_instance *di, const char *rule);
/* The most iterations of a Loop device di wants unrolled (a vnpu
 * profile's "unroll_loops"; 0 for every other device). */
int64_t dev_rescue_unroll(const dev_instance *di);

#endif
