/* Run and infer hooks of the signal, random and string ops (see ops.def). */
#ifndef TDM_OPS_SIGNAL_H
#define TDM_OPS_SIGNAL_H

#include "ops/op.h"

#endif
