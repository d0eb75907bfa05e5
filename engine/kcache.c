/* engine/kcache.c: see kcache.h.
 *
 * File layout: "PFKCACHE" (8 bytes), format version (u32), reserved (u32), key (two
 * u64), payload size (u64), payload hash (u64), payload. Everything is checked before
 * a byte of it is used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_NOFOLLOW, getrandom when built into a test */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "kcache.h"

#define MAGIC        "PFKCACHE"
#define FORMAT       1u
#define HEADER_BYTES 48
#define MAX_ENTRY    (256u << 20)

void pf_kcache_key_init(pf_kcache_key *k)
{
    k->a = 0xcbf29ce484222325ull; /* FNV-1a offset basis */
    k->b = 0x9e3779b97f4a7c15ull;
}

void pf_kcache_key_add(pf_kcache_key *k, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t a = k->a, b = k->b;
    for (size_t i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;          /* FNV-1a */
        b = (b + p[i] + 1) * 0xff51afd7ed558ccdull; /* multiply-xorshift */
        b ^= b >> 29;
    }
    /* length too, so "ab"+"c" and "a"+"bc" differ */
    a = (a ^ n) * 0x100000001b3ull;
    b = (b + n) * 0xc4ceb9fe1a85ec53ull;
    b ^= b >> 32;
    k->a = a;
    k->b = b;
}

static uint64_t payload_hash(const void *data, size_t n)
{
    pf_kcache_key k;
    pf_kcache_key_init(&k);
    pf_kcache_key_add(&k, data, n);
    return k.a ^ (k.b * 0x9e3779b97f4a7c15ull);
}

static int mkdir_p(char *path, mode_t mode)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        int rc = mkdir(path, mode);
        *s = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return mkdir(path, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* One warning per process and reason about the cache directory: every compile would
   repeat it. */
enum { W_CREATE, W_NOT_DIR, W_OWNER, W_MODE, W_COUNT };
static void warn_once(int reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_once(int reason, const char *fmt, ...)
{
    static int warned[W_COUNT];
    if (__atomic_exchange_n(&warned[reason], 1, __ATOMIC_RELAXED))
        return;
    char msg[PF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pf_log(NULL, 1, "%s", msg);
}

#define STALE_SECONDS 600 /* a temporary older than this is a dead writer's */

/* Removes temporaries that writers killed between create and rename left behind: ours,
   regular, and old enough that no live writer holds them. Once per process. */
static void remove_stale(const char *dir)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *ent;
    time_t now = time(NULL);
    while ((ent = readdir(d)) != NULL) {
        size_t len = strlen(ent->d_name);
        struct stat st;
        if (ent->d_name[0] != '.' || len < 5 || strcmp(ent->d_name + len - 4, ".tmp") != 0)
            continue;
        if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid() && now - st.st_mtime > STALE_SECONDS)
            unlinkat(dirfd(d), ent->d_name, 0);
    }
    closedir(d);
}

int pf_kcache_dir(char *buf, size_t size)
{
    const char *env = getenv("PIPEFUSE_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (env && strcmp(env, "off") == 0)
        return -1;
    if (env && *env)
        n = snprintf(buf, size, "%s", env);
    else if (xdg && *xdg == '/')
        n = snprintf(buf, size, "%s/pipefuse", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/pipefuse", home);
    else
        return -1;
    if (n <= 0 || (size_t)n >= size)
        return -1;
    if (mkdir_p(buf, 0700) != 0) {
        warn_once(W_CREATE, "kernel cache %s: cannot create: %s; compiling without the cache", buf,
                  strerror(errno));
        return -1;
    }
    /* Another user's directory, or one others can write to, could feed us code or
       have our writes redirected. */
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
        warn_once(W_NOT_DIR, "kernel cache %s: not a directory; compiling without the cache", buf);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        warn_once(W_OWNER,
                  "kernel cache %s: owned by uid %u, not by this user (uid %u); compiling "
                  "without the cache",
                  buf, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        warn_once(W_MODE,
                  "kernel cache %s: writable by %s (mode %04o); compiling without the cache "
                  "(chmod 700 it to use it)",
                  buf, st.st_mode & S_IWOTH ? "others" : "its group",
                  (unsigned)(st.st_mode & 07777));
        return -1;
    }
    remove_stale(buf);
    return 0;
}

int pf_kcache_path(const pf_kcache_key *k, char *buf, size_t size)
{
    char dir[4096];
    if (pf_kcache_dir(dir, sizeof dir) != 0)
        return -1;
    int n = snprintf(buf, size, "%s/%016llx%016llx.cubin", dir, (unsigned long long)k->a,
                     (unsigned long long)k->b);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int pf_kcache_get(const pf_kcache_key *k, void **data, size_t *size)
{
    char path[4200];
    *data = NULL;
    if (pf_kcache_path(k, path, sizeof path) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    unsigned char h[HEADER_BYTES];
    void *buf = NULL;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
             !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size >= HEADER_BYTES &&
             read(fd, h, HEADER_BYTES) == HEADER_BYTES && memcmp(h, MAGIC, 8) == 0 &&
             get_u64(h + 8) == FORMAT && get_u64(h + 16) == k->a && get_u64(h + 24) == k->b;
    uint64_t n = ok ? get_u64(h + 32) : 0;
    ok = ok && n > 0 && n <= MAX_ENTRY && (uint64_t)st.st_size == HEADER_BYTES + n &&
         (buf = malloc(n)) != NULL && read(fd, buf, n) == (ssize_t)n &&
         payload_hash(buf, n) == get_u64(h + 40);
    close(fd);
    if (!ok) {
        free(buf);
        return -1;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* 16 hex digits nobody can guess, for temporary names. */
static int random_hex(char *out)
{
    unsigned char r[8];
#ifdef PF_KCACHE_TEST_NAMES
    extern int pf_kcache_test_random(unsigned char *r);
    if (pf_kcache_test_random(r) != 0)
#endif
    {
        size_t got = 0;
        while (got < sizeof r) {
            ssize_t n = getrandom(r + got, sizeof r - got, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return -1;
            got += (size_t)n;
        }
    }
    for (int i = 0; i < 8; i++)
        sprintf(out + 2 * i, "%02x", r[i]);
    return 0;
}

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The entry goes to a new file of an unpredictable name in the cache directory, created
   exclusively (never through a link someone planted), synced, then renamed over the
   entry's name (which replaces a link there rather than following it). */
int pf_kcache_put(const pf_kcache_key *k, const void *data, size_t size)
{
    char dir[4096], path[4200], tmp[4300], hex[17];
    if (size == 0 || size > MAX_ENTRY || pf_kcache_dir(dir, sizeof dir) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/%016llx%016llx.cubin", dir, (unsigned long long)k->a,
             (unsigned long long)k->b);
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        if (random_hex(hex) != 0)
            return -1;
        int n = snprintf(tmp, sizeof tmp, "%s/.%016llx%016llx.%s.tmp", dir,
                         (unsigned long long)k->a, (unsigned long long)k->b, hex);
        if (n <= 0 || (size_t)n >= sizeof tmp)
            return -1;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    unsigned char h[HEADER_BYTES];
    memcpy(h, MAGIC, 8);
    put_u64(h + 8, FORMAT);
    put_u64(h + 16, k->a);
    put_u64(h + 24, k->b);
    put_u64(h + 32, size);
    put_u64(h + 40, payload_hash(data, size));
    int ok =
        write_all(fd, h, HEADER_BYTES) == 0 && write_all(fd, data, size) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    /* the rename itself, made durable */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
