/* cli/check_regions.c: `pipefuse plugin check`, calling a stage directly, as the CPU executor
   does: rows in pieces, bands, a stencil's radius, a reduce's partials. */
#include "plugin_check.h"

/* ---- Calling a stage directly, as the CPU executor does ----------------------------------------- */

typedef struct pc_scratch {
    unsigned char *p;
    size_t size;
} pc_scratch;

/* size bytes of poisoned scratch and PC_GUARD guard bytes after them. */
static int scratch_new(pc_scratch *s, size_t size)
{
    void *p = NULL;
    s->p = NULL;
    s->size = size;
    if (size > ((size_t)1 << 34) || posix_memalign(&p, 64, size + PC_GUARD) != 0)
        return -1;
    s->p = p;
    pc_fill_poison(s->p, size);
    memset(s->p + size, 0xa5, PC_GUARD);
    return 0;
}

static int scratch_guard_ok(const pc_scratch *s)
{
    for (size_t i = 0; i < PC_GUARD; i++)
        if (s->p[s->size + i] != 0xa5)
            return 0;
    return 1;
}

static size_t scratch_size_for(const pf_stage_desc *d, const void *params, int width, int rows)
{
    return d->scratch_bytes ? d->scratch_bytes(params, width, rows) : 0;
}

static int call_stage(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in,
                      const pf_image *out, int y0, int y1, pc_scratch *s, double *partial,
                      char *err, size_t err_size)
{
    pf_stage_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.params = params;
    a.in = in;
    a.n_in = n_in;
    if (out)
        a.out = *out;
    a.region.y0 = y0;
    a.region.y1 = y1;
    a.scratch = s && s->size ? s->p : NULL;
    a.scratch_size = s ? s->size : 0;
    a.partial = partial;
    a.err = err;
    a.err_size = err_size;
    err[0] = 0;
    int rc = d->run_cpu(&a);
    err[err_size - 1] = 0; /* a plugin may fill the buffer without a terminator */
    return rc;
}

/* Counts pixels of row y still poisoned (unwritten), and poison words of its padding
   that changed. */
static void row_state(const pc_img *m, int y, int *unwritten, int *padding)
{
    const unsigned char *r = (const unsigned char *)pf_image_row(&m->im, y);
    size_t data = (size_t)m->im.width * sizeof(pf_float4);
    for (size_t i = 0; i < data; i += 4)
        *unwritten += pc_is_poison_at(r + i);
    for (size_t i = data; i + 4 <= m->im.pitch; i += 4)
        *padding += !pc_is_poison_at(r + i);
}

static int row_untouched(const pc_img *m, int y)
{
    const unsigned char *r = (const unsigned char *)pf_image_row(&m->im, y);
    for (size_t i = 0; i + 4 <= m->im.pitch; i += 4)
        if (!pc_is_poison_at(r + i))
            return 0;
    return 1;
}

/* A random split of rows [0, rows) into at most max bands of 1 to rows / 4 rows:
   band b is [y0s[b], y0s[b + 1]); returns the count. y0s holds max + 1 entries. */
static int make_bands(pc *c, int rows, int *y0s, int max)
{
    int n = 0, top = rows / 4 > 1 ? rows / 4 : 1;
    for (int y = 0; y < rows; n++) {
        y0s[n] = y;
        if (n == max - 1) { /* the last band takes the rest */
            n++;
            break;
        }
        y += pc_rng_range(c, 1, top);
    }
    y0s[n] = rows;
    return n;
}

static int inputs_unchanged(const pc_img *in, const pc_img *copy, int n_in)
{
    for (int k = 0; k < n_in; k++)
        if (memcmp(in[k].im.data, copy[k].im.data, in[k].bytes) != 0)
            return 0;
    return 1;
}

static const char *const fix_region =
    "write only the rows a->region.y0 .. a->region.y1 - 1 of a->out: the engine runs other "
    "bands of the same image at the same time";
static const char *const fix_padding =
    "write only x in [0, a->out.width) of a row; rows are a->out.pitch bytes apart and the "
    "bytes past the width belong to nobody";
static const char *const fix_unwritten =
    "write every pixel of every row of the region: outputs are not cleared beforehand";
static const char *const fix_banding =
    "compute each output row from the inputs (and the scratch of this call) only, never "
    "from output rows or state left by another band";
static const char *const fix_inputs =
    "never write to a->in: inputs are shared with other stages that run at the same time";
static const char *const fix_scratch =
    "make scratch_bytes(params, width, rows) return what a band of that many rows needs";

/* Stencil and resample stages: bands against the whole image, writes outside bands,
   unwritten pixels, scratch overruns, input writes, and a stencil's radius. */
void pc_check_regions(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                      pc_img *in, int n_in)
{
    pf_image ims[PF_MAX_INPUTS];
    pf_shape ins[PF_MAX_INPUTS], os = {in[0].im.width, in[0].im.height};
    pc_img copy[PF_MAX_INPUTS], whole = {0}, band = {0}, assembled = {0};
    pc_scratch s = {0};
    char err[1024] = "", text[512];
    int nk = 0, y0s[65];
    for (int k = 0; k < n_in; k++) {
        ims[k] = in[k].im;
        ins[k].width = in[k].im.width;
        ins[k].height = in[k].im.height;
    }
    pc_doing("stage %s: shape() with %s", d->name, set);
    if (d->kind == PF_STAGE_RESAMPLE && d->shape(ps->st, ins, &os, err, sizeof err) != 0) {
        err[sizeof err - 1] = 0;
        skip(c, "regions (%s): shape() refuses a %dx%d input: %s", set, ins[0].width, ins[0].height,
             err);
        return;
    }
    if (os.width <= 0 || os.height <= 0 || os.width > PC_MAX_SIDE || os.height > PC_MAX_SIDE) {
        skip(c, "regions (%s): output shape %dx%d is not checked directly", set, os.width,
             os.height);
        return;
    }
    for (nk = 0; nk < n_in; nk++)
        if (pc_img_copy(&copy[nk], &in[nk]) != 0)
            goto oom;
    if (pc_img_new(&whole, os.width, os.height) != 0 ||
        pc_img_new(&band, os.width, os.height) != 0 ||
        pc_img_new(&assembled, os.width, os.height) != 0 ||
        scratch_new(&s, scratch_size_for(d, ps->st, os.width, os.height)) != 0)
        goto oom;

    /* The whole image in one region. */
    pc_doing("stage %s: run_cpu on rows 0..%d (the whole image) with %s", d->name, os.height - 1,
             set);
    if (call_stage(d, ps->st, ims, n_in, &whole.im, 0, os.height, &s, NULL, err, sizeof err) != 0) {
        fail(c, "return 0 on success; on failure write the reason into a->err",
             "regions (%s): run_cpu failed on the whole image (rows 0..%d): %s", set, os.height - 1,
             err[0] ? err : "no message in a->err");
        goto out;
    }
    int unwritten = 0, padding = 0, bad = 0;
    for (int y = 0; y < os.height; y++)
        row_state(&whole, y, &unwritten, &padding);
    if (!scratch_guard_ok(&s))
        fail(c, fix_scratch,
             "regions (%s): wrote past the end of its scratch (%zu bytes for %d rows)", set, s.size,
             os.height),
            bad++;
    if (unwritten)
        fail(c, fix_unwritten, "regions (%s): left %d values of the whole image unwritten", set,
             unwritten),
            bad++;
    if (padding)
        fail(c, fix_padding, "regions (%s): wrote into the pitch padding past the rows' width",
             set),
            bad++;
    free(s.p);
    s.p = NULL;

    /* Bands, in reverse order, each into a freshly poisoned image. */
    int n = make_bands(c, os.height, y0s, 64);
    int outside = 0, out_lo = INT_MAX, out_hi = -1, bad_y0 = 0, bad_y1 = 0;
    int band_unwritten = 0, band_padding = 0, scratch_over = 0;
    for (int b = n - 1; b >= 0; b--) {
        int y0 = y0s[b], y1 = y0s[b + 1];
        pc_img_poison(&band);
        if (scratch_new(&s, scratch_size_for(d, ps->st, os.width, y1 - y0)) != 0)
            goto oom;
        pc_doing("stage %s: run_cpu on rows %d..%d with %s", d->name, y0, y1 - 1, set);
        if (call_stage(d, ps->st, ims, n_in, &band.im, y0, y1, &s, NULL, err, sizeof err) != 0) {
            fail(c, "a stage must run on any band of rows; return non-zero only for real errors",
                 "regions (%s): run_cpu failed on rows %d..%d: %s", set, y0, y1 - 1,
                 err[0] ? err : "no message in a->err");
            bad++;
            goto out;
        }
        scratch_over += !scratch_guard_ok(&s);
        free(s.p);
        s.p = NULL;
        for (int y = 0; y < os.height; y++) {
            if (y >= y0 && y < y1) {
                row_state(&band, y, &band_unwritten, &band_padding);
                memcpy(pf_image_row(&assembled.im, y), pf_image_row(&band.im, y), band.im.pitch);
            } else if (!row_untouched(&band, y)) {
                if (!outside++)
                    bad_y0 = y0, bad_y1 = y1;
                if (y < out_lo && y0 == bad_y0)
                    out_lo = y;
                if (y > out_hi && y0 == bad_y0)
                    out_hi = y;
            }
        }
    }
    if (outside)
        fail(c, fix_region,
             "regions (%s): writes outside its region: asked for rows %d..%d of %d, it also "
             "changed rows between %d and %d",
             set, bad_y0, bad_y1 - 1, os.height, out_lo, out_hi),
            bad++;
    if (scratch_over)
        fail(c, fix_scratch, "regions (%s): wrote past the end of its scratch on %d band(s)", set,
             scratch_over),
            bad++;
    if (band_unwritten && !unwritten)
        fail(c, fix_unwritten, "regions (%s): left %d values unwritten when run in %d bands", set,
             band_unwritten, n),
            bad++;
    if (band_padding && !padding)
        fail(c, fix_padding, "regions (%s): wrote into the pitch padding when run in bands", set),
            bad++;
    if (!outside && !band_unwritten && !unwritten) {
        pc_diff df = pc_img_compare(&whole, &assembled, 0, os.height, -1);
        if (df.bad)
            fail(c, fix_banding, "regions (%s): %d bands differ from the whole image: %s", set, n,
                 pc_diff_text(&df, 0, text, sizeof text)),
                bad++;
    }
    if (!inputs_unchanged(in, copy, n_in))
        fail(c, fix_inputs, "regions (%s): wrote into its input image", set), bad++;

    if (!bad)
        pass(c,
             "regions (%s): %d band%s, run in reverse order, write%s exactly their rows "
             "and match the whole image bit for bit; inputs untouched",
             set, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
    goto out;
oom:
    fail(c, NULL, "regions (%s): out of memory for a %dx%d check", set, os.width, os.height);
out:
    free(s.p);
    /* the inputs as they came, whatever the stage did to them: the checks after this one
       (random params, other stages) see the same images, and a write into them fails
       there too */
    for (int k = 0; k < nk; k++) {
        if (k < n_in && in[k].bytes == copy[k].bytes)
            memcpy(in[k].im.data, copy[k].im.data, in[k].bytes);
        pc_img_free(&copy[k]);
    }
    pc_img_free(&whole);
    pc_img_free(&band);
    pc_img_free(&assembled);
}

/* A stencil's radius: the centre pixel of an image just large enough to have pixels
   farther than the radius on every side must not change when only those change. The
   image is sized from the radius (so every declared radius up to PF_MAX_RADIUS is
   checked), and a radius outside [0, PF_MAX_RADIUS] fails: the engine refuses it. */
void pc_check_radius(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set, int n_in)
{
    int r = d->radius(ps->st);
    if (r < 0 || r > PF_MAX_RADIUS) {
        fail(c,
             "return the farthest distance the stage reads, 0 to PF_MAX_RADIUS; refuse params "
             "that need more in check()",
             "radius (%s): radius() returns %d; the engine allows 0 to %d (PF_MAX_RADIUS)", set, r,
             PF_MAX_RADIUS);
        return;
    }
    int side = 2 * r + 5, w = side + 2, h = side, cx = w / 2, cy = h / 2, made = 0;
    pc_img near[PF_MAX_INPUTS], far[PF_MAX_INPUTS], whole = {0}, row = {0};
    pf_image nim[PF_MAX_INPUTS], fim[PF_MAX_INPUTS];
    pc_scratch sw = {0}, sr = {0};
    char err[1024] = "";
    for (; made < n_in; made++) {
        if (pc_img_new(&near[made], w, h) != 0)
            break;
        pc_img_random(c, &near[made]);
        if (pc_img_copy(&far[made], &near[made]) != 0) {
            pc_img_free(&near[made]);
            break;
        }
        for (int y = 0; y < h; y++) {
            pf_float4 *px = pf_image_row(&far[made].im, y);
            for (int x = 0; x < w; x++)
                if (abs(x - cx) > r || abs(y - cy) > r)
                    px[x] = pf_f4((float)pc_rng_unit(c), (float)pc_rng_unit(c),
                                  (float)pc_rng_unit(c), (float)pc_rng_unit(c));
        }
        nim[made] = near[made].im;
        fim[made] = far[made].im;
    }
    if (made < n_in || pc_img_new(&whole, w, h) != 0 || pc_img_new(&row, w, h) != 0 ||
        scratch_new(&sw, scratch_size_for(d, ps->st, w, h)) != 0 ||
        scratch_new(&sr, scratch_size_for(d, ps->st, w, 1)) != 0) {
        fail(c, NULL, "radius (%s): out of memory for a %dx%d check", set, w, h);
        goto out;
    }
    pc_doing("stage %s: run_cpu on a %dx%d image for its radius %d", d->name, w, h, r);
    int rc = call_stage(d, ps->st, nim, n_in, &whole.im, 0, h, &sw, NULL, err, sizeof err);
    if (rc == 0) {
        pc_doing("stage %s: run_cpu on row %d with inputs changed beyond radius %d", d->name, cy,
                 r);
        rc = call_stage(d, ps->st, fim, n_in, &row.im, cy, cy + 1, &sr, NULL, err, sizeof err);
    }
    if (rc != 0) {
        fail(c, "a stage must run on any image and band of rows",
             "radius (%s): run_cpu failed on a %dx%d image: %s", set, w, h,
             err[0] ? err : "no message in a->err");
        goto out;
    }
    pf_float4 a = pf_image_row(&whole.im, cy)[cx], b = pf_image_row(&row.im, cy)[cx];
    if (memcmp(&a, &b, sizeof a) != 0)
        fail(c,
             "make radius() return the farthest distance the stage reads: the planner sizes "
             "halos from it",
             "reads beyond its declared radius %d (%s): pixel (%d, %d) of a %dx%d image changed "
             "from (%.6g, %.6g, %.6g, %.6g) to (%.6g, %.6g, %.6g, %.6g) when only inputs more "
             "than %d pixel%s away changed",
             r, set, cx, cy, w, h, a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, r, r == 1 ? "" : "s");
    else
        pass(c,
             "radius (%s): reads within its declared radius %d (a %dx%d image, all inputs "
             "farther away changed)",
             set, r, w, h);
out:
    free(sw.p);
    free(sr.p);
    pc_img_free(&whole);
    pc_img_free(&row);
    for (int k = 0; k < made; k++) {
        pc_img_free(&near[k]);
        pc_img_free(&far[k]);
    }
}

/* Point stages: point_row over pieces of rows, in reverse order, against whole rows. */
void pc_check_point_rows(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                         pc_img *in, int n_in)
{
    enum { G = 8 };
    const int w = in[0].im.width, h = in[0].im.height;
    pf_float4 *whole = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    pf_float4 *piece = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    pf_float4 *assembled = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    int *starts = malloc(sizeof(int) * (size_t)(w + 1));
    pc_img copy[PF_MAX_INPUTS];
    int nk = 0, outside = 0, unwritten = 0, differ = 0, dx = 0, dy = 0;
    size_t rowb = sizeof(pf_float4) * (size_t)(w + 2 * G);
    for (nk = 0; nk < n_in; nk++)
        if (pc_img_copy(&copy[nk], &in[nk]) != 0)
            break;
    if (!whole || !piece || !assembled || !starts || nk < n_in) {
        fail(c, NULL, "point rows (%s): out of memory", set);
        goto out;
    }
    const int rows[3] = {0, h / 2, h - 1};
    for (int ri = 0; ri < 3; ri++) {
        int y = rows[ri];
        const pf_float4 *ptr[PF_MAX_INPUTS];
        for (int k = 0; k < n_in; k++)
            ptr[k] = pf_image_row(&in[k].im, y);
        pc_fill_poison(whole, rowb);
        pc_doing("stage %s: point_row on row %d with %s", d->name, y, set);
        d->point_row(ps->st, ptr, n_in, whole + G, 0, w, y, w, h);
        for (int x = 0; x < w + 2 * G; x++) {
            int in_row = x >= G && x < G + w;
            int p = pc_is_poison_at(&whole[x].x) + pc_is_poison_at(&whole[x].y) +
                    pc_is_poison_at(&whole[x].z) + pc_is_poison_at(&whole[x].w);
            unwritten += in_row && p;
            outside += !in_row && p != 4;
        }
        /* Pieces of 1 to 16 pixels, last piece first. */
        int n = 0;
        for (int x = 0; x < w; n++) {
            starts[n] = x;
            x += pc_rng_range(c, 1, 16);
        }
        starts[n] = w;
        pc_fill_poison(assembled, rowb);
        for (int b = n - 1; b >= 0; b--) {
            int x0 = starts[b], cnt = starts[b + 1] - x0;
            if (cnt <= 0)
                continue;
            const pf_float4 *pp[PF_MAX_INPUTS];
            for (int k = 0; k < n_in; k++)
                pp[k] = ptr[k] + x0;
            pc_fill_poison(piece, rowb);
            pc_doing("stage %s: point_row on pixels %d..%d of row %d with %s", d->name, x0,
                     x0 + cnt - 1, y, set);
            d->point_row(ps->st, pp, n_in, piece + G + x0, x0, cnt, y, w, h);
            for (int x = 0; x < w + 2 * G; x++) {
                int mine = x >= G + x0 && x < G + x0 + cnt;
                int p = pc_is_poison_at(&piece[x].x) + pc_is_poison_at(&piece[x].y) +
                        pc_is_poison_at(&piece[x].z) + pc_is_poison_at(&piece[x].w);
                outside += !mine && p != 4;
                if (mine)
                    assembled[x] = piece[x];
            }
        }
        for (int x = 0; x < w && !differ; x++)
            if (memcmp(&whole[G + x], &assembled[G + x], sizeof(pf_float4)) != 0)
                differ = 1, dx = x, dy = y;
    }
    if (outside)
        fail(c, "write out[0] .. out[n - 1] only (use PF_POINT_ROW to define the row function)",
             "point rows (%s): point_row writes outside the n pixels it is given", set);
    if (unwritten)
        fail(c, "write every one of the n pixels",
             "point rows (%s): point_row leaves pixels unwritten", set);
    if (differ)
        fail(c,
             "compute pixel x0 + i from in[k][i] and the position (x0 + i, y) only (use "
             "PF_POINT_ROW to define the row function)",
             "point rows (%s): pieces of row %d differ from the whole row at x = %d", set, dy, dx);
    if (!inputs_unchanged(in, copy, n_in)) {
        fail(c, fix_inputs, "point rows (%s): wrote into its input image", set);
        outside++;
    }
    if (!outside && !unwritten && !differ)
        pass(c, "point rows (%s): pieces of rows, in reverse order, equal whole rows bit for bit",
             set);
out:
    for (int k = 0; k < nk; k++)
        pc_img_free(&copy[k]);
    free(whole);
    free(piece);
    free(assembled);
    free(starts);
}

/* ---- A point stage's PF_STAGE_PER_CHANNEL claim ------------------------------------------------ */

/* The draws of this check come from a generator of its own (seeded from --seed), so that
   declaring the flag or not leaves every other check's random images and params as they
   were. Values in [0, 1). */
static float per_channel_draw(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (float)((*s * 0x2545f4914f6cdd1dull) >> 40) / 16777216.0f;
}

static float channel_of(const pf_float4 *v, int ch)
{
    return ch == 0 ? v->x : ch == 1 ? v->y : ch == 2 ? v->z : v->w;
}

static void set_channel(pf_float4 *v, int ch, float f)
{
    *(ch == 0 ? &v->x : ch == 1 ? &v->y : ch == 2 ? &v->z : &v->w) = f;
}

/* The claim of PF_STAGE_PER_CHANNEL: output channel c of a pixel depends on channel c of
   its inputs and the params only. The CPU executor tabulates chains of such stages over
   the code values of each channel, so a stage that mixes channels or reads the position
   gives wrong pixels there while every other check passes. Each sampled pixel is run
   again with the other channels of its inputs replaced, then at another position; each
   output channel must keep its bits. */
void pc_check_per_channel(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                          int n_in)
{
    enum { SAMPLES = 64 };
    const int w = PC_W, h = PC_H;
    uint64_t s = (c->o.seed + 1) * 0x9e3779b97f4a7c15ull | 1;
    pf_float4 p[PF_MAX_INPUTS], q[PF_MAX_INPUTS], o, o2;
    const pf_float4 *pp[PF_MAX_INPUTS], *qq[PF_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        pp[k] = &p[k], qq[k] = &q[k];
    for (int i = 0; i < SAMPLES; i++) {
        int x = (int)(per_channel_draw(&s) * (float)w), y = (int)(per_channel_draw(&s) * (float)h);
        for (int k = 0; k < n_in; k++)
            p[k] = pf_f4(per_channel_draw(&s), per_channel_draw(&s), per_channel_draw(&s),
                         per_channel_draw(&s));
        pc_doing("stage %s: point_row on one pixel with %s (per-channel check)", d->name, set);
        d->point_row(ps->st, pp, n_in, &o, x, 1, y, w, h);
        for (int ch = 0; ch < 4; ch++) {
            /* The other channels changed, the position kept. */
            for (int k = 0; k < n_in; k++) {
                q[k] = pf_f4(per_channel_draw(&s), per_channel_draw(&s), per_channel_draw(&s),
                             per_channel_draw(&s));
                set_channel(&q[k], ch, channel_of(&p[k], ch));
            }
            d->point_row(ps->st, qq, n_in, &o2, x, 1, y, w, h);
            float a = channel_of(&o, ch), b = channel_of(&o2, ch);
            if (memcmp(&a, &b, sizeof a) != 0) {
                fail(c,
                     "drop PF_STAGE_PER_CHANNEL from .flags: it claims that output channel c "
                     "depends only on channel c of the inputs (brightness, gamma, levels), and "
                     "the CPU executor then runs the stage as a table per channel, giving "
                     "wrong pixels",
                     "per channel (%s): declares PF_STAGE_PER_CHANNEL, but channel %c of pixel "
                     "(%d, %d) changes (%.9g -> %.9g) when only the inputs' other channels do",
                     set, "rgba"[ch], x, y, (double)a, (double)b);
                return;
            }
        }
        /* The same inputs at another position. */
        int x2 = (x + 1 + (int)(per_channel_draw(&s) * (float)(w - 1))) % w;
        int y2 = (y + 1 + (int)(per_channel_draw(&s) * (float)(h - 1))) % h;
        d->point_row(ps->st, pp, n_in, &o2, x2, 1, y2, w, h);
        if (memcmp(&o, &o2, sizeof o) != 0) {
            fail(c,
                 "drop PF_STAGE_PER_CHANNEL from .flags: a stage that reads pos (a vignette, a "
                 "gradient) is not per channel, and the CPU executor would run it as a table "
                 "per channel, giving wrong pixels",
                 "per channel (%s): declares PF_STAGE_PER_CHANNEL, but the same input pixel "
                 "gives another output at (%d, %d) than at (%d, %d)",
                 set, x2, y2, x, y);
            return;
        }
    }
    pass(c,
         "per channel (%s): each output channel keeps its bits when the inputs' other channels "
         "and the position change, as PF_STAGE_PER_CHANNEL declares (%d pixels)",
         set, SAMPLES);
}

static int doubles_poisoned(const double *v, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += pc_is_poison_at(&v[i]) && pc_is_poison_at((const char *)&v[i] + 4);
    return (int)bad;
}

/* Reduce stages: banded partials combined against one whole partial; a partial reads
   only its band's rows; buffers are not overrun; inputs untouched. */
void pc_check_reduce(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                     pc_img *in, int n_in)
{
    pf_image ims[PF_MAX_INPUTS];
    pf_shape ins[PF_MAX_INPUTS], ts;
    pc_img copy[PF_MAX_INPUTS];
    pc_scratch s = {0};
    double *whole = NULL, *parts = NULL, *res1 = NULL, *resn = NULL, *lone = NULL;
    char err[1024] = "", text[512];
    int nk = 0, bad = 0, y0s[65];
    const int h = in[0].im.height, w = in[0].im.width;
    for (int k = 0; k < n_in; k++) {
        ims[k] = in[k].im;
        ins[k].width = w;
        ins[k].height = h;
    }
    pc_doing("stage %s: shape() and partial_len() with %s", d->name, set);
    if (d->shape(ps->st, ins, &ts, err, sizeof err) != 0) {
        err[sizeof err - 1] = 0;
        skip(c, "regions (%s): shape() refuses a %dx%d input: %s", set, w, h, err);
        return;
    }
    size_t len = d->partial_len(ps->st, ins), cells = (size_t)ts.width * (size_t)ts.height;
    if (ts.width <= 0 || ts.height <= 0 || len == 0 || len > ((size_t)1 << 26) ||
        cells > ((size_t)1 << 26)) {
        fail(c,
             "shape() gives the table's columns x rows; partial_len() the doubles of one "
             "band's partial (both > 0)",
             "regions (%s): table %dx%d, partial of %zu doubles: not a usable size", set, ts.width,
             ts.height, len);
        return;
    }
    int n = make_bands(c, h, y0s, 64);
    size_t gd = PC_GUARD / sizeof(double);
    whole = calloc(len + gd, sizeof(double));
    lone = calloc(len + gd, sizeof(double));
    parts = calloc(len * (size_t)n + gd, sizeof(double));
    res1 = malloc(sizeof(double) * (cells + gd));
    resn = malloc(sizeof(double) * (cells + gd));
    for (nk = 0; nk < n_in; nk++)
        if (pc_img_copy(&copy[nk], &in[nk]) != 0)
            break;
    if (!whole || !lone || !parts || !res1 || !resn || nk < n_in ||
        scratch_new(&s, scratch_size_for(d, ps->st, w, h)) != 0) {
        fail(c, NULL, "regions (%s): out of memory", set);
        goto out;
    }
    memset(whole + len, 0xa5, PC_GUARD);
    memset(parts + len * (size_t)n, 0xa5, PC_GUARD);
    pc_fill_poison(res1, sizeof(double) * cells);
    pc_fill_poison(resn, sizeof(double) * cells);
    memset(res1 + cells, 0xa5, PC_GUARD);
    memset(resn + cells, 0xa5, PC_GUARD);

    pc_doing("stage %s: run_cpu (reduce) on rows 0..%d with %s", d->name, h - 1, set);
    if (call_stage(d, ps->st, ims, n_in, NULL, 0, h, &s, whole, err, sizeof err) != 0) {
        fail(c, "return 0 on success; on failure write the reason into a->err",
             "regions (%s): run_cpu failed on the whole image: %s", set,
             err[0] ? err : "no message");
        bad++;
        goto out;
    }
    int over = !scratch_guard_ok(&s);
    free(s.p);
    s.p = NULL;
    pc_doing("stage %s: combine() of one partial with %s", d->name, set);
    d->combine(ps->st, ins, whole, 1, res1);
    for (int b = n - 1; b >= 0; b--) {
        if (scratch_new(&s, scratch_size_for(d, ps->st, w, y0s[b + 1] - y0s[b])) != 0) {
            fail(c, NULL, "regions (%s): out of memory", set);
            goto out;
        }
        pc_doing("stage %s: run_cpu (reduce) on rows %d..%d with %s", d->name, y0s[b],
                 y0s[b + 1] - 1, set);
        if (call_stage(d, ps->st, ims, n_in, NULL, y0s[b], y0s[b + 1], &s, parts + len * (size_t)b,
                       err, sizeof err) != 0) {
            fail(c, "a stage must run on any band of rows",
                 "regions (%s): run_cpu failed on rows "
                 "%d..%d: %s",
                 set, y0s[b], y0s[b + 1] - 1, err[0] ? err : "no message");
            bad++;
            goto out;
        }
        over += !scratch_guard_ok(&s);
        free(s.p);
        s.p = NULL;
    }
    pc_doing("stage %s: combine() of %d partials with %s", d->name, n, set);
    d->combine(ps->st, ins, parts, n, resn);
    for (size_t i = 0; i < PC_GUARD; i++) {
        int g = ((unsigned char *)(whole + len))[i] != 0xa5 ||
                ((unsigned char *)(parts + len * (size_t)n))[i] != 0xa5;
        int r = ((unsigned char *)(res1 + cells))[i] != 0xa5 ||
                ((unsigned char *)(resn + cells))[i] != 0xa5;
        if (g || r) {
            fail(c,
                 g ? "fill partial_len() doubles of a->partial, no more"
                   : "write rows x columns doubles of the result, no more",
                 "regions (%s): %s writes past the end of its buffer (%zu doubles)", set,
                 g ? "run_cpu" : "combine()", g ? len : cells);
            bad++;
            goto out;
        }
    }
    if (over)
        fail(c, fix_scratch, "regions (%s): wrote past the end of its scratch", set), bad++;
    int unset = doubles_poisoned(res1, cells);
    if (unset)
        fail(c, "combine() must write every entry of the result table (it is not cleared)",
             "regions (%s): combine() left %d of %zu table entries unwritten", set, unset, cells),
            bad++;
    pc_diff df = pc_table_compare(res1, resn, ts.height, ts.width, c->o.tol);
    if (!unset && df.bad)
        fail(c,
             "partials must cover only their band's rows and combine() must fold them in "
             "order, so that the table does not depend on the banding beyond rounding",
             "regions (%s): %d bands combined differ from the whole image beyond %g: %s", set, n,
             c->o.tol, pc_diff_text(&df, 1, text, sizeof text)),
            bad++;

    if (!inputs_unchanged(in, copy, n_in))
        fail(c, fix_inputs, "regions (%s): wrote into its input image", set), bad++;

    /* A band's partial must not read other rows: they become NaN, the partial must not
       change. */
    int mid = n / 2, y0 = y0s[mid], y1 = y0s[mid + 1];
    for (int k = 0; k < n_in; k++)
        for (int y = 0; y < h; y++)
            if (y < y0 || y >= y1) {
                float *row = (float *)pf_image_row(&copy[k].im, y);
                for (int i = 0; i < 4 * w; i++)
                    row[i] = NAN;
            }
    pf_image nanned[PF_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        nanned[k] = copy[k].im;
    if (scratch_new(&s, scratch_size_for(d, ps->st, w, y1 - y0)) != 0) {
        fail(c, NULL, "regions (%s): out of memory", set);
        goto out;
    }
    pc_doing("stage %s: run_cpu (reduce) on rows %d..%d with the other rows NaN", d->name, y0,
             y1 - 1);
    if (call_stage(d, ps->st, nanned, n_in, NULL, y0, y1, &s, lone, err, sizeof err) == 0 &&
        memcmp(lone, parts + len * (size_t)mid, sizeof(double) * len) != 0)
        fail(c,
             "a reduce stage's region is a band of INPUT rows: compute the partial from "
             "those rows only",
             "regions (%s): the partial of rows %d..%d changes when other rows change: it reads "
             "outside its region",
             set, y0, y1 - 1),
            bad++;
    if (!bad)
        pass(c,
             "regions (%s): %d banded partials combine to the whole image's table within %g; "
             "each reads only its rows; no buffer overrun",
             set, n, c->o.tol);
out:
    free(s.p);
    for (int k = 0; k < nk; k++)
        pc_img_free(&copy[k]);
    free(whole);
    free(lone);
    free(parts);
    free(res1);
    free(resn);
}

/* rows_in (ABI 1.6): a resample stage computing output rows r from inputs whose rows
   outside what rows_in names for r were all changed must give the same rows, bit for bit,
   as from the inputs themselves: strips hand it only those rows. Output bands at the
   top, in the middle and at the bottom, one row and several. */
void pc_check_rows_in(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                      pc_img *in, int n_in)
{
    pf_shape ins[PF_MAX_INPUTS], os;
    pf_image ims[PF_MAX_INPUTS], fims[PF_MAX_INPUTS];
    pc_img far[PF_MAX_INPUTS], whole = {0}, band = {0};
    pc_scratch s = {0};
    char err[1024] = "";
    int made = 0, checked = 0;
    for (int k = 0; k < n_in; k++) {
        ims[k] = in[k].im;
        ins[k] = (pf_shape){in[k].im.width, in[k].im.height};
    }
    if (d->shape(ps->st, ins, &os, err, sizeof err) != 0 || os.width <= 0 || os.height <= 0 ||
        os.width > PC_MAX_SIDE || os.height > PC_MAX_SIDE)
        return; /* pc_check_regions says why */
    for (; made < n_in; made++)
        if (pc_img_copy(&far[made], &in[made]) != 0)
            break;
    if (made < n_in || pc_img_new(&whole, os.width, os.height) != 0 ||
        pc_img_new(&band, os.width, os.height) != 0 ||
        scratch_new(&s, scratch_size_for(d, ps->st, os.width, os.height)) != 0) {
        fail(c, NULL, "rows_in (%s): out of memory for a %dx%d check", set, os.width, os.height);
        goto out;
    }
    pc_doing("stage %s: run_cpu on the whole image with %s", d->name, set);
    if (call_stage(d, ps->st, ims, n_in, &whole.im, 0, os.height, &s, NULL, err, sizeof err) != 0)
        goto out; /* pc_check_regions reports it */
    const int h = os.height;
    const int bands[][2] = {
        {0, 1},     {0, h < 5 ? h : 5},    {h / 3, h / 3 + 1}, {h / 2, h / 2 + 7},
        {h - 1, h}, {h > 4 ? h - 4 : 0, h}};
    for (int b = 0; b < 6; b++) {
        pf_region r = {bands[b][0], bands[b][1] < h ? bands[b][1] : h}, rows[PF_MAX_INPUTS];
        if (r.y0 < 0 || r.y1 <= r.y0)
            continue;
        for (int k = 0; k < n_in; k++) {
            pc_doing("stage %s: rows_in(rows %d..%d, input %d) with %s", d->name, r.y0, r.y1 - 1, k,
                     set);
            rows[k] = (pf_region){-1, -1};
            if (d->rows_in(ps->st, ins, &os, k, r, &rows[k]) != 0 || rows[k].y0 < 0 ||
                rows[k].y1 > ins[k].height || rows[k].y1 < rows[k].y0) {
                fail(c,
                     "return 0 and the rows [y0, y1) of input k that the output rows read, "
                     "within the input (y0 == y1 when none)",
                     "rows_in (%s): for output rows %d..%d of input %d (%d rows) it returned "
                     "rows %d..%d",
                     set, r.y0, r.y1 - 1, k, ins[k].height, rows[k].y0, rows[k].y1 - 1);
                goto out;
            }
            /* every row outside them changed */
            for (int y = 0; y < ins[k].height; y++) {
                pf_float4 *px = pf_image_row(&far[k].im, y);
                const pf_float4 *src = pf_image_row(&in[k].im, y);
                int inside = y >= rows[k].y0 && y < rows[k].y1;
                for (int x = 0; x < ins[k].width; x++)
                    px[x] = inside ? src[x]
                                   : pf_f4((float)pc_rng_unit(c), (float)pc_rng_unit(c),
                                           (float)pc_rng_unit(c), (float)pc_rng_unit(c));
            }
            fims[k] = far[k].im;
        }
        pc_doing("stage %s: run_cpu on rows %d..%d with the rows outside rows_in changed", d->name,
                 r.y0, r.y1 - 1);
        if (call_stage(d, ps->st, fims, n_in, &band.im, r.y0, r.y1, &s, NULL, err, sizeof err) !=
            0) {
            fail(c, "a stage must run on any band of rows",
                 "rows_in (%s): run_cpu failed on rows %d..%d: %s", set, r.y0, r.y1 - 1,
                 err[0] ? err : "no message in a->err");
            goto out;
        }
        for (int y = r.y0; y < r.y1; y++)
            if (memcmp(pf_image_row(&whole.im, y), pf_image_row(&band.im, y),
                       sizeof(pf_float4) * (size_t)os.width) != 0) {
                fail(c,
                     "make rows_in name every input row that the output rows read (clamped "
                     "reads included): strips hold no other",
                     "rows_in (%s): output row %d (of rows %d..%d) changed when input rows "
                     "outside those rows_in names (input 0: rows %d..%d of %d) changed",
                     set, y, r.y0, r.y1 - 1, rows[0].y0, rows[0].y1 - 1, ins[0].height);
                goto out;
            }
        checked++;
    }
    pass(c, "rows_in (%s): %d bands of output rows read only the input rows it names", set,
         checked);
out:
    free(s.p);
    pc_img_free(&whole);
    pc_img_free(&band);
    for (int k = 0; k < made; k++)
        pc_img_free(&far[k]);
}
