/* tests/lib/testutil.c: the test harness's checks, data and files (see testutil.h). */
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pf_test_failures;

int pf_test_done(const char *name)
{
    if (pf_test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, pf_test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

void pf_rng_seed(pf_rng *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint32_t pf_rng_u32(pf_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

float pf_rng_float(pf_rng *r)
{
    return (float)(pf_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

int pf_rng_range(pf_rng *r, int lo, int hi)
{
    return lo + (int)(pf_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

static pf_image alloc_image(int w, int h)
{
    pf_image im;
    im.width = w;
    im.height = h;
    im.pitch = ((size_t)w + 3) * sizeof(pf_float4); /* deliberately not tight */
    im.data = malloc(im.pitch * (size_t)h);
    if (!im.data) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return im;
}

pf_image pf_test_image(pf_rng *r, int w, int h, float lo, float hi)
{
    pf_image im = alloc_image(w, h);
    for (int y = 0; y < h; y++) {
        float *row = (float *)pf_image_row(&im, y);
        for (size_t i = 0; i < im.pitch / sizeof(float); i++)
            row[i] = lo + (hi - lo) * pf_rng_float(r);
    }
    return im;
}

pf_image pf_test_image_poisoned(int w, int h)
{
    pf_image im = alloc_image(w, h);
    float *f = (float *)im.data;
    for (size_t i = 0; i < im.pitch / sizeof(float) * (size_t)h; i++)
        f[i] = NAN;
    return im;
}

int pf_test_image_unwritten(const pf_image *im, int y, size_t i0, size_t i1)
{
    const float *f = (const float *)pf_image_row(im, y);
    for (size_t i = i0; i < i1; i++)
        if (!isnan(f[i]))
            return 0;
    return 1;
}

void pf_test_image_free(pf_image *im)
{
    free(im->data);
    im->data = NULL;
}

double pf_test_image_maxdiff(const pf_image *a, const pf_image *b)
{
    if (a->width != b->width || a->height != b->height)
        return INFINITY;
    double m = 0;
    for (int y = 0; y < a->height; y++) {
        const float *ra = (const float *)pf_image_row(a, y);
        const float *rb = (const float *)pf_image_row(b, y);
        for (int i = 0; i < a->width * 4; i++) {
            if (isnan(ra[i]) || isnan(rb[i]))
                return INFINITY;
            double d = fabs((double)ra[i] - rb[i]);
            if (d > m)
                m = d;
        }
    }
    return m;
}

pf_engine *pf_test_engine(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    return pf_test_engine_with(&cfg);
}

void pf_test_quiet_log(void *user, int level, const char *msg)
{
    (void)user, (void)level, (void)msg;
}

pf_engine *pf_test_engine_with(pf_engine_config *cfg)
{
    cfg->use_env_path = 0;
    pf_engine *e = NULL;
    if (pf_engine_create(cfg, &e) != PF_OK) {
        fprintf(stderr, "engine%s%s: %s\n", cfg->plugin_path ? " with " : "",
                cfg->plugin_path ? cfg->plugin_path : "",
                e ? pf_engine_errmsg(e) : "out of memory");
        exit(1);
    }
    return e;
}

static pf_pipeline *set_backend(pf_pipeline *p, const char *name, const char *backend)
{
    if (backend && pf_pipeline_set_option(p, "backend", backend) != PF_OK) {
        fprintf(stderr, "%s: backend %s: %s\n", name, backend, pf_pipeline_errmsg(p));
        exit(1);
    }
    return p;
}

pf_pipeline *pf_test_load_string(pf_engine *e, const char *json, const char *name,
                                 const char *backend)
{
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(e, json, name, &p) != PF_OK) {
        fprintf(stderr, "%s: load: %s\n", name, pf_engine_errmsg(e));
        exit(1);
    }
    return set_backend(p, name, backend);
}

pf_pipeline *pf_test_load_file(pf_engine *e, const char *path, const char *backend)
{
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_file(e, path, &p) != PF_OK) {
        fprintf(stderr, "%s: load: %s\n", path, pf_engine_errmsg(e));
        exit(1);
    }
    return set_backend(p, path, backend);
}

const char *pf_test_tmpdir(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/Testing/tmp-%s", PF_BINARY_DIR, name);
    char cmd[sizeof path + 64];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    if (pf_test_remove_tree(path) != 0 || system(cmd) != 0) {
        fprintf(stderr, "cannot make %s\n", path);
        exit(1);
    }
    return path;
}

int pf_test_remove_tree(const char *path)
{
    char cmd[4200];
    if (strchr(path, '\'') || snprintf(cmd, sizeof cmd, "rm -rf '%s'", path) >= (int)sizeof cmd)
        return -1;
    return system(cmd);
}

void *pf_test_read_file(const char *path, size_t *size)
{
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    void *buf = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc(n > 0 ? (size_t)n : 1) : NULL;
    if (!buf) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    *size = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

void pf_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if ((f && fclose(f) != 0) || !ok) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

uint32_t pf_test_get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void pf_test_put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void pf_test_frame_random(pf_rng *r, pf_frame *f)
{
    for (int y = 0; y < f->height; y++) {
        char *row = (char *)f->data + (size_t)y * f->pitch;
        for (int i = 0; i < f->width * f->channels; i++) {
            if (f->sample == PF_U8)
                ((uint8_t *)row)[i] = (uint8_t)pf_rng_u32(r);
            else if (f->sample == PF_U16)
                ((uint16_t *)row)[i] = (uint16_t)pf_rng_u32(r);
            else
                ((float *)row)[i] = pf_rng_float(r);
        }
    }
}

unsigned pf_test_frame_sample(const pf_frame *f, int x, int y, int c)
{
    const char *row = (const char *)f->data + (size_t)y * f->pitch;
    size_t i = (size_t)x * (size_t)f->channels + (size_t)c;
    return f->sample == PF_U16 ? ((const uint16_t *)row)[i] : ((const uint8_t *)row)[i];
}

long pf_test_frame_mismatches(const pf_frame *a, const pf_frame *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample)
        return -1;
    long n = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            for (int c = 0; c < a->channels; c++)
                n += pf_test_frame_sample(a, x, y, c) != pf_test_frame_sample(b, x, y, c);
    return n;
}

double pf_test_frame_diff(const pf_frame *a, const pf_frame *b, int *at_x, int *at_y)
{
    double m = 0;
    for (int y = 0; y < a->height; y++) {
        const char *ra = (const char *)a->data + (size_t)y * a->pitch;
        const char *rb = (const char *)b->data + (size_t)y * b->pitch;
        for (int i = 0; i < a->width * a->channels; i++) {
            double d;
            if (a->sample == PF_U8)
                d = fabs((double)((const unsigned char *)ra)[i] - ((const unsigned char *)rb)[i]);
            else if (a->sample == PF_U16)
                d = fabs((double)((const unsigned short *)ra)[i] -
                         ((const unsigned short *)rb)[i]) /
                    257.0;
            else
                d = fabs((double)((const float *)ra)[i] - ((const float *)rb)[i]) * 255.0;
            if (isnan(d))
                d = INFINITY;
            if (d > m) {
                m = d;
                if (at_x)
                    *at_x = i / a->channels;
                if (at_y)
                    *at_y = y;
            }
        }
    }
    return m;
}

void pf_test_store_values(float *v, size_t cap)
{
    static const float special[] = {NAN,   -NAN,   INFINITY, -INFINITY, 0.0f,   -0.0f,
                                    1.0f,  -1.0f,  2.0f,     1e30f,     -1e30f, 1e-40f,
                                    1e-7f, -1e-7f, 0.5f,     0.999999f};
    size_t n = 0;
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        v[n++] = special[i];
    for (int s = 0; s < 2; s++) {
        float scale = s ? 65535.0f : 255.0f;
        for (int k = -1; k <= (int)scale; k++) {
            float tie = ((float)k + 0.5f) / scale;
            uint32_t b;
            memcpy(&b, &tie, 4);
            for (int d = -4; d <= 4 && n < cap; d++) {
                uint32_t u = b + (uint32_t)d;
                memcpy(&v[n++], &u, 4);
            }
        }
    }
    for (size_t i = n; i < cap; i++)
        v[i] = (float)(i % 1000) / 999.0f * 1.2f - 0.1f;
}

void pf_test_difference_chain(char *json, size_t cap, int k)
{
    size_t o = 0;
#define PUT(...)                                                                                   \
    (o += (size_t)snprintf(o < cap ? json + o : NULL, o < cap ? cap - o : 0, __VA_ARGS__))
    PUT("{\"pipefuse\":1,\"inputs\":[");
    for (int i = 0; i <= k; i++)
        PUT("%s\"a%d\"", i ? "," : "", i);
    PUT("],\"stages\":[");
    for (int i = 0; i < k; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "s%d" : "a0", i - 1);
        PUT("%s{\"id\":\"s%d\",\"op\":\"difference\",\"inputs\":[\"%s\",\"a%d\"]}", i ? "," : "", i,
            prev, i + 1);
    }
    PUT("],\"outputs\":{");
    for (int i = 0; i < k; i++)
        PUT("%s\"o%d\":\"s%d\"", i ? "," : "", i, i);
    PUT("}}");
#undef PUT
}
