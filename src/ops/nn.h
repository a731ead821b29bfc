/* Run and infer hooks of the nn ops (see ops.def). */
#ifndef TDM_OPS_NN_H
#define TDM_OPS_NN_H

#include "ops/op.h"

#endif
