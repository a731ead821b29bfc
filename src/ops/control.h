/* Run and infer hooks of the control ops (see ops.def). */
#ifndef TDM_OPS_CONTROL_H
#define TDM_OPS_CONTROL_H

#include "ops/op.h"

#endif
