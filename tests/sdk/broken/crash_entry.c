/* tests/sdk/broken/crash_entry.c: a plugin whose entry point writes through a NULL
 * pointer, so every command that loads plugins from its directory meets the crash. */
#include "pipefuse/plugin.h"

PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    (void)host;
    *(volatile int *)0 = 1; /* the fault */
    return 0;
}
