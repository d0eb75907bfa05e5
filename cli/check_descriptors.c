/* cli/check_descriptors.c: `pipefuse plugin check`, the plugin file's permissions and its
   descriptor, read field by field and each stage declaration checked. */
#include "pipefuse/stage_check.h"
#include "plugin_check.h"

/* ---- The file and its descriptor ----------------------------------------------------------- */

/* The engine's rule for plugin files and their directories (pf_plugin_path_check, the
   loader's own). 0 when safe to load. */
int pc_check_file(pc *c)
{
    char what[PATH_MAX + 256], fix[PATH_MAX + 128];
    printf("\nfile\n");
    if (pf_plugin_path_check(c->real, what, sizeof what, fix, sizeof fix) != 0) {
        fail(c, fix,
             "%s: the engine refuses to load it from there, and this check does not load it", what);
        return -1;
    }
    pass(c,
         "%s: only its owner can write to it, its directory or the directories above (mode %03o)",
         c->real, (unsigned)(c->st.st_mode & 0777));
    return 0;
}

static void plugin_host_log(int level, const char *msg)
{
    printf("        (plugin log: %s)\n", msg ? msg : "");
}

/* What plugin check makes of the validator's findings (pipefuse/stage_check.h): errors
   and faults fail at once, with their fix; warnings come after the stage's summary line. */
#define PC_MAX_WARN 8

typedef struct decl_report {
    pc *c;
    int stage; /* the stage's index in the plugin's list; -1 for the plugin descriptor */
    int n_warn;
    char warn[PC_MAX_WARN][1024], fix[PC_MAX_WARN][512];
} decl_report;

static int on_finding(void *user, const pf_check_finding *f)
{
    decl_report *r = user;
    char msg[1200];
    /* A stage's findings name the descriptor field too, as the engine's message does:
       the stage's name alone cannot tell an unnamed or undersized stage apart. */
    if (r->stage >= 0 && f->field && f->field[0])
        snprintf(msg, sizeof msg, "%s (stages[%d].%s)", f->message, r->stage, f->field);
    else
        snprintf(msg, sizeof msg, "%s", f->message);
    if (f->level != PF_CHECK_WARNING) {
        fail(r->c, f->fix, "%s", msg);
    } else if (r->n_warn < PC_MAX_WARN) {
        pc_copy_text(r->warn[r->n_warn], sizeof r->warn[0], msg);
        pc_copy_text(r->fix[r->n_warn], sizeof r->fix[0], f->fix);
        r->n_warn++;
    }
    return 0;
}

/* One stage descriptor: the engine's rules (pf_stage_check, every finding), then what the
   point op calls. */
static void check_stage_decl(pc *c, const pf_stage_desc *src, int index)
{
    int failed = c->failed;
    decl_report r = {.c = c, .stage = index};
    pc_doing("stage %d's descriptor (check() and radius() run on its defaults)", index + 1);
    if (pf_stage_check(src, c->abi_minor, on_finding, &r) < 0)
        fail(c, NULL, "stage %d: out of memory checking its descriptor", index + 1);
    if (src->size < offsetof(pf_stage_desc, cost))
        return;
    pf_stage_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, src, src->size < sizeof d ? src->size : sizeof d);
    const char *label = d.name && d.name[0] ? d.name : "(unnamed)";
    char callee[64];
    int line = 0;
    /* every header the engine compiles into kernels: a point op's, a stencil's functions */
    const char *form = d.kind == PF_STAGE_POINT                       ? "the op header"
                       : d.kind == PF_STAGE_STENCIL && d.stencil_fn   ? "stencil_fn's header"
                       : d.kind == PF_STAGE_STENCIL && d.separable_fn ? "separable_fn's header"
                       : d.kind == PF_STAGE_REDUCE && d.reduce_finish ? "reduce_finish's header"
                                                                      : NULL;
    if (form && d.point_source && pc_forbidden_call(d.point_source, callee, sizeof callee, &line))
        fail(c,
             "a fused function (point op, stencil_fn, separable_fn, reduce_finish) may call only "
             "its "
             "header's own PF_POINT_FN functions, the pf_* helpers and PF_* macros of "
             "pipefuse/point.h, and the maths functions docs/plugins.md lists (no I/O, memory "
             "or process functions: it runs once per pixel, on the GPU too)",
             "%s: %s (point_source) calls %s() (line %d), which a fused function may not use",
             label, form, callee, line);
    if (c->failed == failed && d.n_params == 0)
        pass(c, "%s: %s, %d input%s, no parameters", label, pc_kind_names[d.kind], d.n_inputs,
             d.n_inputs > 1 ? "s" : "");
    else if (c->failed == failed)
        pass(c,
             "%s: %s, %d input%s, %d parameter%s: documented, names unique, defaults in "
             "range",
             label, pc_kind_names[d.kind], d.n_inputs, d.n_inputs > 1 ? "s" : "", d.n_params,
             d.n_params == 1 ? "" : "s");
    for (int k = 0; k < r.n_warn; k++)
        pc_note(c, PC_WARN, r.fix[k], "%s", r.warn[k]);
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
        /* the advice that fits dlopen's reason: a symbol missing, or no shared library
           for this machine at all (a text file, an object file, another architecture) */
        const char *why = dlerror();
        why = why ? why : "unknown error";
        fail(c,
             strstr(why, "undefined symbol")
                 ? "an undefined symbol usually means a function declared but not defined, or "
                   "a library not linked; `ldd -r FILE` lists them"
             : strstr(why, "ELF") || strstr(why, "ET_DYN") || strstr(why, "file too short")
                 ? "a plugin is a shared library built for this machine (pipefuse_add_plugin, "
                   "or cc -shared -fPIC); `file FILE` says what this file is"
                 : "`ldd -r FILE` lists the libraries and symbols it needs and which are missing",
             "cannot load it: %s", why);
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
    decl_report r = {.c = c, .stage = -1};
    int readable = 0;
    pf_plugin_check(pd, &readable, on_finding, &r);
    if (!readable || pd->n_stages == 0) {
        dlclose(h);
        return NULL;
    }
    unsigned minor = pd->abi_version & 0xffff;
    c->abi_minor = minor;
    pass(c, "exports %s: plugin '%s' %s, built for ABI %d.%u (this pipefuse: %d.%d), %d stage%s",
         PF_PLUGIN_ENTRY_NAME, pd->name ? pd->name : "(unnamed)",
         pd->version ? pd->version : "(no version)", PF_ABI_MAJOR, minor, PF_ABI_MAJOR,
         PF_ABI_MINOR, pd->n_stages, pd->n_stages > 1 ? "s" : "");
    for (int k = 0; k < r.n_warn; k++)
        pc_note(c, PC_WARN, r.fix[k], "%s", r.warn[k]);
    for (int i = 0; i < pd->n_stages; i++)
        if (pd->stages[i])
            check_stage_decl(c, pd->stages[i], i);
    *pdo = pd;
    return h;
}
