/* engine/threadpool.c: see threadpool.h. Jobs live on their callers' stacks and are
 * linked into the pool's list while they hand out tasks; workers sleep on one condition
 * variable and scan the list when woken. */
#include "threadpool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

_Thread_local const void *pf_thread_context;

typedef struct pf_job {
    pf_task_fn task;
    void *ctx;
    int n;
    int max_workers;
    atomic_int next;
    atomic_int failed_index; /* lowest index that failed, or n */
    int status;              /* that task's status (under the pool's mu) */
    int joined;              /* threads that took a worker slot, the caller included */
    int busy;                /* threads inside the job */
    int listed;              /* on the pool's list (workers may still join) */
    pthread_cond_t idle;     /* the caller waits here for joined workers to leave */
    const void *context;     /* the caller's pf_thread_context */
    struct pf_job *prev, *next_job;
} pf_job;

struct pf_threadpool {
    int threads;
    pthread_t *tids;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait for a job with tasks left */
    pf_job *jobs;        /* listed jobs, newest first */
    int stop;
};

static void run_tasks(pf_threadpool *tp, pf_job *j, int worker)
{
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n || i > atomic_load(&j->failed_index))
            return;
        int rc = j->task(j->ctx, i, worker);
        if (rc != 0) {
            pthread_mutex_lock(&tp->mu);
            if (i < atomic_load(&j->failed_index)) {
                atomic_store(&j->failed_index, i);
                j->status = rc;
            }
            pthread_mutex_unlock(&tp->mu);
            return;
        }
    }
}

static void unlist(pf_threadpool *tp, pf_job *j)
{
    if (!j->listed)
        return;
    if (j->prev)
        j->prev->next_job = j->next_job;
    else
        tp->jobs = j->next_job;
    if (j->next_job)
        j->next_job->prev = j->prev;
    j->listed = 0;
}

/* A listed job a worker can still help with (under mu); full or drained jobs leave the
   list so that workers do not spin on them. */
static pf_job *find_job(pf_threadpool *tp)
{
    pf_job *j = tp->jobs;
    while (j) {
        pf_job *next = j->next_job;
        if (j->joined < j->max_workers && atomic_load(&j->next) < j->n)
            return j;
        unlist(tp, j);
        j = next;
    }
    return NULL;
}

/* A spare signal stack for a worker (64 KiB, its own: sigaltstack is per thread), so that
   an application's crash handler installed with SA_ONSTACK still runs when a stage
   overflows the worker's stack (the pipefuse command names the stage then). NULL when
   there is none. */
static void *spare_stack_on(void)
{
    const size_t size = 64 * 1024;
    stack_t old;
    /* a thread that has one keeps it (AddressSanitizer gives every thread its own, and
       unmaps it when the thread ends) */
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return NULL;
    void *mem = malloc(size);
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (mem && sigaltstack(&ss, NULL) != 0) {
        free(mem);
        mem = NULL;
    }
    return mem;
}

static void spare_stack_off(void *mem)
{
    if (!mem)
        return;
    stack_t ss = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    free(mem);
}

static void *worker_main(void *arg)
{
    pf_threadpool *tp = arg;
    void *spare = spare_stack_on();
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        pf_job *j = NULL;
        while (!tp->stop && !(j = find_job(tp)))
            pthread_cond_wait(&tp->wake, &tp->mu);
        if (tp->stop)
            break;
        int worker = j->joined++;
        j->busy++;
        pthread_mutex_unlock(&tp->mu);
        pf_thread_context = j->context;
        run_tasks(tp, j, worker);
        pf_thread_context = NULL;
        pthread_mutex_lock(&tp->mu);
        if (--j->busy == 0)
            pthread_cond_signal(&j->idle);
    }
    pthread_mutex_unlock(&tp->mu);
    spare_stack_off(spare);
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
    if (pthread_cond_init(&tp->wake, NULL) != 0) {
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
    if (max_workers > n)
        max_workers = n;
    if (max_workers == 1) {
        for (int i = 0; i < n; i++) {
            int rc = task(ctx, i, 0);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    pf_job j = {
        .task = task, .ctx = ctx, .n = n, .max_workers = max_workers, .context = pf_thread_context};
    atomic_init(&j.next, 0);
    atomic_init(&j.failed_index, n);
    if (pthread_cond_init(&j.idle, NULL) != 0) {
        /* No condition variable: run the job alone, still correct. */
        for (int i = 0; i < n; i++) {
            int rc = task(ctx, i, 0);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    pthread_mutex_lock(&tp->mu);
    j.joined = 1; /* the caller is worker 0 */
    j.busy = 1;
    j.listed = 1;
    j.next_job = tp->jobs;
    if (tp->jobs)
        tp->jobs->prev = &j;
    tp->jobs = &j;
    pthread_cond_broadcast(&tp->wake);
    pthread_mutex_unlock(&tp->mu);

    run_tasks(tp, &j, 0);

    pthread_mutex_lock(&tp->mu);
    unlist(tp, &j); /* no thread joins from now on */
    j.busy--;
    while (j.busy > 0)
        pthread_cond_wait(&j.idle, &tp->mu);
    int status = j.status;
    pthread_mutex_unlock(&tp->mu);
    pthread_cond_destroy(&j.idle);
    return status;
}
