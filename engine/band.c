/* engine/band.c: whether a pipeline can run in bands of rows, and the halo a band needs
 * (pipefuse/bands.h).
 *
 * A point stage needs its own row of each input, a stencil stage radius() rows more on
 * each side, so the context an output needs is the largest sum of radii on a path from
 * the input. Resample and reduce stages need the whole frame. A point op is also given
 * the pixel's position (pf_pos): run on a band it would see the band's, so an op that
 * may read it keeps the pipeline whole. That is read from the op's source text, the
 * header that the CPU row function and the CUDA kernels are built from: the position
 * parameter named in the op's body, or in a macro of the header that the body uses
 * (directly or through other macros), counts as a read, and so does handing it to a
 * helper. An op without source text counts as a read unless it declares
 * PF_STAGE_PER_CHANNEL (which promises that the position is not read).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipefuse/bands.h"
#include "pipefuse/tools.h"

#define PF_API __attribute__((visibility("default")))

static int ident_char(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

PF_API char *pf_source_blank(const char *src)
{
    size_t len = strlen(src);
    char *t = malloc(len + 1);
    if (!t)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '/' && src[i + 1] == '/') {
            while (i < len && src[i] != '\n')
                t[i++] = ' ';
            if (i < len)
                t[i] = src[i];
        } else if (src[i] == '/' && src[i + 1] == '*') {
            t[i] = t[i + 1] = ' ';
            for (i += 2; i < len && !(src[i] == '*' && src[i + 1] == '/'); i++)
                t[i] = src[i] == '\n' ? '\n' : ' ';
            if (i < len)
                t[i] = t[i + 1] = ' ', i++;
        } else if (src[i] == '"' || src[i] == '\'') {
            char q = src[i];
            t[i] = ' ';
            for (i++; i < len && src[i] != q && src[i] != '\n'; i++) {
                t[i] = ' ';
                if (src[i] == '\\' && i + 1 < len)
                    t[++i] = ' ';
            }
            if (i < len)
                t[i] = src[i] == '\n' ? '\n' : ' ';
        } else {
            t[i] = src[i];
        }
    }
    t[len] = 0;
    return t;
}

/* Whether the word w (n bytes) occurs in t[from, to) as a whole identifier. */
static int has_word(const char *t, size_t from, size_t to, const char *w, size_t n)
{
    for (size_t i = from; i + n <= to; i++)
        if (memcmp(t + i, w, n) == 0 && (i == 0 || !ident_char(t[i - 1])) && !ident_char(t[i + n]))
            return 1;
    return 0;
}

/* Whether the body t[body, end) uses a macro of the header that names the word w (n
   bytes): directly, or through other macros it uses (followed to a fixed point). */
static int macro_reads(const char *t, size_t len, size_t body, size_t end, const char *w, size_t n)
{
    enum { MAX_MACROS = 256 };
    size_t name[MAX_MACROS], name_len[MAX_MACROS], text[MAX_MACROS], text_end[MAX_MACROS];
    int n_m = 0, taint[MAX_MACROS] = {0};
    for (size_t m = 0; m < len; m++) {
        if (t[m] != '#' || (m > 0 && t[m - 1] != '\n' && t[m - 1] != ' ' && t[m - 1] != '\t'))
            continue;
        size_t q = m + 1;
        while (t[q] == ' ' || t[q] == '\t')
            q++;
        if (strncmp(t + q, "define", 6) != 0 || ident_char(t[q + 6]))
            continue;
        q += 6;
        while (t[q] == ' ' || t[q] == '\t')
            q++;
        size_t line_end = q;
        while (line_end < len && !(t[line_end] == '\n' && t[line_end - 1] != '\\'))
            line_end++;
        if (n_m == MAX_MACROS)
            return 1; /* too many to follow: assume the worst */
        name[n_m] = q;
        while (ident_char(t[q]))
            q++;
        name_len[n_m] = q - name[n_m];
        text[n_m] = q;
        text_end[n_m] = line_end;
        taint[n_m] = has_word(t, q, line_end, w, n);
        n_m++;
        m = line_end;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int a = 0; a < n_m; a++)
            for (int c = 0; c < n_m && !taint[a]; c++)
                if (taint[c] && has_word(t, text[a], text_end[a], t + name[c], name_len[c]))
                    taint[a] = changed = 1;
    }
    for (int a = 0; a < n_m; a++)
        if (taint[a] && name_len[a] && has_word(t, body, end, t + name[a], name_len[a]))
            return 1;
    return 0;
}

/* 0 when the op fn of source text src provably leaves its position parameter unread, 1
   when it may read it (or the definition cannot be found). */
static int op_reads_position(const char *src, const char *fn)
{
    if (!src || !fn || !fn[0])
        return 1;
    char *t = pf_source_blank(src);
    if (!t)
        return 1;
    size_t len = strlen(t), fl = strlen(fn);
    int reads = 1;
    for (size_t i = 0; i + fl <= len; i++) {
        if (memcmp(t + i, fn, fl) != 0 || (i > 0 && ident_char(t[i - 1])) || ident_char(t[i + fl]))
            continue;
        size_t j = i + fl;
        while (t[j] == ' ' || t[j] == '\t' || t[j] == '\n')
            j++;
        if (t[j] != '(')
            continue;
        /* the parameter list: the last parameter's name is the position's */
        size_t open = j, close = j;
        int depth = 0, commas = 0;
        for (; close < len; close++) {
            depth += t[close] == '(';
            depth -= t[close] == ')';
            commas += depth == 1 && t[close] == ',';
            if (depth == 0)
                break;
        }
        if (close >= len)
            break;
        size_t k = close + 1;
        while (k < len && (t[k] == ' ' || t[k] == '\t' || t[k] == '\n'))
            k++;
        if (t[k] != '{')
            continue; /* a declaration or a call: look on */
        if (commas != 2)
            break; /* not (params, in, pos) */
        size_t e = close;
        while (e > open && !ident_char(t[e - 1]))
            e--;
        size_t b = e;
        while (b > open && ident_char(t[b - 1]))
            b--;
        if (b == e)
            break;
        /* the body, braces matched */
        size_t body = k, end = k;
        for (depth = 0; end < len; end++) {
            depth += t[end] == '{';
            depth -= t[end] == '}';
            if (depth == 0)
                break;
        }
        if (end >= len)
            break;
        reads =
            has_word(t, body, end, t + b, e - b) || macro_reads(t, len, body, end, t + b, e - b);
        break;
    }
    free(t);
    return reads;
}

PF_API int pf_pipeline_band_halo(const pf_pipeline *p, int *halo, char *why, size_t why_size)
{
    if (why && why_size)
        why[0] = 0;
    if (!p || !halo) {
        if (why && why_size)
            snprintf(why, why_size, "pf_pipeline_band_halo: %s is NULL", p ? "halo" : "p");
        return PF_INVALID_ARGUMENT;
    }
    int *depth = calloc((size_t)p->n_nodes + 1, sizeof *depth);
    if (!depth) {
        if (why && why_size)
            snprintf(why, why_size, "out of memory");
        return PF_NO_MEMORY;
    }
    int rc = PF_OK, most = 0;
    /* nodes are in topological order: inputs first, producers before consumers */
    for (int i = p->n_inputs; i < p->n_nodes && rc == PF_OK; i++) {
        const pf_node *n = &p->nodes[i];
        if (!n->used)
            continue;
        const pf_stage_desc *d = n->desc;
        const char *no = NULL;
        int r = 0;
        if (d->kind == PF_STAGE_RESAMPLE)
            no = "resamples (its output needs the whole input)";
        else if (d->kind == PF_STAGE_REDUCE)
            no = "reduces the whole image to a table";
        else if (d->kind == PF_STAGE_STENCIL)
            r = d->radius ? d->radius(n->params) : 0;
        else if (!(!d->point_source && (d->flags & PF_STAGE_PER_CHANNEL)) &&
                 op_reads_position(d->point_source, d->point_fn))
            no = d->point_source ? "may read the pixel's position"
                                 : "may read the pixel's position (no source text tells)";
        if (no) {
            if (why && why_size)
                snprintf(why, why_size, "stage %s (op %s) %s", n->id, d->name, no);
            rc = PF_UNSUPPORTED;
            break;
        }
        if (r < 0 || r > PF_MAX_RADIUS)
            r = PF_MAX_RADIUS; /* refused when params are set; bounded here regardless */
        int in = 0;
        for (int k = 0; k < n->n_in; k++)
            if (depth[n->in[k]] > in)
                in = depth[n->in[k]];
        depth[i] = in + r;
        if (depth[i] > most)
            most = depth[i];
    }
    free(depth);
    *halo = rc == PF_OK ? most : 0;
    return rc;
}
