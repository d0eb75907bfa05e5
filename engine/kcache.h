/* engine/kcache.h: the on-disk cache of compiled kernels.
 *
 * Entries live in PIPEFUSE_CACHE_DIR, else $XDG_CACHE_HOME/pipefuse, else
 * ~/.cache/pipefuse (made with mode 0700; "off" disables the cache), one file per
 * key. A directory owned by another user, or writable by its group or others, is not
 * used (one warning through the log, then compiles go on without the cache). A file is
 * written to a new file of an unpredictable name in the directory (O_EXCL|O_NOFOLLOW:
 * never through a planted link), synced and renamed over the entry's name, so readers
 * see whole entries only, concurrent writers of one key leave one whole entry and a
 * link planted at the entry's name is replaced, not followed. Temporaries of writers
 * that died are removed once they are 10 minutes old. A file that is truncated,
 * corrupt, for another key, a link, or owned or writable by another user is ignored
 * (and replaced on the next put).
 */
#ifndef PF_KCACHE_H
#define PF_KCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pf_kcache_key {
    uint64_t a, b; /* two independent 64-bit hashes of everything added */
} pf_kcache_key;

void pf_kcache_key_init(pf_kcache_key *k);
void pf_kcache_key_add(pf_kcache_key *k, const void *data, size_t n);

/* The cache directory in buf (created if needed); -1 when there is none or it is
   unsafe (why in the log). */
int pf_kcache_dir(char *buf, size_t size);

/* 0 and a malloc'd copy of the entry, or -1 (absent, invalid, or no cache). */
int pf_kcache_get(const pf_kcache_key *k, void **data, size_t *size);
/* 0 when stored. */
int pf_kcache_put(const pf_kcache_key *k, const void *data, size_t size);
/* The entry's path (for tests); -1 without a cache. */
int pf_kcache_path(const pf_kcache_key *k, char *buf, size_t size);

#endif
