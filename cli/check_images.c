/* cli/check_images.c: `pipefuse plugin check`, random numbers, the poisoned test images
   and their comparisons. */
#include "plugin_check.h"

/* ---- Random numbers and images ---------------------------------------------------------- */

uint32_t pc_rng_u32(pc *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (uint32_t)((c->rng * 2685821657736338717ull) >> 32);
}

double pc_rng_unit(pc *c)
{
    return pc_rng_u32(c) / 4294967296.0;
} /* [0, 1) */

int pc_rng_range(pc *c, int lo, int hi)
{
    return lo + (int)(pc_rng_u32(c) % (uint32_t)(hi - lo + 1));
}

void pc_fill_poison(void *p, size_t bytes)
{
    uint32_t v = PC_POISON;
    for (size_t i = 0; i + 4 <= bytes; i += 4)
        memcpy((char *)p + i, &v, 4);
}

int pc_is_poison_at(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v == PC_POISON;
}

void pc_img_poison(pc_img *m)
{
    pc_fill_poison(m->im.data, m->bytes);
}

int pc_img_new(pc_img *m, int w, int h)
{
    memset(m, 0, sizeof *m);
    size_t pitch = ((size_t)w * sizeof(pf_float4) + 48 + 63) / 64 * 64;
    void *p = NULL;
    if (w <= 0 || h <= 0 || posix_memalign(&p, 64, pitch * (size_t)h) != 0)
        return -1;
    m->im.data = p;
    m->im.width = w;
    m->im.height = h;
    m->im.pitch = pitch;
    m->bytes = pitch * (size_t)h;
    pc_img_poison(m);
    return 0;
}

void pc_img_free(pc_img *m)
{
    free(m->im.data);
    memset(m, 0, sizeof *m);
}

void pc_img_random(pc *c, pc_img *m)
{
    for (int y = 0; y < m->im.height; y++) {
        float *r = (float *)pf_image_row(&m->im, y);
        for (int i = 0; i < 4 * m->im.width; i++)
            r[i] = (float)pc_rng_unit(c);
    }
}

int pc_img_copy(pc_img *dst, const pc_img *src)
{
    if (pc_img_new(dst, src->im.width, src->im.height) != 0)
        return -1;
    memcpy(dst->im.data, src->im.data, src->bytes);
    return 0;
}

pf_frame pc_img_frame(const pc_img *m)
{
    pf_frame f = {m->im.data, m->im.width, m->im.height, m->im.pitch, PF_F32, 4};
    return f;
}

/* ---- Comparisons -------------------------------------------------------------------------- */

/* Whether a and b agree: bit for bit when tol < 0, else |a - b| <= tol * max(1, |a|),
   NaN matching NaN. */
static int same_value(float a, float b, double tol)
{
    if (tol < 0)
        return memcmp(&a, &b, sizeof a) == 0;
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (a == b)
        return 1;
    return fabs((double)a - b) <= tol * fmax(1.0, fabs((double)a));
}

static void note_diff(pc_diff *d, int x, int y, int ch, double a, double b)
{
    if (d->bad++ == 0) {
        d->x = x, d->y = y, d->ch = ch;
        d->a = a, d->b = b;
    }
}

/* Pixels [0, width) of rows [y0, y1) of a against b. */
pc_diff pc_img_compare(const pc_img *a, const pc_img *b, int y0, int y1, double tol)
{
    pc_diff d = {0};
    for (int y = y0; y < y1; y++) {
        const float *ra = (const float *)pf_image_row(&a->im, y);
        const float *rb = (const float *)pf_image_row(&b->im, y);
        for (int i = 0; i < 4 * a->im.width; i++, d.total++)
            if (!same_value(ra[i], rb[i], tol))
                note_diff(&d, i / 4, y, i % 4, ra[i], rb[i]);
    }
    return d;
}

pc_diff pc_table_compare(const double *a, const double *b, int rows, int cols, double tol)
{
    pc_diff d = {0};
    for (int i = 0; i < rows * cols; i++, d.total++) {
        int ok;
        if (tol < 0)
            ok = memcmp(&a[i], &b[i], sizeof(double)) == 0;
        else if (isnan(a[i]) || isnan(b[i]))
            ok = isnan(a[i]) && isnan(b[i]);
        else
            ok = a[i] == b[i] || fabs(a[i] - b[i]) <= tol * fmax(1.0, fabs(a[i]));
        if (!ok)
            note_diff(&d, i % cols, i / cols, 0, a[i], b[i]);
    }
    return d;
}

const char *pc_diff_text(const pc_diff *d, int table, char *buf, size_t size)
{
    static const char ch[] = "RGBA";
    if (table)
        snprintf(buf, size,
                 "%ld of %ld values differ; first at row %d, column %d: %.9g against %.9g", d->bad,
                 d->total, d->y, d->x, d->a, d->b);
    else
        snprintf(buf, size, "%ld of %ld values differ; first at (%d, %d) %c: %.9g against %.9g",
                 d->bad, d->total, d->x, d->y, ch[d->ch], d->a, d->b);
    return buf;
}
