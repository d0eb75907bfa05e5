/* tests/fuse/test_kcache.c: the on-disk kernel cache: miss, hit, a corrupt, truncated,
 * foreign-key or group-writable entry ignored and replaced, an unsafe directory
 * refused with a warning, links planted at an entry's name or at the next temporary
 * name not followed, stale temporaries removed, and concurrent writers of one key
 * leaving one whole entry. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kcache.h"
#include "testutil.h"

static pf_kcache_key key_of(const char *s)
{
    pf_kcache_key k;
    pf_kcache_key_init(&k);
    pf_kcache_key_add(&k, s, strlen(s));
    return k;
}

static int get_equals(const pf_kcache_key *k, const void *want, size_t n)
{
    void *d = NULL;
    size_t sz = 0;
    int ok = pf_kcache_get(k, &d, &sz) == 0 && sz == n && memcmp(d, want, n) == 0;
    free(d);
    return ok;
}

/* kcache.c is built here with PF_KCACHE_TEST_NAMES: its temporary names take their
   random part from this while forced_left > 0, so a test can plant a link at the name
   a put is about to use. */
static int forced_left;
static unsigned char forced_byte;
int pf_kcache_test_random(unsigned char *r);
int pf_kcache_test_random(unsigned char *r)
{
    if (forced_left <= 0)
        return -1;
    forced_left--;
    memset(r, forced_byte, 8);
    return 0;
}

/* The whole content of a small file, or "" */
static const char *slurp(const char *path)
{
    static char buf[256];
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

static void write_file(const char *path, const char *text)
{
    pf_test_write_file(path, text, strlen(text));
}

/* Runs from the point of the call with stderr going to a file; stderr_end() restores
   it and returns what was written. */
static int saved_stderr = -1;
static char err_path[4300];
static void stderr_begin(const char *dir)
{
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && saved_stderr >= 0);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
}
static const char *stderr_end(void)
{
    fflush(stderr);
    if (saved_stderr >= 0) {
        dup2(saved_stderr, 2);
        close(saved_stderr);
        saved_stderr = -1;
    }
    return slurp(err_path);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *h = strstr(s, what); h; h = strstr(h + 1, what))
        n++;
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int main(void)
{
    const char *dir = pf_test_tmpdir("kcache");
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/cache/nested", dir);
    setenv("PIPEFUSE_CACHE_DIR", cache, 1);

    /* Temporaries a killed writer left: removed at the first use once old, a recent one
       (a live writer's) kept. */
    char stale[4400], fresh[4400], cmd0[9000];
    snprintf(cmd0, sizeof cmd0, "mkdir -p '%s' && chmod 700 '%s'", cache, cache);
    CHECK(system(cmd0) == 0);
    snprintf(stale, sizeof stale, "%s/.00000000000000000000000000000000.0123456789abcdef.tmp",
             cache);
    snprintf(fresh, sizeof fresh, "%s/.00000000000000000000000000000000.fedcba9876543210.tmp",
             cache);
    write_file(stale, "half an entry");
    write_file(fresh, "being written");
    struct timeval old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    CHECK(utimes(stale, old) == 0);

    /* Keys: different inputs, different keys; split points matter. */
    pf_kcache_key a = key_of("kernel A"), b = key_of("kernel B");
    CHECK(a.a != b.a && a.b != b.b);
    pf_kcache_key s1, s2;
    pf_kcache_key_init(&s1);
    pf_kcache_key_add(&s1, "ab", 2);
    pf_kcache_key_add(&s1, "c", 1);
    pf_kcache_key_init(&s2);
    pf_kcache_key_add(&s2, "a", 1);
    pf_kcache_key_add(&s2, "bc", 2);
    CHECK(s1.a != s2.a || s1.b != s2.b);

    /* Miss, put, hit; the directory is made 0700. */
    unsigned char payload[5000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 7 + 3);
    void *d = NULL;
    size_t n = 0;
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    CHECK(pf_kcache_put(&a, payload, sizeof payload) == 0);
    CHECK(get_equals(&a, payload, sizeof payload));
    CHECK(pf_kcache_get(&b, &d, &n) != 0);
    struct stat st;
    CHECK(stat(cache, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(access(stale, F_OK) != 0 && access(fresh, F_OK) == 0);
    unlink(fresh);

    char path[4300];
    CHECK(pf_kcache_path(&a, path, sizeof path) == 0);
    long full = file_size(path);
    CHECK(full > (long)sizeof payload);

    /* Truncated entry: ignored, then replaced by the next put. */
    CHECK(truncate(path, full - 10) == 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    CHECK(pf_kcache_put(&a, payload, sizeof payload) == 0);
    CHECK(get_equals(&a, payload, sizeof payload));

    /* A flipped payload byte: the checksum catches it. */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, full - 100, SEEK_SET);
        int c = fgetc(f);
        fseek(f, full - 100, SEEK_SET);
        fputc(c ^ 0x40, f);
        fclose(f);
    }
    CHECK(pf_kcache_get(&a, &d, &n) != 0);

    /* Another key's entry under this key's name is not taken for it. */
    char pathb[4300];
    CHECK(pf_kcache_put(&b, "other", 5) == 0);
    CHECK(pf_kcache_path(&b, pathb, sizeof pathb) == 0);
    CHECK(rename(pathb, path) == 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);

    /* An entry others may write to is not trusted. */
    CHECK(pf_kcache_put(&a, payload, sizeof payload) == 0);
    CHECK(chmod(path, 0666) == 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    CHECK(chmod(path, 0600) == 0);
    CHECK(get_equals(&a, payload, sizeof payload));

    /* A group- or world-writable cache directory is refused altogether, with one
       warning that says why and what happens instead. */
    CHECK(chmod(cache, 0777) == 0);
    stderr_begin(dir);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    CHECK(pf_kcache_put(&b, "x", 1) != 0);
    const char *warned = stderr_end();
    CHECKF(strstr(warned, cache) && strstr(warned, "writable by others (mode 0777)") &&
               strstr(warned, "without the cache"),
           "warning: '%s'", warned);
    CHECKF(count(warned, "kernel cache") == 1, "once: '%s'", warned);
    CHECK(chmod(cache, 0700) == 0);
    /* ... and one owned by another user (only root can make one). */
    if (geteuid() == 0) {
        CHECK(chown(cache, 4321, (gid_t)-1) == 0);
        stderr_begin(dir);
        CHECK(pf_kcache_put(&b, "x", 1) != 0);
        CHECK(pf_kcache_get(&a, &d, &n) != 0);
        warned = stderr_end();
        CHECKF(strstr(warned, "owned by uid 4321, not by this user (uid 0)"), "warning: '%s'",
               warned);
        CHECK(chown(cache, 0, (gid_t)-1) == 0);
    }
    CHECK(get_equals(&a, payload, sizeof payload));

    /* A link planted at the entry's name is replaced, not followed: the file it points
       to keeps its content. */
    char victim[4400];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "not yours");
    CHECK(unlink(path) == 0 && symlink(victim, path) == 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0); /* a link is not read either */
    CHECK(pf_kcache_put(&a, payload, sizeof payload) == 0);
    CHECK(strcmp(slurp(victim), "not yours") == 0);
    struct stat lst;
    CHECK(lstat(path, &lst) == 0 && S_ISREG(lst.st_mode));
    CHECK(get_equals(&a, payload, sizeof payload));

    /* A link planted at the temporary name the next put would use (made known here by
       the test's random source) is not followed or replaced: the put takes another
       name. */
    char planted[4400];
    snprintf(planted, sizeof planted, "%s/.%016llx%016llx.%s.tmp", cache, (unsigned long long)a.a,
             (unsigned long long)a.b, "abababababababab");
    CHECK(symlink(victim, planted) == 0);
    forced_left = 1;
    forced_byte = 0xab;
    CHECK(pf_kcache_put(&a, "new entry", 9) == 0);
    CHECK(forced_left == 0);
    CHECK(strcmp(slurp(victim), "not yours") == 0);
    CHECK(lstat(planted, &lst) == 0 && S_ISLNK(lst.st_mode));
    CHECK(get_equals(&a, "new entry", 9));
    CHECK(unlink(planted) == 0);
    /* A dangling link there (to a file that would be created) is not followed either. */
    char target[4400];
    snprintf(target, sizeof target, "%s/created", dir);
    CHECK(symlink(target, planted) == 0);
    forced_left = 1;
    CHECK(pf_kcache_put(&a, payload, sizeof payload) == 0);
    CHECK(access(target, F_OK) != 0);
    CHECK(unlink(planted) == 0);
    CHECK(get_equals(&a, payload, sizeof payload));

    /* Concurrent writers of one key: 8 processes, 50 puts each of different sizes;
       every read in between is whole, and the survivor is one writer's entry. */
    pf_kcache_key c = key_of("contended");
    pid_t pids[8];
    for (int w = 0; w < 8; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            unsigned char buf[20000];
            size_t len = 1000 + 2000 * (size_t)w;
            memset(buf, 'A' + w, len);
            int bad = 0;
            for (int k = 0; k < 50; k++) {
                pf_kcache_put(&c, buf, len);
                void *r = NULL;
                size_t rn = 0;
                if (pf_kcache_get(&c, &r, &rn) == 0) {
                    unsigned char ch = ((unsigned char *)r)[0];
                    bad |= rn != 1000 + 2000 * (size_t)(ch - 'A');
                    for (size_t i = 0; i < rn; i++)
                        bad |= ((unsigned char *)r)[i] != ch;
                }
                free(r);
            }
            _exit(bad);
        }
    }
    for (int w = 0; w < 8; w++) {
        int status = 0;
        CHECK(pids[w] > 0 && waitpid(pids[w], &status, 0) == pids[w]);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d saw a torn entry", w);
    }
    void *r = NULL;
    size_t rn = 0;
    CHECK(pf_kcache_get(&c, &r, &rn) == 0);
    if (r) {
        unsigned char ch = ((unsigned char *)r)[0];
        CHECK(ch >= 'A' && ch < 'A' + 8 && rn == 1000 + 2000 * (size_t)(ch - 'A'));
    }
    free(r);
    /* No temporary files left behind. */
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep -v '\\.cubin$')\"", cache);
    CHECK(system(cmd) == 0);

    /* "off" disables the cache. */
    setenv("PIPEFUSE_CACHE_DIR", "off", 1);
    CHECK(pf_kcache_put(&a, payload, sizeof payload) != 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    return pf_test_done("test_kcache");
}
