/* A device's own rescue rewrites (device ABI 3, tdm_device_iface.rewrite):
 * the plain description a plugin gives (tdm_rewrite) made into a gr_rw, so
 * that the rescue pass (rescue.c) checks, verifies and records it exactly
 * as one of its own rules. */
#ifndef TDM_PLAN_RESCUE_DEV_H
#define TDM_PLAN_RESCUE_DEV_H

#include "graph/rewrite.h"
#include "plan/plan.h"

/* Asks device d of p for its rewrite of node n of g (desc: the node as the
 * device sees it). 1: rw is initialised and filled, its rule
 * "plugin:<device>:<name>" (in p's arena); 0: rw is initialised and empty
 * (no rewrite, or rw->why says why the device's rewrite cannot be taken);
 * -1: out of memory. The device's memory is released before returning. */
int plan_rescue_dev_rewrite(tdm_plan *p, int d, const gr_graph *g, int n, const tdm_node_desc *desc, gr_rw *rw);

#endif
