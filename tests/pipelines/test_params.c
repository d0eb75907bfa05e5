/* tests/pipelines/test_params.c: engine/params.c on its own, over a hand-made table
 * (no plugins, no engine): type and range rules, messages, arrays that fail leaving
 * the struct as it was, defaults, and formatting that reads back to the same value. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "testutil.h"

typedef struct tparams {
    float sigma;
    int radius;
    int on;
    int mode;
    float color[4];
    float free_f;
    int free_i;
} tparams;

static const char *const modes[] = {"bilinear", "nearest", "area", NULL};
static const char *const angles[] = {"90", "180", "270", NULL};
static const float color_def[4] = {0.25f, 0.5f, 0.75f, 1};

static const pf_param_desc table[] = {
    {"sigma", "", offsetof(tparams, sigma), PF_PARAM_FLOAT, 1.5, 0, 64, NULL, 0, NULL},
    {"radius", "", offsetof(tparams, radius), PF_PARAM_INT, 3, 0, 64, NULL, 0, NULL},
    {"on", "", offsetof(tparams, on), PF_PARAM_BOOL, 1, 0, 1, NULL, 0, NULL},
    {"mode", "", offsetof(tparams, mode), PF_PARAM_ENUM, 2, 1, 0, modes, 0, NULL},
    {"color", "", offsetof(tparams, color), PF_PARAM_FLOAT_ARRAY, 0, 0, 1, NULL, 4, color_def},
    {"free_f", "", offsetof(tparams, free_f), PF_PARAM_FLOAT, 0, 1, 0, NULL, 0, NULL},
    {"free_i", "", offsetof(tparams, free_i), PF_PARAM_INT, 0, 1, 0, NULL, 0, NULL},
    {"angle", "", offsetof(tparams, mode), PF_PARAM_ENUM, 0, 1, 0, angles, 0, NULL},
};
static const pf_stage_desc desc = {
    .name = "test", .params_size = sizeof(tparams), PF_PARAMS(table)};

static tparams P;
static char err[1024];

/* Sets name from JSON text; returns the status, the message in err. */
static int set(const char *name, const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!v) {
        fprintf(stderr, "bad test JSON %s: %s\n", text, jerr.text);
        exit(1);
    }
    err[0] = 0;
    const pf_param_desc *pd = pf_param_find(&desc, name);
    CHECKF(pd != NULL, "no row %s", name);
    int st = pd ? pf_param_set_json(pd, v, &P, err, sizeof err) : PF_PARAM;
    json_decref(v);
    return st;
}

static void bad(const char *name, const char *text, const char *frag)
{
    tparams before = P;
    int st = set(name, text);
    CHECKF(st == PF_PARAM, "%s = %s accepted", name, text);
    CHECKF(strstr(err, frag) != NULL, "%s = %s: no '%s' in '%s'", name, text, frag, err);
    CHECKF(memcmp(&before, &P, sizeof P) == 0, "%s = %s changed the struct", name, text);
}

static void good(const char *name, const char *text)
{
    CHECKF(set(name, text) == PF_OK, "%s = %s: %s", name, text, err);
}

static void test_defaults(void)
{
    memset(&P, 0x5a, sizeof P);
    pf_params_init(&desc, &P);
    CHECK(P.sigma == 1.5f && P.radius == 3 && P.on == 1 && P.mode == 0); /* angle wrote last */
    CHECK(memcmp(P.color, color_def, sizeof color_def) == 0);
    CHECK(P.free_f == 0 && P.free_i == 0);
    CHECK(pf_param_find(&desc, "sigma") == &table[0]);
    CHECK(pf_param_find(&desc, "Sigma") == NULL && pf_param_find(&desc, "") == NULL);
    CHECK(strcmp(pf_param_type_name(PF_PARAM_FLOAT), "float") == 0);
    CHECK(strcmp(pf_param_type_name(PF_PARAM_FLOAT_ARRAY), "float array") == 0);
    CHECK(strcmp(pf_param_type_name(PF_PARAM_ENUM), "enum") == 0);
}

static void test_rules(void)
{
    pf_params_init(&desc, &P);
    /* float: integer or real, finite, in range */
    good("sigma", "2");
    CHECK(P.sigma == 2);
    good("sigma", "0.25");
    CHECK(P.sigma == 0.25f);
    good("sigma", "64");
    good("sigma", "0");
    bad("sigma", "true", "expected a number, got true");
    bad("sigma", "\"2\"", "expected a number, got \"2\"");
    bad("sigma", "null", "got null");
    bad("sigma", "[1]", "got an array of 1");
    bad("sigma", "-2", "-2 is out of range [0, 64]");
    bad("sigma", "64.5", "64.5 is out of range [0, 64]");
    good("free_f", "-1e30");
    bad("free_f", "1e300", "too large for a 32-bit float");

    /* int: integers, and reals without a fraction (as JSON Schema's integer) */
    good("radius", "5");
    CHECK(P.radius == 5);
    good("radius", "6.0");
    CHECK(P.radius == 6);
    bad("radius", "2.5", "expected an integer, got 2.5");
    bad("radius", "\"3\"", "expected an integer, got \"3\"");
    bad("radius", "false", "expected an integer, got false");
    bad("radius", "-2", "-2 is out of range [0, 64]");
    bad("radius", "65", "65 is out of range [0, 64]");
    good("free_i", "-2147483648");
    CHECK(P.free_i == INT_MIN);
    bad("free_i", "2147483648", "does not fit");
    bad("free_i", "1e20", "does not fit");

    /* bool: true or false only */
    good("on", "false");
    CHECK(P.on == 0);
    good("on", "true");
    CHECK(P.on == 1);
    bad("on", "1", "expected true or false, got 1");
    bad("on", "\"true\"", "expected true or false, got \"true\"");

    /* enum: one of the names, as a string */
    good("mode", "\"nearest\"");
    CHECK(P.mode == 1);
    bad("mode", "\"nearst\"", "did you mean 'nearest'?");
    bad("mode", "\"nearst\"", "expected one of 'bilinear', 'nearest', 'area'");
    bad("mode", "\"cubic\"", "unknown value 'cubic'");
    bad("mode", "1", "expected a string, one of 'bilinear', 'nearest', 'area'; got the number 1");
    bad("angle", "90", "(write \"90\")");
    good("angle", "\"270\"");
    CHECK(P.mode == 2);

    /* float array: exactly count numbers, each in range; a bad one changes nothing */
    good("color", "[0, 0.5, 1, 1]");
    CHECK(P.color[0] == 0 && P.color[1] == 0.5f && P.color[2] == 1);
    bad("color", "[0, 0.5, 1]", "expected an array of 4 numbers, got 3");
    bad("color", "[0, 0.5, 1, 1, 1]", "got 5");
    bad("color", "0.5", "expected an array of 4 numbers, got 0.5");
    bad("color", "[0.1, 0.2, 2, 0.3]", "element [2]: 2 is out of range [0, 1]");
    bad("color", "[0.1, 0.2, 0.3, \"x\"]", "element [3]: expected a number, got \"x\"");
}

/* pf_param_format writes JSON that sets the same value again. */
static void test_format(void)
{
    pf_params_init(&desc, &P);
    char buf[256];
    static const char *const cases[][2] = {
        {"sigma", "0.1"},
        {"sigma", "1.5"},
        {"sigma", "33.333332"},
        {"radius", "7"},
        {"on", "false"},
        {"mode", "\"area\""},
        {"color", "[0.1, 0.2, 0.3, 1]"},
        {"free_f", "-1e+30"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        good(cases[i][0], cases[i][1]);
        const pf_param_desc *pd = pf_param_find(&desc, cases[i][0]);
        pf_param_format(pd, &P, buf, sizeof buf);
        CHECKF(strcmp(buf, cases[i][1]) == 0, "%s formats as %s, set from %s", cases[i][0], buf,
               cases[i][1]);
        tparams before = P;
        good(cases[i][0], buf);
        CHECKF(memcmp(&before, &P, sizeof P) == 0, "%s: %s does not read back", cases[i][0], buf);
    }
    /* a short buffer is cut, and terminated */
    pf_param_format(pf_param_find(&desc, "color"), &P, buf, 6);
    CHECK(strlen(buf) < 6);
    /* an enum index outside the names prints as a number */
    P.mode = 9;
    pf_param_format(pf_param_find(&desc, "mode"), &P, buf, sizeof buf);
    CHECK(strcmp(buf, "9") == 0);
}

int main(void)
{
    test_defaults();
    test_rules();
    test_format();
    return pf_test_done("test_params");
}
