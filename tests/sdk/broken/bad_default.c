/* tests/sdk/broken/bad_default.c: a parameter whose default (25) is outside its declared
 * range [0, 10]. */
#include "common.h"

GAIN_STAGE("sdk_bad_default", "RGB * gain", 25 /* the fault */, "factor on R, G and B")
PF_DEFINE_PLUGIN("bad_default", "1.0", "a default outside its range", stages)
