/* engine/safefile.c: files written under a temporary name and renamed into place
 * (safefile.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkostemp */
#endif
#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipefuse/pipefuse.h"

static void set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_size, const char *fmt, ...)
{
    if (!err || !err_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

static pthread_once_t umask_once = PTHREAD_ONCE_INIT;
static mode_t umask_cached;
static void read_umask_once(void)
{
    umask_cached = umask(022);
    umask(umask_cached);
}

/* The process umask, without changing it. umask() can only be read by setting it,
   which races with other threads creating files at that moment; Linux (4.7 and
   later) shows it in /proc/self/status. Elsewhere it is read once, by set and reset. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f) {
        char line[256];
        unsigned m;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "Umask: %o", &m) == 1) {
                fclose(f);
                return (mode_t)m;
            }
        }
        fclose(f);
    }
    pthread_once(&umask_once, read_umask_once);
    return umask_cached;
}

int pf_safe_open(const char *path, char **tmp_out, FILE **fp, char *err, size_t err_size)
{
    *tmp_out = NULL;
    *fp = NULL;
    /* "<dir>/.<base>.XXXXXX": hidden, in the same directory (so rename is atomic) and
       recognisably ours. The base is shortened so the name stays within NAME_MAX. */
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = (size_t)(base - path), base_len = strlen(base);
    if (base_len == 0) {
        set_err(err, err_size, "%s: cannot write: is a directory", path);
        return PF_IO;
    }
    if (base_len > 200)
        base_len = 200;
    char *tmp = malloc(dir_len + base_len + 10);
    if (!tmp) {
        set_err(err, err_size, "%s: out of memory", path);
        return PF_NO_MEMORY;
    }
    snprintf(tmp, dir_len + base_len + 10, "%.*s.%.*s.XXXXXX", (int)dir_len, path, (int)base_len,
             base);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        set_err(err, err_size, "%s: cannot create a temporary file %s: %s", path, tmp,
                strerror(errno));
        free(tmp);
        return PF_IO;
    }
    /* mkstemp creates 0600; give the file the mode any new file would have. */
    if (fchmod(fd, 0666 & ~current_umask()) != 0) {
        set_err(err, err_size, "%s: cannot set the mode of %s: %s", path, tmp, strerror(errno));
    } else if (!(*fp = fdopen(fd, "wb"))) {
        set_err(err, err_size, "%s: cannot write: %s", path, strerror(errno));
    } else {
        *tmp_out = tmp;
        return PF_OK;
    }
    close(fd);
    unlink(tmp);
    free(tmp);
    return PF_IO;
}

int pf_safe_close(const char *path, char *tmp, FILE *fp, int st, char *err, size_t err_size)
{
    /* The data may still sit in stdio's buffer: a full disk shows up here. */
    if (fp && fclose(fp) != 0 && st == PF_OK) {
        set_err(err, err_size, "%s: write error: %s", path, strerror(errno));
        st = PF_IO;
    }
    if (st == PF_OK && rename(tmp, path) != 0) {
        set_err(err, err_size, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        st = PF_IO;
    }
    if (st != PF_OK)
        unlink(tmp);
    free(tmp);
    return st;
}
