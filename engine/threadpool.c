/* engine/threadpool.c: see threadpool.h. One job at a time; jobs come from the thread
 * that owns the engine, so there is no queue, only the current job. */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pf_threadpool {
    int threads;
    pthread_t *tids;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait for a new job (generation changes) */
    pthread_cond_t idle; /* the caller waits for workers to leave the job */
    unsigned long generation;
    int stop;
    /* the current job */
    pf_task_fn task;
    void *ctx;
    int n;
    int max_workers;
    atomic_int next;
    atomic_int failed_index; /* lowest index that failed, or n */
    int status;              /* that task's status (under mu) */
    int busy;                /* workers inside the job */
    int joined;              /* workers that took a slot in this job */
};

static void run_tasks(pf_threadpool *tp, int worker)
{
    for (;;) {
        int i = atomic_fetch_add(&tp->next, 1);
        if (i >= tp->n || i > atomic_load(&tp->failed_index))
            return;
        int rc = tp->task(tp->ctx, i, worker);
        if (rc != 0) {
            pthread_mutex_lock(&tp->mu);
            if (i < atomic_load(&tp->failed_index)) {
                atomic_store(&tp->failed_index, i);
                tp->status = rc;
            }
            pthread_mutex_unlock(&tp->mu);
            return;
        }
    }
}

static void *worker_main(void *arg)
{
    pf_threadpool *tp = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        while (!tp->stop && tp->generation == seen)
            pthread_cond_wait(&tp->wake, &tp->mu);
        if (tp->stop)
            break;
        seen = tp->generation;
        if (tp->joined + 1 >= tp->max_workers) /* the caller holds slot 0 */
            continue;
        int worker = ++tp->joined;
        tp->busy++;
        pthread_mutex_unlock(&tp->mu);
        run_tasks(tp, worker);
        pthread_mutex_lock(&tp->mu);
        if (--tp->busy == 0)
            pthread_cond_signal(&tp->idle);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

pf_threadpool *pf_threadpool_create(int threads)
{
    if (threads < 1)
        threads = 1;
    pf_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp)
        return NULL;
    tp->threads = threads;
    if (pthread_mutex_init(&tp->mu, NULL) != 0) {
        free(tp);
        return NULL;
    }
    if (pthread_cond_init(&tp->wake, NULL) != 0 || pthread_cond_init(&tp->idle, NULL) != 0) {
        pthread_mutex_destroy(&tp->mu);
        free(tp);
        return NULL;
    }
    tp->tids = calloc((size_t)threads, sizeof *tp->tids);
    if (!tp->tids) {
        pf_threadpool_destroy(tp);
        return NULL;
    }
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tp->tids[tp->n_started], NULL, worker_main, tp) != 0)
            break; /* fewer workers than asked: still correct, just slower */
        tp->n_started++;
    }
    tp->threads = tp->n_started + 1;
    return tp;
}

void pf_threadpool_destroy(pf_threadpool *tp)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->mu);
    tp->stop = 1;
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n_started; i++)
        pthread_join(tp->tids[i], NULL);
    free(tp->tids);
    pthread_cond_destroy(&tp->wake);
    pthread_cond_destroy(&tp->idle);
    pthread_mutex_destroy(&tp->mu);
    free(tp);
}

int pf_threadpool_size(const pf_threadpool *tp)
{
    return tp ? tp->threads : 1;
}

int pf_threadpool_run(pf_threadpool *tp, int n, int max_workers, pf_task_fn task, void *ctx)
{
    if (n <= 0)
        return 0;
    if (max_workers <= 0 || max_workers > tp->threads)
        max_workers = tp->threads;
    if (max_workers == 1 || n == 1) {
        for (int i = 0; i < n; i++) {
            int rc = task(ctx, i, 0);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    pthread_mutex_lock(&tp->mu);
    tp->task = task;
    tp->ctx = ctx;
    tp->n = n;
    tp->max_workers = max_workers;
    atomic_store(&tp->next, 0);
    atomic_store(&tp->failed_index, n);
    tp->status = 0;
    tp->joined = 0;
    tp->busy = 1; /* the caller */
    tp->generation++;
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->mu);

    run_tasks(tp, 0);

    pthread_mutex_lock(&tp->mu);
    tp->busy--;
    while (tp->busy > 0)
        pthread_cond_wait(&tp->idle, &tp->mu);
    /* Late wakers see joined >= max_workers or an exhausted counter and leave at once;
       block further joins of this generation before returning. */
    tp->joined = tp->max_workers;
    int status = tp->status;
    pthread_mutex_unlock(&tp->mu);
    return status;
}
