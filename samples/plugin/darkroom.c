/* samples/plugin/darkroom.c: a pipefuse plugin with three stages, built only against an
 * installed pipefuse (see CMakeLists.txt and README.md).
 *
 *   spotlight  a POINT stage that uses the pixel's position: a soft disc of light
 *              around a chosen centre, darker around it. Fusable with any other point
 *              stage, built-in or not.
 *   emboss     a STENCIL stage: a directional relief from each pixel's 3x3
 *              neighbourhood (radius 1).
 *   zones      a REDUCE stage: a table of the pixel count and mean luma of each luma
 *              zone (shadows to highlights), written as CSV or JSON.
 *
 *   soften     a separable STENCIL stage: a tent blur, whose taps the engine runs in
 *              two generated passes on the GPU (separable_fn).
 *   profile    a summing REDUCE stage: the means of R, G, B and A along every row, which
 *              the engine computes itself on the GPU (reduce_sum, reduce_finish).
 * emboss declares its per-pixel function (stencil_fn): on the GPU it fuses with the
 * point stages around it.
 *
 * A plugin is a shared library exporting exactly one symbol, pf_plugin_entry, that
 * returns a descriptor listing its stages. The plugin never links against the engine
 * and calls nothing in it: everything is declared in static tables below, and the engine
 * calls the functions those tables point to. Only "pipefuse/plugin.h" is needed.
 *
 * Read it top to bottom: the point stage, the stencil stage, the reduce stage, then the
 * plugin.
 */
#include "pipefuse/plugin.h"

#include <stdio.h> /* snprintf, for messages in a->err */

#include "emboss.h"
#include "profile.h"
#include "soften.h"
#include "spotlight_ops.h"
#include "zones.h"

/* ======================================================================================
 * spotlight: a point stage
 * ====================================================================================== */

/* The op header's text, embedded by pipefuse_add_plugin(... POINT_OPS spotlight_ops.h):
   the engine compiles it with NVRTC into fused kernels. */
extern const char pf_src_spotlight_ops[];

/* The CPU version: PF_POINT_ROW(fn, T) defines `spotlight_row`, which runs the op over
   a piece of a row. The engine calls it on pieces of rows of its own choosing (and
   from several threads at once), passing where the piece starts. */
PF_POINT_ROW(spotlight, spotlight_params)

/* The precompiled CUDA version, defined by PF_POINT_CUDA(spotlight, spotlight_params)
   in darkroom_cuda.cu. PF_CUDA(x) below is x when the plugin is built with CUDA and NULL
   otherwise, so the same file builds for CPU-only machines. */
int spotlight_cuda(const pf_stage_args *a);

/* The default of the float array `tint` (a warm light). */
static const float spotlight_warm[3] = {1.0f, 0.92f, 0.78f};

/* The parameter table: one row per field of spotlight_params, bound with offsetof.
   The engine parses the pipeline file's "params", checks each value's type and range
   against its row, and fills the struct; `pipefuse stages spotlight` prints the rows.
   Every default must lie within its row's [min, max] (the engine refuses the plugin
   otherwise), and every row needs a doc string (`pipefuse plugin check` insists). */
static const pf_param_desc spotlight_table[] = {
    {"cx", "centre of the light, as a fraction of the width (0: left edge)",
     PF_OFFSET(spotlight_params, cx), PF_PARAM_FLOAT, .def = 0.5, .min = -1, .max = 2},
    {"cy", "centre of the light, as a fraction of the height (0: top edge)",
     PF_OFFSET(spotlight_params, cy), PF_PARAM_FLOAT, .def = 0.5, .min = -1, .max = 2},
    {"radius", "radius of the lit disc, as a fraction of the image's shorter side",
     PF_OFFSET(spotlight_params, radius), PF_PARAM_FLOAT, .def = 0.35, .min = 0.01, .max = 4},
    {"feather", "width of the soft edge, as a fraction of the radius (0: a hard edge)",
     PF_OFFSET(spotlight_params, feather), PF_PARAM_FLOAT, .def = 0.5, .min = 0, .max = 1},
    {"ambient", "factor on R, G and B outside the light", PF_OFFSET(spotlight_params, ambient),
     PF_PARAM_FLOAT, .def = 0.45, .min = 0, .max = 4},
    {"gain", "factor on R, G and B inside the light", PF_OFFSET(spotlight_params, gain),
     PF_PARAM_FLOAT, .def = 1.15, .min = 0, .max = 4},
    {"tint", "colour of the light (R, G, B factors)", PF_OFFSET(spotlight_params, tint),
     PF_PARAM_FLOAT_ARRAY, .min = 0, .max = 4, .count = 3, .def_array = spotlight_warm},
};

/* The stage descriptor. PF_POINT_DESC fills the point-stage fields: the kind, the params
   struct's size, the CPU row function (spotlight_row) and, for NVRTC, the op's function
   name, its params struct's name and the op header's text. */
static const pf_stage_desc spotlight_desc = {
    PF_POINT_DESC(spotlight, spotlight_params, pf_src_spotlight_ops),
    .point_cuda = PF_CUDA(spotlight_cuda),
    .name = "spotlight", /* unique among ALL loaded plugins: the built-in color family
                            already has `vignette` */
    .doc = "A soft disc of coloured light around (cx, cy); R, G and B outside it are "
           "scaled by ambient. Alpha kept",
    .n_inputs = 1,
    PF_PARAMS(spotlight_table),
};

/* ======================================================================================
 * emboss: a stencil stage
 * ====================================================================================== */

/* What the planner needs to know: how far around each output pixel the stage reads.
   Constant here; a blur would compute it from its params. */
static int emboss_radius(const void *params)
{
    (void)params; /* radius 1 whatever the params */
    return 1;
}

/* The CPU version. The engine calls it with WHOLE input images and asks for a REGION
   of output rows, [a->region.y0, a->region.y1): it splits the image into bands (to
   use all cores on the CPU, and on the GPU so that no launch outlives the display
   watchdog) and calls this once per band, in any order and possibly at once from
   several threads. So it must write exactly the rows of its region, every pixel of
   them, and nothing else: no other rows, no memory past a row's width. Reads may go
   anywhere in the inputs (clamped at the borders, as every built-in stage does).
   It must not allocate, keep state between calls, print, or exit: on a problem it
   writes a message into a->err and returns non-zero. */
static int emboss_run(const pf_stage_args *a)
{
    const emboss_params *p = (const emboss_params *)a->params;
    const pf_image *in = &a->in[0];
    pf_float4 n[9];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *out = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < 3; i++)
                    n[j * 3 + i] = pf_image_at_clamped(in, x + i - 1, y + j - 1);
            out[x] = emboss_fused(p, n); /* the stencil_fn: what the fused kernel runs */
        }
    }
    return 0;
}

/* The CUDA version, in darkroom_cuda.cu: the same contract, on device memory, launched
   on a->stream (and nothing else: no synchronisation, no allocation). */
int emboss_cuda(const pf_stage_args *a);

/* emboss.h's text (POINT_OPS emboss.h), for the engine's fused 3x3 kernel. */
extern const char pf_src_emboss[];

static const pf_param_desc emboss_table[] = {
    {"angle", "direction the light comes from, degrees counter-clockwise from the +x axis",
     PF_OFFSET(emboss_params, angle), PF_PARAM_FLOAT, .def = 135, .min = 0, .max = 360},
    {"strength", "factor on the slope: 0 gives flat gray", PF_OFFSET(emboss_params, strength),
     PF_PARAM_FLOAT, .def = 1, .min = 0, .max = 10},
    {"gray", "output the relief of the luma instead of each channel's",
     PF_OFFSET(emboss_params, gray), PF_PARAM_BOOL, .def = 0},
};

static const pf_stage_desc emboss_desc = {
    .size = PF_STAGE_DESC_SIZE, /* always: how the engine tells SDK versions apart */
    .name = "emboss",
    .doc = "Relief lit from a direction: 0.5 + strength * the 3x3 Sobel slope along it, "
           "clamped at the borders. Alpha kept",
    .kind = PF_STAGE_STENCIL,
    .n_inputs = 1,
    .params_size = sizeof(emboss_params),
    PF_PARAMS(emboss_table),
    .cost = 3, /* about three times the work per pixel of a simple point op */
    .radius = emboss_radius,
    .run_cpu = emboss_run,
    .run_cuda = PF_CUDA(emboss_cuda),
    /* No scratch_bytes: the stage needs no scratch memory. */
    /* Fusion (a 3x3 stencil): the per-pixel function in the point source, and the name
       of its params struct there. The engine then runs the stage on the GPU in a kernel
       of its own, with the point stages around it (`pipefuse check darkroom.json` shows
       it under "fused stencils"); run_cpu and run_cuda must compute what it computes. */
    .point_source = pf_src_emboss,
    .params_type = "emboss_params",
    .stencil_fn = "emboss_fused",
};

/* ======================================================================================
 * soften: a separable stencil stage
 * ====================================================================================== */

/* soften.h's text (POINT_OPS soften.h): the taps function the engine's passes call. */
extern const char pf_src_soften[];
int soften_cuda(const pf_stage_args *a);

static int soften_radius(const void *params)
{
    double tap;
    int pm;
    return soften_taps((const soften_params *)params, -1, &tap, &pm);
}

/* The normalised taps, as the engine's passes make them: each unnormalised tap divided by
   their sum (tap 0 once, the others twice), the sum in double in that order. */
static int soften_weights(const soften_params *p, float *w)
{
    double t[SOFTEN_MAX_RADIUS + 1], sum = 0;
    int pm;
    const int r = soften_taps(p, -1, &t[0], &pm);
    for (int i = 0; i <= r; i++) {
        soften_taps(p, i, &t[i], &pm);
        sum += i ? 2 * t[i] : t[i];
    }
    for (int i = 0; i <= r; i++)
        w[i] = (float)(t[i] / sum);
    return r;
}

/* Host scratch: the horizontal sums of the band's rows and the halo above and below. */
static size_t soften_scratch(const void *params, int width, int rows)
{
    const int r = soften_radius(params);
    return (size_t)width * (size_t)(rows + 2 * r) * sizeof(pf_float4);
}

/* o + w * (a + b), channel by channel: each float operation rounded on its own, as the
   engine's kernels do (pipefuse_add_plugin compiles C11, which contracts nothing into an
   FMA). */
static pf_float4 soften_pair(pf_float4 o, float w, pf_float4 a, pf_float4 b)
{
    return pf_f4(o.x + w * (a.x + b.x), o.y + w * (a.y + b.y), o.z + w * (a.z + b.z),
                 o.w + w * (a.w + b.w));
}

static pf_float4 soften_scale(pf_float4 a, float w)
{
    return pf_f4(a.x * w, a.y * w, a.z * w, a.w * w);
}

/* The engine's two passes, for the rows of the region: horizontal sums of source rows
   [y0 - r, y1 + r) (clamped to the image) into scratch, then vertical sums of those, then
   every channel divided by the weights' float sum taken as the passes sum ones. */
static int soften_run(const pf_stage_args *a)
{
    const pf_image *in = &a->in[0];
    const int w = in->width, h = in->height, y0 = a->region.y0, y1 = a->region.y1;
    float k[SOFTEN_MAX_RADIUS + 1];
    const int r = soften_weights((const soften_params *)a->params, k);
    const int s0 = y0 - r < 0 ? 0 : y0 - r, s1 = y1 + r > h ? h : y1 + r;
    pf_float4 *tmp = (pf_float4 *)a->scratch;
    if (y0 >= y1)
        return 0;
    if (!tmp || a->scratch_size < (size_t)w * (size_t)(s1 - s0) * sizeof(pf_float4)) {
        snprintf(a->err, a->err_size, "soften: scratch too small");
        return 1;
    }
    for (int y = s0; y < s1; y++)
        for (int x = 0; x < w; x++) {
            pf_float4 o = soften_scale(pf_image_at_clamped(in, x, y), k[0]);
            for (int i = 1; i <= r; i++)
                o = soften_pair(o, k[i], pf_image_at_clamped(in, x - i, y),
                                pf_image_at_clamped(in, x + i, y));
            tmp[(size_t)(y - s0) * (size_t)w + (size_t)x] = o;
        }
    float hs = 1.0f * k[0], wsum; /* the weights' sum, as the passes sum ones */
    for (int i = 1; i <= r; i++)
        hs = hs + k[i] * (1.0f + 1.0f);
    wsum = hs * k[0];
    for (int i = 1; i <= r; i++)
        wsum = wsum + k[i] * (hs + hs);
    for (int y = y0; y < y1; y++) {
        pf_float4 *out = pf_image_row(&a->out, y);
        for (int x = 0; x < w; x++) {
#define SOFTEN_AT(yy)                                                                              \
    tmp[(size_t)(((yy) < 0 ? 0 : (yy) >= h ? h - 1 : (yy)) - s0) * (size_t)w + (size_t)x]
            pf_float4 o = soften_scale(SOFTEN_AT(y), k[0]);
            for (int i = 1; i <= r; i++)
                o = soften_pair(o, k[i], SOFTEN_AT(y - i), SOFTEN_AT(y + i));
#undef SOFTEN_AT
            out[x] = wsum != 1.0f ? pf_f4(o.x / wsum, o.y / wsum, o.z / wsum, o.w / wsum) : o;
        }
    }
    return 0;
}

static const pf_param_desc soften_table[] = {
    PF_INT_PARAM(soften_params, radius, 2, 0, SOFTEN_MAX_RADIUS,
                 "the farthest pixel weighted, in pixels (0: a copy)"),
};

static const pf_stage_desc soften_desc = {
    .size = PF_STAGE_DESC_SIZE,
    .name = "soften",
    .doc = "A tent blur of every channel, separable: weights radius + 1 - |i| across and down",
    .kind = PF_STAGE_STENCIL,
    .n_inputs = 1,
    .params_size = sizeof(soften_params),
    PF_PARAMS(soften_table),
    .cost = 2,
    .radius = soften_radius,
    .scratch_bytes = soften_scratch,
    .run_cpu = soften_run,
    /* Where fusion is off or NVRTC is missing, the GPU runs the stage's own kernel
       (darkroom_cuda.cu: simple, the same arithmetic); otherwise the engine's passes. */
    .run_cuda = PF_CUDA(soften_cuda),
    .point_source = pf_src_soften,
    .params_type = "soften_params",
    .separable_fn = "soften_taps",
    .separable_max = SOFTEN_MAX_RADIUS,
};

/* ======================================================================================
 * zones: a reduce stage
 * ====================================================================================== */

/* A reduce stage makes a small table from an image. So that the engine can split the
   work (across cores, and under the GPU watchdog), it computes one PARTIAL per band of
   input rows, and the engine folds the partials, in band order, into the table.

   Here the table has one row per zone and two columns, the pixel count and the mean
   luma; a partial holds, per zone, the count and the sum of luma (2 * zones doubles:
   counts first, then sums). */

static const char *const zones_columns[] = {"pixels", "mean_luma", NULL};

/* The table's shape: 2 columns, `zones` rows. Called when the engine plans. */
static int zones_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                       size_t err_size)
{
    (void)in, (void)err, (void)err_size;
    out->width = 2;
    out->height = ((const zones_params *)params)->zones;
    return 0;
}

static size_t zones_partial_len(const void *params, const pf_shape *in)
{
    (void)in;
    return 2 * (size_t)((const zones_params *)params)->zones;
}

/* The CPU partial of input rows [a->region.y0, a->region.y1) into a->partial, which the
   engine has zeroed. Only those rows: other bands are other calls. */
static int zones_run(const pf_stage_args *a)
{
    const zones_params *p = (const zones_params *)a->params;
    double *count = a->partial, *sum = a->partial + p->zones;
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const pf_float4 *row = pf_image_row(&a->in[0], y);
        for (int x = 0; x < a->in[0].width; x++) {
            float l = pf_luma(row[x]);
            int z = zones_of(p->zones, l);
            count[z] += 1;
            sum[z] += l;
        }
    }
    return 0;
}

/* Folds n partials, in band order, into the table (rows x columns, row-major). Every
   entry is written: the engine does not clear the table between frames. */
static void zones_combine(const void *params, const pf_shape *in, const double *partials, int n,
                          double *result)
{
    (void)in;
    int zones = ((const zones_params *)params)->zones;
    for (int z = 0; z < zones; z++) {
        double count = 0, sum = 0;
        for (int b = 0; b < n; b++) {
            count += partials[(size_t)b * 2 * zones + z];
            sum += partials[(size_t)b * 2 * zones + zones + z];
        }
        result[2 * z] = count;
        result[2 * z + 1] = count > 0 ? sum / count : 0;
    }
}

static const char *zones_row_name(const void *params, int row)
{
    static const char *const names[ZONES_MAX] = {
        "zone0", "zone1", "zone2",  "zone3",  "zone4",  "zone5",  "zone6",  "zone7",
        "zone8", "zone9", "zone10", "zone11", "zone12", "zone13", "zone14", "zone15"};
    (void)params;
    return row >= 0 && row < ZONES_MAX ? names[row] : "zone";
}

/* The CUDA version (darkroom_cuda.cu) needs device scratch for its per-row partials.
   The engine asks once per plan for the WHOLE input (rows = its height), and gives every
   band's call that block: a band never has more rows. The CUDA side lays partials out
   with a fixed stride of 2 * ZONES_MAX doubles per row, since its launcher cannot read
   the params (they are in device memory). */
int zones_cuda(const pf_stage_args *a);
static size_t zones_cuda_scratch(const void *params, int width, int rows)
{
    (void)params, (void)width;
    return (size_t)rows * 2 * ZONES_MAX * sizeof(double);
}

static const pf_param_desc zones_table[] = {
    PF_INT_PARAM(zones_params, zones, 4, 2, ZONES_MAX, "luma zones, from shadows to highlights"),
};

static const pf_stage_desc zones_desc = {
    .size = PF_STAGE_DESC_SIZE,
    .name = "zones",
    .doc = "Pixel count and mean Rec. 709 luma of each of `zones` equal luma zones",
    .kind = PF_STAGE_REDUCE,
    .n_inputs = 1,
    .params_size = sizeof(zones_params),
    PF_PARAMS(zones_table),
    .shape = zones_shape,
    .partial_len = zones_partial_len,
    .run_cpu = zones_run,
    .combine = zones_combine,
    .columns = zones_columns,
    .row_name = zones_row_name,
    .run_cuda = PF_CUDA(zones_cuda),
    .cuda_scratch_bytes = zones_cuda_scratch,
};

/* ======================================================================================
 * profile: a summing reduce stage
 * ====================================================================================== */

/* The table: one row per image row, the means (or, with mean false, the sums) of its R,
   G, B and A. A table made of the sums of the input's pixels says so with reduce_sum
   (PF_REDUCE_SUM_ROWS here), and names with reduce_finish the function that makes each
   entry from its sum (profile.h): on the GPU the engine then computes it itself, in a
   kernel that runs the point stages producing the input on the way in (so their image is
   never written), adds the partial sums on the device and finishes each entry there.
   The partials hold the sums; combine adds them and finishes each entry with the same
   function. zones' table (counts and means per zone) is no function of row or column
   sums: it declares neither. */

/* profile.h's text (POINT_OPS profile.h): the finishing function the engine's kernel runs. */
extern const char pf_src_profile[];

static const char *const profile_columns[] = {"r", "g", "b", "a", NULL};

static int profile_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                         size_t err_size)
{
    (void)params, (void)err, (void)err_size;
    out->width = 4;           /* columns r, g, b, a */
    out->height = in->height; /* a row per image row */
    return 0;
}

static size_t profile_partial_len(const void *params, const pf_shape *in)
{
    (void)params;
    return 4 * (size_t)in->height;
}

/* The sums of the band's rows; the partial's other rows stay 0 (the engine zeroed it). */
static int profile_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const pf_float4 *row = pf_image_row(&a->in[0], y);
        double *t = a->partial + 4 * (size_t)y;
        for (int x = 0; x < a->in[0].width; x++) {
            t[0] += row[x].x;
            t[1] += row[x].y;
            t[2] += row[x].z;
            t[3] += row[x].w;
        }
    }
    return 0;
}

/* The partials added, in band order (every band's rows are its own, the rest 0), and
   each entry finished from its sum as the engine's kernel finishes it. */
static void profile_combine(const void *params, const pf_shape *in, const double *partials, int n,
                            double *result)
{
    const profile_params *p = (const profile_params *)params;
    const size_t len = 4 * (size_t)in->height;
    for (size_t i = 0; i < len; i++) {
        double v = 0;
        for (int b = 0; b < n; b++)
            v += partials[(size_t)b * len + i];
        result[i] = profile_finish(p, v, (int)(i / 4), (int)(i % 4), in->width, in->height);
    }
}

static const pf_param_desc profile_table[] = {
    PF_BOOL_PARAM(profile_params, mean, 1, "each row's mean of R, G, B and A; false: its sums"),
};

int profile_cuda(const pf_stage_args *a);

static const pf_stage_desc profile_desc = {
    .size = PF_STAGE_DESC_SIZE,
    .name = "profile",
    .doc = "The means (or sums) of R, G, B and A along every row: a table of a row per image row",
    .kind = PF_STAGE_REDUCE,
    .n_inputs = 1,
    .params_size = sizeof(profile_params),
    PF_PARAMS(profile_table),
    .shape = profile_shape,
    .partial_len = profile_partial_len,
    .run_cpu = profile_run,
    .combine = profile_combine,
    .columns = profile_columns,
    .run_cuda = PF_CUDA(profile_cuda),
    .reduce_sum = PF_REDUCE_SUM_ROWS,
    .point_source = pf_src_profile,
    .params_type = "profile_params",
    .reduce_finish = "profile_finish",
};

/* ======================================================================================
 * The plugin
 * ====================================================================================== */

static const pf_stage_desc *const darkroom_stages[] = {&spotlight_desc, &emboss_desc, &soften_desc,
                                                       &zones_desc, &profile_desc};

/* Defines pf_plugin_entry, returning the plugin's name, version, doc and stages, stamped
   with the PF_ABI_VERSION of the headers it was built with. */
PF_DEFINE_PLUGIN("darkroom", "1.0.0",
                 "Sample plugin: a spotlight (point), an emboss (3x3 stencil), a soften "
                 "(separable stencil), luma zones (reduce) and row means (summing reduce)",
                 darkroom_stages)
