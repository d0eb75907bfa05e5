/* engine/plugin_load.c: engine creation and the plugin loader.
 *
 * Plugins come from directories only: the built-in one next to the library
 * (<libdir>/pipefuse/plugins, the same layout in the build tree and once installed),
 * then the configured path, then PIPEFUSE_PLUGIN_PATH. A pipeline file never names a
 * library. A plugin, or a directory holding one, that other users may write to is
 * refused, and so is one below a directory that every user may write to (unless sticky,
 * like /tmp) or that another user owns: loading it would run their code in ours. PIPEFUSE_PLUGIN_PATH names directories by absolute path only: a
 * relative entry would load whatever the current directory holds.
 *
 * A plugin or directory that cannot be loaded is skipped with a warning, and the reason
 * is kept: a pipeline that names one of its stages gets it in its "unknown op" message,
 * and every other command works. Two plugins may define stages of the same name: a
 * pipeline's "name" is the first one on the search path (a warning says so), and
 * "plugin.name" picks one.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_cuda.h"
#include "internal.h"
#include "hostmem.h"
#include "pipefuse/stage_check.h"
#include "threadpool.h"

#define PF_API         __attribute__((visibility("default")))
#define PF_MAX_THREADS 1024 /* worker threads of one engine, as the threads option */

PF_API void pf_engine_config_init_size(pf_engine_config *cfg, size_t size)
{
    pf_engine_config d;
    memset(&d, 0, sizeof d);
    d.use_env_path = 1;
    if (size > sizeof d)
        size = sizeof d;
    memcpy(cfg, &d, size);
    cfg->size = (uint32_t)size;
}

/* The function callers built against 0.1 link to: their struct is that size. */
#undef pf_engine_config_init
PF_API void pf_engine_config_init(pf_engine_config *cfg)
{
    pf_engine_config_init_size(cfg, PF_ENGINE_CONFIG_SIZE_0_1);
}

/* A plugin's notices go to the log callback of the engine whose call runs the plugin's
   code (pf_thread_context: set by the API's calls on a pipeline, loads and engine
   creation, and taken by the workers running their tasks); stderr outside them. */
static void host_log(int level, const char *msg)
{
    pf_log(pf_thread_context, level, "%s", msg ? msg : "(null)");
}

static const pf_host_api host_api = {sizeof(pf_host_api), PF_ABI_VERSION, host_log};

/* ---- Descriptor checks ----------------------------------------------------------------- */

/* The loader's side of pf_plugin_check and pf_stage_check (stage_check.c): the first error,
   with the file and, for a stage's, the descriptor field at fault (stages[i].FIELD): the
   message names the stage by its name, which a stage without one, or whose struct is too
   small to read it, lacks. */
typedef struct first_error {
    pf_engine *e;
    const char *file;
    int stage; /* the stage's index in the plugin's list; -1 for the plugin descriptor */
} first_error;

static int on_finding(void *user, const pf_check_finding *f)
{
    first_error *fe = user;
    if (f->level != PF_CHECK_ERROR)
        return 0;
    if (fe->stage >= 0)
        pf_errf(fe->e->errmsg, "%s: %s (stages[%d]%s%s)", fe->file, f->message, fe->stage,
                f->field && f->field[0] ? "." : "", f->field ? f->field : "");
    else
        pf_errf(fe->e->errmsg, "%s: %s", fe->file, f->message);
    return 1;
}

/* ---- Loading ------------------------------------------------------------------------------ */

static int unsafe_mode(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid != 0 && st->st_uid != geteuid());
}

/* A directory above a plugin directory that every user can write to and that is not
   sticky (/tmp is), or that another user owns: they could rename what it holds and put
   their own in its place. (Group write is allowed there: a umask of 002 with a group of
   one's own makes every build directory so.) */
static int unsafe_parent(const struct stat *st)
{
    return ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) ||
           (st->st_uid != 0 && st->st_uid != geteuid());
}

/* Whether a directory above dir (its real path) lets others replace dir or its
   contents: 0, or -1 with the message in why. */
static int parents_check(const char *dir, char *why, size_t why_size)
{
    char real[PATH_MAX];
    if (!realpath(dir, real)) {
        snprintf(why, why_size, "plugin directory %s: %s", dir, strerror(errno));
        return -1;
    }
    for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
        if (slash == real)
            slash[1] = 0; /* "/" itself */
        else
            *slash = 0;
        struct stat st;
        if (stat(real, &st) != 0) {
            snprintf(why, why_size, "plugin directory %s: %s: %s", dir, real, strerror(errno));
            return -1;
        }
        if (unsafe_parent(&st)) {
            snprintf(why, why_size,
                     "plugin directory %s: refusing it, as other users can write to %s above it "
                     "(mode %03o, owner uid %u)",
                     dir, real, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
            return -1;
        }
        if (slash == real)
            break;
    }
    return 0;
}

static int check_parents(pf_engine *e, const char *dir)
{
    return parents_check(dir, e->errmsg, PF_ERRMSG_MAX);
}

PF_API int pf_plugin_path_check(const char *file, char *what, size_t what_size, char *fix,
                                size_t fix_size)
{
    struct stat st;
    char dir[PATH_MAX];
    snprintf(fix, fix_size, "install the plugin where only you (or root) can write");
    if (stat(file, &st) != 0) {
        snprintf(what, what_size, "%s: %s", file, strerror(errno));
        snprintf(fix, fix_size, "pass the plugin's .so file");
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(what, what_size, "%s: not a regular file", file);
        snprintf(fix, fix_size, "pass the plugin's .so file");
        return -1;
    }
    if (unsafe_mode(&st)) {
        snprintf(what, what_size,
                 "%s: refusing a plugin that other users can write to (mode %03o, owner uid %u)",
                 file, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
        snprintf(fix, fix_size, "chmod go-w %s (and own the file yourself)", file);
        return -1;
    }
    if (!realpath(file, dir)) {
        snprintf(what, what_size, "%s: %s", file, strerror(errno));
        return -1;
    }
    char *slash = strrchr(dir, '/');
    *(slash == dir ? slash + 1 : slash) = 0; /* realpath's result is absolute */
    if (stat(dir, &st) != 0) {
        snprintf(what, what_size, "plugin directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (unsafe_mode(&st)) {
        snprintf(what, what_size,
                 "plugin directory %s: refusing a directory that other users can write to "
                 "(mode %03o, owner uid %u)",
                 dir, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
        snprintf(fix, fix_size,
                 "chmod go-w %s, or move the plugin to a directory only you can write to", dir);
        return -1;
    }
    if (parents_check(dir, what, what_size) != 0) {
        snprintf(fix, fix_size,
                 "make the directories above %s writable only by their owner (or sticky, as "
                 "/tmp is), or move the plugin",
                 dir);
        return -1;
    }
    return 0;
}

/* Keeps "what: why" (e->errmsg) as a reason something was not loaded, and warns. */
static int skip(pf_engine *e)
{
    size_t old = e->skipped ? strlen(e->skipped) : 0, add = strlen(e->errmsg);
    char *grown = realloc(e->skipped, old + add + 2);
    if (!grown)
        return PF_NO_MEMORY;
    memcpy(grown + old, e->errmsg, add);
    grown[old + add] = '\n';
    grown[old + add + 1] = 0;
    e->skipped = grown;
    pf_log(e, 1, "%s; skipped", e->errmsg);
    e->errmsg[0] = 0;
    return PF_OK;
}

/* The stages of a plugin refused after its descriptor could be read, with the reason
   (e->errmsg), so that a pipeline naming one is told why it is missing rather than
   pointed at a loaded stage of a similar name. Best effort: nothing is noted without
   memory. */
static void note_refused(pf_engine *e, const pf_plugin_desc *pd)
{
    const char *pname = pd->name && pd->name[0] ? pd->name : "(unnamed)";
    for (int i = 0; i < pd->n_stages; i++) {
        const pf_stage_desc *s = pd->stages[i];
        if (!s || s->size < offsetof(pf_stage_desc, cost) || !s->name || !s->name[0] ||
            strpbrk(s->name, "\t\n") || strpbrk(pname, "\t\n"))
            continue;
        size_t old = e->refused ? strlen(e->refused) : 0,
               add = strlen(s->name) + strlen(pname) + strlen(e->errmsg) + 3;
        char *grown = realloc(e->refused, old + add + 1);
        if (!grown)
            return;
        snprintf(grown + old, add + 1, "%s\t%s\t%s\n", s->name, pname, e->errmsg);
        e->refused = grown;
    }
}

/* The refusal of a stage named op ("stage" or "plugin.stage") of a refused plugin, in err:
   1 when there is one. */
static int refused_stage(const pf_engine *e, const char *op, char *err, size_t err_size)
{
    for (const char *l = e->refused; l && *l;) {
        const char *t1 = strchr(l, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        const char *nl = t2 ? strchr(t2 + 1, '\n') : NULL;
        if (!nl)
            return 0;
        size_t nlen = (size_t)(t1 - l), plen = (size_t)(t2 - t1 - 1);
        int bare = strlen(op) == nlen && strncmp(op, l, nlen) == 0;
        int dotted = strlen(op) == plen + 1 + nlen && strncmp(op, t1 + 1, plen) == 0 &&
                     op[plen] == '.' && strncmp(op + plen + 1, l, nlen) == 0;
        if (bare || dotted) {
            snprintf(err, err_size,
                     "unknown op '%s': it is a stage of plugin '%.*s', which was not loaded: %.*s",
                     op, (int)plen, t1 + 1, (int)(nl - t2 - 1), t2 + 1);
            return 1;
        }
        l = nl + 1;
    }
    return 0;
}

static const char *plugin_name_of(const pf_engine *e, int i)
{
    return e->plugins[e->stages[i].plugin].desc->name;
}

static int add_stage(pf_engine *e, const char *file, int plugin, int index,
                     const pf_stage_desc *src)
{
    first_error fe = {e, file, index};
    int errors =
        pf_stage_check(src, e->plugins[plugin].desc->abi_version & 0xffff, on_finding, &fe);
    if (errors != 0)
        return errors < 0 ? PF_NO_MEMORY : PF_PLUGIN;
    /* Copy what the plugin's struct holds; fields it is too old to have stay zero. */
    pf_stage_desc *d = calloc(1, sizeof *d);
    if (!d)
        return PF_NO_MEMORY;
    memcpy(d, src, src->size < sizeof *d ? src->size : sizeof *d);
    int rc = PF_OK;
    for (int i = 0; rc == PF_OK && i < e->n_stages; i++) {
        if (strcmp(e->stages[i].desc->name, d->name) != 0)
            continue;
        /* Stages of one plugin are named apart (pf_plugin_check). */
        if (strcmp(plugin_name_of(e, i), e->plugins[plugin].desc->name) == 0) {
            pf_errf(e->errmsg,
                    "%s: stage '%s' of plugin '%s' is already defined by %s, a plugin of the same "
                    "name",
                    file, d->name, e->plugins[plugin].desc->name,
                    e->plugins[e->stages[i].plugin].path);
            rc = PF_PLUGIN;
        } else {
            pf_log(e, 1,
                   "stage '%s' is defined by %s and by %s; pipelines naming '%s' get the first "
                   "(%s.%s); write '%s.%s' for the second",
                   d->name, e->plugins[e->stages[i].plugin].path, file, d->name,
                   plugin_name_of(e, i), d->name, e->plugins[plugin].desc->name, d->name);
            break;
        }
    }
    pf_stage_entry *s =
        rc == PF_OK ? realloc(e->stages, sizeof *s * (size_t)(e->n_stages + 1)) : NULL;
    if (!s) {
        free(d);
        return rc == PF_OK ? PF_NO_MEMORY : rc;
    }
    e->stages = s;
    e->stages[e->n_stages].desc = d;
    e->stages[e->n_stages].plugin = plugin;
    e->n_stages++;
    return PF_OK;
}

/* The longest prefix of p, at most n bytes, this process can read: pages are readable
   whole, so a binary search over pf_readable's probes finds where the mapping ends. */
static size_t readable_len(const void *p, size_t n)
{
    if (pf_readable(p, n))
        return n;
    size_t lo = 0, hi = n; /* lo readable, hi not */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (pf_readable(p, mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The plugin as the loader reads it: a stage descriptor whose declared size runs into
   memory this process cannot read (built against a smaller struct yet claiming the
   current size, at the end of a mapping) is read as far as it can be, its size cut
   there, and the fields past it taken as unset, said once; checked and copied as any
   other. view holds the plugin's list with such stages replaced by copies (freed with
   clip_free); where the list itself cannot be read, view is pd and pf_plugin_check says
   why. */
typedef struct clipped {
    pf_plugin_desc d;
    const pf_stage_desc **stages;
    pf_stage_desc **copies;
    int n;
} clipped;

static const pf_plugin_desc *clip_stages(pf_engine *e, const char *path, const pf_plugin_desc *pd,
                                         clipped *c)
{
    memset(c, 0, sizeof *c);
    if (!pd || !pf_readable(pd, sizeof *pd) || pd->n_stages <= 0 || pd->n_stages > 4096 ||
        !pf_readable(pd->stages, sizeof *pd->stages * (size_t)pd->n_stages))
        return pd;
    int n = pd->n_stages;
    c->stages = calloc((size_t)n, sizeof *c->stages);
    c->copies = calloc((size_t)n, sizeof *c->copies);
    if (!c->stages || !c->copies) {
        free(c->stages);
        free(c->copies);
        memset(c, 0, sizeof *c);
        return pd;
    }
    c->n = n;
    int any = 0;
    for (int i = 0; i < n; i++) {
        const pf_stage_desc *s = pd->stages[i];
        c->stages[i] = s;
        if (!s || !pf_readable(s, sizeof s->size))
            continue;
        size_t want = s->size < sizeof *s ? s->size : sizeof *s;
        size_t got = readable_len(s, want);
        if (got >= want || got < sizeof s->size)
            continue;
        pf_stage_desc *cp = calloc(1, sizeof *cp);
        if (!cp)
            continue; /* pf_plugin_check refuses it, named */
        memcpy(cp, s, got);
        cp->size = (uint32_t)got;
        c->copies[i] = cp;
        c->stages[i] = cp;
        any = 1;
        pf_log(e, 1,
               "%s: stages[%d]'s descriptor says it is %u bytes, but only its first %zu can be "
               "read (a plugin built against another pipefuse?): the fields past them are "
               "taken as unset",
               path, i, s->size, got);
    }
    if (!any)
        return pd;
    c->d = *pd;
    c->d.stages = (const pf_stage_desc *const *)c->stages;
    return &c->d;
}

static void clip_free(clipped *c)
{
    for (int i = 0; c->copies && i < c->n; i++)
        free(c->copies[i]);
    free(c->copies);
    free(c->stages);
}

static int load_plugin(pf_engine *e, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        pf_errf(e->errmsg, "%s: %s", path, strerror(errno));
        return PF_PLUGIN;
    }
    if (unsafe_mode(&st)) {
        pf_errf(e->errmsg, "%s: refusing a plugin that other users can write to (mode %03o)", path,
                (unsigned)(st.st_mode & 0777));
        return PF_PLUGIN;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        pf_errf(e->errmsg, "%s: cannot load plugin: %s", path, dlerror());
        return PF_PLUGIN;
    }
    pf_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, PF_PLUGIN_ENTRY_NAME);
    if (!entry) {
        pf_errf(e->errmsg, "%s: not a pipefuse plugin: no '%s' symbol", path, PF_PLUGIN_ENTRY_NAME);
        dlclose(h);
        return PF_PLUGIN;
    }
    const pf_plugin_desc *pd = entry(&host_api);
    first_error fe = {e, path, -1};
    int readable;
    clipped clip;
    const pf_plugin_desc *view = clip_stages(e, path, pd, &clip);
    int rc = pf_plugin_check(view, &readable, on_finding, &fe) == 0 ? PF_OK : PF_PLUGIN;
    pf_plugin *pl =
        rc == PF_OK ? realloc(e->plugins, sizeof *pl * (size_t)(e->n_plugins + 1)) : NULL;
    char *copy = pl ? pf_strdup(path) : NULL;
    if (pl)
        e->plugins = pl;
    if (!copy) {
        if (rc == PF_PLUGIN && readable)
            note_refused(e, pd);
        clip_free(&clip);
        dlclose(h);
        return rc == PF_OK ? PF_NO_MEMORY : rc;
    }
    int index = e->n_plugins++, first = e->n_stages;
    e->plugins[index] = (pf_plugin){copy, h, pd};
    for (int i = 0; i < pd->n_stages && rc == PF_OK; i++) /* copied: the view can go */
        rc = add_stage(e, path, index, i, view->stages[i]);
    clip_free(&clip);
    if (rc != PF_OK) { /* none of its stages stay */
        if (rc == PF_PLUGIN)
            note_refused(e, pd);
        while (e->n_stages > first)
            free((void *)e->stages[--e->n_stages].desc);
        e->n_plugins--;
        free(copy);
        dlclose(h);
    }
    return rc;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Loads every *.so of dir in name order. A missing directory is an error only when
   required (the built-in one). */
static int load_dir(pf_engine *e, const char *dir, int required)
{
    struct stat st;
    int found = stat(dir, &st) == 0;
    const char *why = found ? "not a directory" : strerror(errno);
    if (!found || !S_ISDIR(st.st_mode)) {
        if (!required) {
            pf_log(e, 1, "plugin directory %s: %s; skipped", dir,
                   found ? "not a directory" : "does not exist");
            return PF_OK;
        }
        pf_errf(e->errmsg, "plugin directory %s: %s", dir, why);
        return PF_PLUGIN;
    }
    if (unsafe_mode(&st)) {
        pf_errf(e->errmsg,
                "plugin directory %s: refusing a directory that other users can write to "
                "(mode %03o)",
                dir, (unsigned)(st.st_mode & 0777));
        return skip(e);
    }
    if (check_parents(e, dir) != 0)
        return skip(e);
    DIR *d = opendir(dir);
    if (!d) {
        pf_errf(e->errmsg, "plugin directory %s: %s", dir, strerror(errno));
        return skip(e);
    }
    char **names = NULL;
    int n = 0, rc = PF_OK;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".so"))
            continue;
        char **grown = realloc(names, sizeof *names * (size_t)(n + 1));
        char *name = grown ? pf_strdup(de->d_name) : NULL;
        if (grown)
            names = grown;
        if (!name) {
            rc = PF_NO_MEMORY;
            break;
        }
        names[n++] = name;
    }
    closedir(d);
    if (n)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && rc == PF_OK; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            pf_errf(e->errmsg, "plugin path too long: %s/%s", dir, names[i]);
            rc = PF_PLUGIN;
        } else {
            rc = load_plugin(e, path);
        }
        if (rc == PF_PLUGIN)
            rc = skip(e);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == PF_NO_MEMORY)
        pf_errf(e->errmsg, "out of memory loading plugins from %s", dir);
    return rc;
}

/* A ':'-separated list of directories; from the environment (env), only absolute ones. */
static int load_path_list(pf_engine *e, const char *list, int env)
{
    char *copy = pf_strdup(list);
    if (!copy)
        return PF_NO_MEMORY;
    int rc = PF_OK;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir && rc == PF_OK;
         dir = strtok_r(NULL, ":", &save)) {
        if (env && dir[0] != '/') {
            pf_errf(e->errmsg,
                    "PIPEFUSE_PLUGIN_PATH: refusing the relative directory '%s' (it would load "
                    "whatever the current directory holds); name it by its absolute path",
                    dir);
            rc = skip(e);
        } else {
            rc = load_dir(e, dir, 0);
        }
    }
    free(copy);
    return rc;
}

/* <directory of libpipefuse.so>/pipefuse/plugins */
static int builtin_dir(char *buf, size_t size)
{
    Dl_info info;
    if (!dladdr((void *)&pf_engine_create, &info) || !info.dli_fname)
        return -1;
    char lib[PATH_MAX];
    if (!realpath(info.dli_fname, lib))
        return -1;
    char *slash = strrchr(lib, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return snprintf(buf, size, "%s/%s", lib, PF_PLUGIN_SUBDIR) < (int)size ? 0 : -1;
}

PF_API int pf_engine_create(const pf_engine_config *cfg, pf_engine **out)
{
    pf_engine_config defaults;
    if (!out)
        return PF_INVALID_ARGUMENT;
    *out = NULL;
    if (!cfg) {
        pf_engine_config_init(&defaults);
        cfg = &defaults;
    }
    pf_engine *e = calloc(1, sizeof *e);
    if (!e)
        return PF_NO_MEMORY;
    static _Atomic unsigned long serials;
    e->serial = atomic_fetch_add(&serials, 1) + 1;
    *out = e;
    if (cfg->size < PF_ENGINE_CONFIG_SIZE_0_1 || cfg->size > (1u << 16)) {
        pf_errf(e->errmsg,
                "pf_engine_config.size is %u; expected %zu to %zu (init it with "
                "pf_engine_config_init)",
                cfg->size, (size_t)PF_ENGINE_CONFIG_SIZE_0_1, sizeof(pf_engine_config));
        return PF_INVALID_ARGUMENT;
    }
    /* An older caller's smaller struct: the fields past its size take defaults. */
    pf_engine_config full;
    pf_engine_config_init_size(&full, sizeof full);
    memcpy(&full, cfg, cfg->size < sizeof full ? cfg->size : sizeof full);
    cfg = &full;
    if (cfg->threads > PF_MAX_THREADS) {
        pf_errf(e->errmsg,
                "pf_engine_config.threads is %d; an engine runs at most %d worker threads",
                cfg->threads, PF_MAX_THREADS);
        return PF_INVALID_ARGUMENT;
    }
    if (cfg->threads < 0) {
        pf_errf(e->errmsg,
                "pf_engine_config.threads is %d; expected 0 (one per core) to %d worker threads",
                cfg->threads, PF_MAX_THREADS);
        return PF_INVALID_ARGUMENT;
    }
    if (cfg->copy_threads < 0 || cfg->copy_threads > PF_MAX_THREADS) {
        pf_errf(e->errmsg,
                "pf_engine_config.copy_threads is %d; expected 0 (up to 8) to %d copy threads",
                cfg->copy_threads, PF_MAX_THREADS);
        return PF_INVALID_ARGUMENT;
    }
    e->copy_threads = cfg->copy_threads > 0 ? cfg->copy_threads : 8;
    e->log = cfg->log;
    e->log_user = cfg->log_user;
    e->threads = cfg->threads > 0 ? cfg->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (e->threads < 1)
        e->threads = 1;
    if (e->threads > PF_MAX_THREADS) /* one per core on a very large machine */
        e->threads = PF_MAX_THREADS;
    e->pool = pf_threadpool_create(e->threads);
    if (!e->pool) {
        pf_errf(e->errmsg, "cannot start %d worker threads", e->threads);
        return PF_NO_MEMORY;
    }
    e->threads = pf_threadpool_size(e->pool);

    const void *context = pf_thread_context; /* plugin entry points log to e */
    pf_thread_context = e;
    int rc = PF_OK;
    if (!cfg->no_builtin) {
        char dir[PATH_MAX];
        if (builtin_dir(dir, sizeof dir) != 0) {
            pf_errf(e->errmsg, "cannot locate the built-in plugin directory");
            rc = PF_PLUGIN;
        } else {
            rc = load_dir(e, dir, 1);
        }
    }
    if (rc == PF_OK && cfg->plugin_path && *cfg->plugin_path)
        rc = load_path_list(e, cfg->plugin_path, 0);
    const char *env = getenv("PIPEFUSE_PLUGIN_PATH");
    if (rc == PF_OK && cfg->use_env_path && env && *env)
        rc = load_path_list(e, env, 1);
    if (rc == PF_NO_MEMORY)
        pf_errf(e->errmsg, "out of memory loading plugins");
    pf_thread_context = context;
    return rc;
}

PF_API void pf_engine_destroy(pf_engine *e)
{
    if (!e)
        return;
    pf_threadpool_destroy(e->pool);
    pf_hostmem_engine_free(e);
    pf_cuda_engine_free(e);
    for (int i = 0; i < e->n_stages; i++)
        free((void *)e->stages[i].desc);
    free(e->stages);
    for (int i = 0; i < e->n_plugins; i++) {
        dlclose(e->plugins[i].handle);
        free(e->plugins[i].path);
    }
    free(e->plugins);
    free(e->skipped);
    free(e->refused);
    free(e);
}

PF_API const char *pf_engine_errmsg(const pf_engine *e)
{
    if (!e)
        return "no engine (out of memory)";
    const char *own = pf_engine_thread_msg(e);
    return own ? own : e->errmsg;
}

PF_API int pf_engine_stage_count(const pf_engine *e)
{
    return e ? e->n_stages : 0;
}

PF_API const pf_stage_desc *pf_engine_stage(const pf_engine *e, int i, const char **plugin_file,
                                            const char **plugin_name)
{
    if (!e || i < 0 || i >= e->n_stages)
        return NULL;
    const pf_plugin *pl = &e->plugins[e->stages[i].plugin];
    if (plugin_file)
        *plugin_file = pl->path;
    if (plugin_name)
        *plugin_name = pl->desc->name;
    return e->stages[i].desc;
}

/* Whether stage i is what op names: "name" or "plugin.name". */
static int stage_is(const pf_engine *e, int i, const char *op)
{
    const char *dot = strchr(op, '.');
    if (!dot)
        return strcmp(e->stages[i].desc->name, op) == 0;
    const char *pn = plugin_name_of(e, i);
    size_t n = (size_t)(dot - op);
    return strncmp(pn, op, n) == 0 && pn[n] == 0 && strcmp(e->stages[i].desc->name, dot + 1) == 0;
}

int pf_engine_lookup_stage(const pf_engine *e, const char *op, char *err, size_t err_size)
{
    for (int i = 0; i < e->n_stages; i++)
        if (stage_is(e, i, op))
            return i;
    /* A stage of a plugin that was refused: that first, with why, and no near name (a
       loaded stage of a similar name is not the one meant). */
    if (refused_stage(e, op, err, err_size))
        return -1;
    /* Candidates: the names, and "plugin.name" when op is qualified. */
    int qualified = strchr(op, '.') != NULL, n = e->n_stages;
    char **q = qualified ? calloc((size_t)(n ? n : 1), sizeof *q) : NULL;
    const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
    const char *near = NULL;
    if (names && (!qualified || q)) {
        for (int i = 0; i < n; i++) {
            names[i] = e->stages[i].desc->name;
            if (qualified) {
                size_t len = strlen(plugin_name_of(e, i)) + strlen(names[i]) + 2;
                q[i] = malloc(len);
                if (!q[i]) {
                    n = i;
                    break;
                }
                snprintf(q[i], len, "%s.%s", plugin_name_of(e, i), names[i]);
                names[i] = q[i];
            }
        }
        near = pf_closest(op, names, n);
    }
    size_t o = 0;
    if (near)
        o = (size_t)snprintf(err, err_size, "unknown op '%s'; did you mean '%s'?", op, near);
    else
        o = (size_t)snprintf(err, err_size,
                             "unknown op '%s'; %d ops are loaded (`pipefuse stages` lists them; "
                             "a plugin's own stages load from a directory given with "
                             "--plugin-path DIR or PIPEFUSE_PLUGIN_PATH)",
                             op, e->n_stages);
    if (e->skipped && o < err_size) {
        /* The reasons, one line each, after the message. */
        snprintf(err + o, err_size - o, "; not loaded:\n%s", e->skipped);
        size_t len = strlen(err);
        if (len && err[len - 1] == '\n')
            err[len - 1] = 0;
    }
    for (int i = 0; q && i < n; i++)
        free(q[i]);
    free(q);
    free(names);
    return -1;
}

PF_API const pf_stage_desc *pf_engine_find_stage(const pf_engine *e, const char *name)
{
    for (int i = 0; e && name && i < e->n_stages; i++)
        if (stage_is(e, i, name))
            return e->stages[i].desc;
    return NULL;
}

/* ---- What stages declare about their output -------------------------------------------------- */

PF_API int pf_pipeline_output_channels(const pf_pipeline *p, int i, int in_channels)
{
    if (!p || i < 0 || i >= p->n_outputs || in_channels < 1 || in_channels > 4)
        return 0;
    const pf_output_decl *o = &p->outputs[i];
    const pf_node *out = &p->nodes[o->node];
    if (out->desc && out->desc->kind == PF_STAGE_REDUCE)
        return 0;
    if (o->channels)
        return o->channels;
    /* need[n]: bit 1 colour, bit 2 alpha, of node n and every stage before it on the
       way (nodes are in topological order; a reduce passes nothing on). */
    unsigned char small[256], *need = p->n_nodes <= 256 ? small : malloc((size_t)p->n_nodes);
    if (!need)
        return in_channels;
    memset(need, 0, (size_t)o->node + 1);
    for (int n = 0; n <= o->node; n++) {
        const pf_node *nd = &p->nodes[n];
        int oc = nd->desc ? nd->desc->out_channels : 0;
        need[n] = (unsigned char)((oc >= 3 ? 1 : 0) | (oc == 2 || oc == 4 ? 2 : 0));
        for (int k = 0; nd->desc && nd->desc->kind != PF_STAGE_REDUCE && k < nd->n_in; k++)
            need[n] |= need[nd->in[k]];
    }
    int colour = need[o->node] & 1, alpha = need[o->node] & 2, ch = in_channels;
    if (need != small)
        free(need);
    if (colour && ch < 3)
        ch += 2; /* 1 -> 3, 2 -> 4 */
    if (alpha && (ch == 1 || ch == 3))
        ch += 1;
    return ch;
}
