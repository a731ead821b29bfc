#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

tdm_status err_set(tdm_err *e, tdm_status status, const char *fmt, ...)
{
    if (!e)
        return status;
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

void err_prefix(tdm_err *e, const char *fmt, ...)
{
    if (!e)
        return;
    char head[TDM_ERR_MAX];
    char old[TDM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t hl = strlen(head);
    if (hl >= sizeof e->msg)
        hl = sizeof e->msg - 1;
    memcpy(e->msg, head, hl);
    size_t ol = strlen(old);
    if (ol > sizeof e->msg - 1 - hl)
        ol = sizeof e->msg - 1 - hl;
    memcpy(e->msg + hl, old, ol);
    e->msg[hl + ol] = '\0';
}

void err_clear(tdm_err *e)
{
    if (!e)
        return;
    e->status = TDM_OK;
    e->msg[0] = '\0';
}

const char *tdm_status_str(tdm_status status)
{
    /* No default: the compiler flags a status missing here. */
    switch (status) {
    case TDM_OK: return "TDM_OK";
    case TDM_E_USAGE: return "TDM_E_USAGE";
    case TDM_E_MODEL: return "TDM_E_MODEL";
    case TDM_E_UNSUPPORTED: return "TDM_E_UNSUPPORTED";
    case TDM_E_INPUT: return "TDM_E_INPUT";
    case TDM_E_IO: return "TDM_E_IO";
    case TDM_E_NOMEM: return "TDM_E_NOMEM";
    case TDM_E_DEVICE: return "TDM_E_DEVICE";
    case TDM_E_POLICY: return "TDM_E_POLICY";
    case TDM_E_RUNTIME: return "TDM_E_RUNTIME";
    case TDM_E_INTERNAL: return "TDM_E_INTERNAL";
    }
    return "TDM_E_UNKNOWN";
}
