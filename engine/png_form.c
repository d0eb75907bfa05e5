/* engine/png_form.c: the form a frame is written in (pipefuse/png.h's output forms):
 * palette and low-bit gray, the smallest lossless form, and pHYs through geometry.
 *
 * pf_png_pack looks at the pixels once (distinct colours up to 257, whether all are
 * opaque, gray, 8-bit values, levels of a low depth), picks the form and writes the
 * rows as PNG stores them; png.c's writer then hands those rows to libpng with the
 * matching IHDR, PLTE and tRNS. Palettes put their translucent entries first, so tRNS
 * is as short as it can be. Beyond 256 colours an explicit palette is a median cut
 * over a histogram of 5 bits a colour channel and 3 of alpha: each pixel takes the mean
 * of its box, a lossy form only when asked for.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipefuse/png.h"
#include "png_form.h"

#define PF_API __attribute__((visibility("default")))

/* PNG colour types */
enum { CT_GRAY = 0, CT_RGB = 2, CT_PALETTE = 3, CT_GA = 4, CT_RGBA = 6 };

static void set_err(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* ---- Names ---------------------------------------------------------------------------- */

static const char *const form_names[] = {"", "auto", "palette", "gray1", "gray2", "gray4"};

PF_API const char *pf_png_form_name(pf_png_form form)
{
    return form >= 0 && form <= PF_PNG_FORM_GRAY4 ? form_names[form] : "";
}

PF_API int pf_png_form_from_name(const char *name)
{
    for (int i = 1; name && i <= PF_PNG_FORM_GRAY4; i++)
        if (strcmp(name, form_names[i]) == 0)
            return i;
    return -1;
}

PF_API int pf_pipeline_output_png_form(const pf_pipeline *p, int i)
{
    if (!p || i < 0 || i >= p->n_outputs)
        return -1;
    const pf_output_decl *d = &p->outputs[i];
    const pf_stage_desc *desc = p->nodes[d->node].desc;
    return desc && desc->kind == PF_STAGE_REDUCE ? -1 : d->png_form;
}

/* ---- Geometry and pHYs ------------------------------------------------------------------ */

PF_API void pf_png_geometry_init(pf_png_geometry *g)
{
    memset(g, 0, sizeof *g);
    g->size = sizeof *g;
    g->scale_x = g->scale_y = 1;
}

PF_API void pf_png_geometry_then(pf_png_geometry *g, const pf_png_geometry *next)
{
    /* next's x runs along g's output y when it swaps: g's scales follow the axes */
    const double gx = next->swap ? g->scale_y : g->scale_x;
    const double gy = next->swap ? g->scale_x : g->scale_y;
    g->scale_x = gx * next->scale_x;
    g->scale_y = gy * next->scale_y;
    g->swap ^= next->swap != 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

PF_API int pf_png_meta_phys(const pf_png_meta *meta, const pf_png_geometry *g, int w, int h,
                            unsigned char data[9])
{
    const void *d = NULL;
    size_t size = 0;
    int found = 0;
    for (int i = 0; i < pf_png_meta_count(meta) && !found; i++) {
        const char *name = pf_png_meta_chunk(meta, i, &d, &size);
        found = name && memcmp(name, "pHYs", 4) == 0 && size == 9 && d;
    }
    if (!found)
        return 0;
    memcpy(data, d, 9);
    if (!g) {
        pf_png_source src;
        pf_png_meta_source(meta, &src);
        return src.width == w && src.height == h;
    }
    const double px = be32(data), py = be32(data + 4);
    const double x = floor((g->swap ? py : px) * g->scale_x + 0.5);
    const double y = floor((g->swap ? px : py) * g->scale_y + 0.5);
    if (!(x >= 1 && x <= 2147483647.0 && y >= 1 && y <= 2147483647.0))
        return 0;
    put_be32(data, (uint32_t)x);
    put_be32(data + 4, (uint32_t)y);
    return 1;
}

/* ---- Looking at the pixels -------------------------------------------------------------- */

/* A pixel as 8-bit RGBA in one word (16-bit samples taken as their 8-bit value), and a
   small open-addressing set of them: up to 257 distinct, each with its first index. */
#define SET_SLOTS 1024
typedef struct colour_set {
    uint32_t key[SET_SLOTS];
    int16_t idx[SET_SLOTS]; /* -1: empty */
    int n;
    uint32_t list[257]; /* in order of first appearance */
} colour_set;

static void set_init(colour_set *s)
{
    memset(s->idx, 0xff, sizeof s->idx);
    s->n = 0;
}

/* The index of k, adding it when new and there is room (add); -1 when absent. */
static int set_find(colour_set *s, uint32_t k, int add)
{
    uint32_t h = (k * 2654435761u) >> 22; /* 10 bits */
    for (;; h = (h + 1) & (SET_SLOTS - 1)) {
        if (s->idx[h] < 0) {
            if (!add || s->n >= 257)
                return -1;
            s->key[h] = k;
            s->idx[h] = (int16_t)s->n;
            s->list[s->n] = k;
            return s->n++;
        }
        if (s->key[h] == k)
            return s->idx[h];
    }
}

typedef struct facts {
    int c, bits16;
    int can8;         /* every sample an 8-bit value (16-bit ones multiples of 257) */
    int opaque;       /* no alpha, or all at the maximum */
    int gray;         /* one or two channels, or r = g = b everywhere */
    int low;          /* gray samples all levels of 1, 2 or 4 bits: that depth; else 8 */
    int n;            /* distinct pixels, 257 meaning more than 256 */
    unsigned lowmask; /* 1: 1 bit fits, 2: 2 bits, 4: 4 bits (so far) */
} facts;

static unsigned sample(const pf_frame *f, const unsigned char *row, int x, int ch)
{
    return f->sample == PF_U16 ? ((const uint16_t *)row)[(size_t)x * f->channels + ch]
                               : row[(size_t)x * f->channels + ch];
}

/* Sample as 8 bits: exact for 8-bit values, rounded otherwise. */
static unsigned s8(const pf_frame *f, unsigned v)
{
    return f->sample == PF_U16 ? (v * 255u + 32767u) / 65535u : v;
}

static uint32_t key_at(const pf_frame *f, const unsigned char *row, int x)
{
    unsigned v[4];
    for (int ch = 0; ch < f->channels; ch++)
        v[ch] = s8(f, sample(f, row, x, ch));
    switch (f->channels) {
    case 1:
        return v[0] << 24 | v[0] << 16 | v[0] << 8 | 255u;
    case 2:
        return v[0] << 24 | v[0] << 16 | v[0] << 8 | v[1];
    case 3:
        return v[0] << 24 | v[1] << 16 | v[2] << 8 | 255u;
    default:
        return v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3];
    }
}

static void look_init(const pf_frame *f, colour_set *set, facts *k)
{
    k->c = f->channels;
    k->bits16 = f->sample == PF_U16;
    k->can8 = 1, k->opaque = 1, k->gray = 1; /* one or two channels are gray */
    k->lowmask = 7;
    set_init(set);
}

/* The facts of f's rows added to those of the rows before (look_init). */
static void look_rows(const pf_frame *f, colour_set *set, facts *k)
{
    const unsigned max = f->sample == PF_U16 ? 65535u : 255u;
    unsigned lowmask = k->lowmask;
    for (int y = 0; y < f->height; y++) {
        const unsigned char *row = (const unsigned char *)f->data + (size_t)y * f->pitch;
        for (int x = 0; x < f->width; x++) {
            for (int ch = 0; ch < f->channels; ch++) {
                unsigned v = sample(f, row, x, ch);
                if (k->bits16 && v % 257u)
                    k->can8 = 0;
            }
            if (f->channels == 2 || f->channels == 4)
                k->opaque &= sample(f, row, x, f->channels - 1) == max;
            if (f->channels >= 3 && k->gray) {
                unsigned r = sample(f, row, x, 0);
                k->gray = r == sample(f, row, x, 1) && r == sample(f, row, x, 2);
            }
            if (lowmask) {
                unsigned g = s8(f, sample(f, row, x, 0));
                lowmask &= (g % 255 ? 0 : 1) | (g % 85 ? 0 : 2) | (g % 17 ? 0 : 4);
            }
            if (set->n <= 256)
                set_find(set, key_at(f, row, x), 1);
        }
    }
    k->n = set->n;
    k->lowmask = lowmask;
    k->low = lowmask & 1 ? 1 : lowmask & 2 ? 2 : lowmask & 4 ? 4 : 8;
}

static void look(const pf_frame *f, colour_set *set, facts *k)
{
    look_init(f, set, k);
    look_rows(f, set, k);
}

/* ---- Packing ---------------------------------------------------------------------------- */

static int alloc_rows(pf_png_packed *p, int bpp, char *err, size_t err_size)
{
    p->row_bytes = ((size_t)p->width * (size_t)bpp + 7) / 8;
    p->pitch = p->row_bytes;
    p->rows = calloc(p->height ? (size_t)p->height : 1, p->pitch ? p->pitch : 1);
    if (!p->rows) {
        set_err(err, err_size, "out of memory packing a %dx%d PNG", p->width, p->height);
        return PF_NO_MEMORY;
    }
    return PF_OK;
}

/* Stores value v (depth bits) as pixel x of row. */
static void put(unsigned char *row, int depth, int x, unsigned v)
{
    if (depth == 16) {
        ((uint16_t *)row)[x] = (uint16_t)v; /* host order: libpng swaps */
    } else if (depth == 8) {
        row[x] = (unsigned char)v;
    } else {
        const int per = 8 / depth, shift = 8 - depth * (x % per + 1);
        row[x / per] |= (unsigned char)(v << shift);
    }
}

/* A direct (non-palette) form: channels gray or colour, alpha or not, depth. */
static int pack_direct(const pf_frame *f, int gray, int alpha, int depth, pf_png_packed *p,
                       char *err, size_t err_size)
{
    const int oc = (gray ? 1 : 3) + alpha;
    p->color_type = gray ? (alpha ? CT_GA : CT_GRAY) : (alpha ? CT_RGBA : CT_RGB);
    p->bit_depth = depth;
    int st = alloc_rows(p, oc * depth, err, err_size);
    if (st != PF_OK)
        return st;
    const unsigned max = f->sample == PF_U16 ? 65535u : 255u, lv = (1u << depth) - 1;
    for (int y = 0; y < f->height; y++) {
        const unsigned char *row = (const unsigned char *)f->data + (size_t)y * f->pitch;
        unsigned char *d = p->rows + (size_t)y * p->pitch;
        for (int x = 0; x < f->width; x++) {
            unsigned v[4];
            int n = 0;
            v[n++] = sample(f, row, x, 0);
            if (!gray) {
                v[n++] = sample(f, row, x, f->channels >= 3 ? 1 : 0);
                v[n++] = sample(f, row, x, f->channels >= 3 ? 2 : 0);
            }
            if (alpha)
                v[n++] =
                    f->channels == 2 || f->channels == 4 ? sample(f, row, x, f->channels - 1) : max;
            for (int ch = 0; ch < n; ch++) {
                /* to the depth: rounded half up (exact on levels and 8-bit values) */
                unsigned long long q = ((unsigned long long)2 * v[ch] * lv + max) / (2ull * max);
                put(d, depth, x * n + ch, depth == 16 && max == 65535u ? v[ch] : (unsigned)q);
            }
        }
    }
    return PF_OK;
}

static int depth_for(int n)
{
    return n <= 2 ? 1 : n <= 4 ? 2 : n <= 16 ? 4 : 8;
}

/* The palette of p from keys (n of them, RGBA words, translucent ones first). */
static void set_palette(pf_png_packed *p, const uint32_t *keys, int n)
{
    p->n_palette = n;
    p->n_trans = 0;
    for (int i = 0; i < n; i++) {
        p->palette[3 * i] = (unsigned char)(keys[i] >> 24);
        p->palette[3 * i + 1] = (unsigned char)(keys[i] >> 16);
        p->palette[3 * i + 2] = (unsigned char)(keys[i] >> 8);
        p->trans[i] = (unsigned char)keys[i];
        if ((keys[i] & 255u) != 255u)
            p->n_trans = i + 1;
    }
}

/* The rows as indices into set (every pixel's key in it), remapped through map. */
static int pack_indices(const pf_frame *f, colour_set *set, const int *map, pf_png_packed *p,
                        char *err, size_t err_size)
{
    p->color_type = CT_PALETTE;
    p->bit_depth = depth_for(p->n_palette);
    int st = alloc_rows(p, p->bit_depth, err, err_size);
    for (int y = 0; st == PF_OK && y < f->height; y++) {
        const unsigned char *row = (const unsigned char *)f->data + (size_t)y * f->pitch;
        unsigned char *d = p->rows + (size_t)y * p->pitch;
        for (int x = 0; x < f->width; x++)
            put(d, p->bit_depth, x, (unsigned)map[set_find(set, key_at(f, row, x), 0)]);
    }
    return st;
}

/* An exact palette of the distinct pixels in set: translucent entries first, each
   group in order of first appearance. */
static int pack_exact(const pf_frame *f, colour_set *set, pf_png_packed *p, char *err,
                      size_t err_size)
{
    uint32_t keys[256];
    int map[257], n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < set->n; i++)
            if (((set->list[i] & 255u) != 255u) == (pass == 0))
                map[i] = n, keys[n++] = set->list[i];
    set_palette(p, keys, n);
    return pack_indices(f, set, map, p, err, err_size);
}

/* The source's palette, where every pixel of set is in it: 1 and p packed; 0 when not. */
static int pack_source(const pf_frame *f, const pf_png_meta *meta, colour_set *set,
                       pf_png_packed *p, int *st, char *err, size_t err_size)
{
    pf_png_source src;
    if (!meta || (pf_png_meta_source(meta, &src), src.n_palette == 0) || set->n > 256)
        return 0;
    colour_set pal;
    set_init(&pal);
    uint32_t keys[256];
    for (int i = 0; i < src.n_palette; i++) {
        const unsigned a = i < src.n_trans ? src.trans[i] : 255u;
        keys[i] = (uint32_t)src.palette[3 * i] << 24 | (uint32_t)src.palette[3 * i + 1] << 16 |
                  (uint32_t)src.palette[3 * i + 2] << 8 | a;
        set_find(&pal, keys[i], 1);
    }
    int map[257];
    for (int i = 0; i < set->n; i++) {
        if (set_find(&pal, set->list[i], 0) < 0)
            return 0;
        for (int e = 0; e < src.n_palette; e++) /* a repeated entry: its first index */
            if (keys[e] == set->list[i]) {
                map[i] = e;
                break;
            }
    }
    p->n_palette = src.n_palette;
    memcpy(p->palette, src.palette, (size_t)src.n_palette * 3);
    p->n_trans = src.n_trans;
    memcpy(p->trans, src.trans, (size_t)src.n_trans);
    *st = pack_indices(f, set, map, p, err, err_size);
    return 1;
}

/* ---- Median cut, beyond 256 colours ------------------------------------------------------ */

#define MC_BINS (1u << 18) /* 5 bits of r, g, b, 3 of alpha */

typedef struct mc_bin {
    uint32_t count;
    uint64_t sum[4];
} mc_bin;

static uint32_t mc_index(uint32_t k)
{
    return (k >> 27) << 13 | ((k >> 19) & 31) << 8 | ((k >> 11) & 31) << 3 | ((k >> 5) & 7);
}

static unsigned mc_value(uint32_t b, int axis)
{
    return axis == 0   ? b >> 13
           : axis == 1 ? (b >> 8) & 31
           : axis == 2 ? (b >> 3) & 31
                       : (b & 7) * 4;
}

static int mc_cmp(const void *a, const void *b, void *axis)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const int ax = *(const int *)axis;
    unsigned vx = mc_value(x, ax), vy = mc_value(y, ax);
    return vx < vy ? -1 : vx > vy ? 1 : (x < y ? -1 : x > y);
}

typedef struct mc_box {
    int lo, hi; /* bins [lo, hi) of the list */
    uint64_t count;
    int axis;
    unsigned range;
} mc_box;

static void mc_measure(mc_box *b, const uint32_t *list, const mc_bin *bins)
{
    unsigned lo[4] = {99, 99, 99, 99}, hi[4] = {0, 0, 0, 0};
    b->count = 0;
    for (int i = b->lo; i < b->hi; i++) {
        for (int a = 0; a < 4; a++) {
            unsigned v = mc_value(list[i], a);
            lo[a] = v < lo[a] ? v : lo[a];
            hi[a] = v > hi[a] ? v : hi[a];
        }
        b->count += bins[list[i]].count;
    }
    b->range = 0, b->axis = 0;
    for (int a = 0; a < 4; a++)
        if (hi[a] - lo[a] > b->range)
            b->range = hi[a] - lo[a], b->axis = a;
}

static int pack_median_cut(const pf_frame *f, pf_png_packed *p, char *err, size_t err_size)
{
    mc_bin *bins = calloc(MC_BINS, sizeof *bins);
    uint32_t *list = malloc(MC_BINS * sizeof *list);
    int16_t *box_of = malloc(MC_BINS * sizeof *box_of);
    if (!bins || !list || !box_of) {
        free(bins), free(list), free(box_of);
        set_err(err, err_size, "out of memory quantising a %dx%d image", f->width, f->height);
        return PF_NO_MEMORY;
    }
    for (int y = 0; y < f->height; y++) {
        const unsigned char *row = (const unsigned char *)f->data + (size_t)y * f->pitch;
        for (int x = 0; x < f->width; x++) {
            uint32_t k = key_at(f, row, x);
            mc_bin *b = &bins[mc_index(k)];
            b->count++;
            for (int a = 0; a < 4; a++)
                b->sum[a] += (k >> (24 - 8 * a)) & 255u;
        }
    }
    int n = 0;
    for (uint32_t i = 0; i < MC_BINS; i++)
        if (bins[i].count)
            list[n++] = i;
    mc_box boxes[256];
    int nb = 1;
    boxes[0] = (mc_box){0, n, 0, 0, 0};
    mc_measure(&boxes[0], list, bins);
    while (nb < 256) { /* split the box of the widest range (most pixels at a tie) */
        int best = -1;
        for (int i = 0; i < nb; i++)
            if (boxes[i].hi - boxes[i].lo > 1 &&
                (best < 0 || boxes[i].range > boxes[best].range ||
                 (boxes[i].range == boxes[best].range && boxes[i].count > boxes[best].count)))
                best = i;
        if (best < 0)
            break;
        mc_box *b = &boxes[best];
        qsort_r(list + b->lo, (size_t)(b->hi - b->lo), sizeof *list, mc_cmp, &b->axis);
        uint64_t half = b->count / 2, acc = 0;
        int cut = b->lo + 1;
        for (int i = b->lo; i < b->hi - 1; i++) {
            acc += bins[list[i]].count;
            cut = i + 1;
            if (acc >= half)
                break;
        }
        boxes[nb] = (mc_box){cut, b->hi, 0, 0, 0};
        b->hi = cut;
        mc_measure(b, list, bins);
        mc_measure(&boxes[nb], list, bins);
        nb++;
    }
    /* each box's mean colour; translucent entries first */
    uint32_t keys[256];
    int order[256], m = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nb; i++) {
            uint64_t s[4] = {0, 0, 0, 0}, c = 0;
            for (int j = boxes[i].lo; j < boxes[i].hi; j++) {
                c += bins[list[j]].count;
                for (int a = 0; a < 4; a++)
                    s[a] += bins[list[j]].sum[a];
            }
            uint32_t k = 0;
            for (int a = 0; a < 4; a++)
                k |= (uint32_t)((s[a] + c / 2) / c) << (24 - 8 * a);
            if (((k & 255u) != 255u) != (pass == 0))
                continue;
            order[i] = m, keys[m++] = k;
        }
    for (int i = 0; i < nb; i++)
        for (int j = boxes[i].lo; j < boxes[i].hi; j++)
            box_of[list[j]] = (int16_t)order[i];
    set_palette(p, keys, m);
    p->color_type = CT_PALETTE;
    p->bit_depth = depth_for(m);
    int st = alloc_rows(p, p->bit_depth, err, err_size);
    for (int y = 0; st == PF_OK && y < f->height; y++) {
        const unsigned char *row = (const unsigned char *)f->data + (size_t)y * f->pitch;
        unsigned char *d = p->rows + (size_t)y * p->pitch;
        for (int x = 0; x < f->width; x++)
            put(d, p->bit_depth, x, (unsigned)box_of[mc_index(key_at(f, row, x))]);
    }
    free(bins), free(list), free(box_of);
    return st;
}

/* ---- Choosing ------------------------------------------------------------------------------ */

/* Bytes of image data before compression: rows with their filter byte, plus extra. */
static double raw_size(const pf_frame *f, int bpp, int extra)
{
    return (double)f->height * (double)(((size_t)f->width * (size_t)bpp + 7) / 8 + 1) + extra;
}

static int pack_auto(const pf_frame *f, const pf_png_meta *meta, colour_set *set, const facts *k,
                     pf_png_packed *p, char *err, size_t err_size)
{
    pf_png_source src = {0};
    if (meta)
        pf_png_meta_source(meta, &src);
    const int keep_kind = src.has_iccp; /* colour stays colour, gray stays gray */
    const int gray = keep_kind ? f->channels <= 2 : k->gray;
    const int alpha = !k->opaque;
    const int depth = !k->can8 ? 16 : gray && !alpha && k->low < 8 ? k->low : 8;
    const int oc = (gray ? 1 : 3) + alpha;
    double direct = raw_size(f, oc * depth, 0);
    int st = PF_OK;
    if (k->can8 && k->n <= 256 && !(keep_kind && f->channels <= 2)) {
        /* the source's palette when the pixels fit it, else an exact one */
        int n = k->n, nt = 0;
        if (src.n_palette) {
            pf_png_packed q = *p;
            if (pack_source(f, meta, set, &q, &st, err, err_size)) {
                if (st != PF_OK)
                    return st;
                if (raw_size(f, q.bit_depth, 3 * q.n_palette + q.n_trans) < direct) {
                    *p = q;
                    return PF_OK;
                }
                free(q.rows);
            }
        }
        for (int i = 0; i < set->n; i++)
            nt += (set->list[i] & 255u) != 255u;
        if (raw_size(f, depth_for(n), 3 * n + nt) < direct)
            return pack_exact(f, set, p, err, err_size);
    }
    const int same = depth == (f->sample == PF_U16 ? 16 : 8) && oc == f->channels;
    if (same)
        return PF_OK; /* the frame's own rows */
    return pack_direct(f, gray, alpha, depth, p, err, err_size);
}

PF_API void pf_png_packed_free(pf_png_packed *p)
{
    if (!p)
        return;
    free(p->rows);
    p->rows = NULL;
}

PF_API int pf_png_pack(const pf_frame *f, pf_png_form form, const pf_png_meta *meta,
                       pf_png_packed *out, char *err, size_t err_size)
{
    static const int ctypes[] = {CT_GRAY, CT_GA, CT_RGB, CT_RGBA};
    memset(out, 0, sizeof *out);
    if (!f || !f->data || f->width <= 0 || f->height <= 0 || f->channels < 1 || f->channels > 4 ||
        (f->sample != PF_U8 && f->sample != PF_U16)) {
        set_err(err, err_size, "pf_png_pack: not an 8- or 16-bit frame of 1-4 channels");
        return PF_INVALID_ARGUMENT;
    }
    out->width = f->width, out->height = f->height;
    out->bit_depth = f->sample == PF_U16 ? 16 : 8;
    out->color_type = ctypes[f->channels - 1];
    if (form == PF_PNG_FORM_FRAME)
        return PF_OK;
    if (form >= PF_PNG_FORM_GRAY1 && form <= PF_PNG_FORM_GRAY4) {
        const int bits = form == PF_PNG_FORM_GRAY1 ? 1 : form == PF_PNG_FORM_GRAY2 ? 2 : 4;
        if (f->channels != 1) {
            set_err(err, err_size,
                    "format gray%d takes a gray image (1 channel); this one has %d channels", bits,
                    f->channels);
            return PF_INVALID_ARGUMENT;
        }
        return pack_direct(f, 1, 0, bits, out, err, err_size);
    }
    if (form != PF_PNG_FORM_AUTO && form != PF_PNG_FORM_PALETTE) {
        set_err(err, err_size, "pf_png_pack: unknown form %d", (int)form);
        return PF_INVALID_ARGUMENT;
    }
    colour_set *set = malloc(sizeof *set);
    if (!set) {
        set_err(err, err_size, "out of memory looking at a %dx%d image", f->width, f->height);
        return PF_NO_MEMORY;
    }
    facts k;
    look(f, set, &k);
    int st;
    if (form == PF_PNG_FORM_AUTO)
        st = pack_auto(f, meta, set, &k, out, err, err_size);
    else if (k.n <= 256 && pack_source(f, meta, set, out, &st, err, err_size))
        ; /* the source's palette */
    else if (k.n <= 256)
        st = pack_exact(f, set, out, err, err_size);
    else
        st = pack_median_cut(f, out, err, err_size);
    free(set);
    if (st != PF_OK)
        pf_png_packed_free(out);
    return st;
}

/* ---- Surveys: auto's choice over bands ---------------------------------------------------- */

struct pf_png_survey {
    colour_set set;
    facts k;
    int width, height, channels;
    pf_sample sample;
};

PF_API int pf_png_survey_new(pf_png_survey **out)
{
    if (!out)
        return PF_INVALID_ARGUMENT;
    *out = calloc(1, sizeof **out);
    return *out ? PF_OK : PF_NO_MEMORY;
}

PF_API int pf_png_survey_rows(pf_png_survey *s, const pf_frame *band)
{
    if (!s || !band || !band->data || band->width <= 0 || band->height <= 0 || band->channels < 1 ||
        band->channels > 4 || (band->sample != PF_U8 && band->sample != PF_U16) ||
        (s->height &&
         (band->width != s->width || band->channels != s->channels || band->sample != s->sample)))
        return PF_INVALID_ARGUMENT;
    if (!s->height) {
        look_init(band, &s->set, &s->k);
        s->width = band->width, s->channels = band->channels, s->sample = band->sample;
    }
    look_rows(band, &s->set, &s->k);
    s->height += band->height;
    return PF_OK;
}

PF_API int pf_png_survey_auto_is_frame(const pf_png_survey *s, const pf_png_meta *meta)
{
    if (!s || !s->height)
        return 0;
    const facts *k = &s->k;
    const pf_frame f = {NULL, s->width, s->height, 0, s->sample, s->channels}; /* its size */
    pf_png_source src = {0};
    if (meta)
        pf_png_meta_source(meta, &src);
    /* pack_auto's choice, without the pixels */
    const int keep_kind = src.has_iccp;
    const int gray = keep_kind ? f.channels <= 2 : k->gray;
    const int alpha = !k->opaque;
    const int depth = !k->can8 ? 16 : gray && !alpha && k->low < 8 ? k->low : 8;
    const int oc = (gray ? 1 : 3) + alpha;
    if (k->can8 && k->n <= 256 && !(keep_kind && f.channels <= 2)) {
        if (src.n_palette) { /* pack_source's choice: every colour in the source's palette */
            int fits = 1;
            for (int i = 0; fits && i < s->set.n; i++) {
                int found = 0;
                for (int e = 0; !found && e < src.n_palette; e++) {
                    const unsigned a = e < src.n_trans ? src.trans[e] : 255u;
                    found = ((uint32_t)src.palette[3 * e] << 24 |
                             (uint32_t)src.palette[3 * e + 1] << 16 |
                             (uint32_t)src.palette[3 * e + 2] << 8 | a) == s->set.list[i];
                }
                fits = found;
            }
            if (fits && raw_size(&f, depth_for(src.n_palette), 3 * src.n_palette + src.n_trans) <
                            raw_size(&f, oc * depth, 0))
                return 0;
        }
        int nt = 0;
        for (int i = 0; i < s->set.n; i++)
            nt += (s->set.list[i] & 255u) != 255u;
        if (raw_size(&f, depth_for(k->n), 3 * k->n + nt) < raw_size(&f, oc * depth, 0))
            return 0;
    }
    return depth == (f.sample == PF_U16 ? 16 : 8) && oc == f.channels;
}

PF_API void pf_png_survey_free(pf_png_survey *s)
{
    free(s);
}
