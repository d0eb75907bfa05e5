/* cli/names.c: the names of `pipefuse run`'s outputs.
 *
 * Every input has a folder (below the directory argument it was found in, "" for a
 * file argument; "a/b", never with a '/' at the end) and a stem (its name without .png,
 * .jpg or .jpeg, made unique in the batch). An output's name, relative to -o DIR, is the
 * template with {dir}, {stem}, {output} and {ext} filled in ({ext} of an image output is
 * png or jpg: cli_image_ext, images.h); an empty {dir} takes the '/' after it with it,
 * so "{dir}/{stem}.png" is "x.png" at the top. Without --name the template is
 * "{dir}/{stem}.{ext}" for the one image output of a pipeline with one, else
 * "{dir}/{stem}.{output}.{ext}"; a template without {dir} gets "{dir}/" in front.
 * inputs.c sets the table up before the batch; batch/run.c asks for names through
 * cli_output_name, records each input's folder and stem in the joblog
 * (cli_output_key) and gives a retried input the ones it had (cli_names_fix).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "images.h"
#include "pipefuse/tools.h"

typedef struct name_entry {
    char *input; /* the path batch/run.c is given */
    char *dir;   /* "" or "a/b" */
    char *stem;
    int fixed;  /* from a joblog (cli_names_fix): never renamed */
    int pinned; /* its stem from the output folder's records (cli_names_pin): named first */
} name_entry;

static struct {
    const char *tmpl; /* --name, or NULL */
    name_entry *e;    /* sorted by input (once sorted is set) */
    int n;
    int sorted;
    char **reserved; /* "dir/stem" keys other inputs' records hold (cli_names_reserve) */
    int n_reserved;
} names;

static int by_input(const void *a, const void *b)
{
    return strcmp(((const name_entry *)a)->input, ((const name_entry *)b)->input);
}

/* "dir/photo.png" -> "photo", "photo.jpg" and "photo.jpeg" too (malloc'd) */
static char *stem_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *ext;
    cli_format f = cli_format_of_name(base, &ext);
    if (f == CLI_FMT_PNG || f == CLI_FMT_JPEG)
        n = (size_t)(ext - 1 - base);
    return strndup(base, n);
}

static const char *const fields[] = {"dir", "stem", "output", "ext"};
#define N_FIELDS 4

/* Renders tmpl into a malloc'd string; NULL on an unknown field (named in err) or no
   memory. {dir} is put first (with a '/') when the template does not place it; an
   empty {dir} drops the '/' that follows it. */
static char *render(const char *tmpl, const char *dir, const char *stem, const char *output,
                    const char *ext, char *err, size_t errn)
{
    const char *vals[N_FIELDS] = {dir, stem, output, ext};
    size_t cap = strlen(tmpl) + strlen(dir) + 4 * (strlen(stem) + strlen(output) + 8) + 1;
    char *out = malloc(cap), *o = out;
    if (!out) {
        snprintf(err, errn, "out of memory");
        return NULL;
    }
    if (!strstr(tmpl, "{dir}") && *dir)
        o += sprintf(o, "%s/", dir);
    for (const char *s = tmpl; *s;) {
        if (*s != '{') {
            if ((size_t)(o - out) + 1 >= cap)
                break;
            *o++ = *s++;
            continue;
        }
        size_t len = strcspn(s + 1, "}");
        int f = -1;
        for (int k = 0; k < N_FIELDS; k++)
            if (strlen(fields[k]) == len && strncmp(s + 1, fields[k], len) == 0)
                f = k;
        if (s[1 + len] != '}') { /* "{stem.png": no field at all, whatever it starts with */
            snprintf(err, errn,
                     "'{' at '%.40s' is not closed; the fields are {dir}, {stem}, "
                     "{output}, {ext}",
                     s);
            free(out);
            return NULL;
        }
        if (f < 0) {
            char bad[64];
            snprintf(bad, sizeof bad, "%.*s", (int)(len < 60 ? len : 60), s + 1);
            const char *near = pf_closest_name(bad, fields, N_FIELDS);
            snprintf(err, errn,
                     "unknown field {%s}%s%s%s; the fields are {dir}, {stem}, {output}, {ext}", bad,
                     near ? " (did you mean {" : "", near ? near : "", near ? "}?)" : "");
            free(out);
            return NULL;
        }
        size_t vl = strlen(vals[f]);
        if ((size_t)(o - out) + vl + 1 >= cap) { /* a template with the same field many times */
            size_t used = (size_t)(o - out);
            char *grown = realloc(out, cap = cap * 2 + vl);
            if (!grown) {
                free(out);
                snprintf(err, errn, "out of memory");
                return NULL;
            }
            out = grown, o = out + used;
        }
        memcpy(o, vals[f], vl);
        o += vl;
        s += len + 2;
        if (f == 0 && !vl && *s == '/') /* "{dir}/x" at the top: "x", not "/x" */
            s++;
    }
    *o = 0;
    return out;
}

static name_entry *find(const char *input)
{
    name_entry key = {.input = (char *)input};
    return names.n ? bsearch(&key, names.e, (size_t)names.n, sizeof key, by_input) : NULL;
}

char *cli_output_name(const char *input, const char *output, const char *ext, int single_image)
{
    const name_entry *e = find(input);
    char *stem = e ? NULL : stem_of(input), err[256];
    const char *tmpl = names.tmpl     ? names.tmpl
                       : single_image ? "{dir}/{stem}.{ext}"
                                      : "{dir}/{stem}.{output}.{ext}";
    if (strcmp(ext, "png") == 0) /* an image output: png or jpg (images.h) */
        ext = cli_image_ext(input);
    else if (strcmp(ext, CLI_EXT_PNG_ONLY) == 0)
        ext = "png";
    char *r = (e || stem)
                  ? render(tmpl, e ? e->dir : "", e ? e->stem : stem, output, ext, err, sizeof err)
                  : NULL;
    free(stem);
    return r;
}

int cli_output_path(const char *outdir, const char *input, const char *output, const char *ext,
                    int single_image, char *final, char *temp, size_t size)
{
    char *name = cli_output_name(input, output, ext, single_image);
    if (!name)
        return -1;
    int n = snprintf(final, size, "%s/%s", outdir, name);
    const char *slash = strrchr(name, '/');
    int t =
        snprintf(temp, size, "%s/%.*s.%s.%s.%ld.tmp", outdir, slash ? (int)(slash - name + 1) : 0,
                 name, slash ? slash + 1 : name, output, (long)getpid());
    free(name);
    return n < 0 || (size_t)n >= size || t < 0 || (size_t)t >= size ? -1 : 0;
}

/* ---- Formats by name ------------------------------------------------------------------------------ */

/* The one table of the extensions an output name may end with, and what each says.
   JPEG output, when it can be written, becomes writable here (and the worker asks
   cli_format_of_name which encoder an image output gets). */
static const struct {
    const char *ext;
    cli_format fmt;
} known_exts[] = {
    {"png", CLI_FMT_PNG},    {"jpg", CLI_FMT_JPEG},   {"jpeg", CLI_FMT_JPEG},
    {"jpe", CLI_FMT_JPEG},   {"jfif", CLI_FMT_JPEG},  {"jif", CLI_FMT_JPEG},
    {"csv", CLI_FMT_CSV},    {"json", CLI_FMT_JSON},  {"tif", CLI_FMT_OTHER},
    {"tiff", CLI_FMT_OTHER}, {"webp", CLI_FMT_OTHER}, {"gif", CLI_FMT_OTHER},
    {"bmp", CLI_FMT_OTHER},  {"avif", CLI_FMT_OTHER}, {"heic", CLI_FMT_OTHER},
    {"heif", CLI_FMT_OTHER}, {"jxl", CLI_FMT_OTHER},  {"jp2", CLI_FMT_OTHER},
    {"j2k", CLI_FMT_OTHER},  {"jpx", CLI_FMT_OTHER},  {"ppm", CLI_FMT_OTHER},
    {"pgm", CLI_FMT_OTHER},  {"pbm", CLI_FMT_OTHER},  {"pnm", CLI_FMT_OTHER},
    {"pam", CLI_FMT_OTHER},  {"qoi", CLI_FMT_OTHER},  {"ico", CLI_FMT_OTHER},
    {"psd", CLI_FMT_OTHER},  {"exr", CLI_FMT_OTHER},  {"hdr", CLI_FMT_OTHER},
    {"svg", CLI_FMT_OTHER},  {"pdf", CLI_FMT_OTHER},  {"dng", CLI_FMT_OTHER},
    {"txt", CLI_FMT_OTHER},  {"tsv", CLI_FMT_OTHER},
};

cli_format cli_format_of_name(const char *name, const char **ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    if (ext)
        *ext = dot && dot != base ? dot + 1 : NULL;
    if (!dot || dot == base) /* ".hidden": a name, not an extension */
        return CLI_FMT_NONE;
    for (size_t k = 0; k < sizeof known_exts / sizeof *known_exts; k++)
        if (strcasecmp(dot + 1, known_exts[k].ext) == 0)
            return known_exts[k].fmt;
    return CLI_FMT_NONE;
}

/* Which formats this program writes images in. */
static int image_writable(cli_format f)
{
    return f == CLI_FMT_PNG || (f == CLI_FMT_JPEG && pf_jpeg_available());
}

static const char *format_word(cli_format f)
{
    switch (f) {
    case CLI_FMT_PNG:
        return "PNG";
    case CLI_FMT_JPEG:
        return "JPEG";
    case CLI_FMT_CSV:
        return "a CSV table";
    case CLI_FMT_JSON:
        return "a JSON table";
    default:
        return "another format";
    }
}

int cli_format_check(const char *name, const char *output, const char *out_ext, char *err,
                     size_t errn)
{
    const char *ext;
    const int png_only = strcmp(out_ext, CLI_EXT_PNG_ONLY) == 0;
    cli_format said = cli_format_of_name(name, &ext), is = png_only ? CLI_FMT_PNG : CLI_FMT_NONE;
    for (size_t k = 0; k < sizeof known_exts / sizeof *known_exts; k++)
        if (strcmp(out_ext, known_exts[k].ext) == 0)
            is = known_exts[k].fmt;
    int image = is == CLI_FMT_PNG || is == CLI_FMT_JPEG;
    if (said == CLI_FMT_NONE || said == is)
        return 0;
    if (png_only && said == CLI_FMT_JPEG) {
        snprintf(err, errn,
                 "output name '%s': .%s says JPEG, but output '%s' is an image only PNG holds "
                 "(the pipeline declares it 1, 2 or 4 bits of gray, a palette, or more than 8 "
                 "bits a sample); name it .png (or write {ext})",
                 name, ext, output);
        return -1;
    }
    if (image && image_writable(said)) /* an image's format follows its name */
        return 0;
    if (image && (said == CLI_FMT_JPEG || said == CLI_FMT_OTHER))
        snprintf(err, errn,
                 "output name '%s': .%s says %s, but output '%s' is an image, and images are "
                 "written as %s; name it .png%s",
                 name, ext, said == CLI_FMT_JPEG ? "JPEG" : "a format pipefuse does not write",
                 output,
                 pf_jpeg_available() ? "PNG or JPEG"
                                     : "PNG only (this pipefuse was built without libjpeg)",
                 pf_jpeg_available() ? " or .jpg" : "");
    else if (image)
        snprintf(err, errn,
                 "output name '%s': .%s says %s, but output '%s' is an image; name it .png "
                 "(or write {ext})",
                 name, ext, format_word(said), output);
    else
        snprintf(err, errn,
                 "output name '%s': .%s says %s, but output '%s' is %s (--table-format or the "
                 "pipeline's format); name it .%s (or write {ext})",
                 name, ext, format_word(said), output, format_word(is), out_ext);
    return -1;
}

/* ---- Setting up the table (inputs.c) ----------------------------------------------------------- */

/* A name relative to -o DIR, as a template or rendered: what refuses it, or NULL. */
static const char *name_problem(const char *name)
{
    if (!*name || name[0] == '/' || name[strlen(name) - 1] == '/' || strstr(name, "//"))
        return "a file name relative to -o DIR is needed";
    for (const char *s = name; *s; s += strcspn(s, "/"), s += *s == '/') {
        size_t len = strcspn(s, "/");
        if ((len == 2 && strncmp(s, "..", 2) == 0) || (len == 1 && *s == '.'))
            return "'.' and '..' would leave or blur -o DIR";
        if (strncmp(s, OUT_TMP_PREFIX, strlen(OUT_TMP_PREFIX)) == 0)
            return "names starting with " OUT_TMP_PREFIX " are the temporary files of runs, "
                   "removed when stale";
        if (s == name && len == strlen(OUT_RECORDS) && strncmp(s, OUT_RECORDS, len) == 0)
            return OUT_RECORDS " holds the records of what made the outputs";
    }
    return NULL;
}

int cli_name_check(const char *name, char *err, size_t errn)
{
    const char *why = name_problem(name);
    if (why)
        snprintf(err, errn, "output name '%s': %s", name, why);
    return why ? -1 : 0;
}

int cli_names_check(const char *tmpl, const char *const *outputs, const char *const *exts, int n,
                    int single_image, char *err, size_t errn)
{
    names.tmpl = tmpl;
    if (!tmpl)
        return 0;
    const char *why = name_problem(tmpl);
    if (why) {
        snprintf(err, errn, "--name '%s': %s", tmpl, why);
        return -1;
    }
    /* {dir} has no '/' at its end: "{dir}{stem}" would run a/b and x together as a/bx */
    const char *d = strstr(tmpl, "{dir}");
    for (; d; d = strstr(d + 5, "{dir}"))
        if (d[5] == '{') {
            snprintf(err, errn, "--name '%s': {dir} has no '/' at its end; write {dir}/%s", tmpl,
                     d + 5);
            return -1;
        }
    char *r[64] = {0};
    int rc = 0;
    for (int k = 0; k < n && k < 64 && rc == 0; k++) {
        r[k] = render(tmpl, "", "x", outputs[k], exts[k], err, errn);
        char what[512];
        if (!r[k] || cli_format_check(r[k], outputs[k], exts[k], what, sizeof what) != 0) {
            if (!r[k])
                snprintf(what, sizeof what, "%s", err);
            snprintf(err, errn, "--name '%s': %s", tmpl, what);
            rc = -1;
        }
        for (int j = 0; j < k && rc == 0; j++)
            if (strcmp(r[j], r[k]) == 0) {
                snprintf(err, errn,
                         "--name '%s': outputs '%s' and '%s' would get the same name; put "
                         "{output} in it",
                         tmpl, outputs[j], outputs[k]);
                rc = -1;
            }
    }
    for (int k = 0; k < n && k < 64; k++)
        free(r[k]);
    if (rc == 0 && !strstr(tmpl, "{stem}")) {
        snprintf(err, errn, "--name '%s': without {stem} every input gets the same name", tmpl);
        rc = -1;
    }
    (void)single_image;
    return rc;
}

static int add_entry(const char *input, const char *dir, size_t dir_len, char *stem)
{
    name_entry *e = realloc(names.e, sizeof *e * (size_t)(names.n + 1));
    if (!e) {
        free(stem);
        return -1;
    }
    names.e = e;
    e += names.n;
    e->input = strdup(input);
    e->dir = strndup(dir, dir_len);
    e->stem = stem;
    e->fixed = 0;
    e->pinned = 0;
    if (!e->input || !e->dir || !e->stem) {
        free(e->input);
        free(e->dir);
        free(e->stem);
        return -1;
    }
    names.n++;
    names.sorted = 0;
    return 0;
}

int cli_names_add(const char *input, const char *dir)
{
    size_t dl = strlen(dir);
    while (dl && dir[dl - 1] == '/') /* "a/b/" as the listing builds it: "a/b" */
        dl--;
    return add_entry(input, dir, dl, stem_of(input));
}

char *cli_output_key(const char *input)
{
    const name_entry *e = find(input);
    char *k = NULL;
    if (!e)
        return stem_of(input);
    return asprintf(&k, "%s%s%s", e->dir, *e->dir ? "/" : "", e->stem) < 0 ? NULL : k;
}

int cli_names_fix(const char *input, const char *key)
{
    const char *slash = strrchr(key, '/');
    size_t dl = slash ? (size_t)(slash - key) : 0;
    char *stem = strdup(slash ? slash + 1 : key);
    if (!stem)
        return -1;
    name_entry *e = find(input);
    if (e) {
        char *dir = strndup(key, dl);
        if (!dir) {
            free(stem);
            return -1;
        }
        free(e->dir);
        free(e->stem);
        e->dir = dir;
        e->stem = stem;
    } else {
        if (add_entry(input, key, dl, stem) != 0)
            return -1;
        /* into its place in the sorted table (appended last): a sort per retried input
           was quadratic in a long retry */
        name_entry added = names.e[names.n - 1];
        int lo = 0, hi = names.n - 1;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (by_input(&names.e[mid], &added) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&names.e[lo + 1], &names.e[lo], sizeof *names.e * (size_t)(names.n - 1 - lo));
        names.e[lo] = added;
        e = &names.e[lo];
    }
    e->fixed = 1;
    return 0;
}

/* A set of "dir/stem" keys: open addressing, FNV-1a. */
typedef struct key_set {
    char **slot;
    size_t cap;
} key_set;

static size_t hash_key(const char *k)
{
    size_t h = 1469598103934665603ull;
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ull;
    return h;
}

/* 1 when key was there, 0 when added, -1 without memory; key is taken over either way
   except on -1 (when it was there it is freed). */
static int key_add(key_set *s, char *key)
{
    size_t i = hash_key(key) & (s->cap - 1);
    for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
        if (strcmp(s->slot[i], key) == 0) {
            free(key);
            return 1;
        }
    s->slot[i] = key;
    return 0;
}

static char *make_key(const char *dir, const char *stem)
{
    char *k = NULL;
    return asprintf(&k, "%s/%s", dir, stem) < 0 ? NULL : k;
}

/* Two inputs with the same folder and stem (x.png from two directory arguments, or
   a/x.png and b/x.png given as files): in the order of their paths, the later ones
   become x-2, x-3... The same path given twice keeps its name (inputs.c takes a file once).
   Then sorted for lookups. */
int cli_names_pin(const char *input, const char *key)
{
    if (!names.sorted && names.n > 0) {
        qsort(names.e, (size_t)names.n, sizeof *names.e, by_input);
        names.sorted = 1;
    }
    name_entry *e = find(input);
    const char *slash = strrchr(key, '/');
    size_t dl = slash ? (size_t)(slash - key) : 0;
    /* in the folder it has now: a layout changed since (-r added) names anew */
    if (!e || strlen(e->dir) != dl || strncmp(e->dir, key, dl) != 0)
        return 0;
    char *stem = strdup(slash ? slash + 1 : key);
    if (!stem)
        return -1;
    free(e->stem);
    e->stem = stem;
    e->pinned = 1;
    return 0;
}

int cli_names_reserve(const char *key)
{
    const char *slash = strrchr(key, '/');
    char *k = NULL; /* make_key's form: "dir/stem", "/stem" at the top */
    if (asprintf(&k, "%s%s", slash ? "" : "/", key) < 0)
        return -1;
    char **grown = realloc(names.reserved, sizeof *grown * (size_t)(names.n_reserved + 1));
    if (!grown) {
        free(k);
        return -1;
    }
    names.reserved = grown;
    names.reserved[names.n_reserved++] = k;
    return 0;
}

int cli_names_finish(int quiet)
{
    key_set set = {NULL, 64};
    while (set.cap < 4 * ((size_t)names.n + (size_t)names.n_reserved))
        set.cap *= 2;
    if (!(set.slot = calloc(set.cap, sizeof *set.slot)))
        return -1;
    int rc = 0;
    if (names.n > 0) /* no inputs (a folder without PNGs): e is NULL, not for qsort */
        qsort(names.e, (size_t)names.n, sizeof *names.e, by_input);
    names.sorted = 1;
    /* the names the records give inputs of other runs, then those they give this batch's
       inputs, whatever their order: the others are named around them (an input not
       given this time keeps its outputs; a new a/x.png beside its x.png becomes x-2) */
    for (int i = 0; i < names.n_reserved && rc == 0; i++) {
        char *k = strdup(names.reserved[i]);
        rc = !k || key_add(&set, k) < 0 ? -1 : 0;
    }
    for (int i = 0; i < names.n && rc == 0; i++) {
        name_entry *e = &names.e[i];
        if (!e->pinned || (i > 0 && strcmp(names.e[i - 1].input, e->input) == 0))
            continue;
        char *k = make_key(e->dir, e->stem);
        int had = k ? key_add(&set, k) : -1;
        if (had < 0)
            rc = -1;
        else if (had) /* two records of one name (not written so): the later one names anew */
            e->pinned = 0;
    }
    for (int i = 0; i < names.n && rc == 0; i++) { /* one key per distinct path */
        name_entry *e = &names.e[i];
        if (e->pinned || (i > 0 && strcmp(names.e[i - 1].input, e->input) == 0))
            continue;
        char *k = make_key(e->dir, e->stem);
        int had = k ? key_add(&set, k) : -1;
        for (int suffix = 2; had == 1 && suffix < 1000000; suffix++) {
            char *s = NULL;
            char *base = stem_of(e->input);
            if (!base || asprintf(&s, "%s-%d", base, suffix) < 0) {
                free(base);
                had = -1;
                break;
            }
            free(base);
            if ((had = (k = make_key(e->dir, s)) ? key_add(&set, k) : -1) != 0) {
                free(s);
                continue;
            }
            if (!quiet)
                fprintf(stderr,
                        "pipefuse run: %s has the same name as another input: its outputs are "
                        "named %s%s%s\n",
                        e->input, e->dir, *e->dir ? "/" : "", s);
            free(e->stem);
            e->stem = s;
        }
        if (had != 0)
            rc = -1;
    }
    for (size_t i = 0; i < set.cap; i++)
        free(set.slot[i]);
    free(set.slot);
    return rc;
}

void cli_names_free(void)
{
    for (int i = 0; i < names.n; i++) {
        free(names.e[i].input);
        free(names.e[i].dir);
        free(names.e[i].stem);
    }
    free(names.e);
    names.e = NULL;
    names.n = 0; /* the template stays */
    for (int i = 0; i < names.n_reserved; i++)
        free(names.reserved[i]);
    free(names.reserved);
    names.reserved = NULL;
    names.n_reserved = 0;
}

/* mkdir that takes a folder already there as made: 1 made, 0 there, or -1 with errno
   (ENOTDIR when a file, or a link to one, has the name). */
static int make_folder(const char *path)
{
    struct stat st;
    if (mkdir(path, 0777) == 0)
        return 1;
    if (errno != EEXIST)
        return -1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    errno = ENOTDIR;
    return -1;
}

/* Creates -o DIR and the folders above it; *made counts the folders made. */
int cli_make_outdir(const char *dir, int *made, char *err, size_t errn)
{
    *made = 0;
    if (!dir[0]) {
        snprintf(err, errn, "-o '': an empty folder name");
        return -1;
    }
    if (strlen(dir) >= PATH_MAX) { /* refused before a folder of it is made */
        snprintf(err, errn,
                 "-o %.60s...: the folder's name is %zu bytes, over the system's PATH_MAX of %d",
                 dir, strlen(dir), PATH_MAX - 1);
        return -1;
    }
    char *tmp = strdup(dir);
    if (!tmp) {
        snprintf(err, errn, "-o %s: out of memory", dir);
        return -1;
    }
    int rc = 0;
    for (char *s = tmp + 1;; s++) {
        if (*s && *s != '/')
            continue;
        char c = *s;
        *s = 0;
        int r = s[-1] == '/' ? 0 : make_folder(tmp);
        if (r < 0) {
            if (errno == ENOTDIR)
                snprintf(err, errn, "-o %s: %s exists and is not a folder", dir, tmp);
            else
                snprintf(err, errn, "-o %s: cannot create the folder %s: %s", dir, tmp,
                         strerror(errno));
            rc = -1;
            break;
        }
        *made += r;
        *s = c;
        if (!c)
            break;
    }
    free(tmp);
    if (rc != 0)
        cli_unmake_outdir(dir, *made);
    return rc;
}

/* Removes the last `made` folders of dir, deepest first, each only while empty. */
void cli_unmake_outdir(const char *dir, int made)
{
    char *tmp = made > 0 ? strdup(dir) : NULL;
    for (int k = 0; tmp && k < made; k++) {
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/') /* "a/b//": the folder is "a/b" */
            tmp[--n] = 0;
        if (rmdir(tmp) != 0)
            break;
        char *slash = strrchr(tmp, '/');
        if (!slash)
            break;
        *slash = 0;
    }
    free(tmp);
}

/* Creates every folder below the output folder (dirfd, shown as outdir) that the name
   of an output needs, a component at a time relative to the one above, never through a
   link: a link planted where a folder of the name goes (by another user of a shared
   folder) is refused, not followed, as batch/outfile.c's open_parent refuses it. */
int cli_names_mkdirs(int dirfd, const char *outdir, const char *name, char *err, size_t errn)
{
    int fd = dirfd, rc = 0;
    for (const char *c = name, *s; rc == 0 && (s = strchr(c, '/')); c = s + 1) {
        char part[NAME_MAX + 1];
        size_t len = (size_t)(s - c);
        if (len > NAME_MAX) {
            snprintf(err, errn, "%s/%.*s...: a folder name over %d bytes", outdir,
                     (int)(s - name > 200 ? 200 : s - name), name, NAME_MAX);
            rc = -1;
            break;
        }
        memcpy(part, c, len);
        part[len] = 0;
        if (mkdirat(fd, part, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errn, "cannot create the folder %s/%.*s: %s", outdir, (int)(s - name),
                     name, strerror(errno));
            rc = -1;
            break;
        }
        int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            struct stat st;
            int link = fstatat(fd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            if (link || e == ELOOP)
                snprintf(err, errn,
                         "%s/%.*s is a symbolic link: folders of output names are not made or "
                         "entered through links",
                         outdir, (int)(s - name), name);
            else if (e == ENOTDIR)
                snprintf(err, errn,
                         "cannot create the folder %s/%.*s: it exists and is not a folder", outdir,
                         (int)(s - name), name);
            else
                snprintf(err, errn, "cannot open the folder %s/%.*s: %s", outdir, (int)(s - name),
                         name, strerror(e));
            rc = -1;
            break;
        }
        if (fd != dirfd)
            close(fd);
        fd = next;
    }
    if (fd != dirfd)
        close(fd);
    return rc;
}
