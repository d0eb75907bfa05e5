/* engine/fuse_gen.h: the pieces of fused-kernel source generation that engine/fuse.c
 * (point units, summing reduces) and engine/fuse_stencil.c (3x3 stencils) share.
 * Engine-private. */
#ifndef PF_FUSE_GEN_H
#define PF_FUSE_GEN_H

#include "fuse.h"

/* A growing string; `failed` once an allocation or format failed (then s is unusable
   and the caller frees it and reports out of memory). */
typedef struct pf_sb {
    char *s;
    size_t n, cap;
    int failed;
} pf_sb;

void pf_sb_printf(pf_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The namespace index (pf_ns<k>) of member a's op source in unit un: the first member
   with the same source text. */
int pf_fuse_source_index(const pf_pipeline *p, const pf_unit *un, int a);

/* Node n's op header inside namespace pf_ns<ns>, its macros undefined around it; what
   follows is numbered as lines of `kernel`. */
void pf_fuse_emit_op(pf_sb *b, const pf_pipeline *p, const pf_node *n, int ns, const char *kernel);

/* The kernel's signature, its parameter pointer P and the opening brace. */
void pf_fuse_emit_signature(pf_sb *b, const pf_fuse_unit *io, const char *name);

/* Member a of unit un on pixel i: inputs from earlier members (v<c>) or the loads
   (in<k>[i] for io->in[k]; in<n_in>[i] for a node io->in does not hold), its op on its
   parameters at pos, its value v<a>, and stores to out<k>[i] for every output of io that
   is this member. The unit's op headers are in namespaces pf_ns<ns_base + k>. */
void pf_fuse_emit_member(pf_sb *b, const pf_pipeline *p, const pf_unit *un, const pf_fuse_unit *io,
                         const size_t *param_off, int a, int ns_base);

/* fuse_stencil.c: the kernel of a stencil unit (io->stencil), malloc'd, or NULL. */
char *pf_fuse_stencil_source(const pf_pipeline *p, int u, const pf_fuse_unit *io,
                             const size_t *param_off, const char *name);

#endif
