/* engine/graph.c: the graph algorithms of graph.h. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "internal.h"

static int n_in_of(const pf_graph *g, int v)
{
    return *(const int *)((const char *)g->n_in + g->stride * (size_t)v);
}

/* Input k of vertex v as a vertex, or -1 outside the graph. */
static int input_of(const pf_graph *g, int v, int k)
{
    int r = ((const int *)((const char *)g->in + g->stride * (size_t)v))[k] - g->base;
    return r >= 0 ? r : -1;
}

void pf_graph_consumers(const pf_graph *g, int *first, int *cons)
{
    for (int c = 0; c < g->n; c++)
        for (int k = 0; k < n_in_of(g, c); k++)
            if (input_of(g, c, k) >= 0)
                first[input_of(g, c, k) + 2]++;
    for (int v = 0; v < g->n; v++)
        first[v + 2] += first[v + 1];
    /* first[v + 1] is v's fill cursor; after the fill it is v + 1's start */
    for (int c = 0; c < g->n; c++)
        for (int k = 0; k < n_in_of(g, c); k++)
            if (input_of(g, c, k) >= 0)
                cons[first[input_of(g, c, k) + 1]++] = c;
}

int pf_graph_order(const pf_graph *g, int *pos, char *done)
{
    int n = g->n, ordered = -1;
    size_t edges = 0;
    for (int v = 0; v < n; v++)
        edges += (size_t)n_in_of(g, v);
    int *pending = calloc((size_t)n + 1, sizeof(int)), *first = calloc((size_t)n + 2, sizeof(int));
    int *cons = malloc(sizeof(int) * (edges + 1)), *heap = malloc(sizeof(int) * ((size_t)n + 1));
    if (pending && first && cons && heap) {
        pf_graph_consumers(g, first, cons);
        for (int v = 0; v < n; v++)
            for (int k = 0; k < n_in_of(g, v); k++)
                pending[v] += input_of(g, v, k) >= 0;
        int nh = 0;
        ordered = 0;
        for (int v = 0; v < n; v++)
            if (!pending[v])
                pf_heap_push(heap, &nh, v);
        while (nh > 0) {
            int v = pf_heap_pop(heap, &nh);
            done[v] = 1;
            pos[v] = ordered++;
            for (int c = first[v]; c < first[v + 1]; c++)
                if (--pending[cons[c]] == 0)
                    pf_heap_push(heap, &nh, cons[c]);
        }
    }
    free(pending);
    free(first);
    free(cons);
    free(heap);
    return ordered;
}

int pf_graph_cycle(const pf_graph *g, const char *done, int *cycle)
{
    int n = g->n;
    int *seen = malloc(sizeof *seen * ((size_t)n + 1)),
        *walk = malloc(sizeof *walk * ((size_t)n + 1));
    if (!seen || !walk) {
        free(seen);
        free(walk);
        return -1;
    }
    for (int v = 0; v < n; v++)
        seen[v] = -1;
    int cur = 0, steps = 0;
    while (done[cur])
        cur++;
    /* follow inputs that are not ordered either until a vertex repeats */
    while (seen[cur] < 0) {
        seen[cur] = steps;
        walk[steps++] = cur;
        int next = -1;
        for (int k = 0; k < n_in_of(g, cur) && next < 0; k++) {
            int r = input_of(g, cur, k);
            if (r >= 0 && !done[r])
                next = r;
        }
        cur = next;
    }
    /* walk[seen[cur] .. steps) runs consumer to producer: reversed, from the smallest */
    int start = seen[cur], len = steps - start, low = 0;
    for (int i = 1; i < len; i++)
        if (walk[start + i] < walk[start + low])
            low = i;
    for (int i = 0; i < len; i++)
        cycle[i] = walk[start + ((low - i) % len + len) % len];
    free(seen);
    free(walk);
    return len;
}

int pf_graph_reach(const pf_graph *g, const int *roots, int n_roots, char *mark)
{
    int total = g->base + g->n, top = 0;
    int *stack = malloc(sizeof *stack * (size_t)(total ? total : 1));
    if (!stack)
        return PF_NO_MEMORY;
    for (int i = 0; i < n_roots; i++)
        if (!mark[roots[i]]) {
            mark[roots[i]] = 1;
            stack[top++] = roots[i];
        }
    while (top > 0) {
        int v = stack[--top] - g->base;
        if (v < 0)
            continue;
        const int *in = (const int *)((const char *)g->in + g->stride * (size_t)v);
        for (int k = 0; k < n_in_of(g, v); k++)
            if (!mark[in[k]]) {
                mark[in[k]] = 1;
                stack[top++] = in[k];
            }
    }
    free(stack);
    return PF_OK;
}

/* ---- A min-heap of ints (h has room for every push) ---------------------------------------- */

void pf_heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2)
        h[i] = h[(i - 1) / 2];
    h[i] = v;
}

int pf_heap_pop(int *h, int *n)
{
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}
