/* engine/fuse.h: fused kernels. For a point unit of the plan, fuse.c writes CUDA source
 * that loads every unit input once (pipeline inputs in their own format, other units'
 * results as float RGBA), evaluates the members' ops in registers and stores every
 * result someone needs once (pipeline outputs in their own format). NVRTC (nvrtc.c,
 * found with dlopen) compiles it for the device's exact architecture; the cubin is
 * cached on disk (kcache.c) and loaded and launched through the driver API
 * (cuda_driver.c), so none of this is a link-time dependency.
 */
#ifndef PF_FUSE_H
#define PF_FUSE_H

#include "plan.h"

/* One input or output of a fused unit. */
typedef struct pf_fuse_io {
    int node;   /* the node read or written */
    int native; /* -1: the node's float RGBA buffer; else the pipeline input (for
                     inputs) or output (for outputs) index, in that frame's format */
    int sample; /* pf_sample of the access */
    int channels;
} pf_fuse_io;

/* A fused kernel takes its members' parameters by value, as its first argument, when
   their span of the parameter block is at most this many bytes (4 KB is what kernel
   arguments may hold on every CUDA version, less room for the others). The kernel then
   reads them from the constant bank, as operands of its arithmetic: through a pointer
   to global memory each op's parameters were loads that a long chain on a small frame
   waited on (58% of its stalls on a 100-stage chain at 256x256). A longer span passes
   a pointer to the device parameter block instead. */
#define PF_FUSE_PARAM_ARG_MAX 3968

/* A fused kernel takes its frame descriptors by value too (io->desc_arg), as a second
   __grid_constant__ argument, when all its arguments fit in this many bytes (4 KB less
   room for alignment): their fields are then constant-bank operands, where through a
   pointer each thread's first loads waited on a descriptor load, and a frame whose
   buffers changed updates the graph's kernel nodes instead of copying descriptors to
   the device. */
#define PF_FUSE_ARG_BYTES_MAX 4032

/* pf_fuse_decide's verdict on a unit. NONE: runs its stages' own kernels. KERNEL: one
   generated kernel (a point unit, a reduce declaring a sum, or a stencil declaring its
   per-pixel function). ABSORBED: a point unit whose ops run inside the reduce or stencil
   kernel reading it. EPILOGUE: a point unit whose ops the stencil kernel producing one of
   its inputs applies before its stores (pf_fuse_epilogue). */
#define PF_FUSE_NONE     0
#define PF_FUSE_KERNEL   1
#define PF_FUSE_ABSORBED 2
#define PF_FUSE_EPILOGUE 3

typedef struct pf_fuse_unit {
    int n_in, n_out;
    int ppt; /* pixels per thread (8, 4, 2 or 1): fewer on small images, for parallelism */
    /* A reduce or stencil unit's kernel: its pf_stage_desc.reduce_sum (0 for other
       units), 1 for a stencil running its stencil_fn (fuse_stencil.c), the point unit
       whose ops it runs on the way in (-1: none, it reads its input), and the node whose
       value it sums or stages in its tile (the stage's input). */
    int reduce, stencil, src_unit, value_node;
    /* A stencil unit's kernel: the point unit whose ops it applies to its result before
       storing (-1: none), whose stored results are among out[]. */
    int epi_unit;
    /* A 3x3 stencil unit's kernel: the point unit its epilogue recomputes from the
       pipeline inputs (pf_fuse_recompute; -1: none), whose inputs are among in[]. */
    int rec_unit;
    /* A separable stencil unit's largest radius (its stage's separable_max): the halo its
       launches and scratch are sized for. */
    int sep_rmax;
    /* The members' parameters: bytes [param_lo, param_lo + param_bytes) of the block;
       param_arg 1 when they are the kernel's first argument (by value), 0 when it is a
       pointer to the whole device block. */
    size_t param_lo, param_bytes;
    int param_arg;
    /* 1 when the kernel's second argument is its descriptors by value (in[], then out[]:
       n_in + n_out of them), 0 when it is a pointer to them in the device block. */
    int desc_arg;
    pf_fuse_io in[PF_MAX_FUSED_IO], out[PF_MAX_FUSED_IO];
} pf_fuse_unit;

/* Which nodes the GPU keeps as float RGBA images when point units are fused (or not):
   f4[node] = 1 where a buffer is needed. A fused unit reads pipeline inputs and writes
   pipeline outputs in their own format, so those need a buffer only when a non-fused
   unit reads them (or, for an output that is a pipeline input, to convert it). */
void pf_fuse_buffers(const pf_pipeline *p, const int *fused_unit, char *f4);

/* The IO list of point unit u; sample/channels of native entries are taken from
   in_fmt/out_fmt (per pipeline input / output: pf_format_code). Returns -1
   when the unit has more than PF_MAX_FUSED_IO inputs or outputs (then it is not fused). */
int pf_fuse_unit_io(const pf_pipeline *p, int u, const char *f4, const int *in_fmt,
                    const int *out_fmt, pf_fuse_unit *io);

/* Byte offset of every stage's params in the parameter block (16-byte aligned, as the
   CUDA executor lays it out); returns the block's size. off has n_nodes entries. */
size_t pf_param_layout(const pf_pipeline *p, size_t *off);

/* Whether unit u can be fused: fusion on and every member has point source. When not,
   why says so (for the notice). */
int pf_fuse_possible(const pf_pipeline *p, int u, char *why, size_t why_size);

/* The fusion decision, made here only, for the CUDA executor, the kernel builder and the
   printed plan: fused[u] for every unit (the point units that can fuse), and f4, the
   float RGBA buffers that leaves (pf_fuse_buffers). no_nvrtc: NULL where NVRTC can be
   loaded, else why it cannot (then nothing fuses). A unit whose kernel would have more
   than PF_MAX_FUSED_IO loads or stores does not fuse. why gets the reason the first
   point unit does not. Returns how many units fuse. */
int pf_fuse_decide(const pf_pipeline *p, const char *no_nvrtc, int *fused, char *f4, char *why,
                   size_t why_size);

/* The point unit whose ops reduce or stencil unit u runs in its own kernel, or -1: one
   whose results are no pipeline output and are read only by u, or also, for a unit of at
   most PF_FUSE_RECOMPUTE_MAX stages, by other kernels that compute it themselves (reduce
   or stencil kernels taking it in, a stencil's epilogue recomputing it), when both can
   fuse. */
int pf_fuse_absorbs(const pf_pipeline *p, int u);

/* pf_fuse_unit.stencil: a 3x3 stencil's one kernel (stencil_fn), or a separable
   stencil's two (separable_fn: PF_FUSED_KERNEL the horizontal pass, PF_FUSED_KERNEL_V
   the vertical, one module). */
#define PF_FUSE_STENCIL_3X3       1
#define PF_FUSE_STENCIL_SEPARABLE 2

/* The point unit that 3x3 stencil unit u's epilogue recomputes at each pixel from the
   pipeline inputs rather than reading its stored image, or -1: a unit of at most
   PF_FUSE_RECOMPUTE_MAX stages, on pipeline inputs only, none of its results an output,
   that the epilogue reads and otherwise only its own stages, the epilogue and reduce or
   stencil kernels taking it in (each of which then computes it too, pf_fuse_absorbs):
   then its image is never written. The mixed bench's chain, read by the gaussian and by
   the blend in the sobel's epilogue, is one. */
#define PF_FUSE_RECOMPUTE_MAX 16
int pf_fuse_recompute(const pf_pipeline *p, int u);

/* Whether stencil unit u can run as a generated kernel: one stage on one input keeping
   the shape, of radius 1 declaring stencil_fn, or declaring separable_fn (with a radius
   of at most its separable_max), with its point_source and params_type; returns
   PF_FUSE_STENCIL_3X3 or PF_FUSE_STENCIL_SEPARABLE, or 0 with why saying why not. */
int pf_fuse_stencil_possible(const pf_pipeline *p, int u, char *why, size_t why_size);

/* A separable kernel's geometry (kernels/separable_rt.h): the horizontal pass's blocks
   of PF_SEP_TW threads over PF_SEP_RPB rows (doubled while the grid is too tall), the
   vertical pass's of PF_SEP_VTX x PF_SEP_VTY threads, PF_SEP_VRPT rows each. */
#define PF_SEP_TW   256
#define PF_SEP_RPB  16
#define PF_SEP_VTX  32
#define PF_SEP_VTY  8
#define PF_SEP_VRPT 4
/* The device scratch a separable unit's kernels need for bands of at most `rows` rows
   of width `width` at largest radius rmax: the rows of horizontal sums, then the taps
   and their weight sum (rmax + 2 floats, rounded up to 16 bytes); and where the taps
   start. */
size_t pf_fuse_sep_scratch(int width, int rows, int height, int rmax);
size_t pf_fuse_sep_taps_at(int width, int rows, int height, int rmax);
/* The separable stage of unit u's largest radius (its separable_max). */
int pf_fuse_sep_rmax(const pf_pipeline *p, int u);

/* The point unit whose ops stencil unit u applies in its kernel to its result, or -1:
   the first point unit that can fuse, reads u's result and otherwise only pipeline
   inputs and nodes u's input is computed from, and is absorbed by no reduce or
   stencil. */
int pf_fuse_epilogue(const pf_pipeline *p, int u);

/* The tile of a stencil kernel: a block of PF_STENCIL_TX x PF_STENCIL_TY threads computes
   PF_STENCIL_RPT output pixels each (rows PF_STENCIL_TY apart), from the tile and its
   one-pixel halo staged in shared memory. */
#define PF_STENCIL_TX  32
#define PF_STENCIL_TY  8
#define PF_STENCIL_RPT 4

/* Whether reduce unit u can run as a generated kernel (its stage declares reduce_sum and
   the table has the shape that sum fills); when not, why says so. */
int pf_fuse_reduce_possible(const pf_pipeline *p, int u, char *why, size_t why_size);

/* A summing reduce kernel's geometry. Columns: rows per chunk (each chunk of rows leaves
   a partial table; the last band's blocks add them up); rows: the partial tables (one
   per block of a row; each band adds its rows'). pf_fuse_reduce_chunks bounds the
   partial tables a whole frame of `bands` bands leaves, and pf_fuse_reduce_groups the
   groups of blocks that count themselves done (a counter each, zero between frames),
   for the layout. */
int pf_fuse_reduce_rows(int width, int height, int vp, int sm_count);
int pf_fuse_reduce_chunks(int reduce, int width, int height, int bands, int sm_count);
int pf_fuse_reduce_groups(int reduce, int width, int height);
/* Partial tables one band [y0, y1) writes (columns), or the row-block count (rows). */
int pf_fuse_reduce_band_chunks(const pf_fuse_unit *io, int width, int height, int y0, int y1,
                               int sm_count);
/* The launch of band [y0, y1): a grid of gx x gy blocks of tx x ty threads. */
void pf_fuse_reduce_grid(const pf_fuse_unit *io, int width, int y0, int y1, int rows, unsigned *gx,
                         unsigned *gy, unsigned *tx, unsigned *ty);

/* Generated source of a fused kernel named `name` (malloc'd), or NULL (out of memory). */
char *pf_fuse_source(const pf_pipeline *p, int u, const pf_fuse_unit *io, const size_t *param_off,
                     const char *name);

/* Pixels per thread for a fused kernel over width x height on a device of sm_count
   multiprocessors: 8 (long runs of coalesced 16-byte accesses) unless that leaves
   fewer than 2048 threads per multiprocessor, then halved down to 1. */
int pf_fuse_ppt(int width, int height, int sm_count);

/* Every fused kernel's name in its module. Units of the same ops, formats and geometry
   (a long chain's groups of one op) so generate the same source and share one compile
   in the kernel cache, whatever their unit number or stage ids. */
#define PF_FUSED_KERNEL   "pf_fused"
#define PF_FUSED_KERNEL_V "pf_fused_v" /* a separable unit's vertical pass */

/* For the generators: text that goes into a comment of the generated source (a stage
   id), or "" while the source to compile is generated, which names nothing, so that
   units of the same ops generate the same text; and whether names are wanted. */
const char *pf_fuse_note(const char *text);
int pf_fuse_annotating(void);

/* Generates, optionally dumps (dump_dir non-NULL: DIR/pf_fused_u<u>.cu), and compiles
   fused unit u for sm_<arch> (pixels per thread from pf_fuse_ppt for a device of sm_count
   multiprocessors: io->ppt), with the unit's IO from f4/in_fmt/out_fmt. The kernel is
   PF_FUSED_KERNEL. On failure p->errmsg names the stages, holds NVRTC's log and where
   the source was written. */
int pf_fuse_build(pf_pipeline *p, int u, const char *f4, const int *in_fmt, const int *out_fmt,
                  int arch, int sm_count, const char *dump_dir, pf_fuse_unit *io, void **cubin,
                  size_t *size);

/* Writes source to DIR/name.cu (for --dump-kernels); 0 on success. */
int pf_fuse_dump(const char *dir, const char *name, const char *source);

#endif
