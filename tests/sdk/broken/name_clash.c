/* tests/sdk/broken/name_clash.c: a stage named like a built-in one (vignette, of the
 * color family). Stage names are shared by all loaded plugins. */
#include "common.h"

GAIN_STAGE("vignette" /* the fault */, "RGB * gain", 1, "factor on R, G and B")
PF_DEFINE_PLUGIN("name_clash", "1.0", "a stage name the color family already uses", stages)
