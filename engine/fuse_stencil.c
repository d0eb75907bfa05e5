/* engine/fuse_stencil.c: the generated kernel of a 3x3 stencil unit (a stage declaring
 * pf_stage_desc.stencil_fn), fused with the point unit producing its input; and the two
 * of a separable one (separable_fn), whose horizontal pass runs that unit's ops on the
 * rows it stages (separable_source, kernels/separable_rt.h).
 *
 * A block of PF_STENCIL_TX x PF_STENCIL_TY threads computes PF_STENCIL_RPT times as many
 * output pixels, each thread a column's pixels PF_STENCIL_TY rows apart. It first issues
 * the loads the epilogue (below) needs at its pixels, so that they overlap the tile's,
 * then stages the tile and a one-pixel halo in shared memory: each tile pixel is read
 * at its coordinate clamped to the image, from the unit's inputs in their own formats
 * (pipeline inputs as the frame has them, other units' results as float RGBA), and the
 * absorbed point unit's ops run on it there with pos the clamped coordinate. That is the
 * value the CPU reads: the producer's image at the clamped pixel. Then each thread calls
 * the stage's function on its 3x3 neighbourhood from the tile and stores the result to
 * the unit's outputs (pipeline outputs in their formats, the float RGBA image when
 * another unit reads it). A point unit reading the result (an epilogue), and otherwise
 * only pipeline inputs or images the stencil's input is computed from (complete before
 * this kernel runs), runs its ops on the result in registers before the stores, at the
 * pixel's own coordinate, its other inputs loaded there (before the tile); its results
 * needed elsewhere are stored from here too. Banded launches cover rows [y0, y1) of the
 * output; the tile reads rows outside the band as the CPU does, so bands give the same
 * pixels.
 */
#include <stdlib.h>

#include "fuse_gen.h"

/* Whether the epilogue (its unit, or the unit it recomputes) reads the unit's input k. */
static int epilogue_reads(const pf_pipeline *p, const pf_fuse_unit *io, int k)
{
    const pf_unit *units = p->plan->units;
    if (io->epi_unit < 0)
        return 0;
    const pf_unit *epi = &units[io->epi_unit];
    const pf_unit *rec = io->rec_unit >= 0 ? &units[io->rec_unit] : NULL;
    for (int j = 0; j < epi->n_inputs; j++)
        if (epi->inputs[j] == io->in[k].node)
            return 1;
    for (int j = 0; rec && j < rec->n_inputs; j++)
        if (rec->inputs[j] == io->in[k].node)
            return 1;
    return 0;
}

/* The epilogue unit's ops on the stencil's result at (x, y): its members read the
   result as in<n_in> (pf_fuse_emit_member's name for a node io->in lacks), its other
   inputs loaded at (x, y). */
static void emit_epilogue(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io,
                          const pf_unit *epi, const pf_node *sn, int ns, const size_t *param_off,
                          int pre)
{
    const pf_unit *rec = io->rec_unit >= 0 ? &p->plan->units[io->rec_unit] : NULL;
    pf_sb_printf(b,
                 "    {\n        const int i = 0;\n        const pf_float4 *in%d = r; /* %s */\n"
                 "        pf_pos pos;\n"
                 "        pos.x = x, pos.y = y, pos.width = W, pos.height = H;\n",
                 io->n_in, pf_fuse_note(sn->id));
    for (int k = 0; k < io->n_in; k++) { /* its other inputs, and rec's, at (x, y) */
        int used = epilogue_reads(p, io, k);
        if (used && pre)
            pf_sb_printf(b, "        pf_float4 in%d[1] = {e%d[j]}; /* %s */\n", k, k,
                         pf_fuse_note(p->nodes[io->in[k].node].id));
        else if (used)
            pf_sb_printf(b,
                         "        pf_float4 in%d[1]; /* %s */\n"
                         "        pf_load_chunk<%d, %d, 1>(io[%d], y, x, W, in%d);\n",
                         k, pf_fuse_note(p->nodes[io->in[k].node].id), io->in[k].sample,
                         io->in[k].channels, k, k);
    }
    if (rec) { /* the unit recomputed here: its values rv<a>, its own names in a block */
        for (int a = 0; a < rec->n_nodes; a++)
            pf_sb_printf(b, "        pf_float4 rv%d; /* %s */\n", a, pf_fuse_note(rec->ids[a]));
        pf_sb_printf(b, "        {\n");
        for (int a = 0; a < rec->n_nodes; a++)
            pf_fuse_emit_member(b, p, rec, io, param_off, a, ns + 1 + epi->n_nodes);
        for (int a = 0; a < rec->n_nodes; a++)
            pf_sb_printf(b, "        rv%d = v%d;\n", a, a);
        pf_sb_printf(b, "        }\n");
    }
    for (int a = 0; a < epi->n_nodes; a++)
        pf_fuse_emit_member(b, p, epi, io, param_off, a, ns + 1);
    pf_sb_printf(b, "    }\n");
}

/* A stencil kernel's first lines: what it is, the runtime headers, the op headers of
   the absorbed point unit src (namespaces 0..) and the stencil's own (the next). */
static void emit_head(pf_sb *b, const pf_pipeline *p, const pf_unit *src, const pf_node *sn,
                      const char *what, const char *name)
{
    pf_sb_printf(b, "// pipefuse fused kernel %s: %s [", name, p->source);
    for (int a = 0; src && a < src->n_nodes; a++)
        pf_sb_printf(b, "%s + ", src->ids[a]);
    pf_sb_printf(b,
                 "%s, %s]\n#define PF_PPT 1\n#include \"pipefuse/point.h\"\n"
                 "#include \"pipefuse/fused_rt.h\"\n\n",
                 sn->id, what);
    for (int a = 0; src && a < src->n_nodes; a++)
        if (pf_fuse_source_index(p, src, a) == a)
            pf_fuse_emit_op(b, p, &p->nodes[src->nodes[a]], a, name);
    pf_fuse_emit_op(b, p, sn, src ? src->n_nodes : 0, name);
}

/* The absorbed point unit's members on the pixel loaded as in<k>[0], and the name of the
   value the stencil reads: the member computing io->value_node, else the input itself
   (written into value, which the caller prints). */
static const char *emit_absorbed(pf_sb *b, const pf_pipeline *p, const pf_unit *src,
                                 const pf_fuse_unit *io, const size_t *param_off, char *value)
{
    snprintf(value, 16, "in0[0]");
    for (int a = 0; src && a < src->n_nodes; a++) {
        pf_fuse_emit_member(b, p, src, io, param_off, a, 0);
        if (src->nodes[a] == io->value_node)
            snprintf(value, 16, "v%d", a);
    }
    return value;
}

/* The loads of every input of the unit at (x, y) into in<k>[0], for a 3x3 tile: pipeline
   inputs in their own format; the engine's float images, which are 16-byte aligned, as
   one vector load with no branch on the address. */
static void emit_pixel_loads(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io)
{
    for (int k = 0; k < io->n_in; k++)
        if (io->in[k].native < 0)
            pf_sb_printf(b,
                         "        pf_float4 in%d[1]; /* %s */\n"
                         "        in%d[0] = __ldg((const float4 *)((const unsigned char *)"
                         "io[%d].data + (size_t)y * io[%d].pitch) + x);\n",
                         k, pf_fuse_note(p->nodes[io->in[k].node].id), k, k, k);
        else
            pf_sb_printf(b,
                         "        pf_float4 in%d[1]; /* %s */\n"
                         "        pf_load_chunk<%d, %d, 1>(io[%d], y, x, W, in%d);\n",
                         k, pf_fuse_note(p->nodes[io->in[k].node].id), io->in[k].sample,
                         io->in[k].channels, k, k);
}

/* The kernels of a separable stencil unit (io->stencil PF_FUSE_STENCIL_SEPARABLE): name,
   the horizontal pass, whose pixels come from pf_sep_src (the unit's inputs in their own
   formats at the clamped coordinate the pass reads, through the absorbed point unit's
   ops there), and name_v, the vertical pass, storing each result to the unit's outputs
   (pf_sep_dst). Both compute the radius and the alpha rule from the stage's
   separable_fn on the params the frame runs with (kernels/separable_rt.h). */
static char *separable_source(const pf_pipeline *p, int u, const pf_fuse_unit *io,
                              const size_t *param_off, const char *name)
{
    const pf_unit *src = io->src_unit >= 0 ? &p->plan->units[io->src_unit] : NULL;
    const int s = p->plan->units[u].nodes[0];
    const pf_node *sn = &p->nodes[s];
    const pf_stage_desc *d = sn->desc;
    const int ns = src ? src->n_nodes : 0;
    pf_sb b = {0};
    emit_head(&b, p, src, sn, "separable", name);
    pf_sb_printf(&b,
                 "#define PF_SEP_RMAX %d\n#define PF_SEP_TW %d\n#define PF_SEP_VTX %d\n"
                 "#define PF_SEP_VTY %d\n#define PF_SEP_VRPT %d\n"
                 "#include \"pipefuse/separable_rt.h\"\n\n",
                 d->separable_max, PF_SEP_TW, PF_SEP_VTX, PF_SEP_VTY, PF_SEP_VRPT);

    /* A pixel of the stencil's input at (x, y): its inputs as they are in memory
       (load), then converted and through the absorbed ops (apply). The column is
       clamped, so a whole pixel is always inside the row. */
    pf_sb_printf(&b, "struct pf_sep_src {\n    const unsigned char *P;\n"
                     "    const pf_frame_desc *io;\n    int W, H;\n    struct raw {\n");
    for (int k = 0; k < io->n_in; k++) {
        if (io->in[k].native < 0)
            pf_sb_printf(&b, "        float4 f%d;\n", k);
        else
            pf_sb_printf(&b, "        unsigned int w%d[PF_NW(%d, %d, 1)];\n", k, io->in[k].sample,
                         io->in[k].channels);
    }
    pf_sb_printf(&b,
                 "    };\n"
                 "    __device__ __forceinline__ void load(int x, int y, raw &q) const\n    {\n");
    for (int k = 0; k < io->n_in; k++) {
        const char *row = "(const unsigned char *)io[%d].data + (size_t)y * io[%d].pitch";
        if (io->in[k].native < 0) {
            pf_sb_printf(&b, "        q.f%d = __ldg((const float4 *)(", k);
            pf_sb_printf(&b, row, k, k);
            pf_sb_printf(&b, ") + x); /* %s */\n", pf_fuse_note(p->nodes[io->in[k].node].id));
        } else {
            pf_sb_printf(&b, "        pf_load_words<PF_SB(%d) * %d>(", io->in[k].sample,
                         io->in[k].channels);
            pf_sb_printf(&b, row, k, k);
            pf_sb_printf(&b, " + (size_t)x * (PF_SB(%d) * %d), q.w%d); /* %s */\n",
                         io->in[k].sample, io->in[k].channels, k,
                         pf_fuse_note(p->nodes[io->in[k].node].id));
        }
    }
    pf_sb_printf(&b, "    }\n"
                     "    __device__ __forceinline__ pf_float4 apply(const raw &q, int x, int y) "
                     "const\n    {\n"
                     "        const int i = 0;\n        pf_pos pos;\n"
                     "        pos.x = x, pos.y = y, pos.width = W, pos.height = H;\n");
    for (int k = 0; k < io->n_in; k++)
        if (io->in[k].native < 0)
            pf_sb_printf(&b, "        pf_float4 in%d[1] = {q.f%d};\n", k, k);
        else
            pf_sb_printf(&b, "        pf_float4 in%d[1] = {pf_pixel<%d, %d>(q.w%d, 0)};\n", k,
                         io->in[k].sample, io->in[k].channels, k);
    char value[16];
    pf_sb_printf(&b, "        return %s;\n    }\n};\n\n",
                 emit_absorbed(&b, p, src, io, param_off, value));

    /* The stage's taps, and each result to the outputs. */
    size_t poff = param_off[s] - (io->param_arg ? io->param_lo : 0);
    pf_sb_printf(&b,
                 "struct pf_sep_taps {\n    const pf_ns%d::%s *sp;\n"
                 "    __device__ __forceinline__ void operator()(int i, double *t) const\n    {\n"
                 "        int pm;\n        pf_ns%d::%s(sp, i, t, &pm);\n    }\n};\n\n",
                 ns, d->params_type, ns, d->separable_fn);
    pf_sb_printf(&b,
                 "struct pf_sep_dst {\n    const pf_frame_desc *io;\n    int W;\n"
                 "    __device__ __forceinline__ void operator()(int x, int y, pf_float4 v) const\n"
                 "    {\n        pf_float4 o[1];\n        o[0] = v;\n");
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "        pf_store_chunk<%d, %d, 1>(io[%d], y, x, W, o); /* %s%s */\n",
                     io->out[k].sample, io->out[k].channels, io->n_in + k,
                     pf_fuse_note(p->nodes[io->out[k].node].id),
                     pf_fuse_note(io->out[k].native >= 0 ? ", pipeline output" : ""));
    pf_sb_printf(&b, "    }\n};\n\n");

    for (int pass = 0; pass < 2; pass++) {
        char kname[96];
        snprintf(kname, sizeof kname, "%s%s", name, pass ? "_v" : "");
        pf_fuse_emit_signature(&b, io, kname);
        pf_sb_printf(&b,
                     "    const pf_ns%d::%s *sp = (const pf_ns%d::%s *)(P + %zu); // %s\n"
                     "    double t0;\n    int pm = 0;\n"
                     "    const int r = min(max(pf_ns%d::%s(sp, -1, &t0, &pm), 0), PF_SEP_RMAX);\n",
                     ns, d->params_type, ns, d->params_type, poff, pf_fuse_note(sn->id), ns,
                     d->separable_fn);
        if (!pass)
            pf_sb_printf(&b,
                         "    const pf_sep_src src = {P, io, W, H};\n"
                         "    const pf_sep_taps tp = {sp};\n"
                         "    pf_sep_h(src, tp, r, pm != 0, W, H, tmp, taps, s0, y0, y1, rpb);\n"
                         "}\n\n");
        else
            pf_sb_printf(&b, "    const pf_sep_dst dst = {io, W};\n"
                             "    pf_sep_v(dst, r, pm != 0, W, H, tmp, taps, s0, y0, y1);\n}\n");
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *pf_fuse_stencil_source(const pf_pipeline *p, int u, const pf_fuse_unit *io,
                             const size_t *param_off, const char *name)
{
    if (io->stencil == PF_FUSE_STENCIL_SEPARABLE)
        return separable_source(p, u, io, param_off, name);
    const pf_unit *src = io->src_unit >= 0 ? &p->plan->units[io->src_unit] : NULL;
    const int s = p->plan->units[u].nodes[0];
    const pf_node *sn = &p->nodes[s];
    const int tx = PF_STENCIL_TX, ty = PF_STENCIL_TY, ns = src ? src->n_nodes : 0;
    pf_sb b = {0};
    emit_head(&b, p, src, sn, "a 3x3 stencil", name);
    const pf_unit *epi = io->epi_unit >= 0 ? &p->plan->units[io->epi_unit] : NULL;
    for (int a = 0; epi && a < epi->n_nodes; a++) /* then the epilogue's */
        if (pf_fuse_source_index(p, epi, a) == a)
            pf_fuse_emit_op(&b, p, &p->nodes[epi->nodes[a]], ns + 1 + a, name);
    const pf_unit *rec = io->rec_unit >= 0 ? &p->plan->units[io->rec_unit] : NULL;
    for (int a = 0; epi && rec && a < rec->n_nodes; a++) /* then the recomputed unit's */
        if (pf_fuse_source_index(p, rec, a) == a)
            pf_fuse_emit_op(&b, p, &p->nodes[rec->nodes[a]], ns + 1 + epi->n_nodes + a, name);
    pf_fuse_emit_signature(&b, io, name);

    /* The tile: (TX + 2) x (TY * RPT + 2) pixels, each loaded at its clamped coordinate
       and run through the absorbed ops there. */
    const int rpt = PF_STENCIL_RPT, pre = epi != NULL, th = ty * rpt;
    pf_sb_printf(&b,
                 "    __shared__ pf_float4 t[%d][%d];\n"
                 "    const int X0 = blockIdx.x * %d, Y0 = y0 + blockIdx.y * %d;\n",
                 th + 2, tx + 2, tx, th);
    if (pre) { /* the epilogue's own loads, issued before the tile's */
        pf_sb_printf(&b, "    const int xq = min(X0 + (int)threadIdx.x, W - 1);\n");
        for (int k = 0; k < io->n_in; k++)
            if (epilogue_reads(p, io, k))
                pf_sb_printf(&b,
                             "    pf_float4 e%d[%d]; /* %s */\n#pragma unroll\n"
                             "    for (int j = 0; j < %d; j++)\n"
                             "        pf_load_chunk<%d, %d, 1>(io[%d], "
                             "min(Y0 + (int)threadIdx.y + j * %d, H - 1), xq, W, e%d + j);\n",
                             k, rpt, pf_fuse_note(p->nodes[io->in[k].node].id), rpt,
                             io->in[k].sample, io->in[k].channels, k, ty, k);
    }
    /* a fixed count of steps, unrolled, so each thread's loads are issued together */
    pf_sb_printf(&b,
                 "#pragma unroll\n    for (int q = 0; q < %d; q++) {\n"
                 "        const int k = threadIdx.y * %d + threadIdx.x + q * %d;\n"
                 "        if (k >= %d)\n            break;\n",
                 ((tx + 2) * (th + 2) + tx * ty - 1) / (tx * ty), tx, tx * ty, (tx + 2) * (th + 2));
    pf_sb_printf(&b,
                 "        const int ly = k / %d, lx = k - ly * %d;\n"
                 "        const int x = min(max(X0 + lx - 1, 0), W - 1);\n"
                 "        const int y = min(max(Y0 + ly - 1, 0), H - 1);\n"
                 "        const int i = 0;\n"
                 "        pf_pos pos;\n"
                 "        pos.x = x, pos.y = y, pos.width = W, pos.height = H;\n",
                 tx + 2, tx + 2);
    emit_pixel_loads(&b, p, io);
    char value[16];
    pf_sb_printf(&b, "        t[ly][lx] = %s;\n    }\n",
                 emit_absorbed(&b, p, src, io, param_off, value));

    /* Each thread's output pixels (RPT rows, TY apart): the stage's function on its 3x3
       of the tile. */
    pf_sb_printf(&b,
                 "    __syncthreads();\n"
                 "    const int x = X0 + threadIdx.x;\n"
                 "    if (x >= W)\n        return;\n"
                 "#pragma unroll\n"
                 "    for (int j = 0; j < %d; j++) {\n"
                 "    const int ly = threadIdx.y + j * %d, y = Y0 + ly;\n"
                 "    if (y >= y1)\n        break;\n"
                 "    pf_float4 n[9];\n#pragma unroll\n"
                 "    for (int k = 0; k < 9; k++)\n"
                 "        n[k] = t[ly + k / 3][threadIdx.x + k %% 3];\n"
                 "    pf_float4 r[1];\n"
                 "    r[0] = pf_opaque(pf_ns%d::%s((const pf_ns%d::%s *)(P + %zu), n)); // %s\n",
                 rpt, ty, ns, sn->desc->stencil_fn, ns, sn->desc->params_type,
                 param_off[s] - (io->param_arg ? io->param_lo : 0), pf_fuse_note(sn->id));
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "    pf_float4 out%d[1];\n", k);
    for (int k = 0; k < io->n_out; k++)
        if (io->out[k].node == s)
            pf_sb_printf(&b, "    out%d[0] = r[0];\n", k);
    if (epi)
        emit_epilogue(&b, p, io, epi, sn, ns, param_off, pre);
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "    pf_store_chunk<%d, %d, 1>(io[%d], y, x, W, out%d); /* %s%s */\n",
                     io->out[k].sample, io->out[k].channels, io->n_in + k, k,
                     pf_fuse_note(p->nodes[io->out[k].node].id),
                     pf_fuse_note(io->out[k].native >= 0 ? ", pipeline output" : ""));
    pf_sb_printf(&b, "    }\n");
    pf_sb_printf(&b, "}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
