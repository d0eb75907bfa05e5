/* tests/cli/plugins/posops.c: point ops that read the pixel's position in the ways an op
 * header can, and one that does not, for the band tests (band_test.sh): whether a
 * pipeline runs in bands is read from each op's source text (engine/band.c).
 *
 *   pos_none    scales RGB; its source names the position only in a comment: bands
 *   pos_direct  a gradient down the rows (pos.y / pos.height): whole frames
 *   pos_helper  hands the position to a helper: whole frames (the helper may read it)
 *   pos_macro   reads it through a macro of its header: whole frames
 *   pos_nosrc   no source text (not fusable): whole frames (nothing tells)
 *   pos_flagged no source text, declared PF_STAGE_PER_CHANNEL (no position): bands
 */
#include "pipefuse/plugin.h"

typedef struct pos_params {
    float k;
} pos_params;

static const pf_param_desc pos_table[] = {
    PF_FLOAT_PARAM(pos_params, k, 0.5, 0, 1, "factor"),
};

PF_POINT_FN pf_float4 pos_none(const pos_params *p, const pf_float4 *in, pf_pos pos)
{
    (void)pos;
    return pf_f4(in[0].x * p->k, in[0].y * p->k, in[0].z * p->k, in[0].w);
}
PF_POINT_FN pf_float4 pos_direct(const pos_params *p, const pf_float4 *in, pf_pos pos)
{
    float t = p->k * (float)pos.y / (float)pos.height;
    return pf_f4(in[0].x * t, in[0].y * t, in[0].z * t, in[0].w);
}
PF_POINT_FN float pos_shade(pf_pos where)
{
    return (float)(where.y % 7) / 7.0f;
}
PF_POINT_FN pf_float4 pos_helper(const pos_params *p, const pf_float4 *in, pf_pos pos)
{
    float t = p->k * pos_shade(pos);
    return pf_f4(in[0].x * t, in[0].y, in[0].z, in[0].w);
}
#define POS_ROW_SHADE(c) ((c) * (float)(pos.y % 5) / 5.0f)
PF_POINT_FN pf_float4 pos_macro(const pos_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(POS_ROW_SHADE(in[0].x) * p->k, in[0].y, in[0].z, in[0].w);
}

PF_POINT_ROW(pos_none, pos_params)
PF_POINT_ROW(pos_direct, pos_params)
PF_POINT_ROW(pos_helper, pos_params)
PF_POINT_ROW(pos_macro, pos_params)

/* The op header as NVRTC would get it: the same functions, as text. */
static const char pos_src[] =
    "typedef struct pos_params { float k; } pos_params;\n"
    "/* pos_none leaves pos alone: \"pos.y\" here is a comment */\n"
    "PF_POINT_FN pf_float4 pos_none(const pos_params *p, const pf_float4 *in, pf_pos pos)\n"
    "{\n"
    "    // not pos.y either\n"
    "    return pf_f4(in[0].x * p->k, in[0].y * p->k, in[0].z * p->k, in[0].w);\n"
    "}\n"
    "PF_POINT_FN pf_float4 pos_direct(const pos_params *p, const pf_float4 *in, pf_pos pos)\n"
    "{\n"
    "    float t = p->k * (float)pos.y / (float)pos.height;\n"
    "    return pf_f4(in[0].x * t, in[0].y * t, in[0].z * t, in[0].w);\n"
    "}\n"
    "PF_POINT_FN float pos_shade(pf_pos where)\n"
    "{\n"
    "    return (float)(where.y % 7) / 7.0f;\n"
    "}\n"
    "PF_POINT_FN pf_float4 pos_helper(const pos_params *p, const pf_float4 *in, pf_pos pos)\n"
    "{\n"
    "    float t = p->k * pos_shade(pos);\n"
    "    return pf_f4(in[0].x * t, in[0].y, in[0].z, in[0].w);\n"
    "}\n"
    "#define POS_ROW_SHADE(c) ((c) * (float)(pos.y % 5) / 5.0f)\n"
    "PF_POINT_FN pf_float4 pos_macro(const pos_params *p, const pf_float4 *in, pf_pos pos)\n"
    "{\n"
    "    return pf_f4(POS_ROW_SHADE(in[0].x) * p->k, in[0].y, in[0].z, in[0].w);\n"
    "}\n";

#define POS_OP(fn, doc_, src)                                                                      \
    static const pf_stage_desc fn##_desc = {PF_POINT_DESC(fn, pos_params, src), .name = #fn,       \
                                            .doc = doc_, .n_inputs = 1, PF_PARAMS(pos_table)};
POS_OP(pos_none, "RGB times k; the position unread", pos_src)
POS_OP(pos_direct, "RGB times k y / height", pos_src)
POS_OP(pos_helper, "R times k (y mod 7) / 7, through a helper", pos_src)
POS_OP(pos_macro, "R times k (y mod 5) / 5, through a macro", pos_src)

/* pos_none's row function without source text */
static const pf_stage_desc pos_nosrc_desc = {
    PF_POINT_DESC(pos_none, pos_params, NULL), .name = "pos_nosrc",
    .doc = "RGB times k, with no source text", .n_inputs = 1, PF_PARAMS(pos_table)};

/* the same, declared per channel (and so not reading the position) */
static const pf_stage_desc pos_flagged_desc = {PF_POINT_DESC(pos_none, pos_params, NULL),
                                               .name = "pos_flagged",
                                               .doc = "RGB times k, per channel, no source text",
                                               .n_inputs = 1,
                                               .flags = PF_STAGE_PER_CHANNEL,
                                               PF_PARAMS(pos_table)};

static const pf_stage_desc *const stages[] = {&pos_none_desc,  &pos_direct_desc, &pos_helper_desc,
                                              &pos_macro_desc, &pos_nosrc_desc,  &pos_flagged_desc};
PF_DEFINE_PLUGIN("posops", "1.0", "point ops that read the position, or not, for tests", stages)
