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
    tdm_dtype map_key;  /* a sequence of maps: their key type (tdm_model_output_map_key) */
} model_io;

struct tdm_model {
    gr_model *gm;
    char *path;         /* as given to the load call (info.path) */
    tdm_model_info info;
    model_op_count *ops;
    size_t n_ops;
    model_io *inputs;
    size_t n_inputs;
    model_io *outputs;
    size_t n_outputs;
    struct flop_node *flops; /* the file's compute nodes (model.c), counted again when specialised */
    size_t n_flops;
};

/* Turns a freshly loaded IR into a model: gr_finalize, gr_validate,
 * gr_infer, the info (histogram, parameters: before folding, so that they
 * describe the file), gr_fold_constants, gr_infer again, then FLOPs and the
 * input/output descriptions from the final types. Takes ownership of gm,
 * also on failure. name (the file, or the name given for a buffer) is kept
 * as info.path; errors are prefixed with its base name. */
tdm_status model_build(tdm_err *e, gr_model *gm, const char *name, tdm_model **out);

/* A graph input's dimensions fixed by the caller (--shape): dims[d] >= 0
 * fixes dimension d, -1 leaves it as the model has it. */
typedef struct model_shape {
    const char *input;
    int rank;
    const int64_t *dims;
} model_shape;

/* The model m with the dimensions of shapes fixed, so that the planner sees
 * static shapes: m's IR is cloned (gr_model_clone, clone.c: no file is
 * read, so a model loaded from memory is specialised too), the inputs get
 * the fixed dimensions, what inference found is forgotten (declarations and
 * constants stay), and inference and folding run again on the clone. info
 * (what describes the file) is m's, but for the FLOPs, counted again with
 * the new shapes. A shape that names no input, or gives another rank than
 * the input's, is skipped (callers check them first). *out is NULL when n
 * is 0; otherwise a new model the caller destroys. */
tdm_status model_specialize(tdm_err *e, const tdm_model *m, const model_shape *shapes, size_t n, tdm_model **out);

/* A deep copy of src (clone.c): graphs, nodes, attributes, values with
 * their types and constants. */
tdm_status gr_model_clone(tdm_err *e, const gr_model *src, gr_model **out);

/* Prefixes e's sentence with "BASE: " (BASE: name's base name) unless the
 * sentence already names it. */
void model_err_prefix(tdm_err *e, const char *name);

#endif
