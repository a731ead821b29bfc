/* The fault-injection device's hooks for the runtime (src/devices/faulty.c). */
#ifndef TDM_DEVICES_FAULTY_H
#define TDM_DEVICES_FAULTY_H

#include "devices/device_internal.h"

/* The slow=F factor of a faulty: device (1 for any other device): run-time
 * adaptation multiplies the node times it measures on d by it. */
double dev_faulty_slowdown(const dev_instance *d);

#endif
