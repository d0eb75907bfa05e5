/* engine/cuda_driver.h: the driver API calls of fused kernels: loading a cubin's
 * module, launching a fused kernel, and the kernel nodes of captured graphs. Without
 * CUDA support every call fails with PF_UNSUPPORTED. */
#ifndef PF_CUDA_DRIVER_H
#define PF_CUDA_DRIVER_H

#include "fuse.h"

/* Launch through the driver API (CUDA builds): load a cubin and get its kernel. */
int pf_fuse_load(const void *cubin, const char *name, void **module, void **function, char *err,
                 size_t err_size);
void pf_fuse_unload(void *module);
/* Another kernel of a loaded module (a separable unit's vertical pass). */
int pf_fuse_function(void *module, const char *name, void **function, char *err, size_t err_size);
/* Where a fused kernel's first two arguments come from: its parameters from host_params
   (the unit's span of the pinned block, copied into the launch: io->param_arg) or as the
   pointer dev_params (the whole device block); its frame descriptors from host_desc
   (the unit's in the pinned block, copied into the launch: io->desc_arg) or as the
   pointer dev_desc (the same in the device block). */
typedef struct pf_fuse_args {
    const void *host_params, *dev_params;
    const void *host_desc, *dev_desc;
} pf_fuse_args;
/* One launch of a fused kernel over rows [y0, y1). */
int pf_fuse_launch(void *function, const pf_fuse_unit *io, int width, int height, int y0, int y1,
                   const pf_fuse_args *a, void *stream, char *err, size_t err_size);
/* Band [y0, y1) of a separable stencil unit (io->stencil PF_FUSE_STENCIL_SEPARABLE): its
   horizontal pass (function) over the band's rows and the halo of the largest radius,
   into scratch (scratch_size bytes, pf_fuse_sep_scratch), then its vertical pass
   (function_v). */
int pf_fuse_launch_separable(void *function, void *function_v, const pf_fuse_unit *io, int width,
                             int height, int y0, int y1, const pf_fuse_args *a, void *scratch,
                             size_t scratch_size, void *stream, char *err, size_t err_size);
/* In an instantiated graph: the fused kernel a kernel node of its graph launches
   (*function, NULL for other nodes), and new by-value arguments for such a node (the
   parameter span where io->param_arg, the descriptors where io->desc_arg), its other
   arguments kept. Both take CUgraphNode / CUgraphExec. */
int pf_fuse_node_function(void *node, void **function);
int pf_fuse_node_set_args(void *exec, void *node, const pf_fuse_unit *io, const pf_fuse_args *a,
                          char *err, size_t err_size);
#define PF_FUSE_MAX_EXTRA 7 /* arguments of a reduce kernel after every fused kernel's six */

/* A summing reduce kernel's own arguments: its partial tables (part, table k at
   part + k * partial_len), the rows of a chunk (by columns), the first partial table this
   band writes (chunk0) and how many the table adds (n_part); the table (NULL: this band
   leaves partials only, for a later band to add) and the groups' done counters; and
   cluster: 0, or (a sum by columns in one launch of n_part chunks, 2 to
   PF_FUSE_MAX_CLUSTER of them, where pf_fuse_clusters says the device has thread-block
   clusters) n_part: the chunks of a stripe are one cluster, and its first block adds
   the others' sums from their shared memory, with no partial tables and no counters. */
typedef struct pf_reduce_args {
    double *part;
    int rows, chunk0, n_part;
    double *table;
    unsigned int *done;
    int cluster;
} pf_reduce_args;
#define PF_FUSE_MAX_CLUSTER 8 /* blocks a cluster may have on every device that has them */
/* Whether launches may form thread-block clusters: the driver has cuLaunchKernelEx and
   the device is sm_90 or later (arch as XY). */
int pf_fuse_clusters(int arch);
/* Band [y0, y1) of a summing reduce kernel (io->reduce). */
int pf_fuse_launch_reduce(void *function, const pf_fuse_unit *io, int width, int height, int y0,
                          int y1, const pf_fuse_args *a, pf_reduce_args *ra, void *stream,
                          char *err, size_t err_size);

#endif
