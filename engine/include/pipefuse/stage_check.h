/* pipefuse/stage_check.h: the rules a plugin descriptor and its stage descriptors must
 * meet, as functions that report every finding. The engine's plugin loader refuses a
 * plugin at its first error; `pipefuse plugin check` prints every finding with its fix.
 * A plugin's own tests may call them on their descriptors too. */
#ifndef PIPEFUSE_STAGE_CHECK_H
#define PIPEFUSE_STAGE_CHECK_H

#include "pipefuse/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pf_check_level {
    PF_CHECK_ERROR = 0, /* the engine refuses the stage (and with it the plugin) */
    PF_CHECK_FAULT,     /* the engine loads it, but it breaks the stage contract of
                           docs/plugins.md (no doc string, say); plugin check fails it */
    PF_CHECK_WARNING    /* allowed, and worth a look (no CUDA code, no point source) */
} pf_check_level;

typedef struct pf_check_finding {
    pf_check_level level;
    const char *field;   /* the descriptor field at fault: "params[2].max", "point_source" */
    const char *message; /* starts with what it is about: "blur.sigma: default 70 is ..." */
    const char *fix;     /* what to change, one sentence */
} pf_check_finding;

/* Called once per finding, in the order of the descriptor's fields; the strings live
   until it returns. A non-zero return stops the walk. */
typedef int (*pf_check_fn)(void *user, const pf_check_finding *f);

/* Checks one stage descriptor as a plugin built for ABI PF_ABI_MAJOR.abi_minor hands it
   over (d->size may be an older, smaller struct's; the fields past it read as zero).
   When the table is sound, runs the stage's check() and radius() (and, for a reduce_sum
   stage, shape() and partial_len()) on its default params. Returns the number of
   PF_CHECK_ERROR findings (those reported before fn stopped the walk), or -1 when out
   of memory. */
int pf_stage_check(const pf_stage_desc *d, unsigned abi_minor, pf_check_fn fn, void *user);

/* Checks a plugin descriptor as pf_plugin_entry returned it (NULL included): its size,
   ABI version, name and stage list, and that its stages are there and named apart; not
   the stages themselves (pf_stage_check each, with the plugin's ABI minor). *readable
   is set to whether pd->stages[0 .. n_stages), the stages they point at and the
   descriptor's strings may be read (each is probed first: a plugin whose n_stages runs
   past its list is refused, not read). Returns the number of
   PF_CHECK_ERROR findings, as pf_stage_check. */
int pf_plugin_check(const pf_plugin_desc *pd, int *readable, pf_check_fn fn, void *user);

/* The engine's rule for where a plugin is loaded from: a regular file that only its
   owner (or root) can write to, in a directory the same holds for, below directories
   that others cannot write to unless they are sticky (as /tmp is) and that no other
   user owns. 0 when the engine would load the file from there; else -1, with what (the
   path at fault and why) and fix filled. */
int pf_plugin_path_check(const char *file, char *what, size_t what_size, char *fix,
                         size_t fix_size);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_STAGE_CHECK_H */
