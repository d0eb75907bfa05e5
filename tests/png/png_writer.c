/* tests/png/png_writer.c: the writer never leaves a partial file or a temporary behind.
 *
 * - no such directory, a file where a directory should be, a target that is a
 *   directory: PF_IO and nothing left;
 * - invalid frames (5 channels, 0 channels, f32, no data, pitch too small, zlib level
 *   10): PF_INVALID_ARGUMENT and no file;
 * - a failure in the middle of writing (the file size limit, RLIMIT_FSIZE, which works
 *   for root too): PF_IO, the temporary removed, the old target untouched;
 * - an existing target is replaced by rename only on success: a hard link to the old
 *   file keeps the old contents, and no temporary remains in the directory;
 * - the new file's mode is 0666 & ~umask, as open(2) would give it.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, link, dirent, rlimit under -std=c11 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipefuse/png.h"
#include "testutil.h"

static char dir[1024];

/* Names in dir, other than . and .., joined with spaces, sorted by readdir luck. */
static int list_dir(const char *d, char *out, size_t n)
{
    DIR *dp = opendir(d);
    int count = 0;
    out[0] = '\0';
    if (!dp)
        return -1;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        count++;
        strncat(out, " ", n - strlen(out) - 1);
        strncat(out, de->d_name, n - strlen(out) - 1);
    }
    closedir(dp);
    return count;
}

/* No temporary file (".<name>.XXXXXX") anywhere in dir. */
static void check_no_temp(const char *where)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        CHECKF(de->d_name[0] != '.' || strcmp(de->d_name, ".") == 0 ||
                   strcmp(de->d_name, "..") == 0,
               "%s: temporary file %s left behind", where, de->d_name);
    if (dp)
        closedir(dp);
}

static void spit(const char *path, const char *text)
{
    pf_test_write_file(path, text, strlen(text));
}

static int file_is(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

static pf_frame make_frame(int w, int h, pf_sample s, int ch, uint64_t seed)
{
    pf_frame f;
    if (pf_frame_alloc(&f, w, h, s, ch) != PF_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    pf_rng r;
    pf_rng_seed(&r, seed);
    for (size_t i = 0; i < f.pitch * (size_t)h; i++)
        ((unsigned char *)f.data)[i] = (unsigned char)pf_rng_u32(&r);
    return f;
}

static void check_bad_paths(const pf_frame *good)
{
    char path[2048], err[512] = "", names[1024];

    /* A directory that does not exist. */
    snprintf(path, sizeof path, "%s/no-such-dir/out.png", dir);
    int st = pf_png_write(path, good, -1, err, sizeof err);
    CHECKF(st == PF_IO, "missing directory: %s: %s", pf_status_name(st), err);
    CHECKF(strncmp(err, path, strlen(path)) == 0, "missing directory: message: %s", err);
    snprintf(path, sizeof path, "%s/no-such-dir", dir);
    CHECK(access(path, F_OK) != 0);

    /* A plain file in the place of the directory. */
    snprintf(path, sizeof path, "%s/plain", dir);
    spit(path, "plain");
    snprintf(path, sizeof path, "%s/plain/out.png", dir);
    st = pf_png_write(path, good, -1, err, sizeof err);
    CHECKF(st == PF_IO, "file as directory: %s: %s", pf_status_name(st), err);

    /* A target that is a directory: everything is written, then rename fails; the
       temporary must go. */
    snprintf(path, sizeof path, "%s/adir", dir);
    CHECK(mkdir(path, 0755) == 0);
    st = pf_png_write(path, good, -1, err, sizeof err);
    CHECKF(st == PF_IO && strncmp(err, path, strlen(path)) == 0, "target is a directory: %s: %s",
           pf_status_name(st), err);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
    check_no_temp("target is a directory");

    /* A path that names no file. */
    snprintf(path, sizeof path, "%s/", dir);
    st = pf_png_write(path, good, -1, err, sizeof err);
    CHECKF(st == PF_IO, "trailing slash: %s: %s", pf_status_name(st), err);

    CHECKF(list_dir(dir, names, sizeof names) == 2, "left in the directory:%s", names);
    snprintf(path, sizeof path, "%s/adir", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/plain", dir);
    remove(path);
}

static void check_bad_frames(const pf_frame *good)
{
    char path[2048], err[512] = "", names[1024];
    snprintf(path, sizeof path, "%s/bad.png", dir);

    pf_frame f = *good;
    f.channels = 5;
    int st = pf_png_write(path, &f, -1, err, sizeof err);
    CHECKF(st == PF_INVALID_ARGUMENT && strstr(err, "5 channels"), "5 channels: %s: %s",
           pf_status_name(st), err);
    f = *good;
    f.channels = 0;
    CHECK(pf_png_write(path, &f, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    f = *good;
    f.sample = PF_F32;
    st = pf_png_write(path, &f, -1, err, sizeof err);
    CHECKF(st == PF_INVALID_ARGUMENT && strstr(err, "f32"), "f32: %s: %s", pf_status_name(st), err);
    CHECKF(strncmp(err, path, strlen(path)) == 0, "f32: message: %s", err);
    f = *good;
    f.data = NULL;
    CHECK(pf_png_write(path, &f, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    f = *good;
    f.pitch = (size_t)f.width * pf_frame_pixel_bytes(f.sample, f.channels) - 1;
    CHECK(pf_png_write(path, &f, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    f = *good;
    f.width = 0;
    CHECK(pf_png_write(path, &f, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_write(path, good, 10, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_write(path, good, -2, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_write(path, NULL, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_write(NULL, good, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_write(path, &f, -1, NULL, 0) == PF_INVALID_ARGUMENT); /* no err buffer */
    CHECKF(list_dir(dir, names, sizeof names) == 0, "left in the directory:%s", names);

    /* An existing file at the target survives a rejected frame. */
    spit(path, "old contents");
    f = *good;
    f.channels = 5;
    CHECK(pf_png_write(path, &f, -1, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(file_is(path, "old contents"));
    remove(path);
}

/* A failure halfway through the file: the size limit makes write() fail with EFBIG. */
static void check_write_failure(void)
{
    char path[2048], err[512] = "", names[1024];
    snprintf(path, sizeof path, "%s/limited.png", dir);
    spit(path, "old contents");

    /* Random 16-bit RGBA does not compress: about 530 kB, against a 64 kB limit. */
    pf_frame big = make_frame(257, 257, PF_U16, 4, 3);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of being killed */
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
        printf("png_writer: cannot set RLIMIT_FSIZE (%s): mid-write failure not tested\n",
               strerror(errno));
    } else {
        int st = pf_png_write(path, &big, 0, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECKF(st == PF_IO && strncmp(err, path, strlen(path)) == 0, "file size limit: %s: %s",
               pf_status_name(st), err);
        printf("png_writer: file size limit: %s\n", err);
        CHECK(file_is(path, "old contents"));
        check_no_temp("file size limit");
        CHECKF(list_dir(dir, names, sizeof names) == 1, "left in the directory:%s", names);

        /* A file smaller than stdio's buffer: every fwrite succeeds and the failure
           only shows when fclose flushes. */
        pf_frame small = make_frame(9, 9, PF_U8, 3, 4);
        lim.rlim_cur = 100;
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        st = pf_png_write(path, &small, 0, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECKF(st == PF_IO && strncmp(err, path, strlen(path)) == 0,
               "file size limit at fclose: %s: %s", pf_status_name(st), err);
        CHECK(file_is(path, "old contents"));
        check_no_temp("file size limit at fclose");
        pf_frame_free(&small);
    }
    signal(SIGXFSZ, SIG_DFL);
    pf_frame_free(&big);
    remove(path);
}

static void check_replace(const pf_frame *good)
{
    char path[2048], link_path[2048], err[512] = "";
    snprintf(path, sizeof path, "%s/target.png", dir);
    snprintf(link_path, sizeof link_path, "%s/old-link", dir);
    spit(path, "old contents");
    CHECK(link(path, link_path) == 0);
    struct stat before, after;
    CHECK(stat(path, &before) == 0);

    int st = pf_png_write(path, good, 6, err, sizeof err);
    CHECKF(st == PF_OK, "replace: %s: %s", pf_status_name(st), err);
    CHECK(stat(path, &after) == 0);
    /* A new inode: renamed into place, never truncated and rewritten. */
    CHECKF(before.st_ino != after.st_ino, "replace: same inode");
    CHECK(file_is(link_path, "old contents"));
    check_no_temp("replace");

    pf_frame back;
    st = pf_png_read(path, 0, &back, NULL, err, sizeof err);
    CHECKF(st == PF_OK && back.width == good->width && back.channels == good->channels,
           "replace: read back: %s", err);
    pf_frame_free(&back);
    remove(link_path);
    remove(path);
}

static void check_modes(const pf_frame *good)
{
    static const mode_t masks[] = {022, 077, 027, 0};
    char path[2048], err[512] = "";
    snprintf(path, sizeof path, "%s/mode.png", dir);
    mode_t saved = umask(022);
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        umask(masks[i]);
        CHECKF(pf_png_write(path, good, 1, err, sizeof err) == PF_OK, "%s", err);
        struct stat sb;
        CHECK(stat(path, &sb) == 0);
        mode_t want = 0666 & ~masks[i];
        CHECKF((sb.st_mode & 07777) == want, "umask %03o: mode %03o, expected %03o",
               (unsigned)masks[i], (unsigned)(sb.st_mode & 07777), (unsigned)want);
        remove(path);
    }
    umask(saved);
}

/* A relative path with no directory part writes into the current directory. */
static void check_relative(const pf_frame *good)
{
    char cwd[4096], err[512] = "";
    if (!getcwd(cwd, sizeof cwd) || chdir(dir) != 0) {
        CHECK(0);
        return;
    }
    CHECKF(pf_png_write("rel.png", good, -1, err, sizeof err) == PF_OK, "%s", err);
    CHECK(access("rel.png", F_OK) == 0);
    check_no_temp("relative path");
    remove("rel.png");
    CHECK(chdir(cwd) == 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("png_writer"));
    pf_frame good = make_frame(31, 17, PF_U8, 3, 1);

    check_bad_paths(&good);
    check_bad_frames(&good);
    check_write_failure();
    check_replace(&good);
    check_modes(&good);
    check_relative(&good);

    char names[1024];
    CHECKF(list_dir(dir, names, sizeof names) == 0, "left in the directory:%s", names);
    pf_frame_free(&good);
    return pf_test_done("png_writer");
}
