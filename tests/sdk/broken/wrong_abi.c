/* tests/sdk/broken/wrong_abi.c: a plugin that says it was built for plugin ABI 2.0. */
#include "common.h"

GAIN_STAGE("sdk_wrong_abi", "RGB * gain", 1, "factor on R, G and B")

PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    static const pf_plugin_desc d = {sizeof(pf_plugin_desc),
                                     2u << 16, /* the fault */
                                     "wrong_abi",
                                     "1.0",
                                     "built for another ABI",
                                     stages,
                                     1};
    return &d;
}
