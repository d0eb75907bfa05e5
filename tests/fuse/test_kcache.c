/* tests/fuse/test_kcache.c: the on-disk kernel cache: miss, hit, a corrupt, truncated,
 * foreign-key or group-writable entry ignored and replaced, an unsafe directory
 * refused, and concurrent writers of one key leaving one whole entry. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

    /* A group- or world-writable cache directory is refused altogether. */
    CHECK(chmod(cache, 0777) == 0);
    CHECK(pf_kcache_get(&a, &d, &n) != 0);
    CHECK(pf_kcache_put(&b, "x", 1) != 0);
    CHECK(chmod(cache, 0700) == 0);

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
