/* engine/graph.h: the graph algorithms the loader and the planner share, on any array
 * of structs with an input count and up to PF_MAX_INPUTS input references each (the
 * loader's stages, the IR's nodes): consumer lists, a stable topological order, a
 * cycle among what cannot be ordered, what reaches a set of vertices, and the min-heap
 * behind the orders. */
#ifndef PF_GRAPH_H
#define PF_GRAPH_H

#include <stddef.h>

typedef struct pf_graph {
    int n;           /* vertices */
    const int *n_in; /* vertex 0's input count; vertex v's is stride bytes further on */
    const int *in;   /* vertex 0's input references, likewise */
    size_t stride;   /* bytes from one vertex's fields to the next's (sizeof the struct) */
    int base;        /* a reference r is vertex r - base; below base it is outside the
                        graph (a pipeline input for the loader's stages) */
} pf_graph;

/* Consumers of every vertex, ascending, one entry per edge inside the graph: those of
   v are cons[first[v] .. first[v + 1]). first has room for n + 2 ints, zeroed; cons
   for every such edge. */
void pf_graph_consumers(const pf_graph *g, int *first, int *cons);
/* Kahn's algorithm, stable: of the vertices ready, the smallest goes first. pos[v] is
   v's position and done[v] is set for each vertex ordered. Returns how many were (n
   unless there is a cycle), or -1 out of memory. */
int pf_graph_order(const pf_graph *g, int *pos, char *done);
/* A cycle among the vertices pf_graph_order left undone, producer to consumer, from
   its smallest vertex, into cycle (room for n). Returns its length, or -1 out of
   memory. */
int pf_graph_cycle(const pf_graph *g, const char *done, int *cycle);
/* Marks in mark (indexed by reference, base + n entries) every reference that the
   references roots[0..n_roots) reach through inputs, roots included. PF_OK or
   PF_NO_MEMORY. */
int pf_graph_reach(const pf_graph *g, const int *roots, int n_roots, char *mark);

/* A min-heap of ints in h[0..*n); h has room for every push. */
void pf_heap_push(int *h, int *n, int v);
int pf_heap_pop(int *h, int *n);

#endif
