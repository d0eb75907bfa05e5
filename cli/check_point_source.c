/* cli/check_point_source.c: `pipefuse plugin check`, what a point op may call: the scan of an op
   header for calls to functions it may not use. */
#include "pipefuse/tools.h"
#include "plugin_check.h"

/* ---- What a point op may call ---------------------------------------------------------------- */

/* The maths functions a fused function (point op, stencil_fn, separable_fn) may call
   besides the pf_* helpers and PF_* macros of point.h: the C99 float and double functions
   that CUDA provides under the same names (docs/plugins.md lists them with how closely
   CPU and GPU agree). */
static const char *const op_maths[] = {
    "sqrtf", "cbrtf", "powf", "expf", "exp2f", "expm1f", "logf", "log2f", "log10f", "log1pf",
    "sinf", "cosf", "tanf", "asinf", "acosf", "atanf", "atan2f", "sinhf", "coshf", "tanhf",
    "floorf", "ceilf", "roundf", "truncf", "rintf", "fabsf", "fminf", "fmaxf", "fmodf", "copysignf",
    "hypotf", "fmaf",
    /* their double versions, which CUDA provides too: a separable_fn's taps are doubles */
    "sqrt", "cbrt", "pow", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "floor", "ceil", "round",
    "trunc", "rint", "fabs", "fmin", "fmax", "fmod", "copysign", "hypot", "fma", NULL};

/* Words followed by '(' that are not calls. */
static const char *const op_keywords[] = {"if",      "for", "while", "switch",   "return", "sizeof",
                                          "defined", "do",  "case",  "_Alignof", NULL};

static int in_list(const char *const *list, const char *w, size_t n)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && strncmp(list[i], w, n) == 0)
            return 1;
    return 0;
}

static int ident_char(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/* The first call in an op header's text to a function it may not use: one that is not
   defined in the text itself (as a function, or a macro), not a pf_ or PF_ name of
   point.h and not in op_maths. Comments and literals are skipped. Returns 1 with the name
   and its line (of the header, not counting a leading #line) in *name / *line, else 0. */
int pc_forbidden_call(const char *src, char *name, size_t name_size, int *line)
{
    /* The text with comments and literals blanked (newlines kept, for line numbers). */
    size_t len = strlen(src);
    char *t = pf_source_blank(src);
    if (!t)
        return 0;
    /* Pass 1: names defined here (a name followed by its parameter list and then '{' or
       ';' at file scope, or after #define). Pass 2: calls of anything else. */
    int found = 0, first_line = strncmp(t, "#line", 5) == 0 ? 0 : 1;
    char(*defined)[64] = calloc(512, sizeof *defined);
    int n_def = 0;
    for (int pass = 0; pass < 2 && defined && !found; pass++) {
        int depth = 0, ln = first_line;
        for (size_t i = 0; i < len && !found; i++) {
            char ch = t[i];
            if (ch == '\n')
                ln++;
            else if (ch == '{')
                depth++;
            else if (ch == '}')
                depth--;
            if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) ||
                (i > 0 && ident_char(t[i - 1])))
                continue;
            size_t n = 0;
            while (ident_char(t[i + n]))
                n++;
            size_t j = i + n;
            int after_define = 0;
            for (size_t k = i; k > 0 && t[k - 1] != '\n'; k--)
                if (t[k - 1] == '#') {
                    after_define = strncmp(t + k, "define", 6) == 0 && k + 6 <= i;
                    break;
                }
            while (t[j] == ' ' || t[j] == '\t')
                j++;
            if (t[j] != '(') {
                if (pass == 0 && after_define && n < 64 && n_def < 512)
                    snprintf(defined[n_def++], 64, "%.*s", (int)n, t + i);
                i += n - 1;
                continue;
            }
            /* past the parentheses */
            size_t k = j;
            for (int par = 0; t[k]; k++) {
                par += t[k] == '(';
                par -= t[k] == ')';
                if (par == 0)
                    break;
            }
            for (k++; t[k] == ' ' || t[k] == '\t' || t[k] == '\n'; k++)
                ;
            int definition = after_define || (depth == 0 && (t[k] == '{' || t[k] == ';'));
            if (pass == 0 && definition && n < 64 && n_def < 512)
                snprintf(defined[n_def++], 64, "%.*s", (int)n, t + i);
            if (pass == 1 && !definition && !in_list(op_keywords, t + i, n) &&
                !in_list(op_maths, t + i, n) && strncmp(t + i, "pf_", 3) != 0 &&
                strncmp(t + i, "PF_", 3) != 0) {
                int known = 0;
                for (int d = 0; d < n_def && !known; d++)
                    known = strlen(defined[d]) == n && strncmp(defined[d], t + i, n) == 0;
                if (!known) {
                    snprintf(name, name_size, "%.*s", (int)n, t + i);
                    *line = ln;
                    found = 1;
                }
            }
            i += n - 1;
        }
    }
    free(defined);
    free(t);
    return found;
}
