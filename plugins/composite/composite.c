/* plugins/composite/composite.c: the `composite` stage family, point stages that
 * combine a base image (input 0) with another (input 1) and, for mask, a mask (input 2).
 *
 * The ops are in kernels/point/composite_ops.h (embedded as pf_src_composite_ops for
 * NVRTC); this file only declares them: one COMPOSITE_STAGE line and its param rows. */
#include "composite_ops.h"
#include "pipefuse/plugin.h"

extern const char pf_src_composite_ops[];

/* ---- Declaring a stage -------------------------------------------------------- */

/* Param rows: PF_FLOAT_PARAM and PF_BOOL_PARAM (pipefuse/plugin.h). */

/* The descriptor fields of an n_in-input point stage running op fn with params T. Its
   precompiled CUDA kernel, fn##_cuda, is PF_POINT_CUDA(fn, T) in a .cu of this plugin,
   used when the plugin is built with CUDA sources. */
#define COMPOSITE_POINT(sname, fn, T, n_in, sdoc)                                                  \
    PF_POINT_DESC(fn, T, pf_src_composite_ops), .point_cuda = PF_CUDA(fn##_cuda), .name = sname,   \
                                                .doc = sdoc, .n_inputs = n_in

/* A stage fn##_desc with the param rows ..., or, for COMPOSITE_STAGE0, none. */
#define COMPOSITE_STAGE(sname, fn, T, n_in, sdoc, ...)                                             \
    PF_POINT_ROW(fn, T)                                                                            \
    int fn##_cuda(const pf_stage_args *a);                                                         \
    static const pf_param_desc fn##_table[] = {__VA_ARGS__};                                       \
    static const pf_stage_desc fn##_desc = {COMPOSITE_POINT(sname, fn, T, n_in, sdoc),             \
                                            PF_PARAMS(fn##_table)};
#define COMPOSITE_STAGE0(sname, fn, sdoc)                                                          \
    PF_POINT_ROW(fn, composite_none_params)                                                        \
    int fn##_cuda(const pf_stage_args *a);                                                         \
    static const pf_stage_desc fn##_desc = {                                                       \
        COMPOSITE_POINT(sname, fn, composite_none_params, 2, sdoc)};

/* ---- Stages ------------------------------------------------------------------- */

COMPOSITE_STAGE("blend", composite_blend, composite_blend_params, 2,
                "Cross-fade: lerp(base, other, opacity) on all four channels",
                PF_FLOAT_PARAM(composite_blend_params, opacity, 0.5, 0, 1,
                               "weight of other (0: base, 1: other)"))

COMPOSITE_STAGE("add", composite_add, composite_add_params, 2,
                "base + scale * other on R, G and B; alpha of base",
                PF_FLOAT_PARAM(composite_add_params, scale, 1, -100, 100, "factor on other"))

COMPOSITE_STAGE0("multiply", composite_multiply, "base * other on R, G and B; alpha of base")

COMPOSITE_STAGE0("difference", composite_difference, "|base - other| on R, G and B; alpha of base")

COMPOSITE_STAGE0("alpha_over", composite_alpha_over,
                 "Porter-Duff other over base, straight alpha (alphas clamped to [0, 1])")

COMPOSITE_STAGE("mask", composite_mask, composite_mask_params, 3,
                "lerp(base, other, luma(mask)) on all four channels, weight clamped to "
                "[0, 1]; inputs base, other, mask",
                PF_BOOL_PARAM(composite_mask_params, invert, 0, "use 1 - luma(mask) as the weight"))

static const pf_stage_desc *const composite_stages[] = {
    &composite_blend_desc,      &composite_add_desc,        &composite_multiply_desc,
    &composite_difference_desc, &composite_alpha_over_desc, &composite_mask_desc,
};

PF_DEFINE_PLUGIN("composite", "0.1.0",
                 "Combining two or three images per pixel (point stages, fusable)",
                 composite_stages)
