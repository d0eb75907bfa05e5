/* tests/fuse/test_reduce_geom.c: the geometry of summing reduce kernels
 * (engine/fuse_geom.c) over image sizes from one pixel to 100000 rows, every chunk
 * width (1, 2, 4, 8 pixels a thread), device sizes and watchdog band counts, band by
 * band as engine/cuda_frame.c launches them. Every launch must stay inside what the
 * layout allocates: the partial tables a column sum's bands write (chunk0 + its grid's
 * rows of chunks) within pf_fuse_reduce_chunks, the done counters its groups count in
 * within pf_fuse_reduce_groups, a row sum's blocks of a row within its partial tables;
 * and cover every row exactly once, with no empty chunk, at most 32 rows a thread and a
 * grid within CUDA's limits. No GPU needed. */
#include <stdio.h>

#include "fuse.h"
#include "testutil.h"

static void band_rows(int rows, int b, int n, int *y0, int *y1)
{
    *y0 = (int)((long long)rows * b / n);
    *y1 = (int)((long long)rows * (b + 1) / n);
}

/* One unit of w x h at vp pixels a chunk on sms multiprocessors, in `bands` bands. */
static int check_unit(int reduce, int w, int h, int vp, int sms, int bands)
{
    pf_fuse_unit io = {0};
    io.reduce = reduce;
    io.ppt = vp;
    int parts = pf_fuse_reduce_chunks(reduce, w, h, bands, sms);
    int groups = pf_fuse_reduce_groups(reduce, w, h);
    int rows = pf_fuse_reduce_rows(w, h, vp, sms), chunk0 = 0, covered = 0;
    char what[160];
    snprintf(what, sizeof what, "%s %dx%d vp %d sms %d bands %d",
             reduce == PF_REDUCE_SUM_COLUMNS ? "colsum" : "rowsum", w, h, vp, sms, bands);
    for (int b = 0; b < bands; b++) {
        int y0, y1;
        unsigned gx, gy, tx, ty;
        band_rows(h, b, bands, &y0, &y1);
        CHECKF(y1 > y0, "%s: band %d is empty", what, b);
        pf_fuse_reduce_grid(&io, w, y0, y1, rows, &gx, &gy, &tx, &ty);
        int chunks = pf_fuse_reduce_band_chunks(&io, w, h, y0, y1, sms);
        CHECKF(tx * ty == 256 && gx >= 1 && gy >= 1 && gy <= 65535,
               "%s: band %d grid %ux%u of %ux%u", what, b, gx, gy, tx, ty);
        if (reduce == PF_REDUCE_SUM_COLUMNS) {
            CHECKF((int)gy == chunks, "%s: band %d: %u chunk blocks, %d chunks counted", what, b,
                   gy, chunks);
            CHECKF(gx * 4u * (unsigned)vp >= (unsigned)w &&
                       (gx - 1) * 4u * (unsigned)vp < (unsigned)w,
                   "%s: %u stripes for %d columns", what, gx, w);
            CHECKF((int)gx <= groups, "%s: %u stripes, %d done counters", what, gx, groups);
            CHECKF((long long)gy * rows >= y1 - y0 && (long long)(gy - 1) * rows < y1 - y0,
                   "%s: band %d: %u chunks of %d rows for %d rows", what, b, gy, rows, y1 - y0);
            CHECKF(rows <= 64 * 32, "%s: %d rows a chunk (%d a thread)", what, rows, rows / 64);
            chunk0 += chunks;
            CHECKF(chunk0 <= parts, "%s: band %d writes partial table %d of %d", what, b,
                   chunk0 - 1, parts);
        } else {
            CHECKF((int)gx == chunks && chunks <= parts, "%s: %u row blocks, %d counted, %d tables",
                   what, gx, chunks, parts);
            CHECKF(gx * 256u * (unsigned)vp >= (unsigned)w, "%s: %u row blocks for %d columns",
                   what, gx, w);
            CHECKF((int)gy <= groups, "%s: band %d: %u row groups, %d done counters", what, b, gy,
                   groups);
        }
        covered += y1 - y0;
    }
    CHECKF(covered == h, "%s: bands cover %d of %d rows", what, covered, h);
    return pf_test_failures;
}

int main(void)
{
    static const int sizes[] = {
        1,    2,    3,    4,    5,    7,    8,    15,   16,   17,   31,    33,    63,    64,
        65,   100,  127,  128,  129,  255,  256,  257,  333,  511,  512,   513,   1000,  1023,
        1024, 1025, 2000, 2047, 2048, 2049, 2160, 3840, 4097, 8191, 16384, 65535, 65536, 100000};
    static const int sms[] = {1, 14, 132, 144};
    static const int band_counts[] = {1, 2, 3, 7, 64, 1000};
    int n_sizes = (int)(sizeof sizes / sizeof sizes[0]), units = 0;
    for (int wi = 0; wi < n_sizes; wi++)
        for (int hi = 0; hi < n_sizes; hi++) {
            int w = sizes[wi], h = sizes[hi];
            if ((long long)w * h > 400000000LL)
                continue; /* past what a frame may hold */
            for (int vp = 1; vp <= 8; vp *= 2)
                for (int s = 0; s < 4; s++)
                    for (int bi = 0; bi < 6; bi++) {
                        int bands = band_counts[bi] < h ? band_counts[bi] : h;
                        for (int r = 0; r < 2; r++, units++)
                            if (check_unit(r ? PF_REDUCE_SUM_ROWS : PF_REDUCE_SUM_COLUMNS, w, h, vp,
                                           sms[s], bands))
                                return pf_test_done("test_reduce_geom");
                    }
        }
    printf("test_reduce_geom: %d units\n", units);
    return pf_test_done("test_reduce_geom");
}
