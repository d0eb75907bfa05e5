/* tests/sdk/broken/abort_entry.c: a plugin whose entry point calls abort(), so every
 * command that loads plugins from its directory meets it. */
#include <stdlib.h>

#include "pipefuse/plugin.h"

PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    (void)host;
    abort();
}
