/* Run and infer hooks of the reduce ops (see ops.def). */
#ifndef TDM_OPS_REDUCE_H
#define TDM_OPS_REDUCE_H

#include "ops/op.h"

#endif
