/* tests/engine/test_stage_check.c: the stage descriptor rules (engine/stage_check.c,
 * pf_stage_check) called directly on descriptors built here: every finding of a
 * descriptor with many faults, in field order, with its level, field and fix; the walk
 * stopped at the first error as the loader stops it; reduce_sum's rules; the ABI 1.0
 * reading of min > max; a sound descriptor with no error or fault; and the plugin
 * descriptor's rules (pf_plugin_check).
 */
#include <math.h>
#include <string.h>

#include "pipefuse/plugin.h"
#include "pipefuse/stage_check.h"
#include "testutil.h"

/* ---- Collecting findings ------------------------------------------------------------- */

#define MAX_FOUND 32

typedef struct found {
    int n, stop_at_error;
    pf_check_level level[MAX_FOUND];
    char field[MAX_FOUND][64], message[MAX_FOUND][512];
} found;

static int collect(void *user, const pf_check_finding *f)
{
    found *fd = user;
    CHECKF(f->field && f->field[0] && f->message && f->message[0] && f->fix && f->fix[0],
           "a finding without field, message or fix: %s", f->message ? f->message : "NULL");
    if (fd->n < MAX_FOUND) {
        fd->level[fd->n] = f->level;
        snprintf(fd->field[fd->n], sizeof fd->field[0], "%s", f->field ? f->field : "");
        snprintf(fd->message[fd->n], sizeof fd->message[0], "%s", f->message ? f->message : "");
    }
    fd->n++;
    return fd->stop_at_error && f->level == PF_CHECK_ERROR;
}

/* The index of the finding on field at level, or -1. */
static int find(const found *fd, const char *field, pf_check_level level)
{
    for (int i = 0; i < fd->n && i < MAX_FOUND; i++)
        if (strcmp(fd->field[i], field) == 0 && fd->level[i] == level)
            return i;
    return -1;
}

static int count_level(const found *fd, pf_check_level level)
{
    int n = 0;
    for (int i = 0; i < fd->n && i < MAX_FOUND; i++)
        n += fd->level[i] == level;
    return n;
}

static void dump(const char *what, const found *fd)
{
    static const char *const names[] = {"error", "fault", "warning"};
    printf("%s: %d findings\n", what, fd->n);
    for (int i = 0; i < fd->n && i < MAX_FOUND; i++)
        printf("  %-7s %-20s %s\n", names[fd->level[i]], fd->field[i], fd->message[i]);
}

/* ---- Stage pieces (never run here but for shape, partial_len and check) ------------------- */

typedef struct two_params {
    float gain;
    int mode;
} two_params;

static void point_row(const void *params, const pf_float4 *const *in, int n_in, pf_float4 *out,
                      int x0, int n, int y, int width, int height)
{
    (void)params, (void)in, (void)n_in, (void)out, (void)x0, (void)n, (void)y, (void)width,
        (void)height;
}

static int run(const pf_stage_args *a)
{
    (void)a;
    return 0;
}

/* A 1x1 table: the number of pixels. */
static int count_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                       size_t err_size)
{
    (void)params, (void)in, (void)err, (void)err_size;
    out->width = out->height = 1;
    return 0;
}

static size_t count_len(const void *params, const pf_shape *in)
{
    (void)params, (void)in;
    return 1;
}

/* A sum by columns: 4 columns, a row per input column. */
static int colsum_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                        size_t err_size)
{
    (void)params, (void)err, (void)err_size;
    out->width = 4;
    out->height = in->width;
    return 0;
}

static size_t colsum_len(const void *params, const pf_shape *in)
{
    (void)params;
    return (size_t)4 * (size_t)in->width;
}

static void combine(const void *params, const pf_shape *in, const double *partials, int n,
                    double *result)
{
    (void)params, (void)in, (void)partials, (void)n, (void)result;
}

static int native_ok(const void *params)
{
    (void)params;
    return 1;
}

static int refuse_all(const void *params, char *err, size_t err_size)
{
    (void)params;
    snprintf(err, err_size, "gain must be below mode");
    return 1;
}

static const pf_param_desc good_table[] = {
    {"gain", "a factor", offsetof(two_params, gain), PF_PARAM_FLOAT, .def = 1, .min = 0, .max = 10},
    {"mode", "a mode", offsetof(two_params, mode), PF_PARAM_INT, .def = 2, .min = 0, .max = 4}};

static pf_stage_desc point_stage(void)
{
    pf_stage_desc d = {.size = PF_STAGE_DESC_SIZE,
                       .name = "t_point",
                       .doc = "a point stage",
                       .kind = PF_STAGE_POINT,
                       .n_inputs = 1,
                       .params_size = sizeof(two_params),
                       .params = good_table,
                       .n_params = 2,
                       .point_row = point_row,
                       .point_cuda = run};
    return d;
}

static const char *const columns[] = {"r", "g", "b", "a", NULL};

static pf_stage_desc reduce_stage(int reduce_sum)
{
    pf_stage_desc d = {.size = PF_STAGE_DESC_SIZE,
                       .name = "t_sum",
                       .doc = "a reduce stage",
                       .kind = PF_STAGE_REDUCE,
                       .n_inputs = 1,
                       .shape = colsum_shape,
                       .run_cpu = run,
                       .run_cuda = run,
                       .partial_len = colsum_len,
                       .combine = combine,
                       .columns = columns,
                       .reduce_sum = reduce_sum};
    return d;
}

/* ---- The cases ------------------------------------------------------------------------ */

static void test_sound(void)
{
    found fd = {0};
    pf_stage_desc d = point_stage();
    int errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    dump("sound point stage", &fd);
    CHECKF(errors == 0 && count_level(&fd, PF_CHECK_FAULT) == 0, "errors %d, faults %d", errors,
           count_level(&fd, PF_CHECK_FAULT));
    CHECK(find(&fd, "point_source", PF_CHECK_WARNING) >= 0); /* it cannot fuse */
    fd = (found){0};
    d = reduce_stage(PF_REDUCE_SUM_COLUMNS);
    errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    dump("sound sum by columns", &fd);
    CHECKF(errors == 0 && fd.n == 0, "errors %d, findings %d", errors, fd.n);
}

/* Many faults: all reported, in field order, errors counted. */
static const pf_param_desc bad_table[] = {
    {"gain", NULL, offsetof(two_params, gain), PF_PARAM_FLOAT, .def = 25, .min = 0, .max = 10},
    {"gain", "again", offsetof(two_params, mode), PF_PARAM_INT, .def = 1, .min = 0, .max = 4},
    {"mode", "overlaps gain", offsetof(two_params, gain), PF_PARAM_INT, .def = 1, .min = 0,
     .max = 4},
    {"arr", "an array past the struct", 8, PF_PARAM_FLOAT_ARRAY, .count = 2, .min = 0, .max = 1},
    {"pick", "an enum", offsetof(two_params, mode), PF_PARAM_ENUM, .def = 3,
     .enum_names = (const char *const[]){"a", "b", NULL}},
    {"nan", "a NaN bound", offsetof(two_params, gain), PF_PARAM_FLOAT, .min = 0, .max = NAN}};

static void test_many_faults(void)
{
    pf_stage_desc d = point_stage();
    d.doc = NULL;
    d.n_inputs = 0;
    d.params = bad_table;
    d.n_params = PF_COUNTOF(bad_table);
    d.out_channels = 5;
    d.flags = 0x80 | PF_STAGE_PER_CHANNEL;
    d.reduce_sum = PF_REDUCE_SUM_ROWS;
    d.native_ok = native_ok; /* without run_native, on a point stage */
    found fd = {0};
    int errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    dump("many faults", &fd);
    static const struct {
        const char *field;
        pf_check_level level;
    } want[] = {{"doc", PF_CHECK_FAULT},
                {"n_inputs", PF_CHECK_ERROR},
                {"params[0].doc", PF_CHECK_FAULT},
                {"params[0].def", PF_CHECK_ERROR},
                {"params[1].name", PF_CHECK_ERROR},
                {"params[2].offset", PF_CHECK_FAULT},
                {"params[3].offset", PF_CHECK_ERROR},
                {"params[4].def", PF_CHECK_ERROR},
                {"params[5].max", PF_CHECK_ERROR},
                {"out_channels", PF_CHECK_ERROR},
                {"flags", PF_CHECK_ERROR},
                {"run_native", PF_CHECK_ERROR},
                {"reduce_sum", PF_CHECK_ERROR}};
    int last = -1;
    for (int k = 0; k < PF_COUNTOF(want); k++) {
        int at = find(&fd, want[k].field, want[k].level);
        CHECKF(at > last, "%s (level %d) missing or out of field order (at %d, after %d)",
               want[k].field, (int)want[k].level, at, last);
        if (at >= 0)
            last = at;
    }
    CHECKF(errors == count_level(&fd, PF_CHECK_ERROR) && errors >= 10,
           "pf_stage_check returned %d for %d errors", errors, count_level(&fd, PF_CHECK_ERROR));
    int at = find(&fd, "params[0].def", PF_CHECK_ERROR);
    CHECKF(at >= 0 && strcmp(fd.message[at], "t_point.gain: default 25 is outside its range "
                                             "[0, 10]") == 0,
           "message: %s", at >= 0 ? fd.message[at] : "none");
    CHECK(find(&fd, "check", PF_CHECK_ERROR) < 0); /* no plugin code on a broken table */

    /* Stopped at the first error, as the loader stops it: the fault before it, then it. */
    found first = {.stop_at_error = 1};
    errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &first);
    dump("stopped at the first error", &first);
    CHECKF(errors == 1 && first.n == 2 && strcmp(first.field[1], "n_inputs") == 0,
           "errors %d, findings %d, last %s", errors, first.n, first.n ? first.field[1] : "-");
}

static void test_reduce_sum(void)
{
    static const struct {
        pf_stage_kind kind;
        int reduce_sum, n_inputs, count_table;
        const char *field;
        pf_check_level level;
        const char *says;
    } cases[] = {
        {PF_STAGE_REDUCE, 3, 1, 0, "reduce_sum", PF_CHECK_ERROR, "declares reduce_sum 3"},
        {PF_STAGE_REDUCE, -1, 1, 0, "reduce_sum", PF_CHECK_ERROR, "declares reduce_sum -1"},
        {PF_STAGE_POINT, PF_REDUCE_SUM_COLUMNS, 1, 0, "reduce_sum", PF_CHECK_ERROR,
         "on a point stage"},
        {PF_STAGE_REDUCE, PF_REDUCE_SUM_ROWS, 1, 0, "reduce_sum", PF_CHECK_FAULT,
         "a 67x45 input gets a 4x67 table (partial_len 268), not 4x45"},
        {PF_STAGE_REDUCE, PF_REDUCE_SUM_COLUMNS, 1, 1, "reduce_sum", PF_CHECK_FAULT,
         "gets a 1x1 table"},
        {PF_STAGE_REDUCE, PF_REDUCE_SUM_COLUMNS, 2, 0, "reduce_sum", PF_CHECK_WARNING,
         "takes 2 inputs"},
    };
    for (int k = 0; k < PF_COUNTOF(cases); k++) {
        pf_stage_desc d = reduce_stage(cases[k].reduce_sum);
        if (cases[k].kind == PF_STAGE_POINT) {
            d = point_stage();
            d.reduce_sum = cases[k].reduce_sum;
        }
        d.n_inputs = cases[k].n_inputs;
        if (cases[k].count_table) {
            d.shape = count_shape;
            d.partial_len = count_len;
        }
        found fd = {0};
        int errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
        dump(cases[k].says, &fd);
        int at = find(&fd, cases[k].field, cases[k].level);
        CHECKF(at >= 0 && strstr(fd.message[at], cases[k].says), "case %d: no %s finding on %s", k,
               cases[k].says, cases[k].field);
        CHECKF(errors == (cases[k].level == PF_CHECK_ERROR), "case %d: %d errors", k, errors);
    }
}

/* Whatever a plugin's struct is too old to hold reads as zero: an ABI 1.2 struct's size
   ends before reduce_sum, so what lies past it is not read. */
static void test_old_sizes(void)
{
    pf_stage_desc d = point_stage();
    d.reduce_sum = 99;
    d.size = offsetof(pf_stage_desc, reduce_sum);
    found fd = {0};
    CHECK(pf_stage_check(&d, 2, collect, &fd) == 0 && find(&fd, "reduce_sum", PF_CHECK_ERROR) < 0);
    d.size = offsetof(pf_stage_desc, cost) - 1;
    fd = (found){0};
    CHECK(pf_stage_check(&d, 2, collect, &fd) == 1 && fd.n == 1 &&
          strcmp(fd.field[0], "size") == 0);
}

/* A field offset so large that offset + size wraps around is still outside the struct. */
static void test_huge_offset(void)
{
    static const pf_param_desc far[] = {
        {"gain", "a factor", (size_t)-4, PF_PARAM_FLOAT, .def = 1, .min = 0, .max = 10}};
    pf_stage_desc d = point_stage();
    d.params = far;
    d.n_params = 1;
    found fd = {0};
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 1 &&
          find(&fd, "params[0].offset", PF_CHECK_ERROR) >= 0);
}

/* min > max: unbounded for an ABI 1.0 plugin (a warning), an error from 1.1. */
static void test_swapped_range(void)
{
    static const pf_param_desc swapped[] = {{"gain", "a factor", offsetof(two_params, gain),
                                             PF_PARAM_FLOAT, .def = 1, .min = 10, .max = 0}};
    pf_stage_desc d = point_stage();
    d.params = swapped;
    d.n_params = 1;
    found fd = {0};
    CHECK(pf_stage_check(&d, 0, collect, &fd) == 0 &&
          find(&fd, "params[0].min", PF_CHECK_WARNING) >= 0);
    fd = (found){0};
    CHECK(pf_stage_check(&d, 1, collect, &fd) == 1 &&
          find(&fd, "params[0].min", PF_CHECK_ERROR) >= 0);
}

/* The stage's own code on its defaults: check() refusing them is an error. */
static void test_defaults(void)
{
    pf_stage_desc d = point_stage();
    d.check = refuse_all;
    found fd = {0};
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 1);
    int at = find(&fd, "check", PF_CHECK_ERROR);
    CHECKF(at >= 0 && strstr(fd.message[at], "t_point: with its default params: gain must be "
                                             "below mode"),
           "%s", at >= 0 ? fd.message[at] : "no finding on check");
}

/* A check() that fills err to the end without a terminator: the finding holds its text,
   cut at the buffer's end. */
static int refuse_unterminated(const void *params, char *err, size_t err_size)
{
    (void)params;
    memset(err, 'E', err_size);
    return 1;
}

/* Defaults the param's C type cannot hold are errors: the engine would store them by a
   conversion with no defined result. */
static void test_unrepresentable_defaults(void)
{
    static const pf_param_desc big_int[] = {{"mode", "a mode", offsetof(two_params, mode),
                                             PF_PARAM_INT, .def = 1e12, .min = PF_NO_MIN,
                                             .max = PF_NO_MAX}};
    static const pf_param_desc big_float[] = {{"gain", "a factor", offsetof(two_params, gain),
                                               PF_PARAM_FLOAT, .def = 1e300, .min = PF_NO_MIN,
                                               .max = PF_NO_MAX}};
    static const pf_param_desc fine[] = {{"mode", "a mode", offsetof(two_params, mode),
                                          PF_PARAM_INT, .def = -2147483648.0, .min = PF_NO_MIN,
                                          .max = PF_NO_MAX}};
    const pf_param_desc *tables[] = {big_int, big_float, fine};
    for (int k = 0; k < 3; k++) {
        pf_stage_desc d = point_stage();
        d.params = tables[k];
        d.n_params = 1;
        found fd = {0};
        int errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
        int at = find(&fd, "params[0].def", PF_CHECK_ERROR);
        if (k < 2)
            CHECKF(errors == 1 && at >= 0 && strstr(fd.message[at], "does not fit in"),
                   "default %g: %d errors: %s", tables[k][0].def, errors,
                   at >= 0 ? fd.message[at] : "no finding on def");
        else
            CHECKF(at < 0, "INT_MIN refused: %s", fd.message[at]);
    }
    pf_stage_desc d = point_stage();
    d.check = refuse_unterminated;
    found fd = {0};
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 1);
    int at = find(&fd, "check", PF_CHECK_ERROR);
    CHECKF(at >= 0 && strstr(fd.message[at], "EEEEEEEE"), "%s",
           at >= 0 ? fd.message[at] : "no finding on check");
}

/* The plugin descriptor: what makes its stage list unreadable ends the walk; the rest is
   reported whole. */
static void test_plugin(void)
{
    pf_stage_desc a = point_stage(), b = point_stage();
    const pf_stage_desc *list[] = {&a, NULL, &b};
    pf_plugin_desc pd = {sizeof pd, PF_ABI_VERSION, "plug.in", NULL, "", list, 3};
    found fd = {0};
    int readable = 0;
    int errors = pf_plugin_check(&pd, &readable, collect, &fd);
    dump("plugin with a dotted name, a NULL stage, two stages of one name", &fd);
    CHECKF(errors == 3 && readable, "errors %d, readable %d", errors, readable);
    CHECK(find(&fd, "name", PF_CHECK_ERROR) >= 0 && find(&fd, "stages[1]", PF_CHECK_ERROR) >= 0 &&
          find(&fd, "stages[2]", PF_CHECK_ERROR) >= 0 &&
          find(&fd, "version", PF_CHECK_WARNING) >= 0 && find(&fd, "doc", PF_CHECK_WARNING) >= 0);
    int at = find(&fd, "stages[2]", PF_CHECK_ERROR);
    CHECKF(at >= 0 && strstr(fd.message[at], "two stages are named 't_point' (stages[0] and "
                                             "stages[2])"),
           "%s", at >= 0 ? fd.message[at] : "no finding on stages[2]");

    static const struct {
        uint32_t size, abi;
        int n_stages;
        const char *field;
        int readable;
    } cases[] = {{sizeof(pf_plugin_desc), (PF_ABI_MAJOR + 1u) << 16, 1, "abi_version", 0},
                 {sizeof(pf_plugin_desc), PF_ABI_VERSION + 1, 1, "abi_version", 0},
                 {8, PF_ABI_VERSION, 1, "size", 0},
                 {sizeof(pf_plugin_desc), PF_ABI_VERSION, -1, "stages", 0}};
    for (int k = 0; k < PF_COUNTOF(cases); k++) {
        pf_plugin_desc q = {cases[k].size, cases[k].abi, "plug",           "1",
                            "doc",         list,         cases[k].n_stages};
        fd = (found){0};
        errors = pf_plugin_check(&q, &readable, collect, &fd);
        CHECKF(errors == 1 && fd.n == 1 && strcmp(fd.field[0], cases[k].field) == 0 &&
                   readable == cases[k].readable,
               "case %d: errors %d, findings %d (%s), readable %d", k, errors, fd.n,
               fd.n ? fd.field[0] : "-", readable);
    }
    fd = (found){0};
    CHECK(pf_plugin_check(NULL, &readable, collect, &fd) == 1 && !readable && fd.n == 1);
    pf_plugin_desc empty = {sizeof empty, PF_ABI_VERSION, "", "1", "doc", NULL, 0};
    fd = (found){0};
    errors = pf_plugin_check(&empty, &readable, collect, &fd);
    CHECKF(errors == 0 && readable && find(&fd, "name", PF_CHECK_FAULT) >= 0 &&
               find(&fd, "n_stages", PF_CHECK_FAULT) >= 0,
           "no name and no stages load (faults): errors %d, findings %d", errors, fd.n);
}

/* A table's names fall short of its shape with the defaults (a column list shorter than
   the columns, a row without a label): a fault each, naming the field, as the engine
   refuses to plan such a table. colsum_shape's table of the 67x45 sample is 4 x 67. */
static const char *no_label(const void *params, int row)
{
    return row < 10 ? "row" : NULL;
}

static void test_table_names(void)
{
    static const char *const two[] = {"r", "g", NULL};
    found fd = {0};
    pf_stage_desc d = reduce_stage(0);
    d.columns = two;
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 0);
    int i = find(&fd, "columns", PF_CHECK_FAULT);
    CHECKF(i >= 0 && strstr(fd.message[i], "4 columns, but columns names 2"), "%s",
           i >= 0 ? fd.message[i] : "no finding");
    fd = (found){0};
    d = reduce_stage(0);
    d.row_name = no_label;
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 0);
    i = find(&fd, "row_name", PF_CHECK_FAULT);
    CHECKF(i >= 0 && strstr(fd.message[i], "NULL for row 10 of 67"), "%s",
           i >= 0 ? fd.message[i] : "no finding");
    fd = (found){0};
    d = reduce_stage(0);
    d.columns = NULL; /* numbered columns: fine */
    CHECK(pf_stage_check(&d, PF_ABI_MINOR, collect, &fd) == 0 &&
          count_level(&fd, PF_CHECK_FAULT) == 0);
}

typedef struct t_radius {
    int r;
} t_radius;

static int radius_of(const void *params)
{
    return *(const int *)params;
}

/* A stencil_fn on params of another radius than 1, a separable_fn past its separable_max:
   declarations the engine ignores there, so warnings, each naming the radius. */
static void test_ignored_fn(void)
{
    static const char src[] = "typedef struct t_p { int r; } t_p;\n"
                              "PF_POINT_FN pf_float4 t_px(const t_p *p, const pf_float4 *n) "
                              "{ return n[4]; }\n";
    static const pf_param_desc rows[] = {PF_INT_PARAM(t_radius, r, 2, 0, 8, "radius")};
    pf_stage_desc d = {.size = PF_STAGE_DESC_SIZE,
                       .name = "t_st",
                       .doc = "a stencil",
                       .kind = PF_STAGE_STENCIL,
                       .n_inputs = 1,
                       .params_size = sizeof(t_radius),
                       .params = rows,
                       .n_params = 1,
                       .radius = radius_of,
                       .run_cpu = run,
                       .run_cuda = run,
                       .point_source = src,
                       .params_type = "t_p",
                       .stencil_fn = "t_px"};
    found fd = {0};
    int errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    int at = find(&fd, "stencil_fn", PF_CHECK_WARNING);
    CHECKF(errors == 0 && at >= 0 && strstr(fd.message[at], "radius() returns 2"),
           "errors %d, at %d", errors, at);
    if (errors || at < 0)
        dump("stencil_fn on radius 2", &fd);
    /* radius 1: nothing to say */
    static const pf_param_desc one[] = {PF_INT_PARAM(t_radius, r, 1, 0, 8, "radius")};
    d.params = one;
    memset(&fd, 0, sizeof fd);
    errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    CHECKF(errors == 0 && find(&fd, "stencil_fn", PF_CHECK_WARNING) < 0, "errors %d", errors);
    /* a separable_fn whose default radius 2 is past separable_max 1 */
    static const char sep[] = "typedef struct t_p { int r; } t_p;\n"
                              "PF_POINT_FN int t_sep(const t_p *p, int i, double *t, int *pm) "
                              "{ *t = 1; *pm = 0; return p->r; }\n";
    d.params = rows;
    d.stencil_fn = NULL;
    d.point_source = sep;
    d.separable_fn = "t_sep";
    d.separable_max = 1;
    memset(&fd, 0, sizeof fd);
    errors = pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
    at = find(&fd, "separable_max", PF_CHECK_WARNING);
    CHECKF(errors == 0 && at >= 0 && strstr(fd.message[at], "past separable_max 1"),
           "errors %d, at %d", errors, at);
}

/* reduce_finish (ABI 1.5): only with reduce_sum, with the source naming it. */
static void test_reduce_finish(void)
{
    static const char src[] = "typedef struct t_fp { int mean; } t_fp;\n"
                              "PF_POINT_FN double t_fin(const t_fp *p, double s, int r, int c, "
                              "int w, int h) { return s / w; }\n";
    const struct {
        int reduce_sum;
        const char *source, *fn, *field;
        pf_check_level level;
    } cases[] = {
        {PF_REDUCE_SUM_COLUMNS, src, "t_fin", NULL, PF_CHECK_ERROR},
        {0, src, "t_fin", "reduce_finish", PF_CHECK_ERROR},
        {PF_REDUCE_SUM_COLUMNS, NULL, "t_fin", "point_source", PF_CHECK_ERROR},
        {PF_REDUCE_SUM_COLUMNS, src, "t_other", "reduce_finish", PF_CHECK_FAULT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pf_stage_desc d = reduce_stage(cases[i].reduce_sum);
        d.point_source = cases[i].source;
        d.params_type = "t_fp";
        d.reduce_finish = cases[i].fn;
        found fd = {0};
        pf_stage_check(&d, PF_ABI_MINOR, collect, &fd);
        if (!cases[i].field) {
            CHECKF(find(&fd, "reduce_finish", PF_CHECK_ERROR) < 0 &&
                       find(&fd, "reduce_finish", PF_CHECK_FAULT) < 0,
                   "case %zu: a sound reduce_finish has findings", i);
            continue;
        }
        int at = find(&fd, cases[i].field, cases[i].level);
        CHECKF(at >= 0, "case %zu: no finding on %s at level %d", i, cases[i].field,
               (int)cases[i].level);
        if (at < 0)
            dump("reduce_finish", &fd);
    }
}

int main(void)
{
    test_ignored_fn();
    test_reduce_finish();
    test_plugin();
    test_sound();
    test_many_faults();
    test_reduce_sum();
    test_old_sizes();
    test_huge_offset();
    test_swapped_range();
    test_defaults();
    test_unrepresentable_defaults();
    test_table_names();
    return pf_test_done("test_stage_check");
}
