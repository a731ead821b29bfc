/* The library's version (include/tandem/tandem.h), for programs that run
 * against a shared libtandem built from another header. */
#include "tandem/tandem.h"

const char *tdm_version(void)
{
    return TDM_VERSION_STRING;
}

int tdm_version_number(void)
{
    return TDM_VERSION_NUMBER;
}
