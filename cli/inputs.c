/* cli/inputs.c: `pipefuse run` as the user writes it, turned into the batch that batch/run.c
 * carries out.
 *
 * Before the batch: --backend cuda is refused once when no GPU can run it (asked in a
 * child process: the supervisor holds no CUDA context); directory
 * inputs are listed (with --recursive, their subfolders too, keeping each file's folder
 * for its outputs' names); files in the output folder that are this pipeline's outputs
 * of other inputs there are left out (x.edges.png beside x.png, when -o is the input
 * folder); names are made unique (names.c); '-' as the input is stdin, spooled to a
 * temporary file, and '-' as -o runs into a temporary folder whose one output is then
 * copied to stdout. batch/run.c gets plain files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "batch.h"
#include "images.h"

typedef struct found {
    char *path;
    char *dir;  /* below the directory argument: "" or "a/b/" */
    int listed; /* from a directory listing (may be left out as an output) */
} found;

typedef struct run_args {
    char **pass; /* arguments for batch/run.c, in order, without inputs and our own options */
    int n_pass;
    const char *pipeline, *outdir, *tmpl;
    const char *table_format;
    int recursive, quiet;
    char **positional; /* inputs as given */
    int n_positional;
    found *files;
    int n_files;
    struct stat out_st; /* -o DIR when it exists */
    int out_exists;
    /* --recursive: the folders listed so far, by device and inode (open addressing), so
       that links to a folder above (or two links to one folder) list it once */
    struct folder_id {
        dev_t dev;
        ino_t ino;
        int used;
    } * seen;
    size_t seen_cap, n_seen;
    int n_looped; /* folders reached again and not listed */
} run_args;

static int grow(void **v, int n, size_t size)
{
    if (n & (n - 1) && n > 8)
        return 0; /* capacity doubles at powers of two */
    void *g = realloc(*v, size * (size_t)(n < 8 ? 8 : 2 * n));
    if (!g)
        return -1;
    *v = g;
    return 0;
}

static int push_str(char ***v, int *n, char *s)
{
    if (!s || grow((void **)v, *n, sizeof(char *)) != 0)
        return -1;
    (*v)[(*n)++] = s;
    return 0;
}

/* What a folder contributes: *.png and the JPEG names (*.jpg, *.jpeg, *.jpe, *.jfif,
   *.jif), any case (cli_format_of_name) */
static int is_image_name(const char *name)
{
    cli_format f = cli_format_of_name(name, NULL);
    return f == CLI_FMT_PNG || f == CLI_FMT_JPEG;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_file(run_args *r, const char *path, const char *dir, int listed)
{
    if (grow((void **)&r->files, r->n_files, sizeof(found)) != 0)
        return -1;
    found *f = &r->files[r->n_files];
    f->path = NULL;
    if (path[0] == '-' && asprintf(&f->path, "./%s", path) < 0) /* not an option to batch/run.c */
        return -1;
    if (!f->path)
        f->path = strdup(path);
    f->dir = strdup(dir);
    f->listed = listed;
    if (!f->path || !f->dir) {
        free(f->path);
        free(f->dir);
        return -1;
    }
    r->n_files++;
    return 0;
}

static volatile sig_atomic_t stop_signal;

/* Marks folder st listed: 1 when it was already (a link led to it again), 0 when new,
   -1 without memory. */
static int seen_folder(run_args *r, const struct stat *st)
{
    if (2 * (r->n_seen + 1) > r->seen_cap) { /* grown at half full, everything re-placed */
        size_t cap = r->seen_cap ? 2 * r->seen_cap : 64;
        struct folder_id *n = calloc(cap, sizeof *n);
        if (!n)
            return -1;
        for (size_t k = 0; k < r->seen_cap; k++) {
            if (!r->seen[k].used)
                continue;
            size_t h = ((size_t)r->seen[k].dev * 31u + (size_t)r->seen[k].ino) & (cap - 1);
            while (n[h].used)
                h = (h + 1) & (cap - 1);
            n[h] = r->seen[k];
        }
        free(r->seen);
        r->seen = n;
        r->seen_cap = cap;
    }
    size_t h = ((size_t)st->st_dev * 31u + (size_t)st->st_ino) & (r->seen_cap - 1);
    for (; r->seen[h].used; h = (h + 1) & (r->seen_cap - 1))
        if (r->seen[h].dev == st->st_dev && r->seen[h].ino == st->st_ino)
            return 1;
    r->seen[h] = (struct folder_id){st->st_dev, st->st_ino, 1};
    r->n_seen++;
    return 0;
}

/* Tests only (docs/testing.md): with PF_TEST_LIST_GATE=FILE in the environment and FILE
   there, each folder about to be read is written into FILE, a line, and the listing
   waits while FILE holds anything: a test empties it to let the listing go on to the
   next folder or removes it to let it run free, and so signals a run in the middle of a
   listing however fast or loaded the machine. A signal ends the wait; the listing then
   stops as it does anywhere else. */
static void list_gate(const char *path)
{
    const char *gate = getenv("PF_TEST_LIST_GATE");
    int fd = gate && *gate ? open(gate, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    if (fd < 0)
        return;
    int said = dprintf(fd, "%s\n", path) > 0;
    close(fd);
    struct stat st;
    struct timespec t = {0, 2000000};
    while (said && !stop_signal && stat(gate, &st) == 0 && st.st_size > 0)
        nanosleep(&t, NULL);
}

#define LIST_MAX_DEPTH 256

/* The image files (PNG and JPEG names: cli_format_of_name) of root/rel (sorted), and with
   --recursive its subfolders' (sorted, after the files), never the output folder itself
   when it lies inside, and each folder once (by identity: a link to a folder above would
   list the tree again and again).
   -2 when a signal stopped it (Ctrl-C or SIGTERM while a large tree is listed). Folders
   more than LIST_MAX_DEPTH below the argument are named, not listed: each level holds a
   path on the stack. */
static int list_dir(run_args *r, const char *root, const char *rel, int depth)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s%s%s", root,
                     root[strlen(root) - 1] == '/' || !*rel ? "" : "/", rel);
    if (n < 0 || (size_t)n >= sizeof path) {
        fprintf(stderr, "pipefuse run: %s%s: the path is too long\n", root, rel);
        return -1;
    }
    if (stop_signal)
        return -2;
    DIR *d = opendir(path);
    struct stat dst;
    if (!d) {
        fprintf(stderr, "pipefuse run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int again = fstat(dirfd(d), &dst) == 0 ? seen_folder(r, &dst) : 0;
    if (again != 0) {
        closedir(d);
        if (again < 0) {
            fprintf(stderr, "pipefuse run: out of memory listing %s\n", path);
            return -1;
        }
        if (!r->quiet && r->n_looped < 3)
            fprintf(stderr,
                    "pipefuse run: %s: this folder is listed already (reached again through "
                    "a link); not listed twice\n",
                    path);
        r->n_looped++;
        return 0;
    }
    list_gate(path);
    char **files = NULL, **dirs = NULL;
    int nf = 0, nd = 0, rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (stop_signal) {
            rc = -2;
            break;
        }
        if (de->d_name[0] == '.')
            continue;
        char *full = NULL;
        if (asprintf(&full, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", de->d_name) <
            0) {
            rc = -1;
            break;
        }
        struct stat st;
        if (stat(full, &st) != 0) { /* a dangling link: batch/run.c reports it if it is a PNG */
            st.st_mode = 0;
        }
        if (S_ISDIR(st.st_mode)) {
            int is_out =
                r->out_exists && st.st_dev == r->out_st.st_dev && st.st_ino == r->out_st.st_ino;
            if (r->recursive && !is_out && depth >= LIST_MAX_DEPTH)
                fprintf(stderr,
                        "pipefuse run: %s: more than %d folders below %s: not listed (a "
                        "deeper tree takes its own run)\n",
                        full, LIST_MAX_DEPTH, root);
            else if (r->recursive && !is_out)
                rc = push_str(&dirs, &nd, strdup(de->d_name));
            free(full);
        } else if (is_image_name(de->d_name)) {
            rc = push_str(&files, &nf, full);
        } else {
            free(full);
        }
    }
    closedir(d);
    if (rc == -1)
        fprintf(stderr, "pipefuse run: out of memory listing %s\n", path);
    if (nf)
        qsort(files, (size_t)nf, sizeof *files, cmp_str);
    if (nd)
        qsort(dirs, (size_t)nd, sizeof *dirs, cmp_str);
    for (int i = 0; i < nf && rc == 0; i++)
        rc = add_file(r, files[i], rel, 1);
    for (int i = 0; i < nd && rc == 0; i++) {
        char *sub = NULL;
        rc = asprintf(&sub, "%s%s/", rel, dirs[i]) < 0 ? -1 : list_dir(r, root, sub, depth + 1);
        free(sub);
    }
    for (int i = 0; i < nf; i++)
        free(files[i]);
    for (int i = 0; i < nd; i++)
        free(dirs[i]);
    free(files);
    free(dirs);
    return rc;
}

/* Splits the normalised arguments: ours (--name, --recursive, -o, inputs) and batch/run.c's. */
static int split_args(int argc, char **argv, const cli_command *cmd, run_args *r)
{
    int ended = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!ended && strcmp(a, "--") == 0) {
            ended = 1;
            continue;
        }
        if (ended || a[0] != '-' || !a[1]) {
            if (!r->pipeline)
                r->pipeline = a;
            else if (push_str(&r->positional, &r->n_positional, (char *)a) != 0)
                return -1;
            continue;
        }
        const cli_opt *o = cli_find_option(cmd, a);
        const char *v = o && o->arg && i + 1 < argc ? argv[i + 1] : NULL;
        if (o && o->arg && !v) { /* batch/run.c says what is missing */
            if (push_str(&r->pass, &r->n_pass, (char *)a) != 0)
                return -1;
            continue;
        }
        char why[256];
        int mine = cli_image_option(a, v, why, sizeof why); /* --format, --quality... */
        if (mine < 0) {
            fprintf(stderr, "pipefuse run: %s\n", why);
            return -2;
        }
        if (mine) {
        } else if (strcmp(a, "--name") == 0) {
            r->tmpl = v;
        } else if (strcmp(a, "--recursive") == 0) {
            r->recursive = 1;
        } else if (strcmp(a, "--output") == 0) {
            r->outdir = v;
        } else {
            if (strcmp(a, "--table-format") == 0)
                r->table_format = v;
            if (strcmp(a, "--quiet") == 0)
                r->quiet = 1;
            if (push_str(&r->pass, &r->n_pass, (char *)a) != 0 ||
                (v && push_str(&r->pass, &r->n_pass, (char *)v) != 0))
                return -1;
        }
        i += v != NULL;
    }
    return 0;
}

/* Ctrl-C or SIGTERM before the batch starts (batch/run.c has its own handler from then
   on): a read of stdin or of a piped pipeline stops, so that the private temporary
   folder is removed instead of left behind, and so does the listing of the inputs. */
static void on_stop(int sig)
{
    stop_signal = sig;
}

/* Closes *fd and forgets it, so that an error path does not close it again. */
static int close_fd(int *fd)
{
    int rc = close(*fd);
    *fd = -1;
    return rc;
}

/* Copies fd to out_fd, all of it; -1 with errno EINTR when stopped by a signal. */
static int copy_fd(int fd, int out_fd)
{
    char buf[1 << 16];
    for (;;) {
        /* a signal that comes just before a read would not interrupt it: the wait for
           data is a poll that looks at the signal's flag every 100 ms */
        struct pollfd p = {fd, POLLIN, 0};
        if (stop_signal) {
            errno = EINTR;
            return -1;
        }
        int pr = poll(&p, 1, 100);
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0) /* the time, or a signal: its flag is looked at above */
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            return 0;
        if (n < 0) {
            if (errno == EINTR && !stop_signal)
                continue;
            return -1;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out_fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR && !stop_signal)
                continue;
            if (w <= 0)
                return -1;
            off += w;
        }
    }
}

/* Removes the temporary folder and what is in it (files, and folders of names). */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        for (struct dirent *de; (de = readdir(d));) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *full = NULL;
            if (asprintf(&full, "%s/%s", path, de->d_name) < 0)
                continue;
            struct stat st;
            if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(full);
            else
                unlink(full);
            free(full);
        }
        closedir(d);
    }
    rmdir(path);
}

/* The outputs' names and extensions, from the pipeline. */
typedef struct pipe_outputs {
    int n, single_image, n_images;
    const char *name[64];
    const char *ext[64];
    int image[64];
} pipe_outputs;

static int read_outputs(pf_pipeline *p, const char *table_format, pipe_outputs *po)
{
    memset(po, 0, sizeof *po);
    po->n = pf_pipeline_output_count(p);
    if (po->n > 64)
        po->n = 64;
    for (int k = 0; k < po->n; k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        po->name[k] = oi.name;
        po->image[k] = oi.kind == PF_OUTPUT_IMAGE;
        po->n_images += po->image[k];
        int json = oi.table_format ? oi.table_format == 2
                                   : table_format && strcmp(table_format, "json") == 0;
        po->ext[k] = !po->image[k]        ? (json ? "json" : "csv")
                     : cli_png_only(p, k) ? CLI_EXT_PNG_ONLY
                                          : "png";
    }
    po->single_image = po->n_images == 1;
    return 0;
}

/* Leaves out listed files that are outputs of other inputs of this batch: the output
   names of every candidate are looked up in the file system and files with the same
   identity dropped. Only when -o DIR exists (a new folder holds no outputs). */
static int drop_outputs(run_args *r, const pipe_outputs *po)
{
    if (!r->out_exists)
        return 0;
    typedef struct id {
        dev_t dev;
        ino_t ino;
        int owner;
    } id;
    id *ids = NULL;
    int n_ids = 0;
    for (int i = 0; i < r->n_files; i++) {
        if (!r->files[i].listed)
            continue;
        for (int k = 0; k < po->n; k++) {
            char *name = cli_output_name(r->files[i].path, po->name[k], po->ext[k],
                                         po->image[k] && po->single_image);
            char *full = NULL;
            struct stat st;
            if (name && asprintf(&full, "%s/%s", r->outdir, name) >= 0 && stat(full, &st) == 0) {
                if (grow((void **)&ids, n_ids, sizeof *ids) != 0) {
                    free(full), free(name), free(ids);
                    return -1;
                }
                ids[n_ids++] = (id){st.st_dev, st.st_ino, i};
            }
            free(full);
            free(name);
        }
    }
    int kept = 0, dropped = 0;
    for (int i = 0; i < r->n_files; i++) {
        struct stat st;
        int drop = 0;
        if (r->files[i].listed && stat(r->files[i].path, &st) == 0)
            for (int j = 0; j < n_ids && !drop; j++)
                drop = ids[j].owner != i && ids[j].dev == st.st_dev && ids[j].ino == st.st_ino;
        if (drop) {
            if (!r->quiet && dropped < 3)
                fprintf(stderr,
                        "pipefuse run: %s is an output of this pipeline: not taken as an input\n",
                        r->files[i].path);
            dropped++;
            free(r->files[i].path);
            free(r->files[i].dir);
        } else {
            r->files[kept++] = r->files[i];
        }
    }
    if (!r->quiet && dropped > 3)
        fprintf(stderr, "pipefuse run: %d more outputs of this pipeline not taken as inputs\n",
                dropped - 3);
    r->n_files = kept;
    free(ids);
    return 0;
}

typedef struct placed {
    char *where;
    int index;
} placed;

static int cmp_placed(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    int c = strcmp(x->where, y->where);
    return c ? c : x->index - y->index;
}

/* The same file given twice by one name ("x.png x.png", "x.png ./x.png", "-r tree
   tree/a"): taken once, where it first came, so it keeps that occurrence's folder and
   name; said unless -q. */
static int take_once(run_args *r)
{
    placed *pl = calloc((size_t)r->n_files + 1, sizeof *pl);
    char *drop = calloc((size_t)r->n_files + 1, 1);
    int rc = pl && drop ? 0 : -1;
    for (int i = 0; rc == 0 && i < r->n_files; i++)
        if (!(pl[i] = (placed){cli_where(r->files[i].path), i}).where)
            rc = -1;
    if (rc == 0 && r->n_files > 1)
        qsort(pl, (size_t)r->n_files, sizeof *pl, cmp_placed); /* the first of equals first */
    for (int a = 1, first = 0; rc == 0 && a < r->n_files; a++) {
        if (strcmp(pl[a].where, pl[first].where) != 0) {
            first = a;
            continue;
        }
        drop[pl[a].index] = 1;
        if (!r->quiet)
            fprintf(stderr, "pipefuse run: %s is the same file as %s: taken once\n",
                    r->files[pl[a].index].path, r->files[pl[first].index].path);
    }
    for (int i = 0; pl && i < r->n_files; i++)
        free(pl[i].where);
    free(pl);
    int kept = 0;
    for (int i = 0; rc == 0 && i < r->n_files; i++) {
        if (drop[i]) {
            free(r->files[i].path);
            free(r->files[i].dir);
        } else {
            r->files[kept++] = r->files[i];
        }
    }
    if (rc == 0)
        r->n_files = kept;
    free(drop);
    return rc;
}

/* --input NAME=FILE, checked against the pipeline before anything runs: the form, a
   name the pipeline has other than the first (the files on the command line go
   there), each name once. 0, or -1 after saying which argument is wrong. An input no
   output uses is taken and its file not read (the worker does without), with a notice. */
static int check_binds(const run_args *r, pf_pipeline *p)
{
    int n_in = pf_pipeline_input_count(p);
    const char *first = n_in > 0 ? pf_pipeline_input_name(p, 0) : "";
    for (int a = 0; a + 1 < r->n_pass; a++) {
        if (strcmp(r->pass[a], "--input") != 0)
            continue;
        const char *v = r->pass[++a], *eq = strchr(v, '=');
        size_t len = eq ? (size_t)(eq - v) : 0;
        if (!eq || !len || !eq[1]) {
            fprintf(stderr,
                    "pipefuse run: --input %s: expected NAME=FILE (a pipeline input and "
                    "its PNG file)\n",
                    v);
            return -1;
        }
        int known = 0;
        for (int i = 0; i < n_in && !known; i++) {
            const char *name = pf_pipeline_input_name(p, i);
            known = strlen(name) == len && strncmp(name, v, len) == 0 ? i + 1 : 0;
        }
        if (known == 1) {
            fprintf(stderr,
                    "pipefuse run: --input %s: '%s' is the input the files on the command line "
                    "go to\n",
                    v, first);
            return -1;
        }
        if (!known) {
            fprintf(stderr, "pipefuse run: --input %s: %s has no input '%.*s'; its inputs:", v,
                    r->pipeline, (int)len, v);
            for (int i = 0; i < n_in; i++)
                fprintf(stderr, " %s", pf_pipeline_input_name(p, i));
            fprintf(stderr, "\n");
            return -1;
        }
        for (int b = 0; b < a - 1; b++)
            if (strcmp(r->pass[b], "--input") == 0 && strncmp(r->pass[b + 1], v, len + 1) == 0) {
                fprintf(stderr,
                        "pipefuse run: --input %s: input '%.*s' is already given (--input %s)\n", v,
                        (int)len, v, r->pass[b + 1]);
                return -1;
            }
        if (!r->quiet && !pf_pipeline_input_used(p, known - 1))
            fprintf(stderr,
                    "pipefuse run: --input %s: no output uses input '%.*s'; %s is not read\n", v,
                    (int)len, v, eq + 1);
    }
    return 0;
}

/* --backend cuda: whether the CUDA backend can run, asked in a child process, so that
   this one (the batch's supervisor) never holds a CUDA context. 0, or -1 after the
   reason is printed. */
static int require_cuda(const cli_common *c)
{
    if (!c->backend || strcmp(c->backend, "cuda") != 0)
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pipefuse run: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        pf_engine *e = cli_engine(c);
        int bad = !e || cli_require_backend(e, c->backend, "run") != 0;
        pf_engine_destroy(e);
        fflush(NULL);
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "pipefuse run: waitpid: %s\n", strerror(errno));
            return -1;
        }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (!WIFEXITED(st))
        fprintf(stderr, "pipefuse run: --backend cuda: probing the device crashed (signal %d)\n",
                WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return -1;
}

/* The keys records give inputs that are not in this batch (their where differs from
   every input's in wheres, sorted) and that still exist: reserved, so that a run over a
   subset never takes another input's names. An input that is gone (a deleted temporary
   folder, a tree moved elsewhere) leaves its names to whoever comes. */
typedef struct reserve_ctx {
    char **wheres;
    int n;
} reserve_ctx;

static int reserve_other(void *ctx, const char *where, const char *key)
{
    const reserve_ctx *c = ctx;
    struct stat st;
    if ((c->n && bsearch(&where, c->wheres, (size_t)c->n, sizeof *c->wheres, cmp_str)) ||
        stat(where, &st) != 0)
        return 0;
    return cli_names_reserve(key);
}

/* Names stay with their input: an input the output folder's records (freshness.c) say
   wrote outputs keeps the folder and stem they were named from, so that another input of
   the same name added since (an older a/x.png beside b/x.png) never takes b's names and
   passes for it (cli_names_pin); and the names of inputs outside the batch are reserved
   (reserve_other). Before each cli_names_finish. */
static int pin_names(const run_args *r, const fresh_db *db)
{
    if (!db)
        return 0;
    reserve_ctx c = {calloc((size_t)r->n_files + 1, sizeof(char *)), 0};
    if (!c.wheres)
        return -1;
    int rc = 0;
    for (int i = 0; i < r->n_files && rc == 0; i++) {
        char *w = cli_where(r->files[i].path);
        if (!w) {
            rc = -1;
            break;
        }
        c.wheres[c.n++] = w;
        const char *key = fresh_key_of(db, w);
        rc = key ? cli_names_pin(r->files[i].path, key) : 0;
    }
    if (rc == 0) {
        qsort(c.wheres, (size_t)c.n, sizeof *c.wheres, cmp_str);
        rc = fresh_each_key(db, reserve_other, &c);
    }
    for (int i = 0; i < c.n; i++)
        free(c.wheres[i]);
    free(c.wheres);
    return rc != 0 ? -1 : 0;
}

/* The identities of the plugins the pipeline's stages come from (for the fingerprint of
   --skip-existing): each library's path, size and modification time, from the stage
   list's ops; malloc'd, NULL without memory. A rebuilt plugin makes outputs again. */
static char *plugin_ids(pf_engine *e, const char *pipeline, const char *text)
{
    json_error_t je;
    json_t *root = text ? json_loads(text, 0, &je) : json_load_file(pipeline, 0, &je);
    json_t *stages = json_object_get(root, "stages");
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m) {
        json_decref(root);
        return NULL;
    }
    size_t k;
    json_t *st;
    int n = pf_engine_stage_count(e);
    char *done = calloc((size_t)n + 1, 1);
    json_array_foreach(stages, k, st)
    {
        const char *op = json_string_value(json_object_get(st, "op"));
        const char *dot = op ? strchr(op, '.') : NULL;
        for (int i = 0; op && done && i < n; i++) {
            const char *file = NULL, *pname = NULL;
            const pf_stage_desc *d = pf_engine_stage(e, i, &file, &pname);
            int is = d && d->name &&
                     (dot ? pname && strlen(pname) == (size_t)(dot - op) &&
                                strncmp(pname, op, (size_t)(dot - op)) == 0 &&
                                strcmp(d->name, dot + 1) == 0
                          : strcmp(d->name, op) == 0);
            if (!is)
                continue;
            for (int j = 0; j < n; j++) { /* each library once, in load order */
                const char *fj = NULL;
                pf_engine_stage(e, j, &fj, NULL);
                if (fj && file && strcmp(fj, file) == 0 && done[j])
                    break;
                if (j == i || (fj && file && strcmp(fj, file) == 0)) {
                    struct stat fs;
                    if (file && stat(file, &fs) == 0)
                        fprintf(m, "%s:%lld:%lld.%09ld;", file, (long long)fs.st_size,
                                (long long)fs.st_mtim.tv_sec, fs.st_mtim.tv_nsec);
                    else
                        fprintf(m, "%s;", file ? file : "(built in)");
                    done[j] = 1;
                    break;
                }
            }
            break; /* the first stage of that name, as the engine takes it */
        }
    }
    free(done);
    json_decref(root);
    if (fclose(m) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void free_args(run_args *r)
{
    for (int i = 0; i < r->n_files; i++) {
        free(r->files[i].path);
        free(r->files[i].dir);
    }
    free(r->files);
    free(r->seen);
    free(r->pass);
    free(r->positional);
}

int cli_run_main(int argc, char **argv, const cli_common *c)
{
    run_args r;
    memset(&r, 0, sizeof r);
    int status = PF_EXIT_USAGE;
    char tmpdir[4096];
    const char *tmp_env = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/pipefuse-XXXXXX",
             tmp_env && *tmp_env && strlen(tmp_env) < 4000 ? tmp_env : "/tmp");
    int have_tmp = 0;
    char **run_argv = NULL;
    int run_argc = 0;
    pf_engine *e = NULL;
    pf_pipeline *p = NULL;
    const char *spooled = NULL;
    char *spool_path = NULL, *stdout_dir = NULL;
    char *pipe_spool = NULL, *pipe_text = NULL; /* a pipeline read from a pipe */
    int out_fd = -1;                            /* -o -: the real stdout */
    fresh_db *fresh = NULL;                     /* -o DIR's records, for names */
    char *plugins = NULL;                       /* the plugins' identities */

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: a blocked read of stdin returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* as batch/run.c does for the batch: stdin or a piped pipeline copied past ulimit -f fails
       with EFBIG, said, and the private folder is removed (the signal killed the process
       and left it) */
    signal(SIGXFSZ, SIG_IGN);
    int split = split_args(argc, argv, cli_find_command("run"), &r);
    if (split != 0) {
        if (split == -1)
            fprintf(stderr, "pipefuse run: out of memory\n");
        goto done;
    }
    r.quiet |= c->quiet;
    int retry = 0; /* --retry-failed FILE brings inputs of its own (batch/run.c) */
    for (int k = 0; k < r.n_pass; k++)
        retry |= strcmp(r.pass[k], "--retry-failed") == 0;
    if (!r.pipeline || !r.outdir || (!r.n_positional && !retry)) {
        fprintf(stderr, "pipefuse run: %s (see pipefuse run --help)\n",
                !r.pipeline ? "no pipeline file given"
                : !r.outdir ? "no output directory given (-o DIR, or -o - for stdout)"
                            : "no input files");
        goto done;
    }
    for (int k = 0; k + 1 < r.n_pass; k++) /* before any work: no folder made, no file read */
        if (strcmp(r.pass[k], "--dump-kernels") == 0 && cli_check_dump_dir("run", r.pass[++k]) != 0)
            goto done;
    /* -o -: stdout holds the image alone; whatever else is printed on the way (a notice, a
       plugin's printf, in this process or the worker) goes to stderr. */
    int to_stdout = strcmp(r.outdir, "-") == 0;
    if (to_stdout && isatty(STDOUT_FILENO)) {
        fprintf(stderr, "pipefuse run: -o -: stdout is a terminal; redirect it to a file\n");
        goto done;
    }
    if (to_stdout && (out_fd = cli_take_stdout()) < 0) {
        fprintf(stderr, "pipefuse run: -o -: stdout: %s\n", strerror(errno));
        goto done;
    }
    if (require_cuda(c) != 0)
        goto done;
    e = cli_engine(c);
    if (!e)
        goto done;
    /* A pipeline that is no regular file (`run <(make-pipeline) ...`, a FIFO) can be read
       once, but this process, batch/run.c and every worker read it: it is copied into the
       private temporary folder and read from there, its messages naming it as given. */
    struct stat pst;
    if (stat(r.pipeline, &pst) == 0 && !S_ISREG(pst.st_mode) && !S_ISDIR(pst.st_mode)) {
        int in = -1, fd = -1;
        FILE *f = NULL;
        long size = -1;
        if (!mkdtemp(tmpdir) || !(have_tmp = 1) ||
            asprintf(&pipe_spool, "%s/pipeline.json", tmpdir) < 0 ||
            (in = open(r.pipeline, O_RDONLY | O_CLOEXEC)) < 0 ||
            (fd = open(pipe_spool, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 ||
            copy_fd(in, fd) != 0 || close_fd(&fd) != 0 || !(f = fopen(pipe_spool, "re")) ||
            fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
            !(pipe_text = calloc((size_t)size + 1, 1)) ||
            fread(pipe_text, 1, (size_t)size, f) != (size_t)size) {
            if (stop_signal)
                fprintf(stderr, "pipefuse run: interrupted while reading %s; nothing run\n",
                        r.pipeline);
            else
                fprintf(stderr, "pipefuse run: %s: cannot read the pipeline: %s\n", r.pipeline,
                        strerror(errno ? errno : EIO));
            status = stop_signal ? 130 : status;
            if (in >= 0)
                close(in);
            if (fd >= 0)
                close(fd);
            if (f)
                fclose(f);
            goto done;
        }
        close(in);
        fclose(f);
    }
    cli_doing("loading %s", r.pipeline);
    int lrc = pipe_text ? pf_pipeline_load_string(e, pipe_text, r.pipeline, &p)
                        : pf_pipeline_load_file(e, r.pipeline, &p);
    cli_doing("%s", "");
    if (lrc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", pf_engine_errmsg(e));
        goto done;
    }
    pipe_outputs po;
    read_outputs(p, r.table_format, &po);
    plugins = plugin_ids(e, pipe_spool ? pipe_spool : r.pipeline, pipe_text);
    if (!plugins)
        goto oom;
    char err[1024];
    if (cli_names_check(r.tmpl, po.name, po.ext, po.n, po.single_image, err, sizeof err) != 0) {
        fprintf(stderr, "pipefuse run: %s\n", err);
        goto done;
    }
    /* --format png|jpeg with --name: a name that says the other format contradicts it */
    for (int k = 0; k < po.n && r.tmpl && cli_images.format != CLI_FMT_NONE; k++) {
        char *name =
            po.image[k] ? cli_output_name("x.png", po.name[k], po.ext[k], po.single_image) : NULL;
        cli_format f = name ? cli_format_of_name(name, NULL) : CLI_FMT_NONE;
        if ((f == CLI_FMT_PNG || f == CLI_FMT_JPEG) && f != cli_images.format) {
            fprintf(stderr,
                    "pipefuse run: --format %s, but --name '%s' names output '%s' %s; drop "
                    "one or make them agree\n",
                    cli_images.format == CLI_FMT_JPEG ? "jpeg" : "png", r.tmpl, po.name[k],
                    f == CLI_FMT_JPEG ? ".jpg" : ".png");
            free(name);
            goto done;
        }
        free(name);
    }
    /* a JPEG option where no image output can be JPEG: --format png, names saying .png,
       or forms only PNG holds */
    int can_jpeg = 0;
    for (int k = 0; k < po.n && cli_images.jpeg_option && !can_jpeg; k++) {
        if (!po.image[k] || strcmp(po.ext[k], CLI_EXT_PNG_ONLY) == 0)
            continue;
        char *name =
            r.tmpl ? cli_output_name("x.jpg", po.name[k], po.ext[k], po.single_image) : NULL;
        cli_format f = name ? cli_format_of_name(name, NULL) : CLI_FMT_NONE;
        can_jpeg = f == CLI_FMT_JPEG || (f != CLI_FMT_PNG && cli_images.format != CLI_FMT_PNG);
        free(name);
    }
    if (cli_images.jpeg_option && !can_jpeg && !r.quiet)
        fprintf(stderr, "pipefuse run: %s has no effect: no image output of this run is JPEG\n",
                cli_images.jpeg_option);
    for (int k = 0; k < po.n && cli_images.format == CLI_FMT_JPEG && !r.quiet; k++)
        if (po.image[k] && strcmp(po.ext[k], CLI_EXT_PNG_ONLY) == 0)
            fprintf(stderr,
                    "pipefuse run: output '%s' is written as PNG, not JPEG (--format jpeg): the "
                    "pipeline declares it a form only PNG holds\n",
                    po.name[k]);
    int stdout_k = -1;
    for (int k = 0; k < po.n; k++)
        if (po.image[k] && stdout_k < 0)
            stdout_k = k;
    if (to_stdout && po.n_images != 1) {
        fprintf(stderr,
                "pipefuse run: -o - writes one image to stdout, but %s has %d image outputs; "
                "give an output folder\n",
                r.pipeline, po.n_images);
        goto done;
    }
    /* tables have no place on stdout: written to the temporary folder and dropped */
    for (int k = 0; k < po.n && to_stdout && !r.quiet; k++)
        if (!po.image[k])
            fprintf(stderr,
                    "pipefuse run: -o -: table output '%s' is not written (only the image "
                    "output '%s' goes to stdout; give an output folder for tables)\n",
                    po.name[k], po.name[stdout_k]);
    if (check_binds(&r, p) != 0)
        goto done;
    if (!to_stdout && stat(r.outdir, &r.out_st) == 0)
        r.out_exists = S_ISDIR(r.out_st.st_mode);

    /* stdin and stdout go through a private temporary folder */
    for (int i = 0; i < r.n_positional; i++)
        if (strcmp(r.positional[i], "-") == 0 && (spooled || r.n_positional > 1)) {
            fprintf(stderr, "pipefuse run: '-' (stdin) must be the only input\n");
            goto done;
        } else if (strcmp(r.positional[i], "-") == 0 && retry) {
            fprintf(stderr, "pipefuse run: '-' (stdin) with --retry-failed: a joblog names "
                            "files to run again, and stdin is no file; give the image again "
                            "without --retry-failed\n");
            goto done;
        } else if (strcmp(r.positional[i], "-") == 0) {
            spooled = "-";
        }
    if ((spooled || to_stdout) && !have_tmp) {
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "pipefuse run: cannot create a temporary folder: %s\n",
                    strerror(errno));
            goto done;
        }
        have_tmp = 1;
    }
    if (spooled) {
        int fd = -1;
        char *named = NULL; /* a JPEG on stdin is stdin.jpg: its outputs' names say JPEG */
        if (asprintf(&spool_path, "%s/stdin.png", tmpdir) < 0 ||
            (fd = open(spool_path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0 ||
            copy_fd(STDIN_FILENO, fd) != 0 || close_fd(&fd) != 0 ||
            (cli_image_sniff(spool_path) == CLI_FMT_JPEG &&
             (asprintf(&named, "%s/stdin.jpg", tmpdir) < 0 || rename(spool_path, named) != 0))) {
            free(named);
            if (stop_signal)
                fprintf(stderr, "pipefuse run: interrupted while reading stdin; nothing run\n");
            else
                fprintf(stderr, "pipefuse run: cannot read stdin into %s: %s\n", tmpdir,
                        strerror(errno));
            status = stop_signal ? 130 : status;
            if (fd >= 0)
                close(fd);
            goto done;
        }
        if (named) {
            free(spool_path);
            spool_path = named;
        }
    }
    if (to_stdout && asprintf(&stdout_dir, "%s/out", tmpdir) < 0)
        goto done;
    if (to_stdout)
        r.outdir = stdout_dir;

    /* the inputs */
    for (int i = 0; i < r.n_positional; i++) {
        const char *a = spooled ? spool_path : r.positional[i];
        struct stat st;
        int is_dir = stat(a, &st) == 0 && S_ISDIR(st.st_mode), before = r.n_files;
        /* folders once per argument: the same folder under two arguments ("-r tree
           tree/a") is the same files given twice, which take_once names */
        if (r.seen) /* none yet: NULL, which memset may not take even for 0 bytes */
            memset(r.seen, 0, sizeof *r.seen * r.seen_cap);
        r.n_seen = 0;
        int got = is_dir ? list_dir(&r, a, "", 0) : add_file(&r, a, "", 0);
        if (got == -2 || (got == 0 && stop_signal)) {
            fprintf(stderr, "pipefuse run: interrupted while listing the inputs; nothing run\n");
            status = 130;
            goto done;
        }
        if (got != 0)
            goto done;
        if (is_dir && r.n_files == before)
            fprintf(stderr,
                    "pipefuse run: %s: no .png, .jpg or .jpeg files (nor .jpe, .jfif, .jif) in "
                    "this directory%s\n",
                    a, r.recursive ? " or below" : "");
    }
    if (!r.quiet && r.n_looped > 3)
        fprintf(stderr,
                "pipefuse run: %d more folders reached again through links; not listed "
                "twice\n",
                r.n_looped - 3);
    if (take_once(&r) != 0)
        goto oom;
    if (r.out_exists) { /* names stay with the inputs the folder's records name */
        int ofd = open(r.outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ofd >= 0 && fresh_open(ofd, &fresh) != 0) {
            fresh_close(fresh); /* unreadable: batch/run.c says so */
            fresh = NULL;
        }
        if (ofd >= 0)
            close(ofd);
    }
    for (int i = 0; i < r.n_files; i++)
        if (cli_names_add(r.files[i].path, r.files[i].dir) != 0)
            goto oom;
    if (pin_names(&r, fresh) != 0 || cli_names_finish(1) != 0 || drop_outputs(&r, &po) != 0)
        goto oom;
    cli_names_free(); /* again, without the files left out, now with notices */
    for (int i = 0; i < r.n_files; i++)
        if (cli_names_add(r.files[i].path, r.files[i].dir) != 0)
            goto oom;
    if (pin_names(&r, fresh) != 0 || cli_names_finish(r.quiet) != 0)
        goto oom;
    if (to_stdout && r.n_files != 1) {
        fprintf(stderr, "pipefuse run: -o - writes one image to stdout, but there are %d inputs\n",
                r.n_files);
        goto done;
    }
    if (!r.n_files && !retry) {
        fprintf(stderr, "pipefuse run: no input files\n");
        goto done;
    }
    /* -o DIR and the folders of names (templates with '/', --recursive) are made by
       batch/run.c once the whole command line is accepted (a refused one leaves no folder), the
       latter per input in its precheck: one that cannot be made fails its inputs only */
    /* batch/run.c's arguments: the pipeline, -o, the files, then the other options */
    run_argv = calloc((size_t)(r.n_pass + r.n_files + 4), sizeof *run_argv);
    if (!run_argv)
        goto oom;
    run_argv[run_argc++] = pipe_spool ? pipe_spool : (char *)r.pipeline;
    run_argv[run_argc++] = "--output";
    run_argv[run_argc++] = (char *)r.outdir;
    for (int i = 0; i < r.n_pass; i++)
        run_argv[run_argc++] = r.pass[i];
    for (int i = 0; i < r.n_files; i++)
        run_argv[run_argc++] = r.files[i].path;
    pf_pipeline_destroy(p);
    p = NULL;
    pf_engine_destroy(e);
    e = NULL;
    if (stop_signal) { /* before batch/run.c's handler: nothing has run */
        fprintf(stderr, "pipefuse run: interrupted before the batch started; nothing run\n");
        status = 130;
        goto done;
    }
    /* batch/run.c copies the output to stdout as its input ends, so that a write that fails
       fails the input in the log, the joblog and the summary, and closes out_fd */
    cli_run_stdio(spool_path, to_stdout ? r.outdir : NULL);
    cli_run_streams(out_fd, pipe_spool != NULL);
    cli_run_plugins(plugins);
    out_fd = -1;
    status = cli_run(run_argc, run_argv, c);
    cli_run_stdio(NULL, NULL);
    cli_run_streams(-1, 0);
    cli_run_plugins(NULL);
    goto done;
oom:
    fprintf(stderr, "pipefuse run: out of memory\n");
    status = PF_EXIT_USAGE;
done:
    if (out_fd >= 0 && close(out_fd) != 0 && status == PF_EXIT_OK) {
        fprintf(stderr, "pipefuse run: cannot write the output to stdout: %s\n", strerror(errno));
        status = PF_EXIT_FAILED;
    }
    if (have_tmp)
        remove_tree(tmpdir);
    cli_names_free();
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    free(run_argv);
    fresh_close(fresh);
    free(plugins);
    free(spool_path);
    free(stdout_dir);
    free(pipe_spool);
    free(pipe_text);
    free_args(&r);
    return status;
}
