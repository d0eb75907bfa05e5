/* cli/check_stage.c: `pipefuse plugin check`, the checks of one loaded stage in order:
   its parameter sets, CPU runs, determinism, regions (or point rows and a per-channel
   claim, or banded partials), the radius, the fused forms it declares run on the CPU, the
   chain with built-in stages, then the GPU. */
#include "plugin_check.h"

void pc_check_stage(pc *c, const pf_stage_desc *d)
{
    static const char *const set_names[2] = {"default params", "random params"};
    pc_params sets[2];
    pc_img in[PF_MAX_INPUTS];
    pc_run cpu[2], chain;
    char why[512], chain_json[16384];
    int n_in = d->n_inputs, made = 0;
    memset(cpu, 0, sizeof cpu);
    memset(&chain, 0, sizeof chain);
    memset(sets, 0, sizeof sets);
    printf("\nstage %s (%s, %d input%s)\n", d->name, pc_kind_names[d->kind], n_in,
           n_in > 1 ? "s" : "");
    for (; made < n_in; made++) {
        if (pc_img_new(&in[made], PC_W, PC_H) != 0)
            break;
        pc_img_random(c, &in[made]);
    }
    if (made < n_in) {
        fail(c, NULL, "out of memory for the test images");
        goto out;
    }
    if (pc_make_params(c, d, 0, &sets[0], why, sizeof why) != 0) {
        fail(c, "the defaults must be valid params", "default params: %s", why);
        goto out;
    }
    if (pc_make_params(c, d, 1, &sets[1], why, sizeof why) != 0 && d->n_params > 0)
        skip(c, "random params: %s", why);
    if (d->n_params == 0)
        sets[1].ok = 0; /* nothing to vary */

    if (pc_check_cpu_runs(c, d, sets, 2, set_names, in, cpu) != 0)
        goto out;
    pc_check_determinism(c, d, &sets[0], in, &cpu[0]);
    for (int s = 0; s < 2; s++) {
        if (!sets[s].ok)
            continue;
        if (d->kind == PF_STAGE_POINT)
            pc_check_point_rows(c, d, &sets[s], set_names[s], in, n_in);
        else if (d->kind == PF_STAGE_REDUCE)
            pc_check_reduce(c, d, &sets[s], set_names[s], in, n_in);
        else
            pc_check_regions(c, d, &sets[s], set_names[s], in, n_in);
        if (d->kind == PF_STAGE_STENCIL)
            pc_check_radius(c, d, &sets[s], set_names[s], n_in);
        if (d->kind == PF_STAGE_RESAMPLE && d->rows_in)
            pc_check_rows_in(c, d, &sets[s], set_names[s], in, n_in);
        else if (d->kind == PF_STAGE_RESAMPLE && s == 0)
            warn(c, "rows_in: not declared (plugin ABI 1.6): pipelines using the stage run "
                    "whole frames, never in strips of rows");
        if (d->kind == PF_STAGE_POINT && (d->flags & PF_STAGE_PER_CHANNEL))
            pc_check_per_channel(c, d, &sets[s], set_names[s], n_in);
    }
    pc_check_fused_forms(c, d, sets, 2, set_names, in, cpu);
    int have_chain = pc_check_chain(c, d, &sets[0], in, chain_json, sizeof chain_json, &chain) == 0;
    pc_check_gpu(c, d, sets, 2, set_names, in, cpu, have_chain ? chain_json : NULL, &chain);
out:
    pc_run_free(&cpu[0]);
    pc_run_free(&cpu[1]);
    pc_run_free(&chain);
    pc_params_free(&sets[0]);
    pc_params_free(&sets[1]);
    for (int k = 0; k < made; k++)
        pc_img_free(&in[k]);
}
