/* cli/check_descriptors.c: `pipefuse plugin check`, the plugin file's permissions and its
   descriptor, read field by field and each stage declaration checked. */
#include "plugin_check.h"

/* ---- The file and its descriptor ----------------------------------------------------------- */

int pc_is_identifier(const char *s)
{
    if (!s || !*s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static int unsafe_mode(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid != 0 && st->st_uid != geteuid());
}

/* The engine's rule for plugin files and their directories. 0 when safe to load. */
int pc_check_file(pc *c)
{
    char dir[PATH_MAX];
    struct stat ds;
    printf("\nfile\n");
    if (!S_ISREG(c->st.st_mode)) {
        fail(c, "pass the plugin's .so file", "%s is not a regular file", c->real);
        return -1;
    }
    if (unsafe_mode(&c->st)) {
        char fix[PATH_MAX + 64];
        snprintf(fix, sizeof fix, "chmod go-w %s (and own the file yourself)", c->real);
        fail(c, fix,
             "%s: other users can write to it (mode %03o, owner uid %u): the engine "
             "refuses such a plugin, and this check does not load it",
             c->real, (unsigned)(c->st.st_mode & 0777), (unsigned)c->st.st_uid);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", c->real);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    if (stat(dir, &ds) != 0) {
        fail(c, NULL, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (unsafe_mode(&ds)) {
        char fix[PATH_MAX + 128];
        snprintf(fix, sizeof fix,
                 "chmod go-w %s, or move the plugin to a directory only you "
                 "can write to",
                 dir);
        fail(c, fix,
             "%s: other users can write to the plugin's directory (mode %03o, owner uid "
             "%u): the engine refuses it, and this check does not load the plugin",
             dir, (unsigned)(ds.st_mode & 0777), (unsigned)ds.st_uid);
        return -1;
    }
    pass(c, "%s: only its owner can write to it or its directory (mode %03o)", c->real,
         (unsigned)(c->st.st_mode & 0777));
    return 0;
}

static void plugin_host_log(int level, const char *msg)
{
    printf("        (plugin log: %s)\n", msg ? msg : "");
}

/* One stage descriptor, as the engine reads it. */
static void check_stage_decl(pc *c, const pf_stage_desc *src, int index, const pf_plugin_desc *pd)
{
    char label[96];
    if (!src) {
        fail(c, "list only defined stages", "stage %d of %d is NULL", index + 1, pd->n_stages);
        return;
    }
    if (src->size < offsetof(pf_stage_desc, cost)) {
        fail(c, "set .size = PF_STAGE_DESC_SIZE in every stage descriptor",
             "stage %d: descriptor too small (%u bytes)", index + 1, src->size);
        return;
    }
    pf_stage_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, src, src->size < sizeof d ? src->size : sizeof d);
    snprintf(label, sizeof label, "%s", pc_is_identifier(d.name) ? d.name : "?");
    int before = c->failed;
    if (!pc_is_identifier(d.name))
        fail(c, "name stages as C identifiers (letters, digits, _): pipeline files refer to them",
             "stage %d: name '%s' is not an identifier", index + 1, d.name ? d.name : "NULL");
    for (int j = 0; j < index && pc_is_identifier(d.name); j++) {
        const pf_stage_desc *o = pd->stages[j];
        if (o && o->size >= offsetof(pf_stage_desc, cost) && o->name &&
            strcmp(o->name, d.name) == 0)
            fail(c, "give each stage its own name", "%s: two stages of the plugin have this name",
                 label);
    }
    if (!d.doc || !d.doc[0])
        fail(c, "set .doc: `pipefuse stages` shows it to users", "%s: no doc string", label);
    if ((unsigned)d.kind > PF_STAGE_REDUCE) {
        fail(c, "set .kind to PF_STAGE_POINT, _STENCIL, _RESAMPLE or _REDUCE",
             "%s: unknown kind %d", label, (int)d.kind);
        return;
    }
    if (d.n_inputs < 1 || d.n_inputs > PF_MAX_INPUTS)
        fail(c, "set .n_inputs", "%s: takes %d inputs; 1 to %d are allowed", label, d.n_inputs,
             PF_MAX_INPUTS);
    const char *missing = NULL;
    switch (d.kind) {
    case PF_STAGE_POINT:
        missing = !d.point_row ? "point_row" : NULL;
        break;
    case PF_STAGE_STENCIL:
        missing = !d.run_cpu ? "run_cpu" : !d.radius ? "radius" : NULL;
        break;
    case PF_STAGE_RESAMPLE:
        missing = !d.run_cpu ? "run_cpu" : !d.shape ? "shape" : NULL;
        break;
    case PF_STAGE_REDUCE:
        missing = !d.run_cpu       ? "run_cpu"
                  : !d.shape       ? "shape"
                  : !d.partial_len ? "partial_len"
                  : !d.combine     ? "combine"
                                   : NULL;
        break;
    }
    if (missing)
        fail(c, "every stage of this kind needs it (docs/plugins.md lists what each kind needs)",
             "%s: a %s stage without %s", label, pc_kind_names[d.kind], missing);
    if (d.kind == PF_STAGE_POINT && d.point_source) {
        if (!d.point_fn || !d.params_type)
            fail(c, "use PF_POINT_DESC(fn, T, source), which sets all three",
                 "%s: point_source without point_fn or params_type", label);
        else if (!strstr(d.point_source, d.point_fn) || !strstr(d.point_source, d.params_type))
            fail(c,
                 "point_fn and params_type must name the op and its params struct as the "
                 "header spells them",
                 "%s: the point source does not mention %s", label,
                 !strstr(d.point_source, d.point_fn) ? d.point_fn : d.params_type);
        char callee[64];
        int line = 0;
        if (pc_forbidden_call(d.point_source, callee, sizeof callee, &line))
            fail(c,
                 "a point op may call only its own PF_POINT_FN functions, the pf_* helpers and "
                 "PF_* macros of pipefuse/point.h, and the maths functions docs/plugins.md "
                 "lists (no I/O, memory or process functions: the op runs once per pixel, on "
                 "the GPU too)",
                 "%s: the op header calls %s() (line %d), which a point op may not use", label,
                 callee, line);
    }
    int bad_params = pc_check_params(c, label, &d);
    if (!bad_params && (d.check || (d.kind == PF_STAGE_STENCIL && d.radius))) {
        pc_params ps;
        char why[512];
        pc_doing("stage %s: check() on its defaults", label);
        if (pc_make_params(c, &d, 0, &ps, why, sizeof why) != 0) {
            fail(c, "make the defaults pass the stage's own check()", "%s: %s", label, why);
        } else if (d.kind == PF_STAGE_STENCIL && d.radius) {
            pc_doing("stage %s: radius() on its defaults", label);
            int r = d.radius(ps.st);
            if (r < 0 || r > PF_MAX_RADIUS)
                fail(c,
                     "return the farthest distance the stage reads, 0 to PF_MAX_RADIUS; a "
                     "stage needing more must work another way (a resample, or passes)",
                     "%s: radius() returns %d with the default params; the engine allows 0 to "
                     "%d (PF_MAX_RADIUS)",
                     label, r, PF_MAX_RADIUS);
        }
        pc_params_free(&ps);
    }
    if (c->failed == before && d.n_params == 0)
        pass(c, "%s: %s, %d input%s, no parameters", label, pc_kind_names[d.kind], d.n_inputs,
             d.n_inputs > 1 ? "s" : "");
    else if (c->failed == before)
        pass(c,
             "%s: %s, %d input%s, %d parameter%s: documented, names unique, defaults in "
             "range",
             label, pc_kind_names[d.kind], d.n_inputs, d.n_inputs > 1 ? "s" : "", d.n_params,
             d.n_params == 1 ? "" : "s");
    if (d.kind == PF_STAGE_POINT && !d.point_source)
        warn(c,
             "%s: no point source (point_source is NULL): it cannot fuse, so each use costs a "
             "launch and a trip through memory",
             label);
    if (!pc_has_cuda(&d))
        warn(c, "%s: no CUDA implementation (%s is NULL): pipelines using it run on the CPU%s",
             label, d.kind == PF_STAGE_POINT ? "point_cuda" : "run_cuda",
             " (was the plugin built without its CUDA sources?)");
    if (d.kind == PF_STAGE_REDUCE && !d.columns)
        warn(c, "%s: no column names (columns is NULL): table outputs get numbered columns", label);
}

/* Opens the file and checks its descriptor. Returns the dlopen handle (to close at the
   end) when the engine can be asked to load it, NULL when not; *pdo gets the descriptor. */
void *pc_check_descriptor(pc *c, const pf_plugin_desc **pdo)
{
    static const pf_host_api host = {sizeof(pf_host_api), PF_ABI_VERSION, plugin_host_log};
    printf("\ndescriptor\n");
    *pdo = NULL;
    pc_doing("loading %s (its constructors run)", c->real);
    void *h = dlopen(c->real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fail(c,
             "an undefined symbol usually means a function declared but not defined, or a "
             "library not linked; `ldd -r FILE` lists them",
             "cannot load it: %s", dlerror());
        return NULL;
    }
    pf_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, PF_PLUGIN_ENTRY_NAME);
    if (!entry) {
        fail(c,
             "define the entry with PF_DEFINE_PLUGIN(name, version, doc, stages) in one "
             "source file (it is exported even when everything else is hidden)",
             "not a pipefuse plugin: it exports no %s", PF_PLUGIN_ENTRY_NAME);
        dlclose(h);
        return NULL;
    }
    pc_doing("calling %s", PF_PLUGIN_ENTRY_NAME);
    const pf_plugin_desc *pd = entry(&host);
    if (!pd) {
        fail(c, "return the address of a static pf_plugin_desc", "%s returned NULL",
             PF_PLUGIN_ENTRY_NAME);
        dlclose(h);
        return NULL;
    }
    if (pd->size < offsetof(pf_plugin_desc, n_stages) + sizeof(int)) {
        fail(c, "set .size = sizeof(pf_plugin_desc) (PF_DEFINE_PLUGIN does)",
             "plugin descriptor too small (%u bytes)", pd->size);
        dlclose(h);
        return NULL;
    }
    unsigned major = pd->abi_version >> 16, minor = pd->abi_version & 0xffff;
    c->abi_minor = minor;
    if (major != PF_ABI_MAJOR || minor > PF_ABI_MINOR) {
        fail(c,
             "rebuild the plugin against this pipefuse's headers (find_package(pipefuse) or "
             "pkg-config pipefuse finds them): a plugin built for ABI M.m loads in engines "
             "of the same major M and minor m or newer",
             "built for plugin ABI %u.%u; this pipefuse supports ABI %d.0 to %d.%d", major, minor,
             PF_ABI_MAJOR, PF_ABI_MAJOR, PF_ABI_MINOR);
        dlclose(h);
        return NULL;
    }
    if (!pd->name || !pd->name[0] || pd->n_stages <= 0 || !pd->stages) {
        fail(c,
             "PF_DEFINE_PLUGIN(name, version, doc, stages) with a name and a non-empty "
             "array of stages",
             "the plugin descriptor has %s", !pd->name || !pd->name[0] ? "no name" : "no stages");
        dlclose(h);
        return NULL;
    }
    pass(c, "exports %s: plugin '%s' %s, built for ABI %u.%u (this pipefuse: %d.%d), %d stage%s",
         PF_PLUGIN_ENTRY_NAME, pd->name, pd->version ? pd->version : "(no version)", major, minor,
         PF_ABI_MAJOR, PF_ABI_MINOR, pd->n_stages, pd->n_stages > 1 ? "s" : "");
    if (!pd->version || !pd->version[0])
        warn(c, "the plugin has no version string");
    if (!pd->doc || !pd->doc[0])
        warn(c, "the plugin has no doc string (`pipefuse info` shows it)");
    for (int i = 0; i < pd->n_stages; i++)
        check_stage_decl(c, pd->stages[i], i, pd);
    *pdo = pd;
    return h;
}
