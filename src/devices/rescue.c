/* Rescue rules per device (devices/rescue.h). */
#include "devices/rescue.h"
#include "devices/vnpu/vnpu.h"

#include <string.h>

int dev_rescue_wants(const dev_instance *di, const char *rule)
{
    if (!di || di->kind == DEV_KIND_CPU)
        return 0;
    if (di->dev.iface != &vnpu_iface || !di->dev.ctx)
        return 1;
    const struct vnpu_ctx *c = di->dev.ctx;
    if (!c->has_rescue)
        return 1;
    for (size_t k = 0; k < c->n_rescue; k++)
        if (strcmp(c->rescue[k], rule) == 0)
            return 1;
    return 0;
}

int64_t dev_rescue_unroll(const dev_instance *di)
{
    if (!di || di->kind == DEV_KIND_CPU || di->dev.iface != &vnpu_iface || !di->dev.ctx)
        return 0;
    return ((const struct vnpu_ctx *)di->dev.ctx)->unroll_loops;
}
