/* plugins/geometry/geometry_size.c: output sizes from decimal factors, exactly, and
 * crop's rectangle (geometry.h's host-only helpers).
 *
 * A scale or a percent reaches a stage as a float, the nearest one to the decimal the
 * pipeline file wrote. The size it asks for is round_half_up(n * decimal): a float
 * product can land on either side of a half the decimal product does not reach (2297 x
 * 2.867 = 6585.499, but 2297 x 2.86700010 = 6585.4992 and, with any allowance for the
 * float's rounding, 6586). So the decimal is recovered (the shortest one that reads
 * back as the float, which is what was written unless more digits were written than a
 * float holds) and the product is taken in integers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "geometry.h"

/* The shortest decimal m * 10^e (m > 0) that reads back as f (> 0, finite): 0, or -1. */
static int shortest_decimal(float f, unsigned long long *m, int *e)
{
    for (int digits = 1; digits <= 9; digits++) { /* 9 digits always read back */
        char buf[64];
        snprintf(buf, sizeof buf, "%.*e", digits - 1, (double)f);
        unsigned long long mant = 0;
        int nd = 0;
        const char *s = buf;
        for (; *s && *s != 'e'; s++) /* the digits, whatever the locale's radix */
            if (*s >= '0' && *s <= '9')
                mant = mant * 10 + (unsigned long long)(*s - '0'), nd++;
        if (*s != 'e')
            return -1;
        const int exp10 = atoi(s + 1) - (nd - 1);
        char back[64]; /* no radix character: read the same in every locale */
        snprintf(back, sizeof back, "%llue%d", mant, exp10);
        if (strtof(back, NULL) == f) {
            *m = mant;
            *e = exp10;
            return 0;
        }
    }
    return -1;
}

double pf_decimal_size(long long n, float f, int percent)
{
    if (!(f > 0) || !isfinite(f) || n <= 0)
        return n > 0 && f > 0 ? HUGE_VAL : 0; /* an infinite factor: refused by the caller */
    unsigned long long m;
    int e;
    if (shortest_decimal(f, &m, &e) != 0) /* not reached: 9 digits always read back */
        return floor((double)n * (percent ? f / 100.0 : f) + 0.5);
    e -= percent ? 2 : 0;
    /* n < 2^31 and m < 10^9: the product is below 2^61 */
    const unsigned long long prod = (unsigned long long)n * m;
    if (e >= 0) {
        double v = (double)prod;
        for (int i = 0; i < e && v < 0x1p60; i++)
            v *= 10;
        return v;
    }
    if (e < -18) /* 10^19 > prod: below a half */
        return 0;
    unsigned long long q = 1;
    for (int i = 0; i < -e; i++)
        q *= 10;
    /* floor(prod / q + 1/2), exactly: both terms below 2^63 */
    return (double)((2 * prod + q) / (2 * q));
}

/* The size one side of crop asks for: pixels, else a percent (at least 1), else the
   rest of the input from the corner (all of it with a gravity). */
static long long crop_side(int px, float pct, int n, int off, int gravity)
{
    if (px > 0)
        return px;
    if (pct > 0) {
        double v = pf_decimal_size(n, pct, 1);
        return v < 1 ? 1 : (long long)v;
    }
    return gravity == PF_GRAVITY_NONE ? (long long)n - off : n;
}

int pf_crop_size(const pf_crop_params *p, int w, int h, long long *x, long long *y, long long *cw,
                 long long *ch)
{
    *cw = crop_side(p->width, p->width_pct, w, p->x, p->gravity);
    *ch = crop_side(p->height, p->height_pct, h, p->y, p->gravity);
    *x = pf_gravity_x(p->gravity, w, *cw, p->x);
    *y = pf_gravity_y(p->gravity, h, *ch, p->y);
    const int inside = *x >= 0 && *y >= 0 && *cw >= 1 && *ch >= 1 && *x + *cw <= w && *y + *ch <= h;
    if (inside || p->outside == PF_CROP_PAD)
        return *cw >= 1 && *ch >= 1 ? 0 : -1;
    if (p->outside != PF_CROP_CLAMP)
        return -1;
    /* the part of the rectangle inside the input */
    const long long x0 = *x < 0 ? 0 : *x, y0 = *y < 0 ? 0 : *y;
    const long long x1 = *x + *cw > w ? w : *x + *cw, y1 = *y + *ch > h ? h : *y + *ch;
    if (x1 - x0 < 1 || y1 - y0 < 1)
        return -1;
    *cw = x1 - x0, *ch = y1 - y0;
    pf_crop_origin(p, w, h, (int)*cw, (int)*ch, x, y); /* x0, y0 (pf_crop_origin says why) */
    return 0;
}
