/* engine/fuse_stencil.c: the generated kernel of a 3x3 stencil unit (a stage declaring
 * pf_stage_desc.stencil_fn), fused with the point unit producing its input.
 *
 * A block of PF_STENCIL_TX x PF_STENCIL_TY threads computes as many output pixels. It
 * first stages the tile and a one-pixel halo in shared memory: each tile pixel is read
 * at its coordinate clamped to the image, from the unit's inputs in their own formats
 * (pipeline inputs as the frame has them, other units' results as float RGBA), and the
 * absorbed point unit's ops run on it there with pos the clamped coordinate. That is the
 * value the CPU reads: the producer's image at the clamped pixel. Then each thread calls
 * the stage's function on its 3x3 neighbourhood from the tile and stores the result to
 * the unit's outputs (pipeline outputs in their formats, the float RGBA image when
 * another unit reads it). A point unit reading the result (an epilogue), and otherwise
 * only pipeline inputs or images the stencil's input is computed from (complete before
 * this kernel runs), runs its ops on the result in registers before the stores, at the
 * pixel's own coordinate, its other inputs loaded there; its results needed elsewhere
 * are stored from here too. Banded launches cover rows [y0, y1) of the output; the tile
 * reads rows outside the band as the CPU does, so bands give the same pixels.
 */
#include <stdlib.h>

#include "fuse_gen.h"

/* The epilogue unit's ops on the stencil's result at (x, y): its members read the
   result as in<n_in> (pf_fuse_emit_member's name for a node io->in lacks), its other
   inputs loaded at (x, y). */
static void emit_epilogue(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io,
                          const pf_unit *epi, const pf_node *sn, int ns, const size_t *param_off)
{
    pf_sb_printf(b,
                 "    {\n        const int i = 0;\n        const pf_float4 *in%d = r; /* %s */\n"
                 "        pf_pos pos;\n"
                 "        pos.x = x, pos.y = y, pos.width = W, pos.height = H;\n",
                 io->n_in, pf_fuse_note(sn->id));
    for (int k = 0; k < io->n_in; k++) /* its other inputs, at (x, y) */
        for (int j = 0; j < epi->n_inputs; j++)
            if (epi->inputs[j] == io->in[k].node)
                pf_sb_printf(b,
                             "        pf_float4 in%d[1]; /* %s */\n"
                             "        pf_load_chunk<%d, %d, 1>(io[%d], y, x, W, in%d);\n",
                             k, pf_fuse_note(p->nodes[io->in[k].node].id), io->in[k].sample,
                             io->in[k].channels, k, k);
    for (int a = 0; a < epi->n_nodes; a++)
        pf_fuse_emit_member(b, p, epi, io, param_off, a, ns + 1);
    pf_sb_printf(b, "    }\n");
}

char *pf_fuse_stencil_source(const pf_pipeline *p, int u, const pf_fuse_unit *io,
                             const size_t *param_off, const char *name)
{
    const pf_unit *src = io->src_unit >= 0 ? &p->plan->units[io->src_unit] : NULL;
    const int s = p->plan->units[u].nodes[0];
    const pf_node *sn = &p->nodes[s];
    const int tx = PF_STENCIL_TX, ty = PF_STENCIL_TY, ns = src ? src->n_nodes : 0;
    pf_sb b = {0};
    pf_sb_printf(&b, "// pipefuse fused kernel %s: %s [", name, p->source);
    for (int a = 0; src && a < src->n_nodes; a++)
        pf_sb_printf(&b, "%s + ", src->ids[a]);
    pf_sb_printf(&b,
                 "%s, a 3x3 stencil]\n#define PF_PPT 1\n#include \"pipefuse/point.h\"\n"
                 "#include \"pipefuse/fused_rt.h\"\n\n",
                 sn->id);
    for (int a = 0; src && a < src->n_nodes; a++)
        if (pf_fuse_source_index(p, src, a) == a)
            pf_fuse_emit_op(&b, p, &p->nodes[src->nodes[a]], a, name);
    pf_fuse_emit_op(&b, p, sn, ns, name); /* its own namespace, after the members' */
    const pf_unit *epi = io->epi_unit >= 0 ? &p->plan->units[io->epi_unit] : NULL;
    for (int a = 0; epi && a < epi->n_nodes; a++) /* then the epilogue's */
        if (pf_fuse_source_index(p, epi, a) == a)
            pf_fuse_emit_op(&b, p, &p->nodes[epi->nodes[a]], ns + 1 + a, name);
    pf_fuse_emit_signature(&b, io, name);

    /* The tile: (TX + 2) x (TY + 2) pixels, each loaded at its clamped coordinate and
       run through the absorbed ops there. */
    pf_sb_printf(&b,
                 "    __shared__ pf_float4 t[%d][%d];\n"
                 "    const int X0 = blockIdx.x * %d, Y0 = y0 + blockIdx.y * %d;\n"
                 "    for (int k = threadIdx.y * %d + threadIdx.x; k < %d; k += %d) {\n"
                 "        const int ly = k / %d, lx = k - ly * %d;\n"
                 "        const int x = min(max(X0 + lx - 1, 0), W - 1);\n"
                 "        const int y = min(max(Y0 + ly - 1, 0), H - 1);\n"
                 "        const int i = 0;\n"
                 "        pf_pos pos;\n"
                 "        pos.x = x, pos.y = y, pos.width = W, pos.height = H;\n",
                 ty + 2, tx + 2, tx, ty, tx, (tx + 2) * (ty + 2), tx * ty, tx + 2, tx + 2);
    for (int k = 0; k < io->n_in; k++)
        pf_sb_printf(&b,
                     "        pf_float4 in%d[1]; /* %s */\n"
                     "        pf_load_chunk<%d, %d, 1>(io[%d], y, x, W, in%d);\n",
                     k, pf_fuse_note(p->nodes[io->in[k].node].id), io->in[k].sample,
                     io->in[k].channels, k, k);
    int value = -1;
    for (int a = 0; src && a < src->n_nodes; a++) {
        pf_fuse_emit_member(&b, p, src, io, param_off, a, 0);
        if (src->nodes[a] == io->value_node)
            value = a;
    }
    if (value >= 0)
        pf_sb_printf(&b, "        t[ly][lx] = v%d;\n    }\n", value);
    else
        pf_sb_printf(&b, "        t[ly][lx] = in0[0];\n    }\n");

    /* Each thread's output pixel: the stage's function on its 3x3 of the tile. */
    pf_sb_printf(&b,
                 "    __syncthreads();\n"
                 "    const int x = X0 + threadIdx.x, y = Y0 + threadIdx.y;\n"
                 "    if (x >= W || y >= y1)\n        return;\n"
                 "    pf_float4 n[9];\n#pragma unroll\n"
                 "    for (int k = 0; k < 9; k++)\n"
                 "        n[k] = t[threadIdx.y + k / 3][threadIdx.x + k %% 3];\n"
                 "    pf_float4 r[1];\n"
                 "    r[0] = pf_opaque(pf_ns%d::%s((const pf_ns%d::%s *)(P + %zu), n)); // %s\n",
                 ns, sn->desc->stencil_fn, ns, sn->desc->params_type,
                 param_off[s] - (io->param_arg ? io->param_lo : 0), pf_fuse_note(sn->id));
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "    pf_float4 out%d[1];\n", k);
    for (int k = 0; k < io->n_out; k++)
        if (io->out[k].node == s)
            pf_sb_printf(&b, "    out%d[0] = r[0];\n", k);
    if (epi)
        emit_epilogue(&b, p, io, epi, sn, ns, param_off);
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "    pf_store_chunk<%d, %d, 1>(io[%d], y, x, W, out%d); /* %s%s */\n",
                     io->out[k].sample, io->out[k].channels, io->n_in + k, k,
                     pf_fuse_note(p->nodes[io->out[k].node].id),
                     pf_fuse_note(io->out[k].native >= 0 ? ", pipeline output" : ""));
    pf_sb_printf(&b, "}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
