/* cli/batch/budget.c: a file's bytes against the budget and whether it runs in bands */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "worker.h"

/* ---- Memory estimate ------------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A PNG's IHDR fields: 0, or -1 when the file does not start with a PNG header. */
static int read_ihdr(const char *path, unsigned long long *w, unsigned long long *h, int *depth,
                     int *ctype, int *interlace)
{
    if (cli_jpeg_ihdr(path, w, h, depth, ctype, interlace) == 0) /* a JPEG's header */
        return 0;
    unsigned char b[33];
    /* O_NONBLOCK: a FIFO put in a file's place is not waited for (decode names it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (n != (ssize_t)sizeof b || memcmp(b, sig, 8) != 0 || memcmp(b + 12, "IHDR", 4) != 0)
        return -1;
    *w = be32(b + 16);
    *h = be32(b + 20);
    *depth = b[24];
    *ctype = b[25];
    *interlace = b[28];
    return 0;
}

unsigned long long worker_estimate_bytes(const char *path, int n_image_outputs,
                                         unsigned long long *pixels)
{
    unsigned long long w, ht;
    int depth, ctype, interlace;
    if (read_ihdr(path, &w, &ht, &depth, &ctype, &interlace) != 0)
        return 0;
    /* channels after expansion: palette and tRNS may become RGBA */
    int ch = ctype == 0 ? 2 : ctype == 4 ? 2 : 4;
    int bytes = depth == 16 ? 2 : 1;
    if (pixels)
        *pixels = w * ht;
    unsigned long long in = w * ht * (unsigned long long)(ch * bytes);
    /* outputs: at most RGBA u16 each, bounded below by the input's size */
    unsigned long long out = w * ht * (unsigned long long)(ch * bytes);
    return in + out * (unsigned long long)(n_image_outputs > 0 ? n_image_outputs : 0);
}

/* Rows of a float RGBA band when --band-rows is auto (8 MiB), and the whole-frame
   memory (frames and the plan's buffers) above which auto bands an image. */
#define BAND_BYTES      (8u << 20)
#define BAND_AUTO_BYTES (64ull << 20)

/* A new job's bytes against the budget and whether it runs in bands: the pipeline can
   (setup), the file is not interlaced, it is taller than a band, and --band-rows asks
   for bands or (auto) its whole-frame run would hold over BAND_AUTO_BYTES, or over
   --max-memory when that is less (where it would fail whole, bands fit). */
/* What a band of `rows` output rows of an image w x h holds: its share of the file's
   frames (est counts the whole image) and the pipeline's buffers for the band's shape,
   from the probe as a lane will count them (0: the engine cannot say). */
static unsigned long long band_need(unsigned long long est, unsigned long long h, int w, int rows)
{
    pf_shape s = {w, rows + 2 * W.halo};
    pf_shape shapes[RUN_MAX_IO];
    for (int i = 0; i < W.n_in; i++)
        shapes[i] = W.unused[i] ? (pf_shape){W.bound[i].width, W.bound[i].height} : s;
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    if (pf_pipeline_memory(W.probe, shapes, W.n_in, &m) != PF_OK)
        return 0;
    if (W.gpu && W.dev_budget && m.device_bytes > W.dev_budget)
        return ULLONG_MAX;
    return est / h * (unsigned long long)s.height + 1 + plan_host_bytes(&m);
}

/* The pipeline's input shapes for a w x h file: the other inputs (--input) their own. */
static void file_shapes(int w, int h, pf_shape *shapes)
{
    for (int i = 0; i < W.n_in; i++)
        shapes[i] = i ? (pf_shape){W.bound[i].width, W.bound[i].height} : (pf_shape){w, h};
}

/* A strip plan of `rows` output rows for a w x h file (W.probe planned for it): the
   buffers' bytes, the tallest window of the file's rows a strip reads (*in_rows), the
   outputs' height, and whether the windows move down the image (a reader streams them).
   0, or -1 when the engine refuses (the lane then says why, on the whole frame). */
static int strip_probe(int w, int h, int rows, unsigned long long *plan_bytes, int *in_rows,
                       int *out_h, int *streams)
{
    pf_shape shapes[RUN_MAX_IO];
    file_shapes(w, h, shapes);
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    int n = 0;
    if (pf_pipeline_strip_memory(W.probe, shapes, W.n_in, rows, &m) != PF_OK ||
        pf_pipeline_plan_strips(W.probe, shapes, W.n_in, rows, &n) != PF_OK)
        return -1;
    *plan_bytes = plan_host_bytes(&m);
    *in_rows = 0;
    *streams = 1;
    pf_region last = {0, 0}, win[RUN_MAX_IO];
    for (int s = 0; s < n; s++) {
        int y0, y1;
        if (pf_pipeline_strip(W.probe, s, &y0, &y1, win, W.n_in) != PF_OK)
            return -1;
        *out_h = y1;
        if (win[0].y1 <= win[0].y0)
            continue;
        *in_rows = win[0].y1 - win[0].y0 > *in_rows ? win[0].y1 - win[0].y0 : *in_rows;
        *streams &= win[0].y0 >= last.y0 && win[0].y1 >= last.y1;
        last = win[0];
    }
    return 0;
}

/* plan_job for a pipeline that runs in strips (W.stripable), on the CPU: strips when
   --band-rows asks for them, or (auto) when the whole frame would hold over
   BAND_AUTO_BYTES or --max-memory, of as many output rows as keep a strip's buffers
   within the lanes' share of BAND_AUTO_BYTES, fewer under --max-memory, down to the
   smallest strip that fits. Only where a reader can stream the windows (not a vertical flip, say). */
static void plan_strips(job *j, int w, int h)
{
    const unsigned long long budget = W.o->max_memory;
    long long rows = W.o->band_rows;
    static atomic_int said;
    if (atomic_load(&W.gpu) && rows > 0 && !W.o->quiet && !atomic_exchange(&said, 1)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "--band-rows %lld: images run whole: on the GPU this pipeline runs whole "
                 "frames (it runs in strips, which are the CPU's, not in frames of bands)",
                 rows);
        notice(0, msg);
    }
    if (atomic_load(&W.gpu) || rows == 0)
        return;
    if (rows < 0) {
        pf_shape shapes[RUN_MAX_IO];
        file_shapes(w, h, shapes);
        pf_memory m;
        memset(&m, 0, sizeof m);
        m.size = sizeof m;
        if (pf_pipeline_memory(W.probe, shapes, W.n_in, &m) != PF_OK)
            return;
        const unsigned long long need = j->est + plan_host_bytes(&m);
        if (need <= (budget && budget < BAND_AUTO_BYTES ? budget : BAND_AUTO_BYTES))
            return;
        rows = 256;
    }
    /* The frames of a strip: its window of the input, two sets of output rows; est counts
       the input and one output the input's size per image output. */
    const unsigned long long row_bytes =
        j->est / (unsigned long long)h / (1u + (unsigned)W.n_images);
    /* a lane's strip buffers: BAND_AUTO_BYTES shared by the lanes, 4 to 16 MiB each */
    unsigned long long target = BAND_AUTO_BYTES / (unsigned)(W.lanes > 0 ? W.lanes : 1);
    target = target < BAND_BYTES / 2   ? BAND_BYTES / 2
             : target > 2 * BAND_BYTES ? 2 * BAND_BYTES
                                       : target;
    unsigned long long plan_bytes = 0, frames = 0;
    int in_rows = 0, out_h = 0, streams = 0;
    for (;;) {
        if (strip_probe(w, h, (int)rows, &plan_bytes, &in_rows, &out_h, &streams) != 0)
            return;
        frames = row_bytes * ((unsigned long long)in_rows +
                              2ull * (unsigned long long)rows * (unsigned)W.n_images) +
                 1;
        int fits = plan_bytes <= target && (!budget || frames + plan_bytes <= budget / 2);
        if (W.o->band_rows > 0 || fits || rows <= 8)
            break;
        rows = rows * 3 / 4 > 8 ? rows * 3 / 4 : 8;
    }
    if (!streams && W.o->band_rows > 0 && !W.o->quiet && !atomic_exchange(&said, 1)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "--band-rows %d: images run whole: the rows a band reads run up the image "
                 "(a vertical flip or a turn), and files are read from the top",
                 W.o->band_rows);
        notice(0, msg);
    }
    if (!streams || rows >= out_h)
        return;
    j->band_rows = (int)rows;
    j->strips = 1;
    j->est = frames;
}

void plan_job(job *j)
{
    j->est = worker_estimate_bytes(j->path, W.n_images, &j->pixels);
    unsigned long long w, h;
    int depth, ctype, interlace;
    if (!(W.bandable || W.stripable) || !j->est ||
        read_ihdr(j->path, &w, &h, &depth, &ctype, &interlace) != 0 || interlace || w == 0 ||
        h == 0 || w > (1u << 20) || h > (1u << 20))
        return;
    if (W.stripable) {
        plan_strips(j, (int)w, (int)h);
        return;
    }
    for (int i = 1; i < W.n_in; i++) /* other inputs are cut into the same bands */
        if (!W.unused[i] && ((unsigned long long)W.bound[i].width != w ||
                             (unsigned long long)W.bound[i].height != h))
            return;
    long long rows = W.o->band_rows;
    const long long min_rows = 4ll * W.halo > 16 ? 4ll * W.halo : 16;
    if (rows < 0 && min_rows + 2ll * W.halo >= (long long)h)
        return; /* no band of auto's smallest is shorter than the image */
    if (rows < 0) {
        pf_shape s = {(int)w, (int)h};
        if (s.width != W.probe_shape.width || s.height != W.probe_shape.height) {
            pf_memory m;
            memset(&m, 0, sizeof m);
            m.size = sizeof m;
            pf_shape shapes[RUN_MAX_IO];
            file_shapes(s.width, s.height, shapes);
            if (pf_pipeline_memory(W.probe, shapes, W.n_in, &m) != PF_OK)
                return; /* the lane says why, on the whole frame */
            W.probe_shape = s;
            W.probe_bytes = plan_host_bytes(&m);
            W.probe_dev = m.device_bytes;
        }
        const unsigned long long need = j->est + W.probe_bytes, budget = W.o->max_memory;
        /* On the CPU, bands above BAND_AUTO_BYTES: a band in the cache beats a frame out of
           it, and memory stays small. On the GPU bands only when the frame does not fit:
           host memory under --max-memory, device memory under its budget. */
        if (W.gpu ? (!budget || need <= budget) && (!W.dev_budget || W.probe_dev <= W.dev_budget)
                  : need <= (budget && budget < BAND_AUTO_BYTES ? budget : BAND_AUTO_BYTES))
            return;
        /* the GPU wants few large bands: from half the image down, until one fits */
        rows = W.gpu ? ((long long)h - 2ll * W.halo) / 2 : (long long)(BAND_BYTES / (16 * w));
        /* under --max-memory, bands that take at most half of it, in proportion */
        if (budget && need > budget / 2) {
            long long fit =
                (long long)((double)h * (double)(budget / 2) / (double)need) - 2ll * W.halo;
            rows = fit < rows ? fit : rows;
        }
        rows = rows < min_rows ? min_rows : rows;
        /* The proportion above leaves out what does not shrink with the rows (scratch per
           engine thread, slots, tables): check the band's own need and shrink the band
           until it fits, so that only a budget below the smallest band fails the file. */
        while ((budget || W.gpu) && rows > min_rows && rows + 2ll * W.halo < (long long)h) {
            unsigned long long band = band_need(j->est, h, (int)w, (int)rows);
            if (band && band != ULLONG_MAX && (!budget || band <= budget))
                break;
            rows = rows * 3 / 4 > min_rows ? rows * 3 / 4 : min_rows;
        }
    }
    if (rows + 2ll * W.halo >= (long long)h)
        return;
    j->band_rows = (int)rows;
    /* the frames of one band: the input's rows with the halo, and the outputs' */
    j->est = j->est / h * (unsigned long long)(rows + 2 * W.halo) + 1;
}
