/* engine/stage_check.c: the rules a plugin's descriptor and its stage descriptors must
 * meet, written once (pipefuse/stage_check.h). The plugin loader stops at the first
 * error; `pipefuse plugin check` prints every finding with its fix. Errors are what the
 * engine cannot run safely and so refuses; faults break the contract of docs/plugins.md
 * but load (refusing them would break plugins that load today); warnings are allowed.
 *
 * The walk follows the descriptor: name, kind, inputs, what the kind needs, the point
 * source, the parameter table row by row, the later ABI fields, then the defaults run
 * through the stage's own code. A finding that makes later rules meaningless (an
 * unknown kind, a bad table) skips those rules rather than reporting their echoes.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipefuse/stage_check.h"

#define PF_API __attribute__((visibility("default")))

/* The input a reduce_sum stage's table is asked for with its defaults: odd, not square,
   so that a sum by columns and one by rows give different tables. */
#define SAMPLE_W 67
#define SAMPLE_H 45

static const char *const kind_names[] = {"point", "stencil", "resample", "reduce"};

static const char fix_table[] =
    "correct the row in the parameter table; the engine refuses the plugin otherwise";
static const char fix_finite[] =
    "give the row a finite default (PF_NO_MIN / PF_NO_MAX open a side of the range, not "
    "the default); the engine refuses the plugin otherwise";

typedef struct walk {
    const pf_stage_desc *d; /* copied to this engine's full size */
    unsigned abi_minor;
    const char *label; /* the stage's name, or "(unnamed)" */
    pf_check_fn fn;
    void *user;
    int errors, faults, stop;
} walk;

static void note(walk *w, pf_check_level level, const char *field, const char *fix, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));
static void note(walk *w, pf_check_level level, const char *field, const char *fix, const char *fmt,
                 ...)
{
    if (w->stop)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->errors += level == PF_CHECK_ERROR;
    w->faults += level == PF_CHECK_FAULT;
    pf_check_finding f = {level, field, msg, fix};
    if (w->fn && w->fn(w->user, &f) != 0)
        w->stop = 1;
}

/* "params[i].member" in buf. */
static const char *row_field(char *buf, size_t size, int i, const char *member)
{
    snprintf(buf, size, "params[%d].%s", i, member);
    return buf;
}

#define ROW(member) row_field(field, sizeof field, i, member)

int pf_stage_params_ok(const pf_stage_desc *d, const void *params, char *err, size_t err_size)
{
    if (err_size)
        err[0] = 0;
    if (d->check && d->check(params, err, err_size) != 0) {
        pf_plugin_msg(err, err_size);
        if (err_size && !err[0])
            snprintf(err, err_size, "invalid parameters");
        return 1;
    }
    if (d->kind == PF_STAGE_STENCIL && d->radius) {
        int r = d->radius(params);
        if (r < 0 || r > PF_MAX_RADIUS) {
            snprintf(err, err_size,
                     "these params make radius() return %d; a stencil's radius must be 0 to %d "
                     "(PF_MAX_RADIUS)",
                     r, PF_MAX_RADIUS);
            return 2;
        }
    }
    return 0;
}

/* ---- The parameter table ---------------------------------------------------------------- */

static int in_range(const pf_param_desc *pd, double v)
{
    return pd->min > pd->max || (v >= pd->min && v <= pd->max);
}

/* Row i's field: inside the struct, aligned, its own bytes. 0 when it cannot be read. */
static int check_row_field(walk *w, int i, const char *pn)
{
    const pf_stage_desc *d = w->d;
    const pf_param_desc *pd = &d->params[i];
    char field[48];
    size_t bytes = pf_param_bytes(pd);
    if (pd->offset > d->params_size || bytes > d->params_size - pd->offset || pd->offset % 4) {
        note(w, PF_CHECK_ERROR, ROW("offset"),
             "bind the row with PF_OFFSET(struct, field) and set .params_size = sizeof(struct) "
             "(PF_POINT_DESC does both for point stages)",
             "%s: its field (offset %zu, %zu bytes) %s the %zu-byte params struct", pn, pd->offset,
             bytes, pd->offset % 4 ? "is not 4-byte aligned in" : "does not fit", d->params_size);
        return 0;
    }
    for (int j = 0; j < i; j++) {
        const pf_param_desc *q = &d->params[j];
        if ((unsigned)q->type <= PF_PARAM_FLOAT_ARRAY && q->name &&
            pd->offset < q->offset + pf_param_bytes(q) && q->offset < pd->offset + bytes)
            note(w, PF_CHECK_FAULT, ROW("offset"),
                 "each row needs a field of its own (a copied PF_OFFSET?)",
                 "%s and %s.%s share bytes of the params struct", pn, w->label, q->name);
    }
    return 1;
}

/* Row i's range. 0 when its bounds cannot be used. */
static int check_row_range(walk *w, int i, const char *pn)
{
    const pf_param_desc *pd = &w->d->params[i];
    char field[48];
    if (pd->type != PF_PARAM_FLOAT && pd->type != PF_PARAM_INT && pd->type != PF_PARAM_FLOAT_ARRAY)
        return 1;
    if (isnan(pd->min) || isnan(pd->max)) {
        note(w, PF_CHECK_ERROR, ROW(isnan(pd->min) ? "min" : "max"),
             "write PF_NO_MIN or PF_NO_MAX for a side without a bound",
             "%s: a bound of its range is NaN", pn);
        return 0;
    }
    /* ABI 1.0 plugins meant "unbounded" by min > max; from 1.1 it is a mistake. */
    if (pd->min > pd->max && w->abi_minor >= 1) {
        note(w, PF_CHECK_ERROR, ROW("min"),
             "swap the bounds, or write PF_NO_MIN / PF_NO_MAX for a side without one (min > max "
             "no longer means unbounded)",
             "%s: min %g is above max %g (swapped?); write PF_NO_MIN / PF_NO_MAX for no bound", pn,
             pd->min, pd->max);
        return 0;
    }
    if (pd->min > pd->max)
        note(w, PF_CHECK_WARNING, ROW("min"),
             "write PF_NO_MIN / PF_NO_MAX: rebuilt against this pipefuse, the plugin is refused",
             "%s: min %g > max %g means unbounded for a plugin built for ABI 1.0", pn, pd->min,
             pd->max);
    return 1;
}

/* Row i's default (or defaults) against its type and range. */
static void check_row_default(walk *w, int i, const char *pn)
{
    const pf_param_desc *pd = &w->d->params[i];
    char field[48];
    if (pd->type == PF_PARAM_ENUM) {
        int n = pf_param_enum_count(pd);
        if (n == 0 || !(pd->def >= 0 && pd->def < n))
            note(w, PF_CHECK_ERROR, ROW("def"), fix_table,
                 "%s: enum default %g is not an index into its %d choices", pn, pd->def, n);
        else if (pd->def != floor(pd->def))
            note(w, PF_CHECK_FAULT, ROW("def"), "write the default choice's index, a whole number",
                 "%s: enum default %g is not a whole number (taken as %d)", pn, pd->def,
                 (int)pd->def);
    } else if (pd->type == PF_PARAM_FLOAT_ARRAY) {
        if (pd->count <= 0 || !pd->def_array) {
            note(w, PF_CHECK_ERROR, ROW(pd->count <= 0 ? "count" : "def_array"),
                 "set .count and .def_array (count defaults)",
                 "%s: float array without count or defaults", pn);
            return;
        }
        for (int k = 0; k < pd->count; k++)
            if (!isfinite(pd->def_array[k]) && !isnan(pd->def_array[k])) {
                snprintf(field, sizeof field, "params[%d].def_array[%d]", i, k);
                note(w, PF_CHECK_ERROR, field, fix_finite,
                     "%s: default element [%d] = %g is not a finite number", pn, k,
                     pd->def_array[k]);
                return;
            } else if (!in_range(pd, pd->def_array[k])) {
                snprintf(field, sizeof field, "params[%d].def_array[%d]", i, k);
                note(w, PF_CHECK_ERROR, field, fix_table,
                     "%s: default element [%d] = %g is outside its range [%g, %g]", pn, k,
                     pd->def_array[k], pd->min, pd->max);
                return;
            }
    } else if (pd->type == PF_PARAM_BOOL) {
        /* A bool row has no range: its min and max are not read (a row written by hand,
           `.def = 1` and no bounds, is as good as PF_BOOL_PARAM's). */
        int fits = pd->def > (double)INT_MIN - 1 && pd->def < (double)INT_MAX + 1;
        if (pd->def != 0 && pd->def != 1)
            note(w, fits ? PF_CHECK_WARNING : PF_CHECK_ERROR, ROW("def"), "write 0 or 1",
                 "%s: a bool default of %g (%s)", pn, pd->def,
                 fits ? "taken as true" : "it does not fit in an int");
    } else if (pd->type == PF_PARAM_FLOAT && !isfinite(pd->def) && !isnan(pd->def)) {
        /* In range when that side is open (PF_NO_MAX), but no pipeline file can write it
           (JSON has no infinity) and `pipefuse stages` could not show it. */
        note(w, PF_CHECK_ERROR, ROW("def"), fix_finite, "%s: default %g is not a finite number", pn,
             pd->def);
    } else if (!in_range(pd, pd->def)) {
        note(w, PF_CHECK_ERROR, ROW("def"), fix_table,
             "%s: default %g is outside its range [%g, %g]", pn, pd->def, pd->min, pd->max);
    } else if (pd->type == PF_PARAM_INT &&
               !(pd->def > (double)INT_MIN - 1 && pd->def < (double)INT_MAX + 1)) {
        note(w, PF_CHECK_ERROR, ROW("def"), fix_table, "%s: default %g does not fit in an int", pn,
             pd->def);
    } else if (pd->type == PF_PARAM_FLOAT && isfinite(pd->def) && !isfinite((float)pd->def)) {
        note(w, PF_CHECK_ERROR, ROW("def"), fix_table, "%s: default %g does not fit in a float", pn,
             pd->def);
    } else if (pd->type == PF_PARAM_INT && pd->def != floor(pd->def)) {
        note(w, PF_CHECK_WARNING, ROW("def"), "write a whole number",
             "%s: an int default of %g (truncated to %d)", pn, pd->def, (int)pd->def);
    }
}

static void check_row(walk *w, int i)
{
    const pf_stage_desc *d = w->d;
    const pf_param_desc *pd = &d->params[i];
    char field[48], pn[160];
    if (!pf_is_identifier(pd->name)) {
        note(
            w, PF_CHECK_ERROR, ROW("name"), "name parameters as C identifiers (letters, digits, _)",
            "%s: parameter %d has no valid name ('%s')", w->label, i, pd->name ? pd->name : "NULL");
        return;
    }
    snprintf(pn, sizeof pn, "%s.%s", w->label, pd->name);
    for (int j = 0; j < i; j++)
        if (d->params[j].name && strcmp(d->params[j].name, pd->name) == 0) {
            note(w, PF_CHECK_ERROR, ROW("name"), "give each parameter its own name",
                 "%s: declared twice (rows %d and %d)", pn, j, i);
            break;
        }
    if (!pd->doc || !pd->doc[0])
        note(w, PF_CHECK_FAULT, ROW("doc"),
             "add a doc string to the row: `pipefuse stages` shows it to users",
             "%s: no doc string", pn);
    if ((unsigned)pd->type > PF_PARAM_FLOAT_ARRAY) {
        note(w, PF_CHECK_ERROR, ROW("type"), fix_table, "%s: unknown type %d", pn, (int)pd->type);
        return;
    }
    if (check_row_field(w, i, pn) && check_row_range(w, i, pn))
        check_row_default(w, i, pn);
}

/* ---- The stage's declarations -------------------------------------------------------------- */

/* The functions every stage of its kind needs. */
static void check_kind_needs(walk *w)
{
    const pf_stage_desc *d = w->d;
    const struct {
        pf_stage_kind kind;
        const char *name;
        int have;
    } needs[] = {
        {PF_STAGE_POINT, "point_row", d->point_row != NULL},
        {PF_STAGE_STENCIL, "run_cpu", d->run_cpu != NULL},
        {PF_STAGE_STENCIL, "radius", d->radius != NULL},
        {PF_STAGE_RESAMPLE, "run_cpu", d->run_cpu != NULL},
        {PF_STAGE_RESAMPLE, "shape", d->shape != NULL},
        {PF_STAGE_REDUCE, "run_cpu", d->run_cpu != NULL},
        {PF_STAGE_REDUCE, "shape", d->shape != NULL},
        {PF_STAGE_REDUCE, "partial_len", d->partial_len != NULL},
        {PF_STAGE_REDUCE, "combine", d->combine != NULL},
    };
    for (size_t k = 0; k < sizeof needs / sizeof needs[0]; k++)
        if (needs[k].kind == d->kind && !needs[k].have)
            note(w, PF_CHECK_ERROR, needs[k].name,
                 "every stage of this kind needs it (docs/plugins.md lists what each kind needs)",
                 "%s: a %s stage without %s", w->label, kind_names[d->kind], needs[k].name);
}

/* A point stage's source for NVRTC: named op and params struct, or none (no fusion). */
static void check_point_source(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (d->kind != PF_STAGE_POINT)
        return;
    if (!d->point_source) {
        note(w, PF_CHECK_WARNING, "point_source",
             "declare the op in a header with PF_POINT_DESC(fn, T, source) (docs/plugins.md)",
             "%s: no point source (point_source is NULL): it cannot fuse, so each use costs a "
             "launch and a trip through memory",
             w->label);
        return;
    }
    if (!d->point_fn || !d->params_type) {
        note(w, PF_CHECK_ERROR, !d->point_fn ? "point_fn" : "params_type",
             "use PF_POINT_DESC(fn, T, source), which sets all three",
             "%s: point_source without point_fn or params_type", w->label);
        return;
    }
    int no_fn = !strstr(d->point_source, d->point_fn);
    if (no_fn || !strstr(d->point_source, d->params_type))
        note(w, PF_CHECK_FAULT, no_fn ? "point_fn" : "params_type",
             "point_fn and params_type must name the op and its params struct as the header "
             "spells them",
             "%s: the point source does not mention %s", w->label,
             no_fn ? d->point_fn : d->params_type);
}

/* out_channels, flags, native_ok/run_native (ABI 1.1, 1.2). */
static void check_later_fields(walk *w)
{
    const pf_stage_desc *d = w->d;
    if ((unsigned)d->out_channels > 4)
        note(w, PF_CHECK_ERROR, "out_channels",
             "set .out_channels to 0 (the output follows the input), 3 (colour) or 4 (colour "
             "and alpha)",
             "%s: declares out_channels %d; 0 to 4 are allowed", w->label, d->out_channels);
    if (d->flags & ~PF_STAGE_FLAGS_KNOWN)
        note(w, PF_CHECK_ERROR, "flags", "declare only the PF_STAGE_* flags of pipefuse/plugin.h",
             "%s: declares flags 0x%x; this engine knows 0x%x", w->label, d->flags,
             PF_STAGE_FLAGS_KNOWN);
    if ((d->flags & PF_STAGE_BINDABLE) && d->kind != PF_STAGE_POINT)
        note(w, PF_CHECK_ERROR, "flags",
             "drop PF_STAGE_BINDABLE: only a point stage's params may be bound",
             "%s: declares PF_STAGE_BINDABLE on a %s stage", w->label, kind_names[d->kind]);
    if ((d->flags & PF_STAGE_PER_CHANNEL) && d->kind != PF_STAGE_POINT)
        note(w, PF_CHECK_ERROR, "flags", "drop PF_STAGE_PER_CHANNEL: it is a point stage's claim",
             "%s: declares PF_STAGE_PER_CHANNEL on a %s stage; only point stages may", w->label,
             kind_names[d->kind]);
    if (!d->native_ok != !d->run_native)
        note(w, PF_CHECK_ERROR, d->native_ok ? "run_native" : "native_ok",
             "set both native_ok and run_native, or neither",
             "%s: declares %s without %s; they come together", w->label,
             d->native_ok ? "native_ok" : "run_native", d->native_ok ? "run_native" : "native_ok");
    else if (d->run_native && d->kind != PF_STAGE_RESAMPLE && d->kind != PF_STAGE_REDUCE &&
             !(d->kind == PF_STAGE_STENCIL && w->abi_minor >= 6))
        note(w, PF_CHECK_ERROR, "run_native", "drop native_ok and run_native from this stage",
             "%s: declares run_native on a %s stage; only resample and reduce stages may (and "
             "stencils, from ABI 1.6)",
             w->label, kind_names[d->kind]);
}

/* reduce_sum (ABI 1.3): a known value, on a reduce stage. */
static void check_reduce_sum(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (!d->reduce_sum)
        return;
    if ((unsigned)d->reduce_sum > PF_REDUCE_SUM_ROWS)
        note(w, PF_CHECK_ERROR, "reduce_sum",
             "declare 0, PF_REDUCE_SUM_COLUMNS or PF_REDUCE_SUM_ROWS",
             "%s: declares reduce_sum %d; this engine knows 0, PF_REDUCE_SUM_COLUMNS (%d) and "
             "PF_REDUCE_SUM_ROWS (%d)",
             w->label, d->reduce_sum, PF_REDUCE_SUM_COLUMNS, PF_REDUCE_SUM_ROWS);
    else if (d->kind != PF_STAGE_REDUCE)
        note(w, PF_CHECK_ERROR, "reduce_sum",
             "drop reduce_sum: it describes a reduce stage's table",
             "%s: declares reduce_sum %d on a %s stage; only reduce stages may", w->label,
             d->reduce_sum, kind_names[d->kind]);
    else if (d->n_inputs != 1)
        note(w, PF_CHECK_WARNING, "reduce_sum",
             "declare reduce_sum 0, or sum one input: the engine computes sums of one input only",
             "%s: declares reduce_sum but takes %d inputs: the engine never computes it itself",
             w->label, d->n_inputs);
}

/* reduce_finish (ABI 1.5): on a summing reduce, with point_source and params_type naming
   the function and its params struct. */
static void check_reduce_finish(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (!d->reduce_finish)
        return;
    if (d->kind != PF_STAGE_REDUCE || !d->reduce_sum)
        note(w, PF_CHECK_ERROR, "reduce_finish",
             "declare reduce_finish only with reduce_sum: it makes each entry of a summed table",
             "%s: declares reduce_finish on a %s stage without reduce_sum", w->label,
             kind_names[d->kind]);
    else if (!d->point_source || !d->params_type)
        note(w, PF_CHECK_ERROR, !d->point_source ? "point_source" : "params_type",
             "set point_source to the header defining the function and params_type to its "
             "params struct",
             "%s: declares reduce_finish without %s", w->label,
             !d->point_source ? "point_source" : "params_type");
    else if (!strstr(d->point_source, d->reduce_finish) || !strstr(d->point_source, d->params_type))
        note(w, PF_CHECK_FAULT, "reduce_finish",
             "reduce_finish and params_type must name the function and its params struct as "
             "the header spells them",
             "%s: the point source does not mention %s", w->label,
             !strstr(d->point_source, d->reduce_finish) ? d->reduce_finish : d->params_type);
}

/* A function of the stage's point_source that field (stencil_fn, separable_fn) names as
   fn and that describes `what` (a 3x3 stencil, a separable stencil): on a stencil stage,
   with point_source and params_type, both named in the source. Returns 1 when all of that
   holds. */
static int check_source_fn(walk *w, const char *field, const char *fn, const char *what)
{
    const pf_stage_desc *d = w->d;
    char fix[256];
    if (d->kind != PF_STAGE_STENCIL) {
        snprintf(fix, sizeof fix, "drop %s: it describes %s", field, what);
        note(w, PF_CHECK_ERROR, field, fix,
             "%s: declares %s on a %s stage; only stencil stages may", w->label, field,
             kind_names[d->kind]);
    } else if (!d->point_source || !d->params_type) {
        note(w, PF_CHECK_ERROR, !d->point_source ? "point_source" : "params_type",
             "set point_source to the header defining the function and params_type to its "
             "params struct",
             "%s: declares %s without %s", w->label, field,
             !d->point_source ? "point_source" : "params_type");
    } else if (!strstr(d->point_source, fn) || !strstr(d->point_source, d->params_type)) {
        snprintf(fix, sizeof fix,
                 "%s and params_type must name the function and its params struct as the header "
                 "spells them",
                 field);
        note(w, PF_CHECK_FAULT, field, fix, "%s: the point source does not mention %s", w->label,
             !strstr(d->point_source, fn) ? fn : d->params_type);
    } else {
        return 1;
    }
    return 0;
}

/* A stage whose function field describes takes more than one input: the engine never
   runs it itself. */
static void check_one_input(walk *w, const char *field)
{
    char fix[128];
    snprintf(fix, sizeof fix, "declare %s only on a stencil of one input", field);
    note(w, PF_CHECK_WARNING, field, fix,
         "%s: declares %s but takes %d inputs: the engine never runs it itself", w->label, field,
         w->d->n_inputs);
}

/* stencil_fn (ABI 1.3): check_source_fn's rules. */
static void check_stencil_fn(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (d->stencil_fn && check_source_fn(w, "stencil_fn", d->stencil_fn, "a 3x3 stencil") &&
        d->n_inputs != 1)
        check_one_input(w, "stencil_fn");
}

/* separable_fn (ABI 1.4): check_source_fn's rules, a largest radius in
   1..PF_SEPARABLE_MAX, and not together with stencil_fn. */
static void check_separable_fn(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (!d->separable_fn ||
        !check_source_fn(w, "separable_fn", d->separable_fn, "a separable stencil"))
        return;
    if (d->separable_max < 1 || d->separable_max > PF_SEPARABLE_MAX)
        note(w, PF_CHECK_ERROR, "separable_max",
             "set separable_max to the largest radius separable_fn returns",
             "%s: declares separable_fn with separable_max %d; 1 to %d are allowed", w->label,
             d->separable_max, PF_SEPARABLE_MAX);
    else if (d->stencil_fn)
        note(w, PF_CHECK_ERROR, "separable_fn", "declare stencil_fn or separable_fn, not both",
             "%s: declares both stencil_fn and separable_fn", w->label);
    else if (d->n_inputs != 1)
        check_one_input(w, "separable_fn");
}

/* What the engine plans and runs that the stage's CUDA code and tables decide. */
static void check_advice(walk *w)
{
    const pf_stage_desc *d = w->d;
    if (d->kind == PF_STAGE_POINT ? !d->point_cuda : !d->run_cuda)
        note(w, PF_CHECK_WARNING, d->kind == PF_STAGE_POINT ? "point_cuda" : "run_cuda",
             "build the plugin with its CUDA sources (pipefuse_add_plugin CUDA_SOURCES)",
             "%s: no CUDA implementation (%s is NULL): pipelines using it run on the CPU (was "
             "the plugin built without its CUDA sources?)",
             w->label, d->kind == PF_STAGE_POINT ? "point_cuda" : "run_cuda");
    if (d->kind == PF_STAGE_REDUCE && !d->columns)
        note(w, PF_CHECK_WARNING, "columns", "set .columns to a NULL-terminated list of names",
             "%s: no column names (columns is NULL): table outputs get numbered columns", w->label);
}

/* ---- The defaults, through the stage's own code ---------------------------------------------- */

/* A reduce_sum stage's table of a sample input: 4 columns, a row per input column (or
   row), a partial of 4 doubles a row. */
static void check_sum_shape(walk *w, const void *params)
{
    const pf_stage_desc *d = w->d;
    int by_columns = d->reduce_sum == PF_REDUCE_SUM_COLUMNS;
    pf_shape in = {SAMPLE_W, SAMPLE_H}, t = {0, 0};
    int rows = by_columns ? in.width : in.height;
    char why[512] = "";
    if (d->shape(params, &in, &t, why, sizeof why) != 0) {
        pf_plugin_msg(why, sizeof why);
        note(w, PF_CHECK_FAULT, "shape", "make shape() accept the default params",
             "%s: with its default params, shape() refuses a %dx%d input: %s", w->label, in.width,
             in.height, why[0] ? why : "(no message)");
        return;
    }
    size_t len = d->partial_len(params, &in);
    if (t.width != 4 || t.height != rows || len != (size_t)4 * (size_t)rows)
        note(w, PF_CHECK_FAULT, "reduce_sum",
             "return the table a sum fills (4 columns; a row per input column for "
             "PF_REDUCE_SUM_COLUMNS, per input row for PF_REDUCE_SUM_ROWS; partial_len 4 a "
             "row), or declare reduce_sum 0",
             "%s: declares a sum by %s, but with its default params a %dx%d input gets a %dx%d "
             "table (partial_len %zu), not 4x%d (partial_len %d)",
             w->label, by_columns ? "columns" : "rows", in.width, in.height, t.width, t.height, len,
             rows, 4 * rows);
}

/* A stencil_fn or separable_fn the engine would not use with the default params: a
   stencil_fn needs radius 1, a separable_fn a radius of at most separable_max. */
static void check_ignored_fn(walk *w, const void *params)
{
    const pf_stage_desc *d = w->d;
    int r = d->radius ? d->radius(params) : 0;
    if (d->stencil_fn && !d->separable_fn && r != 1)
        note(w, PF_CHECK_WARNING, "stencil_fn",
             "declare stencil_fn only on a 3x3 stencil (radius 1 for the params pipelines use), "
             "or use separable_fn for a separable kernel",
             "%s: declares stencil_fn, but with its default params radius() returns %d: the "
             "engine runs stencil_fn only where the radius is 1, and the stage's own run_cuda "
             "otherwise",
             w->label, r);
    else if (d->separable_fn && !d->stencil_fn && d->separable_max >= 1 &&
             d->separable_max <= PF_SEPARABLE_MAX && r > d->separable_max)
        note(w, PF_CHECK_WARNING, "separable_max",
             "raise separable_max to the largest radius the params allow (at most "
             "PF_SEPARABLE_MAX)",
             "%s: declares separable_fn, but with its default params radius() returns %d, past "
             "separable_max %d: the engine runs the stage's own run_cuda there",
             w->label, r, d->separable_max);
}

/* A reduce stage's table of a sample input with its default params: a name for each
   column (when it lists any) and a label for each row (when it labels them), as
   pf_table readers assume. The engine refuses to plan a table without them. */
static void check_table_names(walk *w, const void *params)
{
    const pf_stage_desc *d = w->d;
    pf_shape in = {SAMPLE_W, SAMPLE_H}, t = {0, 0};
    char why[512] = "";
    if (!d->shape || d->shape(params, &in, &t, why, sizeof why) != 0 || t.width < 1 || t.height < 1)
        return; /* the engine refuses such a plan with the shape's own message */
    int named = 0;
    while (d->columns && named < t.width && d->columns[named])
        named++;
    if (d->columns && named < t.width)
        note(w, PF_CHECK_FAULT, "columns",
             "list one name per table column, NULL-terminated, or set .columns to NULL for "
             "numbered columns; the engine refuses to plan such a table",
             "%s: with its default params a %dx%d input gets a table of %d columns, but "
             "columns names %d",
             w->label, in.width, in.height, t.width, named);
    for (int r = 0; d->row_name && r < t.height; r++)
        if (!d->row_name(params, r)) {
            note(w, PF_CHECK_FAULT, "row_name",
                 "return a label for every row, or set .row_name to NULL for numbered rows; "
                 "the engine refuses to plan such a table",
                 "%s: with its default params row_name() returns NULL for row %d of %d", w->label,
                 r, t.height);
            break;
        }
}

/* The defaults must be params the engine accepts (check(), the radius limit). -1 when
   out of memory. */
static int check_defaults(walk *w)
{
    const pf_stage_desc *d = w->d;
    void *defaults = calloc(1, d->params_size ? d->params_size : 1);
    if (!defaults)
        return -1;
    pf_params_init(d, defaults);
    char why[512];
    int bad = pf_stage_params_ok(d, defaults, why, sizeof why);
    if (bad)
        note(w, PF_CHECK_ERROR, bad == 2 ? "radius" : "check",
             bad == 2 ? "return the farthest distance the stage reads, 0 to PF_MAX_RADIUS; a "
                        "stage needing more must work another way (a resample, or passes)"
                      : "make the defaults pass the stage's own check()",
             "%s: with its default params: %s", w->label, why);
    else if (d->kind == PF_STAGE_REDUCE && d->reduce_sum)
        check_sum_shape(w, defaults);
    else if (d->kind == PF_STAGE_STENCIL && (d->stencil_fn || d->separable_fn))
        check_ignored_fn(w, defaults);
    if (!bad && d->kind == PF_STAGE_REDUCE)
        check_table_names(w, defaults);
    free(defaults);
    return 0;
}

/* ---- The walk ------------------------------------------------------------------------------ */

PF_API int pf_stage_check(const pf_stage_desc *src, unsigned abi_minor, pf_check_fn fn, void *user)
{
    walk w = {NULL, abi_minor, "(unnamed)", fn, user, 0, 0, 0};
    if (!pf_readable(src, sizeof src->size) ||
        !pf_readable(src, src->size < sizeof(pf_stage_desc) ? src->size : sizeof(pf_stage_desc))) {
        note(&w, PF_CHECK_ERROR, "size", "point at a defined pf_stage_desc",
             "the stage descriptor is memory this process cannot read");
        return w.errors;
    }
    if (src->size < offsetof(pf_stage_desc, cost)) {
        note(&w, PF_CHECK_ERROR, "size", "set .size = PF_STAGE_DESC_SIZE in every stage descriptor",
             "stage descriptor too small (%u bytes)", src->size);
        return w.errors;
    }
    /* Fields the plugin's struct is too old to have read as zero. */
    pf_stage_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, src, src->size < sizeof d ? src->size : sizeof d);
    w.d = &d;
    if (d.name && !pf_readable_str(d.name, 4096)) {
        note(&w, PF_CHECK_ERROR, "name", "set .name to a string",
             "the stage's name is memory this process cannot read, or no string");
        return w.errors;
    }
    if (d.doc && !pf_readable_str(d.doc, 1 << 20)) {
        note(&w, PF_CHECK_ERROR, "doc", "set .doc to a string",
             "the stage's doc is memory this process cannot read, or no string");
        return w.errors;
    }
    if (d.name && d.name[0])
        w.label = d.name;
    if (!pf_is_identifier(d.name))
        note(&w, PF_CHECK_ERROR, "name",
             "name stages as C identifiers (letters, digits, _): pipeline files refer to them",
             "stage name '%s' is not an identifier", d.name ? d.name : "NULL");
    if (!d.doc || !d.doc[0])
        note(&w, PF_CHECK_FAULT, "doc", "set .doc: `pipefuse stages` shows it to users",
             "%s: no doc string", w.label);
    int kind_ok = (unsigned)d.kind <= PF_STAGE_REDUCE;
    if (!kind_ok)
        note(&w, PF_CHECK_ERROR, "kind",
             "set .kind to PF_STAGE_POINT, _STENCIL, _RESAMPLE or _REDUCE", "%s: unknown kind %d",
             w.label, (int)d.kind);
    if (d.n_inputs < 1 || d.n_inputs > PF_MAX_INPUTS)
        note(&w, PF_CHECK_ERROR, "n_inputs", "set .n_inputs to the number of images it reads",
             "%s: takes %d inputs; 1 to %d are allowed", w.label, d.n_inputs, PF_MAX_INPUTS);
    if (kind_ok) {
        check_kind_needs(&w);
        check_point_source(&w);
    }
    int table_ok = d.n_params >= 0 && (d.n_params == 0 || d.params);
    if (!table_ok)
        note(&w, PF_CHECK_ERROR, "params",
             "use PF_PARAMS(table) to set .params and .n_params together",
             "%s: bad parameter table (n_params %d, params %s)", w.label, d.n_params,
             d.params ? "set" : "NULL");
    for (int i = 0; table_ok && i < d.n_params && !w.stop; i++)
        check_row(&w, i);
    if (kind_ok) {
        check_later_fields(&w);
        check_reduce_sum(&w);
        check_stencil_fn(&w);
        check_separable_fn(&w);
        check_reduce_finish(&w);
    }
    /* Plugin code runs on the defaults only once the declarations are sound. */
    if (w.errors == 0 && !w.stop && check_defaults(&w) != 0)
        return -1;
    if (kind_ok)
        check_advice(&w);
    return w.errors;
}

/* ---- The plugin descriptor ------------------------------------------------------------------ */

/* Its stages: each there, each named apart from the others. */
/* Returns 0 where a stage pointer, or what it points at, cannot be read: the caller must
   not walk the list then. */
static int check_stage_list(walk *w, const pf_plugin_desc *pd)
{
    char field[48];
    for (int i = 0; i < pd->n_stages; i++) {
        snprintf(field, sizeof field, "stages[%d]", i);
        /* n_stages larger than the array reads past it: garbage, often unmapped */
        const pf_stage_desc *s = NULL;
        int ok = pf_readable(&pd->stages[i], sizeof *pd->stages);
        if (ok && (s = pd->stages[i]) != NULL)
            ok = pf_readable(s, sizeof s->size) &&
                 pf_readable(s, s->size < sizeof *s ? s->size : sizeof *s) &&
                 (s->size < offsetof(pf_stage_desc, cost) || !s->name ||
                  pf_readable_str(s->name, 4096));
        if (!ok) {
            note(w, PF_CHECK_ERROR, field,
                 "list only defined stages, and set n_stages to their number (PF_DEFINE_PLUGIN "
                 "does)",
                 "stages[%d] of %d is memory this process cannot read (is n_stages more than "
                 "the stages listed?)",
                 i, pd->n_stages);
            w->stop = 1;
            return 0;
        }
        if (!s) {
            note(w, PF_CHECK_ERROR, field, "list only defined stages", "stages[%d] of %d is NULL",
                 i, pd->n_stages);
            continue;
        }
        for (int j = 0; j < i && s->size >= offsetof(pf_stage_desc, cost) && s->name; j++) {
            const pf_stage_desc *o = pd->stages[j];
            if (o && o->size >= offsetof(pf_stage_desc, cost) && o->name &&
                strcmp(o->name, s->name) == 0) {
                note(w, PF_CHECK_ERROR, field, "give each stage its own name",
                     "two stages are named '%s' (stages[%d] and stages[%d])", s->name, j, i);
                break;
            }
        }
    }
    return 1;
}

PF_API int pf_plugin_check(const pf_plugin_desc *pd, int *readable, pf_check_fn fn, void *user)
{
    walk w = {NULL, 0, "(unnamed)", fn, user, 0, 0, 0};
    *readable = 0;
    if (pd && !pf_readable(pd, offsetof(pf_plugin_desc, n_stages) + sizeof(int))) {
        note(&w, PF_CHECK_ERROR, PF_PLUGIN_ENTRY_NAME,
             "return the address of a static pf_plugin_desc (PF_DEFINE_PLUGIN does)",
             "%s returned memory this process cannot read", PF_PLUGIN_ENTRY_NAME);
        return w.errors;
    }
    if (!pd) {
        note(&w, PF_CHECK_ERROR, PF_PLUGIN_ENTRY_NAME,
             "return the address of a static pf_plugin_desc (PF_DEFINE_PLUGIN does)",
             "%s returned no descriptor", PF_PLUGIN_ENTRY_NAME);
        return w.errors;
    }
    if (pd->size < offsetof(pf_plugin_desc, n_stages) + sizeof(int)) {
        note(&w, PF_CHECK_ERROR, "size",
             "set .size = sizeof(pf_plugin_desc) (PF_DEFINE_PLUGIN does)",
             "plugin descriptor too small (%u bytes)", pd->size);
        return w.errors;
    }
    unsigned major = pd->abi_version >> 16, minor = pd->abi_version & 0xffff;
    if (major != PF_ABI_MAJOR || minor > PF_ABI_MINOR) {
        note(&w, PF_CHECK_ERROR, "abi_version",
             "rebuild the plugin against this pipefuse's headers (find_package(pipefuse) or "
             "pkg-config pipefuse finds them): a plugin built for ABI M.m loads in engines of "
             "the same major M and minor m or newer",
             "built for plugin ABI %u.%u; this pipefuse supports ABI %d.0 to %d.%d", major, minor,
             PF_ABI_MAJOR, PF_ABI_MAJOR, PF_ABI_MINOR);
        return w.errors;
    }
    static const char fix_define[] =
        "PF_DEFINE_PLUGIN(name, version, doc, stages) with a name and a non-empty array of stages";
    if (pd->name && !pf_readable_str(pd->name, 4096)) {
        note(&w, PF_CHECK_ERROR, "name", fix_define,
             "the plugin's name is memory this process cannot read, or no string");
        return w.errors;
    }
    if (!pd->name || !pd->name[0])
        note(&w, pd->name ? PF_CHECK_FAULT : PF_CHECK_ERROR, "name", fix_define,
             "the plugin descriptor has no name");
    else if (strchr(pd->name, '.'))
        note(&w, PF_CHECK_ERROR, "name", "name the plugin without a '.'",
             "plugin name '%s' has a '.' (pipelines write plugin.stage)", pd->name);
    if (pd->n_stages < 0 || (pd->n_stages > 0 && !pd->stages)) {
        note(&w, PF_CHECK_ERROR, "stages", fix_define,
             "the plugin descriptor has a bad stage list (n_stages %d, stages %s)", pd->n_stages,
             pd->stages ? "set" : "NULL");
        return w.errors;
    }
    if (pd->n_stages == 0)
        note(&w, PF_CHECK_FAULT, "n_stages", fix_define, "the plugin descriptor has no stages");
    int bad_version = pd->version && !pf_readable_str(pd->version, 4096);
    int bad_doc = pd->doc && !pf_readable_str(pd->doc, 1 << 20);
    if (bad_version || bad_doc) {
        note(&w, PF_CHECK_ERROR, bad_doc ? "doc" : "version", fix_define,
             "the plugin's version or doc is memory this process cannot read, or no string");
        return w.errors;
    }
    if (!pd->version || !pd->version[0])
        note(&w, PF_CHECK_WARNING, "version", "give PF_DEFINE_PLUGIN a version string",
             "the plugin has no version string");
    if (!pd->doc || !pd->doc[0])
        note(&w, PF_CHECK_WARNING, "doc", "give PF_DEFINE_PLUGIN a doc string",
             "the plugin has no doc string (`pipefuse info` shows it)");
    /* the caller may walk the list and print the strings only once all could be read */
    *readable = check_stage_list(&w, pd);
    return w.errors;
}
