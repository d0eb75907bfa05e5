/* engine/threadpool.h: a fixed pool of worker threads running parallel-for jobs.
 *
 * Many threads may run jobs on one pool at once (one engine serves many pipelines on
 * many threads): each caller's job goes on the pool's list, idle workers join whichever
 * listed job still has tasks to hand out, and every caller takes part in its own job,
 * so a job always progresses even when all workers are busy elsewhere. A job's tasks
 * are handed out in index order from an atomic counter, and the call returns when all
 * of that job's tasks have finished. */
#ifndef PF_THREADPOOL_H
#define PF_THREADPOOL_H

typedef struct pf_threadpool pf_threadpool;

/* task(ctx, index, worker): worker is in [0, max_workers) and unique among the threads
   inside one job, so it identifies that job's per-thread scratch; a non-zero return
   stops handing out further tasks. */
typedef int (*pf_task_fn)(void *ctx, int index, int worker);

/* threads: total workers including the caller (>= 1). NULL on failure. */
pf_threadpool *pf_threadpool_create(int threads);
/* No job may be running. */
void pf_threadpool_destroy(pf_threadpool *tp);
int pf_threadpool_size(const pf_threadpool *tp);

/* Runs task for every index in [0, n) on at most max_workers threads (0: all), the
   calling thread included. Thread-safe; a task must not call it again on the same pool.
   Returns 0, or the first non-zero status a task returned (by lowest index). */
int pf_threadpool_run(pf_threadpool *tp, int n, int max_workers, pf_task_fn task, void *ctx);

/* A value of the thread's own that travels with its jobs: workers take the submitting
   thread's for as long as they run its tasks. The engine keeps there the engine whose
   plugin code runs (a plugin's host->log reaches that engine's log callback). */
extern _Thread_local const void *pf_thread_context;

#endif
