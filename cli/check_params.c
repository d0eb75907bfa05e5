/* cli/check_params.c: `pipefuse plugin check`, the parameter sets the runs use: a stage's
   defaults and random sets within its declared ranges, as structs and as JSON. (The table's
   rules are the engine's: pf_stage_check.) */
#include "plugin_check.h"

/* ---- Parameter sets --------------------------------------------------------------------- */

static int enum_count(const pf_param_desc *pd)
{
    int n = 0;
    while (pd->enum_names && pd->enum_names[n])
        n++;
    return n;
}

/* A random value within the row's range, kept moderate (about [-4, 4], or 8 wide at the
   range's nearer end) so that random params exercise the op without making images of
   infinities or giant resample outputs. */
static double random_value(pc *c, const pf_param_desc *pd)
{
    double lo = pd->min <= pd->max ? pd->min : -4, hi = pd->min <= pd->max ? pd->max : 4;
    double a = fmax(lo, -4), b = fmin(hi, 4);
    if (a > b) {
        a = lo > 4 ? lo : fmax(lo, hi - 8);
        b = lo > 4 ? fmin(hi, lo + 8) : hi;
    }
    if (pd->type == PF_PARAM_INT) {
        int ia = (int)ceil(a), ib = (int)floor(b);
        return ia <= ib ? pc_rng_range(c, ia, ib) : pd->def;
    }
    return (double)(float)(a + (b - a) * pc_rng_unit(c));
}

static int json_append(pc_params *ps, size_t *o, const char *fmt, ...) PC_PRINTF(3, 4);
static int json_append(pc_params *ps, size_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ps->json + *o, sizeof ps->json - *o, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof ps->json - *o)
        return -1;
    *o += (size_t)n;
    return 0;
}

/* Fills ps with the defaults (random 0) or one random set; the descriptor has passed
   its table checks. Returns 0, or -1 with why (out of memory, no random set found). */
int pc_make_params(pc *c, const pf_stage_desc *d, int random, pc_params *ps, char *why,
                   size_t why_size)
{
    size_t size = d->params_size ? d->params_size : 1;
    memset(ps, 0, sizeof *ps);
    if (posix_memalign(&ps->st, 16, (size + 15) / 16 * 16) != 0) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    for (int attempt = 0; attempt < 32; attempt++) {
        memset(ps->st, 0, size);
        size_t o = 0;
        int rc = json_append(ps, &o, "{");
        for (int i = 0; i < d->n_params && rc == 0; i++) {
            const pf_param_desc *pd = &d->params[i];
            char *field = (char *)ps->st + pd->offset;
            rc = json_append(ps, &o, "%s\"%s\": ", i ? ", " : "", pd->name);
            if (rc != 0)
                break;
            if (pd->type == PF_PARAM_FLOAT) {
                float v = (float)(random ? random_value(c, pd) : pd->def);
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%.17g", (double)v);
            } else if (pd->type == PF_PARAM_INT) {
                int v = (int)(random ? random_value(c, pd) : pd->def);
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%d", v);
            } else if (pd->type == PF_PARAM_BOOL) {
                int v = random ? (int)(pc_rng_u32(c) & 1) : pd->def != 0;
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%s", v ? "true" : "false");
            } else if (pd->type == PF_PARAM_ENUM) {
                int v = random ? pc_rng_range(c, 0, enum_count(pd) - 1) : (int)pd->def;
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "\"%s\"", pd->enum_names[v]);
            } else {
                rc = json_append(ps, &o, "[");
                for (int k = 0; k < pd->count && rc == 0; k++) {
                    float v = (float)(random ? random_value(c, pd) : pd->def_array[k]);
                    memcpy(field + sizeof(float) * (size_t)k, &v, sizeof v);
                    rc = json_append(ps, &o, "%s%.17g", k ? ", " : "", (double)v);
                }
                if (rc == 0)
                    rc = json_append(ps, &o, "]");
            }
        }
        if (rc == 0)
            rc = json_append(ps, &o, "}");
        if (rc != 0) {
            snprintf(why, why_size, "the parameters do not fit in %zu bytes of JSON",
                     sizeof ps->json);
            return -1;
        }
        char err[512] = "";
        if (!d->check || d->check(ps->st, err, sizeof err) == 0) {
            ps->ok = 1;
            return 0;
        }
        err[sizeof err - 1] = 0;
        if (!random) {
            snprintf(why, why_size, "check() rejects the defaults: %s", err);
            return -1;
        }
    }
    snprintf(why, why_size, "no random set within the ranges passed the stage's check()");
    return -1;
}

void pc_params_free(pc_params *ps)
{
    free(ps->st);
    ps->st = NULL;
}
