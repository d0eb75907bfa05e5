/* engine/params.c: typed stage parameters. A stage's table rows are bound to fields of
 * its params struct with offsetof; this file fills those fields from defaults and from
 * JSON values, with the type and range rules of the pipeline format
 * (docs/pipeline-format.md). Messages carry no location: callers prefix it.
 */
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "pipefuse/tools.h"

#define FIELD(params, pd, T) ((T *)(void *)((char *)(params) + (pd)->offset))

size_t pf_param_bytes(const pf_param_desc *pd)
{
    switch (pd->type) {
    case PF_PARAM_FLOAT:
        return sizeof(float);
    case PF_PARAM_FLOAT_ARRAY:
        return sizeof(float) * (size_t)(pd->count > 0 ? pd->count : 0);
    default:
        return sizeof(int);
    }
}

void pf_params_init(const pf_stage_desc *d, void *params)
{
    memset(params, 0, d->params_size);
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *pd = &d->params[i];
        if (pd->offset + pf_param_bytes(pd) > d->params_size)
            continue; /* refused at plugin load; never write outside the struct */
        switch (pd->type) {
        case PF_PARAM_FLOAT:
            *FIELD(params, pd, float) = (float)pd->def;
            break;
        case PF_PARAM_INT:
        case PF_PARAM_BOOL:
        case PF_PARAM_ENUM:
            *FIELD(params, pd, int) = (int)pd->def;
            break;
        case PF_PARAM_FLOAT_ARRAY:
            for (int k = 0; k < pd->count; k++)
                FIELD(params, pd, float)[k] = pd->def_array ? pd->def_array[k] : (float)pd->def;
            break;
        }
    }
}

const pf_param_desc *pf_param_find(const pf_stage_desc *d, const char *name)
{
    for (int i = 0; i < d->n_params; i++)
        if (d->params[i].name && strcmp(d->params[i].name, name) == 0)
            return &d->params[i];
    return NULL;
}

const char *pf_param_type_name(pf_param_type t)
{
    switch (t) {
    case PF_PARAM_FLOAT:
        return "float";
    case PF_PARAM_INT:
        return "int";
    case PF_PARAM_BOOL:
        return "bool";
    case PF_PARAM_ENUM:
        return "enum";
    case PF_PARAM_FLOAT_ARRAY:
        return "float array";
    }
    return "unknown";
}

/* ---- Messages ------------------------------------------------------------------------- */

/* A real as a message shows it, looking like one: 2.0, not 2. */
static void describe_real(double x, char *buf, size_t size)
{
    char t[32];
    if (isfinite(x) && x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, size, "%.1f", x);
    else
        snprintf(buf, size, "%s", pf_number_text(x, 0, t, sizeof t));
}

/* A JSON value as a message shows it: 2.5, true, "text", an array of 3, an object. */
static void describe(const json_t *v, char *buf, size_t size)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        describe_real(json_real_value(v), buf, size);
        break;
    case JSON_STRING: {
        const char *s = json_string_value(v);
        if (strlen(s) > 40)
            snprintf(buf, size, "\"%.37s...\"", s);
        else
            snprintf(buf, size, "\"%s\"", s);
        break;
    }
    case JSON_TRUE:
        snprintf(buf, size, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, size, "false");
        break;
    case JSON_NULL:
        snprintf(buf, size, "null");
        break;
    case JSON_ARRAY:
        snprintf(buf, size, "an array of %zu", json_array_size(v));
        break;
    case JSON_OBJECT:
        snprintf(buf, size, "an object");
        break;
    }
}

static int errv(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int errv(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(err, err_size, fmt, ap);
    va_end(ap);
    return PF_PARAM;
}

static int bounded(const pf_param_desc *pd)
{
    return !(pd->min > pd->max);
}

static int out_of_range(const pf_param_desc *pd, double v, const char *what, char *err,
                        size_t err_size)
{
    char a[32], lo[32], hi[32];
    return errv(err, err_size, "%s%s is out of range [%s, %s]", what,
                pf_number_text(v, 0, a, sizeof a), pf_number_text(pd->min, 0, lo, sizeof lo),
                pf_number_text(pd->max, 0, hi, sizeof hi));
}

/* ---- Checking one value ---------------------------------------------------------------- */

/* A number x for a float row: finite, in range, a float. */
static int float_value(const pf_param_desc *pd, double x, const char *what, float *out, char *err,
                       size_t err_size)
{
    char got[64];
    if (!isfinite(x))
        return errv(err, err_size, "%sexpected a finite number, got %s", what,
                    pf_number_text(x, 0, got, sizeof got));
    if (bounded(pd) && (x < pd->min || x > pd->max))
        return out_of_range(pd, x, what, err, err_size);
    if (fabs(x) > FLT_MAX)
        return errv(err, err_size, "%s%s is too large for a 32-bit float", what,
                    pf_number_text(x, 0, got, sizeof got));
    *out = (float)x;
    return PF_OK;
}

/* A number for a float row (one element of an array row too); what prefixes messages. */
static int get_float(const pf_param_desc *pd, const json_t *v, const char *what, float *out,
                     char *err, size_t err_size)
{
    char got[64];
    if (!json_is_number(v)) {
        describe(v, got, sizeof got);
        return errv(err, err_size, "%sexpected a number, got %s", what, got);
    }
    return float_value(pd, json_number_value(v), what, out, err, err_size);
}

/* An integral number x for an int row: in range, an int. */
static int int_value(const pf_param_desc *pd, double x, int *out, char *err, size_t err_size)
{
    if (bounded(pd) && (x < pd->min || x > pd->max))
        return out_of_range(pd, x, "", err, err_size);
    if (x < INT_MIN || x > INT_MAX)
        return errv(err, err_size, "%.0f does not fit in a 32-bit int", x);
    *out = (int)x;
    return PF_OK;
}

/* A real for an int row: integral (2.0, 1e3 are integers, as in JSON Schema; 2.5 is not). */
static int real_int(const pf_param_desc *pd, double x, int *out, char *err, size_t err_size)
{
    if (!isfinite(x) || x != floor(x)) {
        char got[64];
        describe_real(x, got, sizeof got);
        return errv(err, err_size, "expected an integer, got %s", got);
    }
    return int_value(pd, x, out, err, err_size);
}

static int get_int(const pf_param_desc *pd, const json_t *v, int *out, char *err, size_t err_size)
{
    if (json_is_real(v))
        return real_int(pd, json_real_value(v), out, err, err_size);
    if (!json_is_integer(v)) {
        char got[64];
        describe(v, got, sizeof got);
        return errv(err, err_size, "expected an integer, got %s", got);
    }
    json_int_t n = json_integer_value(v);
    if (bounded(pd) && (n < pd->min || n > pd->max)) { /* a JSON integer as written */
        char lo[32], hi[32];
        return errv(err, err_size, "%" JSON_INTEGER_FORMAT " is out of range [%s, %s]", n,
                    pf_number_text(pd->min, 0, lo, sizeof lo),
                    pf_number_text(pd->max, 0, hi, sizeof hi));
    }
    return int_value(pd, (double)n, out, err, err_size);
}

int pf_param_enum_count(const pf_param_desc *pd)
{
    int n = 0;
    while (pd->enum_names && pd->enum_names[n])
        n++;
    return n;
}

/* "'bilinear', 'nearest', 'area'" */
static void enum_list(const pf_param_desc *pd, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; pd->enum_names && pd->enum_names[i] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", pd->enum_names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static int get_enum(const pf_param_desc *pd, const json_t *v, int *out, char *err, size_t err_size)
{
    char names[1024], got[64];
    int n = pf_param_enum_count(pd);
    enum_list(pd, names, sizeof names);
    if (!json_is_string(v)) {
        describe(v, got, sizeof got);
        /* rotate's angle is "90": say how to write it when a bare 90 was given */
        if (json_is_integer(v))
            for (int i = 0; i < n; i++)
                if (strcmp(got, pd->enum_names[i]) == 0)
                    return errv(err, err_size,
                                "expected a string, one of %s; got the number %s (write "
                                "\"%s\")",
                                names, got, got);
        return errv(err, err_size, "expected a string, one of %s; got %s%s", names,
                    json_is_number(v) ? "the number " : "", got);
    }
    const char *s = json_string_value(v);
    for (int i = 0; i < n; i++)
        if (strcmp(s, pd->enum_names[i]) == 0) {
            *out = i;
            return PF_OK;
        }
    const char *near = pf_closest(s, (const char *const *)pd->enum_names, n);
    if (near)
        return errv(err, err_size, "unknown value '%.40s'; expected one of %s; did you mean '%s'?",
                    s, names, near);
    return errv(err, err_size, "unknown value '%.40s'; expected one of %s", s, names);
}

int pf_param_set_json(const pf_param_desc *pd, const json_t *v, void *params, char *err,
                      size_t err_size)
{
    char got[64];
    if (!pd || !v || !params)
        return errv(err, err_size, "no value");
    switch (pd->type) {
    case PF_PARAM_FLOAT: {
        float f;
        int st = get_float(pd, v, "", &f, err, err_size);
        if (st == PF_OK)
            *FIELD(params, pd, float) = f;
        return st;
    }
    case PF_PARAM_INT:
    case PF_PARAM_ENUM: {
        int i = 0;
        int st = pd->type == PF_PARAM_INT ? get_int(pd, v, &i, err, err_size)
                                          : get_enum(pd, v, &i, err, err_size);
        if (st == PF_OK)
            *FIELD(params, pd, int) = i;
        return st;
    }
    case PF_PARAM_BOOL:
        if (!json_is_boolean(v)) {
            describe(v, got, sizeof got);
            return errv(err, err_size, "expected true or false, got %s", got);
        }
        *FIELD(params, pd, int) = json_is_true(v);
        return PF_OK;
    case PF_PARAM_FLOAT_ARRAY: {
        if (!json_is_array(v)) {
            describe(v, got, sizeof got);
            return errv(err, err_size, "expected an array of %d numbers, got %s", pd->count, got);
        }
        size_t n = json_array_size(v);
        if (n != (size_t)pd->count)
            return errv(err, err_size, "expected an array of %d numbers, got %zu", pd->count, n);
        /* check every element before storing any, so a bad array changes nothing */
        float tmp[256];
        float *vals = n <= 256 ? tmp : malloc(n * sizeof *vals);
        if (!vals)
            return errv(err, err_size, "out of memory");
        int st = PF_OK;
        for (size_t k = 0; k < n && st == PF_OK; k++) {
            char what[48];
            snprintf(what, sizeof what, "element [%zu]: ", k);
            st = get_float(pd, json_array_get(v, k), what, &vals[k], err, err_size);
        }
        if (st == PF_OK)
            memcpy(FIELD(params, pd, float), vals, n * sizeof *vals);
        if (vals != tmp)
            free(vals);
        return st;
    }
    }
    return errv(err, err_size, "parameter of unknown type %d", (int)pd->type);
}

int pf_param_set_real(const pf_param_desc *pd, double x, void *params, char *err, size_t err_size)
{
    if (!pd || !params)
        return errv(err, err_size, "no value");
    switch (pd->type) {
    case PF_PARAM_FLOAT: {
        float f;
        int st = float_value(pd, x, "", &f, err, err_size);
        if (st == PF_OK)
            *FIELD(params, pd, float) = f;
        return st;
    }
    case PF_PARAM_INT: {
        int i = 0;
        int st = real_int(pd, x, &i, err, err_size);
        if (st == PF_OK)
            *FIELD(params, pd, int) = i;
        return st;
    }
    default: { /* a number where another kind is wanted: the JSON path's refusal, as it words it */
        json_t *v = json_real(x);
        if (!v)
            return errv(err, err_size, "expected a finite number");
        int st = pf_param_set_json(pd, v, params, err, err_size);
        json_decref(v);
        return st;
    }
    }
}

/* ---- Formatting ------------------------------------------------------------------------ */

/* The shortest text that reads back as the same float. */
static int format_float(float f, char *buf, size_t size)
{
    char tmp[40];
    if (!isfinite(f))
        return snprintf(buf, size, "null");
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)f);
        if (strtof(tmp, NULL) == f)
            break;
    }
    return snprintf(buf, size, "%s", tmp);
}

void pf_param_format(const pf_param_desc *pd, const void *params, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    buf[0] = 0;
    const char *base = (const char *)params;
    switch (pd->type) {
    case PF_PARAM_FLOAT:
        format_float(*(const float *)(const void *)(base + pd->offset), buf, size);
        break;
    case PF_PARAM_INT:
        snprintf(buf, size, "%d", *(const int *)(const void *)(base + pd->offset));
        break;
    case PF_PARAM_BOOL:
        snprintf(buf, size, "%s",
                 *(const int *)(const void *)(base + pd->offset) ? "true" : "false");
        break;
    case PF_PARAM_ENUM: {
        int i = *(const int *)(const void *)(base + pd->offset);
        if (i >= 0 && i < pf_param_enum_count(pd))
            snprintf(buf, size, "\"%s\"", pd->enum_names[i]);
        else
            snprintf(buf, size, "%d", i);
        break;
    }
    case PF_PARAM_FLOAT_ARRAY: {
        const float *a = (const float *)(const void *)(base + pd->offset);
        size_t used = 0;
        for (int k = 0; k <= pd->count && used + 1 < size; k++) {
            int n;
            if (k == pd->count)
                n = snprintf(buf + used, size - used, "]");
            else {
                n = snprintf(buf + used, size - used, "%s", k ? ", " : "[");
                if (n >= 0 && used + (size_t)n < size)
                    n += format_float(a[k], buf + used + n, size - used - (size_t)n);
            }
            if (n < 0)
                break;
            used += (size_t)n;
        }
        break;
    }
    }
}
