/* cli/check_engine.c: `pipefuse plugin check`, the plugin in an engine: the built-in
   plugins alone first (is the file one of them? do its stage names clash with theirs?),
   then the file reached through a private directory (mkdtemp, mode 0700) holding only a
   symbolic link to it, next to the built-in plugins; the engine's reasons for refusing
   it, with the link's path put back to the file's.

   An installed copy of the plugin itself (`cmake --install` of the author's build into
   pipefuse's prefix puts it in the built-in directory: the same plugin name in a file of
   the same name, which the next install replaces) is no clash: it is left out, with a
   notice, and the built-in plugins are then reached through links of their own in a
   subdirectory of the private one. A built-in plugin that shares only the plugin name or
   only the file name is another plugin, and still clashes. */
#include "plugin_check.h"

#include <dirent.h>

/* The private directory and the link, removed at the end and by the crash guards; with
   an installed copy left out, the links to the other built-in plugins in g_builtin. */
#define PC_MAX_BUILTIN 64
static char g_tmpdir[PATH_MAX], g_link[PATH_MAX], g_builtin[PATH_MAX];
static char g_blinks[PC_MAX_BUILTIN][PATH_MAX];
static int g_n_blinks;

void pc_cleanup_tmp(void)
{
    for (int i = 0; i < g_n_blinks; i++)
        unlink(g_blinks[i]);
    g_n_blinks = 0;
    if (g_builtin[0])
        rmdir(g_builtin);
    if (g_link[0])
        unlink(g_link);
    if (g_tmpdir[0])
        rmdir(g_tmpdir);
    g_builtin[0] = g_link[0] = g_tmpdir[0] = 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Whether the built-in plugin named plugin, from file, is an installed copy of the plugin
   being checked (pd, at c->real): the same plugin name and the same file name. */
static int installed_copy(const pc *c, const pf_plugin_desc *pd, const char *file,
                          const char *plugin)
{
    return pd && pd->name && plugin && strcmp(pd->name, plugin) == 0 && file &&
           strcmp(base_name(file), base_name(c->real)) == 0;
}

/* g_builtin (made inside g_tmpdir) with a link to every *.so of dir but skip: the
   built-in plugins without the installed copy. 0, or -1 after a FAIL. */
static int link_builtins(pc *c, const char *dir, const char *skip_file)
{
    int n = snprintf(g_builtin, sizeof g_builtin, "%s/builtin", g_tmpdir);
    if (n < 0 || (size_t)n >= sizeof g_builtin || mkdir(g_builtin, 0700) != 0) {
        fail(c, "set TMPDIR to a directory you can write to", "cannot make %s: %s", g_builtin,
             strerror(errno));
        g_builtin[0] = 0;
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fail(c, "check the pipefuse installation (`pipefuse info`)", "%s: %s", dir,
             strerror(errno));
        return -1;
    }
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 4 || strcmp(de->d_name + len - 3, ".so") != 0 ||
            strcmp(de->d_name, skip_file) == 0)
            continue;
        char target[PATH_MAX];
        if (g_n_blinks == PC_MAX_BUILTIN ||
            snprintf(target, sizeof target, "%s/%s", dir, de->d_name) >= (int)sizeof target ||
            snprintf(g_blinks[g_n_blinks], PATH_MAX, "%s/%s", g_builtin, de->d_name) >= PATH_MAX ||
            symlink(target, g_blinks[g_n_blinks]) != 0) {
            fail(c, NULL, "cannot link the built-in plugin %s/%s into %s", dir, de->d_name,
                 g_builtin);
            rc = -1;
        } else {
            g_n_blinks++;
        }
    }
    closedir(d);
    return rc;
}

/* Engine notices (the CPU fallback and such) are expected here: shown with -v only. */
static void engine_log(void *user, int level, const char *msg)
{
    pc *c = user;
    size_t n = strlen(msg), have = strlen(c->refused);
    if (level >= 1 && n > 9 && strcmp(msg + n - 9, "; skipped") == 0 &&
        have + n < sizeof c->refused)
        snprintf(c->refused + have, sizeof c->refused - have, "%.*s\n", (int)(n - 9), msg);
    if (c->o.verbose) {
        char shown[4096];
        pc_unlinked_message(c, msg, shown, sizeof shown);
        printf("        (engine: %s)\n", shown);
    }
}

int pc_same_file(const char *path, const struct stat *st)
{
    struct stat s2;
    return path && stat(path, &s2) == 0 && s2.st_dev == st->st_dev && s2.st_ino == st->st_ino;
}

/* msg with every occurrence of the private link's path replaced by the real file's. */
void pc_unlinked_message(const pc *c, const char *msg, char *out, size_t size)
{
    size_t o = 0, n = strlen(g_link);
    while (*msg && o + 1 < size) {
        if (n && strncmp(msg, g_link, n) == 0) {
            o += (size_t)snprintf(out + o, size - o, "%s", c->real);
            if (o >= size)
                o = size - 1;
            msg += n;
        } else {
            out[o++] = *msg++;
        }
    }
    out[o] = 0;
}

static int create_engine(pc *c, const char *path, int no_builtin, pf_engine **out)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.no_builtin = no_builtin;
    cfg.plugin_path = path;
    cfg.threads = c->common->threads;
    cfg.log = engine_log;
    cfg.log_user = c;
    return pf_engine_create(&cfg, out);
}

/* Creates c->eng: the built-in plugins and the file. 0 when it loaded. */
int pc_load_engine(pc *c, const pf_plugin_desc *pd)
{
    printf("\nengine\n");
    pf_engine *e = NULL;
    pc_doing("loading the built-in plugins");
    if (create_engine(c, NULL, 0, &e) != PF_OK) {
        fail(c, "check the pipefuse installation (`pipefuse info`)",
             "the built-in plugins do not load: %s", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return -1;
    }
    for (int i = 0; i < pf_engine_stage_count(e); i++) {
        const char *file;
        pf_engine_stage(e, i, &file, NULL);
        if (pc_same_file(file, &c->st)) {
            pass(c, "loads: it is one of the built-in plugins (%d stages in all)",
                 pf_engine_stage_count(e));
            c->eng = e;
            return 0;
        }
    }
    /* An installed copy of this plugin among the built-in ones: left out. */
    char copy[PATH_MAX] = "";
    for (int i = 0; i < pf_engine_stage_count(e) && !copy[0]; i++) {
        const char *file, *plugin;
        pf_engine_stage(e, i, &file, &plugin);
        if (installed_copy(c, pd, file, plugin))
            pc_copy_text(copy, sizeof copy, file);
    }
    if (copy[0])
        printf("  note  %s is an installed copy of this plugin (plugin '%s', the same file "
               "name); it is left out of the checks\n",
               copy, pd->name);
    for (int i = 0; pd && i < pd->n_stages; i++) {
        const pf_stage_desc *s = pd->stages[i];
        if (!s || s->size < offsetof(pf_stage_desc, cost) || !s->name)
            continue;
        for (int k = 0; k < pf_engine_stage_count(e); k++) {
            const char *file, *plugin;
            const pf_stage_desc *b = pf_engine_stage(e, k, &file, &plugin);
            if (installed_copy(c, pd, file, plugin))
                continue;
            if (strcmp(b->name, s->name) == 0)
                fail(c, "rename the stage: stage names are shared by all loaded plugins",
                     "stage name '%s' is already taken by the built-in plugin %s (%s)", s->name,
                     plugin, file);
        }
    }
    pf_engine_destroy(e);
    e = NULL;

    /* The file alone in a private directory, named on the plugin path. */
    const char *tmp = getenv("TMPDIR");
    int n =
        snprintf(g_tmpdir, sizeof g_tmpdir, "%s/pipefuse-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof g_tmpdir || !mkdtemp(g_tmpdir)) {
        fail(c, "set TMPDIR to a directory you can write to",
             "cannot make a private directory "
             "(%s): %s",
             g_tmpdir, strerror(errno));
        g_tmpdir[0] = 0;
        return -1;
    }
    const char *base = strrchr(c->real, '/');
    base = base ? base + 1 : c->real;
    size_t bl = strlen(base);
    n = snprintf(g_link, sizeof g_link, "%s/%s%s%s", g_tmpdir, base[0] == '.' ? "p" : "", base,
                 bl > 3 && strcmp(base + bl - 3, ".so") == 0 ? "" : ".so");
    if (n < 0 || (size_t)n >= sizeof g_link || symlink(c->real, g_link) != 0) {
        fail(c, NULL, "cannot link the plugin into %s: %s", g_tmpdir, strerror(errno));
        g_link[0] = 0;
        return -1;
    }
    /* With a copy left out, the built-in plugins come from links in g_builtin, searched
       before the file as the built-in directory is. */
    char path[2 * PATH_MAX + 2];
    snprintf(path, sizeof path, "%s", g_tmpdir);
    if (copy[0]) {
        char dir[PATH_MAX];
        pc_copy_text(dir, sizeof dir, copy);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        if (link_builtins(c, dir, base_name(copy)) != 0)
            return -1;
        snprintf(path, sizeof path, "%s:%s", g_builtin, g_tmpdir);
    }
    pc_doing("loading the plugin in the engine, next to the built-in plugins");
    c->refused[0] = 0;
    int loaded = 0;
    if (create_engine(c, path, copy[0] != 0, &e) == PF_OK)
        for (int i = 0; i < pf_engine_stage_count(e); i++) {
            const char *file;
            pf_engine_stage(e, i, &file, NULL);
            loaded += pc_same_file(file, &c->st);
        }
    if (!loaded) {
        /* The engine skips a plugin it refuses, with a warning that says why. */
        char msg[4096];
        size_t len = strlen(c->refused);
        if (len && c->refused[len - 1] == '\n')
            c->refused[len - 1] = 0;
        pc_unlinked_message(c, c->refused[0] ? c->refused : pf_engine_errmsg(e), msg, sizeof msg);
        fail(c,
             "see the failures above; `pipefuse stages` skips such a plugin with this "
             "warning, and pipelines using its stages fail",
             "the engine refuses it: %s", msg);
        pf_engine_destroy(e);
        return -1;
    }
    pass(c, "loads next to the built-in plugins (%d stages in all)", pf_engine_stage_count(e));
    c->eng = e;
    return 0;
}
