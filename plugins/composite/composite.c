/* plugins/composite/composite.c: the `composite` stage family, point stages that
 * combine a base image (input 0) with another (input 1) and, for mask, a mask (input 2),
 * and overlay, a resample stage laying an image of any size over the base.
 *
 * The ops are in kernels/point/composite_ops.h (embedded as pf_src_composite_ops for
 * NVRTC); this file only declares them: one COMPOSITE_STAGE line and its param rows. */
#include "composite_ops.h"
#include "overlay.h"
#include "pipefuse/plugin.h"

extern const char pf_src_composite_ops[];

/* ---- Declaring a stage -------------------------------------------------------- */

/* Param rows: PF_FLOAT_PARAM and PF_BOOL_PARAM (pipefuse/plugin.h). */

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the row loops are also built for AVX2 and the CPU picks; not under the
   sanitizers (see engine/frame.c). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COMPOSITE_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define COMPOSITE_VECTOR_CLONES
#endif

/* The CPU row function of an n_in-input op fn, fn##_row: PF_POINT_ROW's loop (the params
   copied to a local, fn on each pixel in turn) with the number of inputs fixed, so that
   the compiler can vectorise the loop over pixels: the same operations on each pixel,
   the same values. */
#define COMPOSITE_POINT_ROW(fn, T, n_in_)                                                          \
    COMPOSITE_VECTOR_CLONES static void fn##_row(const void *params, const pf_float4 *const *in,   \
                                                 int n_in, pf_float4 *out, int x0, int n, int y,   \
                                                 int width, int height)                            \
    {                                                                                              \
        const T pl_ = *(const T *)params;                                                          \
        const pf_float4 *src_[n_in_];                                                              \
        for (int k_ = 0; k_ < n_in_; k_++)                                                         \
            src_[k_] = in[k_];                                                                     \
        for (int i_ = 0; i_ < n; i_++) {                                                           \
            pf_float4 v_[n_in_];                                                                   \
            for (int k_ = 0; k_ < n_in_; k_++)                                                     \
                v_[k_] = src_[k_][i_];                                                             \
            const pf_pos pos_ = {x0 + i_, y, width, height};                                       \
            out[i_] = fn(&pl_, v_, pos_);                                                          \
        }                                                                                          \
    }

/* The descriptor fields of an n_in-input point stage running op fn with params T and
   PF_STAGE_* flags fl (PF_STAGE_PER_CHANNEL where channel c of the output reads channel c
   of each input only). Its precompiled CUDA kernel, fn##_cuda, is PF_POINT_CUDA(fn, T) in
   a .cu of this plugin, used when the plugin is built with CUDA sources. */
#define COMPOSITE_POINT(sname, fn, T, n_in, fl, sdoc)                                              \
    PF_POINT_DESC(fn, T, pf_src_composite_ops), .point_cuda = PF_CUDA(fn##_cuda), .name = sname,   \
                                                .doc = sdoc, .n_inputs = n_in, .flags = fl

/* A stage fn##_desc with the param rows ..., or, for COMPOSITE_STAGE0, none. */
#define COMPOSITE_STAGE(sname, fn, T, n_in, fl, sdoc, ...)                                         \
    COMPOSITE_POINT_ROW(fn, T, n_in)                                                               \
    int fn##_cuda(const pf_stage_args *a);                                                         \
    static const pf_param_desc fn##_table[] = {__VA_ARGS__};                                       \
    static const pf_stage_desc fn##_desc = {COMPOSITE_POINT(sname, fn, T, n_in, fl, sdoc),         \
                                            PF_PARAMS(fn##_table)};
#define COMPOSITE_STAGE0(sname, fn, fl, sdoc)                                                      \
    COMPOSITE_POINT_ROW(fn, composite_none_params, 2)                                              \
    int fn##_cuda(const pf_stage_args *a);                                                         \
    static const pf_stage_desc fn##_desc = {                                                       \
        COMPOSITE_POINT(sname, fn, composite_none_params, 2, fl, sdoc)};

/* ---- Stages ------------------------------------------------------------------- */

COMPOSITE_STAGE("blend", composite_blend, composite_blend_params, 2, PF_STAGE_PER_CHANNEL,
                "Cross-fade: lerp(base, other, opacity) on all four channels",
                PF_FLOAT_PARAM(composite_blend_params, opacity, 0.5, 0, 1,
                               "weight of other (0: base, 1: other)"))

COMPOSITE_STAGE("add", composite_add, composite_add_params, 2, PF_STAGE_PER_CHANNEL,
                "base + scale * other on R, G and B; alpha of base",
                PF_FLOAT_PARAM(composite_add_params, scale, 1, -100, 100, "factor on other"))

COMPOSITE_STAGE0("multiply", composite_multiply, PF_STAGE_PER_CHANNEL,
                 "base * other on R, G and B; alpha of base")

COMPOSITE_STAGE0("difference", composite_difference, PF_STAGE_PER_CHANNEL,
                 "|base - other| on R, G and B; alpha of base")

COMPOSITE_STAGE0("alpha_over", composite_alpha_over, 0,
                 "Porter-Duff other over base, straight alpha (alphas clamped to [0, 1])")

COMPOSITE_STAGE("mask", composite_mask, composite_mask_params, 3, 0,
                "lerp(base, other, luma(mask)) on all four channels, weight clamped to "
                "[0, 1]; inputs base, other, mask",
                PF_BOOL_PARAM(composite_mask_params, invert, 0, "use 1 - luma(mask) as the weight"))

/* ---- overlay: an image of any size over the base (a resample stage) ----------- */

static int overlay_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                         size_t err_size)
{
    *out = in[0]; /* the base's size; the overlay may be any size, and may reach outside */
    return 0;
}

/* Rows r of the output read the base's rows r and the overlay's rows under them. */
static int overlay_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,
                           pf_region r, pf_region *rows)
{
    (void)out;
    const pf_overlay_params *p = (const pf_overlay_params *)params;
    if (k == 0) {
        *rows = r;
        return 0;
    }
    const long long oy = pf_gravity_y(p->gravity, in[0].height, in[1].height, p->y);
    long long y0 = r.y0 - oy, y1 = r.y1 - oy;
    y0 = y0 < 0 ? 0 : y0;
    y1 = y1 > in[1].height ? in[1].height : y1;
    *rows = y1 > y0 ? (pf_region){(int)y0, (int)y1} : (pf_region){0, 0};
    return 0;
}

/* alpha_over of the overlay (its alpha times opacity) where it covers the base; the
   base elsewhere. */
static int overlay_run(const pf_stage_args *a)
{
    const pf_overlay_params *p = (const pf_overlay_params *)a->params;
    const pf_image *b = &a->in[0], *o = &a->in[1];
    const long long ox = pf_gravity_x(p->gravity, b->width, o->width, p->x);
    const long long oy = pf_gravity_y(p->gravity, b->height, o->height, p->y);
    const composite_none_params none = {0};
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const pf_float4 *src = pf_image_row(b, y);
        pf_float4 *dst = pf_image_row(&a->out, y);
        const long long sy = y - oy;
        const pf_float4 *orow = sy >= 0 && sy < o->height ? pf_image_row(o, (int)sy) : NULL;
        for (int x = 0; x < a->out.width; x++) {
            const long long sx = x - ox;
            pf_float4 v = src[x];
            if (orow && sx >= 0 && sx < o->width) {
                pf_float4 pair[2] = {v, orow[sx]};
                pair[1].w *= p->opacity;
                v = composite_alpha_over(&none, pair, (pf_pos){x, y, b->width, b->height});
            }
            dst[x] = v;
        }
    }
    return 0;
}

int composite_overlay_cuda(const pf_stage_args *a);
static const char *const overlay_gravities[] = {PF_GRAVITY_NAMES, NULL};
static const pf_param_desc overlay_table[] = {
    PF_INT_PARAM(pf_overlay_params, x, 0, -PF_GEOMETRY_MAX_SIDE, PF_GEOMETRY_MAX_SIDE,
                 "columns from the left edge, or inward from the gravity's anchor"),
    PF_INT_PARAM(pf_overlay_params, y, 0, -PF_GEOMETRY_MAX_SIDE, PF_GEOMETRY_MAX_SIDE,
                 "rows from the top edge, or inward from the gravity's anchor"),
    PF_ENUM_PARAM(pf_overlay_params, gravity, 0, overlay_gravities,
                  "where the overlay sits: none (at x, y) or center, top, bottom, left, right, "
                  "top-left, top-right, bottom-left, bottom-right"),
    PF_FLOAT_PARAM(pf_overlay_params, opacity, 1, 0, 1, "factor on the overlay's alpha"),
};
static const pf_stage_desc composite_overlay_desc = {
    .size = PF_STAGE_DESC_SIZE,
    .name = "overlay",
    .doc = "Lay another image (input 1, any size: a watermark, a logo) over the base at a "
           "position or a gravity, alpha over with an opacity; the output has the base's size",
    .kind = PF_STAGE_RESAMPLE,
    .n_inputs = 2,
    .cost = 1,
    .params_size = sizeof(pf_overlay_params),
    PF_PARAMS(overlay_table),
    .shape = overlay_shape,
    .run_cpu = overlay_run,
    .run_cuda = PF_CUDA(composite_overlay_cuda),
    .out_channels = 3, /* a colour logo over a gray photo stays in colour */
    .rows_in = overlay_rows_in,
};

static const pf_stage_desc *const composite_stages[] = {
    &composite_blend_desc,      &composite_add_desc,        &composite_multiply_desc,
    &composite_difference_desc, &composite_alpha_over_desc, &composite_mask_desc,
    &composite_overlay_desc,
};

PF_DEFINE_PLUGIN("composite", "0.1.0",
                 "Combining two or three images per pixel (point stages, fusable)",
                 composite_stages)
