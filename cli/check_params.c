/* cli/check_params.c: `pipefuse plugin check`, the parameter sets the runs use, and a stage's
   parameter table checked row by row. */
#include "plugin_check.h"

/* ---- Parameter sets --------------------------------------------------------------------- */

static size_t param_bytes(const pf_param_desc *pd)
{
    return pd->type == PF_PARAM_FLOAT_ARRAY
               ? sizeof(float) * (size_t)(pd->count > 0 ? pd->count : 0)
           : pd->type == PF_PARAM_FLOAT ? sizeof(float)
                                        : sizeof(int);
}

static int in_range(const pf_param_desc *pd, double v)
{
    return pd->min > pd->max || (v >= pd->min && v <= pd->max);
}

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

/* ---- The parameter table ---------------------------------------------------------------- */

static const char *const fix_table =
    "correct the row in the parameter table; the engine refuses the plugin otherwise";

/* The parameter table of stage label (d copied to full size). Returns failures found. */
int pc_check_params(pc *c, const char *label, const pf_stage_desc *d)
{
    int bad = 0;
    if (d->n_params < 0 || (d->n_params > 0 && !d->params)) {
        fail(c, "use PF_PARAMS(table) to set .params and .n_params together",
             "%s: bad parameter table (n_params %d, params %s)", label, d->n_params,
             d->params ? "set" : "NULL");
        return 1;
    }
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *pd = &d->params[i];
        char pn[128];
        snprintf(pn, sizeof pn, "%s.%s", label, pc_is_identifier(pd->name) ? pd->name : "?");
        if (!pc_is_identifier(pd->name)) {
            fail(c, "name parameters as C identifiers (letters, digits, _)",
                 "%s: parameter %d has no valid name ('%s')", label, i,
                 pd->name ? pd->name : "NULL");
            bad++;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (d->params[j].name && strcmp(d->params[j].name, pd->name) == 0) {
                fail(c, "give each parameter its own name", "%s: declared twice (rows %d and %d)",
                     pn, j, i);
                bad++;
            }
        if (!pd->doc || !pd->doc[0]) {
            fail(c, "add a doc string to the row: `pipefuse stages` shows it to users",
                 "%s: no doc string", pn);
            bad++;
        }
        if ((unsigned)pd->type > PF_PARAM_FLOAT_ARRAY) {
            fail(c, fix_table, "%s: unknown type %d", pn, (int)pd->type);
            bad++;
            continue;
        }
        size_t bytes = param_bytes(pd);
        if (pd->offset + bytes > d->params_size || pd->offset % 4) {
            fail(c,
                 "bind the row with PF_OFFSET(struct, field) and set .params_size = "
                 "sizeof(struct) (PF_POINT_DESC does both for point stages)",
                 "%s: its field (offset %zu, %zu bytes) does not fit the %zu-byte params struct",
                 pn, pd->offset, bytes, d->params_size);
            bad++;
            continue;
        }
        for (int j = 0; j < i; j++) {
            const pf_param_desc *q = &d->params[j];
            if ((unsigned)q->type <= PF_PARAM_FLOAT_ARRAY && q->name &&
                pd->offset < q->offset + param_bytes(q) && q->offset < pd->offset + bytes) {
                fail(c, "each row needs a field of its own (a copied PF_OFFSET?)",
                     "%s and %s.%s share bytes of the params struct", pn, label, q->name);
                bad++;
            }
        }
        int ranged = pd->type == PF_PARAM_FLOAT || pd->type == PF_PARAM_INT ||
                     pd->type == PF_PARAM_FLOAT_ARRAY;
        if (ranged && (isnan(pd->min) || isnan(pd->max))) {
            fail(c, "write PF_NO_MIN or PF_NO_MAX for a side without a bound",
                 "%s: a bound of its range is NaN", pn);
            bad++;
            continue;
        }
        if (ranged && pd->min > pd->max && c->abi_minor >= 1) {
            fail(c,
                 "swap the bounds, or write PF_NO_MIN / PF_NO_MAX for a side without one (min > "
                 "max no longer means unbounded; the engine refuses the plugin)",
                 "%s: min %g is above max %g", pn, pd->min, pd->max);
            bad++;
            continue;
        }
        if (ranged && pd->min > pd->max)
            warn(c,
                 "%s: min %g > max %g means unbounded for a plugin built for ABI 1.0; rebuilt "
                 "against this pipefuse it is refused: write PF_NO_MIN / PF_NO_MAX",
                 pn, pd->min, pd->max);
        if (pd->type == PF_PARAM_ENUM) {
            int n = enum_count(pd);
            if (n == 0 || pd->def < 0 || pd->def >= n || pd->def != floor(pd->def)) {
                fail(c, fix_table, "%s: enum default %g is not an index into its %d choices", pn,
                     pd->def, n);
                bad++;
            }
        } else if (pd->type == PF_PARAM_FLOAT_ARRAY) {
            if (pd->count <= 0 || !pd->def_array) {
                fail(c, "set .count and .def_array (count defaults)",
                     "%s: float array without count or defaults", pn);
                bad++;
            } else {
                for (int k = 0; k < pd->count; k++)
                    if (!in_range(pd, pd->def_array[k])) {
                        fail(c, fix_table, "%s: default[%d] = %g is outside its range [%g, %g]", pn,
                             k, pd->def_array[k], pd->min, pd->max);
                        bad++;
                        break;
                    }
            }
        } else if (!in_range(pd, pd->def)) {
            fail(c, fix_table, "%s: default %g is outside its range [%g, %g]", pn, pd->def, pd->min,
                 pd->max);
            bad++;
        } else if (pd->type == PF_PARAM_BOOL && pd->def != 0 && pd->def != 1) {
            warn(c, "%s: a bool default of %g (taken as true)", pn, pd->def);
        } else if (pd->type == PF_PARAM_INT && pd->def != floor(pd->def)) {
            warn(c, "%s: an int default of %g (truncated to %d)", pn, pd->def, (int)pd->def);
        }
    }
    return bad;
}
