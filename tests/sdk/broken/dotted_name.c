/* tests/sdk/broken/dotted_name.c: a plugin named with a '.', which pipelines could not
 * name (they write plugin.stage): the engine refuses it. */
#include "common.h"

GAIN_STAGE("sdk_dotted_name", "RGB * gain", 1, "factor on R, G and B")
PF_DEFINE_PLUGIN("dotted.name" /* the fault */, "1.0", "a plugin name with a '.'", stages)
