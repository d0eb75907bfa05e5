/* my_plugin.c: the plugin's descriptors and CPU code. See the darkroom sample one
 * directory up for the same, commented line by line. */
#include "pipefuse/plugin.h"

#include "my_ops.h"

/* ---- my_gain: a point stage ------------------------------------------------------------ */

extern const char pf_src_my_ops[];        /* my_ops.h's text (pipefuse_add_plugin POINT_OPS) */
PF_POINT_ROW(my_gain, my_gain_params)     /* defines my_gain_row, the CPU version */
int my_gain_cuda(const pf_stage_args *a); /* my_plugin_cuda.cu */

/* One row per field: name (the field's), default, min, max (PF_NO_MAX: none), doc. The
   macro checks at compile time that the field is a float. */
static const pf_param_desc my_gain_table[] = {
    PF_FLOAT_PARAM(my_gain_params, gain, 1, 0, 8, "factor on R, G and B"),
};

static const pf_stage_desc my_gain_desc = {
    PF_POINT_DESC(my_gain, my_gain_params, pf_src_my_ops),
    .point_cuda = PF_CUDA(my_gain_cuda),
    .name = "my_gain", /* TODO: a name no other plugin uses */
    .doc = "Multiplies R, G and B by gain; alpha kept",
    .n_inputs = 1,
    PF_PARAMS(my_gain_table),
};

/* ---- my_blur3: a stencil stage ---------------------------------------------------------- */

static int my_blur3_radius(const void *params)
{
    (void)params; /* the same radius whatever the params */
    return 1;
}

/* Writes exactly the output rows [region.y0, region.y1), all of each row, nothing else. */
static int my_blur3_run(const pf_stage_args *a)
{
    const my_blur3_params *p = (const my_blur3_params *)a->params;
    pf_float4 n[9];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *out = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < 3; i++)
                    n[j * 3 + i] = pf_image_at_clamped(&a->in[0], x + i - 1, y + j - 1);
            out[x] = my_blur3_pixel(p, n);
        }
    }
    return 0;
}

int my_blur3_cuda(const pf_stage_args *a); /* my_plugin_cuda.cu */

static const pf_param_desc my_blur3_table[] = {
    PF_FLOAT_PARAM(my_blur3_params, mix, 1, 0, 1, "0: the input unchanged, 1: the 3x3 mean"),
};

static const pf_stage_desc my_blur3_desc = {
    .size = PF_STAGE_DESC_SIZE,
    .name = "my_blur3", /* TODO: a name no other plugin uses */
    .doc = "Mixes each pixel with the mean of its 3x3 neighbourhood, clamped at the borders",
    .kind = PF_STAGE_STENCIL,
    .n_inputs = 1,
    .params_size = sizeof(my_blur3_params),
    PF_PARAMS(my_blur3_table),
    .radius = my_blur3_radius,
    .run_cpu = my_blur3_run,
    .run_cuda = PF_CUDA(my_blur3_cuda),
};

/* ---- The plugin -------------------------------------------------------------------------- */

static const pf_stage_desc *const my_stages[] = {&my_gain_desc, &my_blur3_desc};

PF_DEFINE_PLUGIN("myplugin", "0.1.0", "TODO: what the plugin is for", my_stages)
