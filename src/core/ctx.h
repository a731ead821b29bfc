/* The context behind the public tdm_ctx. */
#ifndef TDM_CORE_CTX_H
#define TDM_CORE_CTX_H

#include "core/err.h"

struct tdm_ctx {
    tdm_err err;
};

#endif
