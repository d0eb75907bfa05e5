/* cli/check_fused.c: `pipefuse plugin check`, the fused forms a stage declares, proved on
 * the CPU.
 *
 * On the GPU the engine runs a stage's point op, its stencil_fn or separable_fn in kernels
 * it generates, and computes a reduce_sum table itself; a machine without a GPU runs none
 * of that, and the stage's own run_cpu never calls those functions. So each declared
 * function is compiled from the stage's point_source with the host C compiler ($CC, else
 * cc) into a temporary shared object, through a wrapper that assigns it to a pointer of
 * the declared signature (a missing function, a wrong signature or an undeclared call
 * such as printf is then a compile error, named with the header's own line), and the
 * arithmetic of the generated kernels is run with it on the test images and compared
 * with the stage's own CPU run within --tolerance:
 *   point      the op at every pixel, position included, against point_row;
 *   stencil_fn the function on each pixel's 3x3 neighbourhood, clamped at the edges,
 *              against run_cpu (params of radius 1; the engine ignores it otherwise);
 *   separable  plugin.h's two passes with separable_fn's taps against run_cpu;
 *   reduce_sum the plain sum of the input by columns or rows, in double, against the
 *              table (a mean or a normalised table is not a sum: the GPU would write sums).
 * NVRTC compiles the same text as CUDA in the fused kernel (check_run.c), so the two
 * together cover both compilers. The temporary directory (mkdtemp, mode 0700) is removed
 * as soon as the object is loaded.
 */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "../plugins/premultiply.h" /* the alpha rules of the separable passes */
#include "plugin_check.h"

extern char **environ;
/* pipefuse/point.h and pipefuse/premultiply.h, embedded (cli/CMakeLists.txt): the headers a
   generated kernel offers a point source */
extern const char pc_src_point_h[];
extern const char pc_src_premultiply_h[];

/* The declared forms, each a function of the point source with its signature. */
enum { FORM_POINT, FORM_STENCIL, FORM_SEPARABLE, FORM_FINISH };

static const struct {
    const char *field; /* the descriptor field naming the function */
    const char *proto; /* the signature, T for the params struct, as docs/plugins.md */
    const char *type;  /* a pointer type of that signature, %s for T */
    const char *call;  /* the wrapper exported from the object */
} forms[] = {
    {"point_fn", "pf_float4 %s(const T *params, const pf_float4 *in, pf_pos pos)",
     "pf_float4 (*)(const %s *, const pf_float4 *, pf_pos)",
     "pf_float4 pipefuse_check_fn_(const void *p, const pf_float4 *in, pf_pos pos)\n"
     "{\n    return f_((const T_ *)p, in, pos);\n}\n"},
    {"stencil_fn", "pf_float4 %s(const T *params, const pf_float4 *n)",
     "pf_float4 (*)(const %s *, const pf_float4 *)",
     "pf_float4 pipefuse_check_fn_(const void *p, const pf_float4 *n)\n"
     "{\n    return f_((const T_ *)p, n);\n}\n"},
    {"separable_fn", "int %s(const T *params, int i, double *tap, int *premultiply)",
     "int (*)(const %s *, int, double *, int *)",
     "int pipefuse_check_fn_(const void *p, int i, double *tap, int *pm)\n"
     "{\n    return f_((const T_ *)p, i, tap, pm);\n}\n"},
    {"reduce_finish",
     "double %s(const T *params, double sum, int row, int column, int width, int height)",
     "double (*)(const %s *, double, int, int, int, int)",
     "double pipefuse_check_fn_(const void *p, double s, int r, int c, int w, int h)\n"
     "{\n    return f_((const T_ *)p, s, r, c, w, h);\n}\n"},
};

typedef pf_float4 (*point_fn)(const void *, const pf_float4 *, pf_pos);
typedef pf_float4 (*stencil_fn)(const void *, const pf_float4 *);
typedef int (*taps_fn)(const void *, int, double *, int *);
typedef double (*finish_fn)(const void *, double, int, int, int, int);

/* ---- The host compile ------------------------------------------------------------------------ */

/* dir/name into out; -1 when it does not fit (the directory is mkdtemp's: it does). */
static int in_dir(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    if (in_dir(path, sizeof path, dir, name) != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) == EOF;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

static void remove_tree(const char *dir)
{
    static const char *const files[] = {
        "pipefuse/point.h", "pipefuse/premultiply.h", "ops.h", "check.c", "check.so", "cc.log"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (in_dir(path, sizeof path, dir, files[i]) == 0)
            unlink(path);
    }
    if (in_dir(path, sizeof path, dir, "pipefuse") == 0)
        rmdir(path);
    rmdir(dir);
}

/* The compiler's error lines (at most three), the temporary directory's name taken out. */
static void compiler_errors(const char *dir, char *why, size_t size)
{
    char path[PATH_MAX], line[1024];
    FILE *f = in_dir(path, sizeof path, dir, "cc.log") == 0 ? fopen(path, "r") : NULL;
    size_t o = 0, dl = strlen(dir);
    int n = 0;
    why[0] = 0;
    while (f && n < 3 && fgets(line, sizeof line, f)) {
        if (!strstr(line, "error") || strncmp(line, "cc1", 3) == 0)
            continue; /* "cc1: some warnings being treated as errors" says nothing */
        line[strcspn(line, "\n")] = 0;
        const char *l = strncmp(line, dir, dl) == 0 && line[dl] == '/' ? line + dl + 1 : line;
        int k = snprintf(why + o, size - o, "%s%s", n++ ? "; " : "", l);
        if (k < 0 || (size_t)k >= size - o)
            break;
        o += (size_t)k;
    }
    if (f)
        fclose(f);
    if (!why[0])
        snprintf(why, size, "the compiler failed without an error line (see `%s`)", "cc -v");
}

/* Runs the host compiler on dir/check.c. 0 when it made dir/check.so, 1 when it
   refused (why: its errors), -1 when it could not run (why: why not). */
static int run_compiler(const char *dir, char *why, size_t size)
{
    const char *cc = getenv("CC");
    char ccbuf[512], inc[PATH_MAX + 2], src[PATH_MAX], so[PATH_MAX], log[PATH_MAX];
    snprintf(ccbuf, sizeof ccbuf, "%s", cc && cc[0] ? cc : "cc");
    if (snprintf(inc, sizeof inc, "-I%s", dir) >= (int)sizeof inc ||
        in_dir(src, sizeof src, dir, "check.c") != 0 ||
        in_dir(so, sizeof so, dir, "check.so") != 0 ||
        in_dir(log, sizeof log, dir, "cc.log") != 0) {
        snprintf(why, size, "the temporary directory's name is too long");
        return -1;
    }
    char *argv[48];
    int argc = 0;
    for (char *t = strtok(ccbuf, " \t"); t && argc < 16; t = strtok(NULL, " \t"))
        argv[argc++] = t; /* CC may be "ccache gcc" */
    static char *const flags[] = {"-std=c11",
                                  "-O1",
                                  "-ffp-contract=off",
                                  "-fPIC",
                                  "-shared",
                                  "-fvisibility=hidden",
                                  "-Werror=implicit-function-declaration",
                                  "-Werror=incompatible-pointer-types",
                                  "-Werror=int-conversion",
                                  "-Werror=return-type"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        argv[argc++] = flags[i];
    argv[argc++] = inc;
    argv[argc++] = "-o";
    argv[argc++] = so;
    argv[argc++] = src;
    argv[argc++] = "-lm";
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        snprintf(why, size, "cannot start the host C compiler: out of memory");
        return -1;
    }
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(why, size, "no host C compiler: %s: %s (set CC to one)", argv[0], strerror(rc));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, size, "waiting for %s: %s", argv[0], strerror(errno));
            return -1;
        }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        snprintf(why, size, "no host C compiler: %s could not be run (set CC to one)", argv[0]);
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        compiler_errors(dir, why, size);
        return 1;
    }
    return 0;
}

/* Compiles form's function fn of the stage's point source for the host. 0 with *entry
   the wrapper (the object stays loaded until the process ends); 1 when the header or the
   function does not compile (why: the compiler's errors); -1 when there is no compiler. */
static int host_compile(const pf_stage_desc *d, int form, const char *fn, void **entry, char *why,
                        size_t size)
{
    char dir[1024], sub[PATH_MAX], type[256];
    const char *t = getenv("TMPDIR");
    int dn = snprintf(dir, sizeof dir, "%s/pipefuse-check-XXXXXX", t && t[0] == '/' ? t : "/tmp");
    if (dn < 0 || (size_t)dn >= sizeof dir || !mkdtemp(dir)) {
        snprintf(why, size, "cannot create a temporary directory in %s: %s",
                 t && t[0] == '/' ? t : "/tmp", strerror(errno));
        return -1;
    }
    if (in_dir(sub, sizeof sub, dir, "pipefuse") != 0) {
        remove_tree(dir);
        snprintf(why, size, "the temporary directory's name is too long");
        return -1;
    }
    snprintf(type, sizeof type, forms[form].type, "T_"); /* T_: the params struct, below */
    /* The function assigned to a pointer of the declared type: a function of another
       signature is an incompatible-pointer-types error, a missing one undeclared. type is
       "R (*)(A...)"; the pointer f_ goes after its "(*". */
    const char *star = strstr(type, "(*)");
    size_t n = strlen(forms[form].call) + strlen(type) + strlen(d->params_type) + strlen(fn) + 256;
    char *wrapper = malloc(n);
    int rc = -1;
    if (!wrapper || !star) {
        snprintf(why, size, "out of memory");
        goto out;
    }
    if (mkdir(sub, 0700) != 0 || write_file(sub, "point.h", pc_src_point_h) != 0 ||
        write_file(sub, "premultiply.h", pc_src_premultiply_h) != 0 ||
        write_file(dir, "ops.h", d->point_source) != 0) {
        snprintf(why, size, "cannot write into %s: %s", dir, strerror(errno));
        goto out;
    }
    /* params_type as a typedef name, else as a struct tag (NVRTC's C++ takes either) */
    for (int tag = 0; tag < 2; tag++) {
        char first[2048];
        snprintf(wrapper, n,
                 "#include \"ops.h\"\n"
                 "typedef %s%s T_;\n"
                 "static %.*s(*const f_)%s = %s;\n"
                 "__attribute__((visibility(\"default\"))) %s",
                 tag ? "struct " : "", d->params_type, (int)(star - type), type, star + 3, fn,
                 forms[form].call);
        if (write_file(dir, "check.c", wrapper) != 0) {
            snprintf(why, size, "cannot write into %s: %s", dir, strerror(errno));
            rc = -1;
            break;
        }
        if (tag)
            pc_copy_text(first, sizeof first, why);
        rc = run_compiler(dir, why, size);
        if (rc != 1)
            break;
        if (tag) /* the typedef's errors say more */
            pc_copy_text(why, size, first);
    }
    if (rc == 0) {
        char so[PATH_MAX];
        void *h =
            in_dir(so, sizeof so, dir, "check.so") == 0 ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
        *(void **)entry = h ? dlsym(h, "pipefuse_check_fn_") : NULL;
        if (!*entry) {
            const char *e = dlerror();
            snprintf(why, size, "cannot load the host build: %s", e ? e : "no entry");
            rc = -1;
        }
    }
out:
    free(wrapper);
    remove_tree(dir);
    return rc;
}

/* ---- The arithmetic of the generated kernels --------------------------------------------------- */

static pf_float4 at_clamped(const pc_img *m, int x, int y)
{
    return pf_image_at_clamped(&m->im, x, y);
}

/* The point op at every pixel of the inputs into ref. */
static void run_point(point_fn f, const void *params, const pc_img *in, int n_in, pc_img *ref)
{
    pf_float4 v[PF_MAX_INPUTS];
    const int w = ref->im.width, h = ref->im.height;
    for (int y = 0; y < h; y++) {
        pf_float4 *o = pf_image_row(&ref->im, y);
        for (int x = 0; x < w; x++) {
            for (int k = 0; k < n_in; k++)
                v[k] = pf_image_row(&in[k].im, y)[x];
            pf_pos pos = {x, y, w, h};
            o[x] = f(params, v, pos);
        }
    }
}

/* The 3x3 function on each pixel's neighbourhood, row-major from the top left, clamped. */
static void run_stencil(stencil_fn f, const void *params, const pc_img *in, pc_img *ref)
{
    pf_float4 n[9];
    for (int y = 0; y < ref->im.height; y++) {
        pf_float4 *o = pf_image_row(&ref->im, y);
        for (int x = 0; x < ref->im.width; x++) {
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < 3; i++)
                    n[j * 3 + i] = at_clamped(in, x + i - 1, y + j - 1);
            o[x] = f(params, n);
        }
    }
}

static pf_float4 f4_scale(pf_float4 a, float s)
{
    return pf_f4(a.x * s, a.y * s, a.z * s, a.w * s);
}

/* acc + s * (a + b), each float operation rounded on its own */
static pf_float4 f4_pair(pf_float4 acc, float s, pf_float4 a, pf_float4 b)
{
    return pf_f4(acc.x + s * (a.x + b.x), acc.y + s * (a.y + b.y), acc.z + s * (a.z + b.z),
                 acc.w + s * (a.w + b.w));
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* plugin.h's separable passes with taps w[0..r] (pm: premultiplied) into ref; tmp is an
   image of ref's size for the horizontal sums. */
static void run_separable(const float *w, int r, int pm, const pc_img *in, pc_img *tmp, pc_img *ref)
{
    const int W = ref->im.width, H = ref->im.height;
    pm = pm && r > 0; /* radius 0 mixes nothing: a copy */
    for (int y = 0; y < H; y++) {
        pf_float4 *t = pf_image_row(&tmp->im, y);
        for (int x = 0; x < W; x++) {
            pf_float4 c[2 * PF_SEPARABLE_MAX + 1];
            for (int i = -r; i <= r; i++) {
                pf_float4 v = at_clamped(in, x + i, y);
                if (pm) {
                    const float a = pf_pm_alpha(v.w);
                    v = pf_f4(pf_pm_mul(v.x, a), pf_pm_mul(v.y, a), pf_pm_mul(v.z, a), a);
                }
                c[i + r] = v;
            }
            pf_float4 acc = f4_scale(c[r], w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, w[i], c[r - i], c[r + i]);
            t[x] = acc;
        }
    }
    /* the weights summed as both passes sum an alpha of 1 (filter.c's weight_sum) */
    float hs = 1.0f * w[0];
    for (int i = 1; i <= r; i++)
        hs = hs + w[i] * (1.0f + 1.0f);
    float wsum = hs * w[0];
    for (int i = 1; i <= r; i++)
        wsum = wsum + w[i] * (hs + hs);
    for (int y = 0; y < H; y++) {
        pf_float4 *o = pf_image_row(&ref->im, y);
        for (int x = 0; x < W; x++) {
            pf_float4 acc = f4_scale(pf_image_row(&tmp->im, y)[x], w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, w[i], pf_image_row(&tmp->im, clampi(y - i, 0, H - 1))[x],
                              pf_image_row(&tmp->im, clampi(y + i, 0, H - 1))[x]);
            if (wsum != 1.0f || pm)
                acc = pf_f4(pf_norm_colour(acc.x, acc.w, wsum, pm),
                            pf_norm_colour(acc.y, acc.w, wsum, pm),
                            pf_norm_colour(acc.z, acc.w, wsum, pm), acc.w / wsum);
            o[x] = acc;
        }
    }
}

/* The taps separable_fn gives for params, normalised as the engine normalises them:
   returns the radius (-1 with why when it is not one the engine takes). */
static int separable_taps(taps_fn f, const pf_stage_desc *d, const void *params, float *w, int *pm,
                          char *why, size_t size)
{
    double t0 = 0, t[PF_SEPARABLE_MAX + 1], sum = 0;
    *pm = 0;
    int r = f(params, -1, &t0, pm);
    if (r < 0 || r > d->separable_max) {
        snprintf(why, size, "separable_fn returns the radius %d, outside 0..separable_max (%d)", r,
                 d->separable_max);
        return -1;
    }
    for (int i = 0; i <= r; i++) {
        int pm_i = 0;
        t[i] = 0;
        f(params, i, &t[i], &pm_i);
        sum = sum + (i ? 2.0 * t[i] : t[i]);
    }
    if (!(sum > 0) || !isfinite(sum)) {
        snprintf(why, size, "its taps sum to %g: they cannot be normalised", sum);
        return -1;
    }
    for (int i = 0; i <= r; i++)
        w[i] = (float)(t[i] / sum);
    return r;
}

/* The input's plain sum by columns (table row x: the sum over y of pixel (x, y)) or by
   rows, in double, into t (rows x 4). */
static void run_sum(int by_columns, const pc_img *in, double *t)
{
    const int W = in->im.width, H = in->im.height, rows = by_columns ? W : H;
    memset(t, 0, sizeof(double) * 4 * (size_t)rows);
    for (int y = 0; y < H; y++) {
        const pf_float4 *r = pf_image_row(&in->im, y);
        for (int x = 0; x < W; x++) {
            double *e = t + 4 * (size_t)(by_columns ? x : y);
            e[0] += r[x].x, e[1] += r[x].y, e[2] += r[x].z, e[3] += r[x].w;
        }
    }
}

/* ---- The checks ------------------------------------------------------------------------------- */

static const char fix_host[] =
    "the point source must compile as C after pipefuse/point.h alone (as the plugin's own "
    "files include it) and define the function with exactly the declared signature, "
    "PF_POINT_FN, calling only what an op may call (docs/plugins.md)";

/* The declared form's function compiled for the host, or NULL after a FAIL or a skip. */
static void *compiled(pc *c, const pf_stage_desc *d, int form, const char *fn)
{
    char why[2048], proto[512], fix[1024];
    void *entry = NULL;
    pc_doing("stage %s: compiling %s %s for the host", d->name, forms[form].field, fn);
    int rc = host_compile(d, form, fn, &entry, why, sizeof why);
    if (rc == 0)
        return entry;
    if (rc < 0) {
        skip(c, "%s %s on the CPU: %s", forms[form].field, fn, why);
        return NULL;
    }
    snprintf(proto, sizeof proto, forms[form].proto, fn);
    snprintf(fix, sizeof fix,
             "define `PF_POINT_FN %s` in the header point_source holds, T being %s "
             "(params_type); %s",
             proto, d->params_type, fix_host);
    fail(c, fix, "%s: %s '%s' does not compile for the host as `%s` (T = %s): %s", d->name,
         forms[form].field, fn, proto, d->params_type, why);
    return NULL;
}

/* One set's reference image against its CPU run; 1 when they agree. */
static int agrees(pc *c, const pc_img *ref, const pc_run *cpu, char *why, size_t size)
{
    char text[512];
    if (cpu->is_table[0] || cpu->img[0].im.width != ref->im.width ||
        cpu->img[0].im.height != ref->im.height) {
        snprintf(why, size, "the CPU run's output is not a %dx%d image", ref->im.width,
                 ref->im.height);
        return 0;
    }
    pc_diff df = pc_img_compare(ref, &cpu->img[0], 0, ref->im.height, c->o.tol);
    if (!df.bad)
        return 1;
    snprintf(why, size, "%s (the fused form's value first)",
             pc_diff_text(&df, 0, text, sizeof text));
    return 0;
}

static void check_images(pc *c, const pf_stage_desc *d, int form, const char *fn, pc_params *sets,
                         int n_sets, const char *const *set_names, pc_img *in, pc_run *cpu)
{
    void *entry = compiled(c, d, form, fn);
    if (!entry)
        return;
    pc_img ref, tmp;
    if (pc_img_new(&ref, PC_W, PC_H) != 0 || pc_img_new(&tmp, PC_W, PC_H) != 0) {
        pc_img_free(&ref);
        fail(c, NULL, "%s: out of memory for the fused form's image", d->name);
        return;
    }
    const char *own = form == FORM_POINT ? "point_row" : "run_cpu";
    char why[1024], done[256] = "", ignored[256] = "";
    int ran = 0;
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok || cpu[s].status != PF_OK || !cpu[s].p)
            continue;
        const void *params = sets[s].st;
        int r = d->radius ? d->radius(params) : 0;
        pc_img_poison(&ref);
        pc_doing("stage %s: %s %s on the CPU with %s", d->name, forms[form].field, fn,
                 set_names[s]);
        if (form == FORM_POINT) {
            run_point((point_fn)entry, params, in, d->n_inputs, &ref);
        } else if (form == FORM_STENCIL) {
            if (r != 1) { /* the engine runs run_cuda for these params */
                size_t o = strlen(ignored);
                snprintf(ignored + o, sizeof ignored - o, "%s%s (radius %d)", o ? ", " : "",
                         set_names[s], r);
                continue;
            }
            run_stencil((stencil_fn)entry, params, in, &ref);
        } else {
            float w[PF_SEPARABLE_MAX + 1];
            int pm, rs = separable_taps((taps_fn)entry, d, params, w, &pm, why, sizeof why);
            if (rs >= 0 && rs != r)
                snprintf(why, sizeof why,
                         "separable_fn returns the radius %d where radius() returns %d", rs, r);
            if (rs < 0 || rs != r) {
                fail(c,
                     "separable_fn must return the radius radius() returns, 0 to "
                     "separable_max, and taps with a positive sum",
                     "%s: separable_fn '%s' with %s: %s", d->name, fn, set_names[s], why);
                goto out;
            }
            run_separable(w, rs, pm, in, &tmp, &ref);
        }
        if (!agrees(c, &ref, &cpu[s], why, sizeof why)) {
            char fix[512];
            snprintf(fix, sizeof fix,
                     form == FORM_POINT
                         ? "point_row and the op in point_source must be the same function: "
                           "PF_POINT_ROW(%s, T) over the header POINT_OPS embeds"
                     : form == FORM_STENCIL
                         ? "run_cpu and run_cuda must compute what %s computes on the clamped "
                           "neighbourhood: call it from both"
                         : "run_cpu must compute the engine's two passes with %s's taps "
                           "(docs/plugins.md, Separable stencils), or declare no separable_fn",
                     fn);
            fail(c, fix, "%s: %s '%s' disagrees with %s on %dx%d random images (%s): %s", d->name,
                 forms[form].field, fn, own, PC_W, PC_H, set_names[s], why);
            goto out;
        }
        size_t o = strlen(done);
        snprintf(done + o, sizeof done - o, "%s%s", o ? " and " : "", set_names[s]);
        ran++;
    }
    if (ran)
        pass(c, "%s %s, compiled for the host, computes what %s does (%s, within %g)%s%s%s",
             forms[form].field, fn, own, done, c->o.tol, ignored[0] ? "; not used with " : "",
             ignored, ignored[0] ? ": the engine runs stencil_fn only on a radius of 1" : "");
    else if (ignored[0])
        warn(c,
             "%s: stencil_fn '%s' is never used with the params checked, %s: the engine runs it "
             "only where radius() returns 1",
             d->name, fn, ignored);
out:
    pc_img_free(&ref);
    pc_img_free(&tmp);
}

static void check_sum(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                      const char *const *set_names, pc_img *in, pc_run *cpu)
{
    const int by_columns = d->reduce_sum == PF_REDUCE_SUM_COLUMNS;
    const int rows = by_columns ? in[0].im.width : in[0].im.height;
    const int W = in[0].im.width, H = in[0].im.height;
    finish_fn fin = NULL;
    if (d->reduce_finish) { /* each entry is then finish(sum) */
        if (!d->point_source || !d->params_type ||
            !(fin = (finish_fn)compiled(c, d, FORM_FINISH, d->reduce_finish)))
            return;
    }
    double *sum = malloc(sizeof(double) * 4 * (size_t)rows);
    double *ref = malloc(sizeof(double) * 4 * (size_t)rows);
    char done[256] = "", text[512];
    if (!ref || !sum) {
        free(sum);
        free(ref);
        fail(c, NULL, "%s: out of memory for the sum", d->name);
        return;
    }
    run_sum(by_columns, &in[0], sum);
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok)
            continue;
        for (int j = 0; j < 4 * rows; j++)
            ref[j] = fin ? fin(sets[s].st, sum[j], j / 4, j % 4, W, H) : sum[j];
        if (!sets[s].ok || cpu[s].status != PF_OK || !cpu[s].p || !cpu[s].is_table[0])
            continue;
        if (cpu[s].cols[0] != 4 || cpu[s].rows[0] != rows) {
            fail(c,
                 "return the table a sum fills (4 columns; a row per input column for "
                 "PF_REDUCE_SUM_COLUMNS, per input row for PF_REDUCE_SUM_ROWS), or declare "
                 "reduce_sum 0",
                 "%s: declares a sum by %s, but with %s a %dx%d input gets a %dx%d table, not "
                 "4x%d",
                 d->name, by_columns ? "columns" : "rows", set_names[s], PC_W, PC_H, cpu[s].cols[0],
                 cpu[s].rows[0], rows);
            goto out;
        }
        pc_diff df = pc_table_compare(ref, cpu[s].tab[0], rows, 4, c->o.tol);
        if (df.bad && fin) {
            fail(c,
                 "run_cpu with combine (and run_cuda with combine) must give reduce_finish of "
                 "each entry's sum: call the function from combine",
                 "%s: reduce_finish '%s' of the input's sums by %s is not the table (%s): %s, "
                 "the finished sum first",
                 d->name, d->reduce_finish, by_columns ? "columns" : "rows", set_names[s],
                 pc_diff_text(&df, 1, text, sizeof text));
            goto out;
        }
        if (df.bad) {
            /* a mean over the summed direction is the commonest: say so when it is one */
            double n = by_columns ? in[0].im.height : in[0].im.width;
            double ratio = cpu[s].tab[0][4 * df.y + df.x] != 0
                               ? ref[4 * df.y + df.x] / cpu[s].tab[0][4 * df.y + df.x]
                               : 0;
            char hint[160] = "";
            if (fabs(ratio - n) <= 1e-6 * n)
                snprintf(hint, sizeof hint, " (the table is the sum divided by %g: a mean?)", n);
            fail(c,
                 "declare reduce_sum only where every entry is the plain sum of the input's "
                 "pixels, or a function of it that reduce_finish names (a mean: the sum "
                 "divided by the pixels summed); otherwise the engine's GPU kernel writes the "
                 "sums. A count or a table of other values is neither: set reduce_sum to 0 "
                 "(the stage's own run_cuda and combine then run)",
                 "%s: reduce_sum says the table is the input's sum by %s, but with %s it is "
                 "not: %s, the sum first%s",
                 d->name, by_columns ? "columns" : "rows", set_names[s],
                 pc_diff_text(&df, 1, text, sizeof text), hint);
            goto out;
        }
        size_t o = strlen(done);
        snprintf(done + o, sizeof done - o, "%s%s", o ? " and " : "", set_names[s]);
    }
    if (done[0] && fin)
        pass(c,
             "reduce_finish %s, compiled for the host, of the input's sums by %s is the table, "
             "as the engine computes it on the GPU (%s, within %g)",
             d->reduce_finish, by_columns ? "columns" : "rows", done, c->o.tol);
    else if (done[0])
        pass(c,
             "reduce_sum: the table is the input's plain sum by %s, as the engine computes it on "
             "the GPU (%s, within %g)",
             by_columns ? "columns" : "rows", done, c->o.tol);
out:
    free(sum);
    free(ref);
}

void pc_check_fused_forms(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                          const char *const *set_names, pc_img *in, pc_run *cpu)
{
    if (d->kind == PF_STAGE_REDUCE && d->reduce_sum && d->n_inputs == 1 &&
        (unsigned)d->reduce_sum <= PF_REDUCE_SUM_ROWS)
        check_sum(c, d, sets, n_sets, set_names, in, cpu);
    if (!d->point_source || !d->params_type)
        return;
    if (d->kind == PF_STAGE_POINT && d->point_fn)
        check_images(c, d, FORM_POINT, d->point_fn, sets, n_sets, set_names, in, cpu);
    if (d->kind == PF_STAGE_STENCIL && d->n_inputs == 1 && d->stencil_fn)
        check_images(c, d, FORM_STENCIL, d->stencil_fn, sets, n_sets, set_names, in, cpu);
    else if (d->kind == PF_STAGE_STENCIL && d->n_inputs == 1 && d->separable_fn)
        check_images(c, d, FORM_SEPARABLE, d->separable_fn, sets, n_sets, set_names, in, cpu);
}
