/* engine/util.c: status names, versions, error formatting, name suggestions. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "internal.h"

#define PF_API __attribute__((visibility("default")))

PF_API int pf_version(void)
{
    return PF_VERSION_NUMBER;
}
PF_API const char *pf_version_string(void)
{
    return PF_VERSION_STRING;
}

PF_API const char *pf_status_name(int status)
{
    switch (status) {
#define PF_STATUS_NAME_(name, number, text)                                                        \
    case PF_##name:                                                                                \
        return "PF_" #name;
        PF_STATUS_MAP(PF_STATUS_NAME_)
#undef PF_STATUS_NAME_
    }
    return "PF_UNKNOWN";
}

PF_API const char *pf_status_str(int status)
{
    switch (status) {
#define PF_STATUS_STR_(name, number, text)                                                         \
    case PF_##name:                                                                                \
        return text;
        PF_STATUS_MAP(PF_STATUS_STR_)
#undef PF_STATUS_STR_
    }
    return "unknown status";
}

void pf_verrf(char *buf, size_t size, const char *fmt, va_list ap)
{
    if (!buf || size == 0)
        return;
    vsnprintf(buf, size, fmt, ap);
}

void pf_errf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(buf, PF_ERRMSG_MAX, fmt, ap);
    va_end(ap);
}

void pf_log(const pf_engine *e, int level, const char *fmt, ...)
{
    char msg[PF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e && e->log) {
        e->log(e->log_user, level, msg);
        return;
    }
    static const char *const prefix[] = {"", "warning: ", "error: "};
    fprintf(stderr, "pipefuse: %s%s\n", prefix[level < 0 ? 0 : (level > 2 ? 2 : level)], msg);
}

int pf_is_identifier(const char *s)
{
    if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

char *pf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions),
   case-insensitive: "sigam" and "Sigma" are both one step from "sigma". */
static int edit_distance(const char *a, const char *b)
{
    enum { MAXN = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAXN || m >= MAXN)
        return 1 << 20;
    int d[MAXN][MAXN];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
            int cost = ca != cb;
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) && (a[i - 2] | 0x20) == cb &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[n][m];
}

const char *pf_closest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL;
    int best_d = 1 << 20;
    for (int i = 0; i < n; i++) {
        if (!cands[i])
            continue;
        int d = edit_distance(name, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    /* A plausible typo: at most a third of the name's letters changed (at least 1),
       or one name containing the other ("blur" for "gaussian_blur" is not, "gauss"
       for "gaussian" is). */
    size_t len = strlen(name);
    int limit = (int)(len / 3) > 1 ? (int)(len / 3) : 1;
    if (best && (best_d <= limit || (len >= 3 && (strstr(best, name) || strstr(name, best)))))
        return best;
    return NULL;
}

/* A plugin's pointers are read only after these say the memory is there: write() copies
   from the caller's memory and fails with EFAULT where it cannot be read, where a load
   would be a SIGSEGV. A pipe takes the bytes and is emptied; at most one page goes in at
   a time, less than a pipe holds. */
static int probe(int fd[2], const void *p, size_t n)
{
    char sink[4096];
    while (n) {
        size_t k = n < sizeof sink ? n : sizeof sink;
        ssize_t w = write(fd[1], p, k);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        if (read(fd[0], sink, (size_t)w) != w)
            return 0;
        p = (const char *)p + w;
        n -= (size_t)w;
    }
    return 1;
}

int pf_readable(const void *p, size_t n)
{
    int fd[2];
    if (!p)
        return 0;
    if (pipe2(fd, O_CLOEXEC) != 0)
        return 1; /* no pipe to probe with: as before, trust the plugin */
    int ok = probe(fd, p, n);
    close(fd[0]);
    close(fd[1]);
    return ok;
}

int pf_readable_str(const char *s, size_t max)
{
    int fd[2];
    if (!s)
        return 0;
    if (pipe2(fd, O_CLOEXEC) != 0)
        return 1;
    /* One byte probed on each page the string reaches (pages are readable whole); no byte
       past its end is read, which a sanitizer would call an overflow. */
    int ok = 0;
    for (size_t at = 0; at < max; at++) {
        if ((at == 0 || ((uintptr_t)(s + at) & 4095) == 0) && !probe(fd, s + at, 1))
            break;
        if (s[at] == 0) {
            ok = 1;
            break;
        }
    }
    close(fd[0]);
    close(fd[1]);
    return ok;
}
