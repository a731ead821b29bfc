/* Error sentences kept on handles. */
#ifndef TDM_CORE_ERR_H
#define TDM_CORE_ERR_H

#include "tandem/tandem.h"

#define TDM_ERR_MAX 1024

typedef struct tdm_err {
    tdm_status status;
    char msg[TDM_ERR_MAX];
} tdm_err;

/* Records status and a printf-style sentence on e (which may be NULL) and
 * returns status, so that callers can write `return err_set(e, …);`. */
tdm_status err_set(tdm_err *e, tdm_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefixes the existing message with a printf-style context ("node 'x': "). */
void err_prefix(tdm_err *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void err_clear(tdm_err *e);

#endif
