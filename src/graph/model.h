/* The model handle behind the public tdm_model: the IR plus what `info`
 * reports, computed once at load (before constant folding, so that it
 * describes the file). */
#ifndef TDM_GRAPH_MODEL_H
#define TDM_GRAPH_MODEL_H

#include "graph/graph.h"

typedef struct model_op_count {
    const char *domain;
    const char *op_type;
    size_t count;
} model_op_count;

typedef struct model_io {
    tdm_value_info info;
    tdm_dim dims[TDM_MAX_RANK];
    int value;          /* value id in the main graph */
} model_io;

struct tdm_model {
    gr_model *gm;
    tdm_model_info info;
    model_op_count *ops;
    size_t n_ops;
    model_io *inputs;
    size_t n_inputs;
    model_io *outputs;
    size_t n_outputs;
};

#endif
