/* engine/threadpool.h: a fixed pool of worker threads running parallel-for jobs.
 * The calling thread takes part in every job; a job's tasks are handed out in index
 * order from an atomic counter, and the call returns when all have finished. */
#ifndef PF_THREADPOOL_H
#define PF_THREADPOOL_H

typedef struct pf_threadpool pf_threadpool;

/* task(ctx, index, worker): worker is in [0, workers) and identifies per-thread
   scratch; a non-zero return stops handing out further tasks. */
typedef int (*pf_task_fn)(void *ctx, int index, int worker);

/* threads: total workers including the caller (>= 1). NULL on failure. */
pf_threadpool *pf_threadpool_create(int threads);
void pf_threadpool_destroy(pf_threadpool *tp);
int pf_threadpool_size(const pf_threadpool *tp);

/* Runs task for every index in [0, n) on at most max_workers threads (0: all).
   Returns 0, or the first non-zero status a task returned (by lowest index). */
int pf_threadpool_run(pf_threadpool *tp, int n, int max_workers, pf_task_fn task, void *ctx);

#endif
