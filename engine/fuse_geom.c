/* engine/fuse_geom.c: the geometry of summing reduce kernels (engine/fuse.h): rows per
 * chunk, the partial tables and done counters a frame needs (the layout allocates them,
 * engine/cuda_layout.c) and each band's launch grid (engine/cuda_driver.c). Plain
 * arithmetic, so tests/fuse/test_reduce_geom.c checks without a GPU that no launch
 * reaches past what the layout allocates. */
#include "fuse.h"

int pf_fuse_reduce_rows(int width, int height, int vp, int sm_count)
{
    /* Blocks of 4 threads of vp pixels across and 64 rows: as many chunks of rows as
       make two blocks a multiprocessor, and at most 32 rows a thread. One chunk needs no
       partial tables: its blocks write the table. */
    int sms = sm_count > 0 ? sm_count : 1, stripes = (width + 4 * vp - 1) / (4 * vp);
    int chunks = (2 * sms + stripes - 1) / stripes, tall = (height + 2047) / 2048;
    chunks = chunks > tall ? chunks : tall;
    int rows = (height + chunks - 1) / chunks;
    return rows > 64 ? (rows + 63) / 64 * 64 : rows;
}

int pf_fuse_reduce_chunks(int reduce, int width, int height, int bands, int sm_count)
{
    if (reduce == PF_REDUCE_SUM_ROWS)
        return (width + 255) / 256; /* the most row blocks: one pixel a thread */
    int rows = pf_fuse_reduce_rows(width, height, 8, sm_count); /* the most chunks */
    return (height + rows - 1) / rows + (bands > 0 ? bands : 1);
}

int pf_fuse_reduce_groups(int reduce, int width, int height)
{
    if (reduce == PF_REDUCE_SUM_ROWS)
        return height < 65535 ? height : 65535; /* a group per block of a column */
    return (width + 3) / 4; /* a group per stripe of 4 threads of a pixel or more */
}

int pf_fuse_reduce_band_chunks(const pf_fuse_unit *io, int width, int height, int y0, int y1,
                               int sm_count)
{
    if (io->reduce == PF_REDUCE_SUM_ROWS)
        return (width + 256 * io->ppt - 1) / (256 * io->ppt);
    int rows = pf_fuse_reduce_rows(width, height, io->ppt, sm_count);
    return y1 > y0 ? (y1 - y0 + rows - 1) / rows : 0;
}

void pf_fuse_reduce_grid(const pf_fuse_unit *io, int width, int y0, int y1, int rows, unsigned *gx,
                         unsigned *gy, unsigned *tx, unsigned *ty)
{
    if (io->reduce == PF_REDUCE_SUM_COLUMNS) {
        /* 4 threads of ppt pixels across, 64 rows; a block per stripe and chunk of rows */
        *tx = 4, *ty = 64;
        *gx = (unsigned)((width + 4 * io->ppt - 1) / (4 * io->ppt));
        *gy = (unsigned)((y1 - y0 + rows - 1) / rows);
    } else {
        /* 256 threads of ppt pixels along a row; blocks of a row side by side */
        *tx = 256, *ty = 1;
        *gx = (unsigned)((width + 256 * io->ppt - 1) / (256 * io->ppt));
        *gy = (unsigned)(y1 - y0 < 65535 ? y1 - y0 : 65535);
    }
}
