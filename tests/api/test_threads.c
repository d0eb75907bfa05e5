/* tests/api/test_threads.c: the threading contract of pipefuse.h. One engine, 8 threads,
 * each with its own pipelines of three kinds (a point chain, demo.json's point +
 * stencil + reduce graph, an unsharp mask), many small frames each; every image and
 * table is compared bit for bit with a single-threaded run of the same input. Then two
 * threads on one pipeline: the second gets PF_BUSY, never a deadlock or a wrong frame.
 *
 *   test_threads            CPU backend, a few hundred frames per thread
 *   test_threads gpu        CUDA backend, pageable and pinned host frames, 2 in flight
 *                           (77: skipped without a device)
 *   PF_STRESS_FRAMES=N      frames per pipeline per thread (the long run: 2000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "pipefuse/png.h"
#include "testutil.h"

#define N_THREADS 8
#define N_KINDS   3
#define N_INPUTS  6
#define MAX_OUT   2

typedef struct kind {
    const char *name, *file, *json;
    int w, h;
} kind;

static const kind kinds[N_KINDS] = {
    {"chain", NULL,
     "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
     "{\"id\": \"inv\", \"op\": \"invert\"},"
     "{\"id\": \"lin\", \"op\": \"linear\", \"params\": {\"a\": 0.8, \"b\": 0.05}},"
     "{\"id\": \"g\", \"op\": \"gamma\", \"params\": {\"gamma\": 1.3}}],"
     "\"outputs\": {\"out\": \"g\"}}",
     61, 37},
    {"demo", PF_SOURCE_DIR "/pipelines/demo.json", NULL, 48, 40},
    {"sharpen", PF_SOURCE_DIR "/pipelines/sharpen.json", NULL, 33, 29},
};

static int gpu;
static int frames_per_thread;
static pf_engine *eng;

/* Reference results per kind and input: images (u8 RGBA, packed) and tables. */
static pf_frame input[N_KINDS][N_INPUTS];
static unsigned char *ref_img[N_KINDS][N_INPUTS][MAX_OUT];
static double *ref_tab[N_KINDS][N_INPUTS][MAX_OUT];
static size_t ref_tab_len[N_KINDS][MAX_OUT];
static int n_out[N_KINDS];
static int is_table[N_KINDS][MAX_OUT];

static pf_pipeline *load_kind(int k)
{
    const char *backend = gpu ? "cuda" : "cpu";
    return kinds[k].file ? pf_test_load_file(eng, kinds[k].file, backend)
                         : pf_test_load_string(eng, kinds[k].json, kinds[k].name, backend);
}

/* Output frames for kind k: images the input's size in u8 RGBA, NULL data for tables. */
typedef struct outs {
    pf_frame f[MAX_OUT];
    int pinned;
} outs;

static void outs_make(outs *o, int k, int pinned)
{
    memset(o, 0, sizeof *o);
    o->pinned = pinned;
    for (int i = 0; i < n_out[k]; i++) {
        if (is_table[k][i])
            continue;
        int rc = pinned ? pf_frame_alloc_host(eng, kinds[k].w, kinds[k].h, PF_U8, 4, &o->f[i])
                        : pf_frame_alloc(&o->f[i], kinds[k].w, kinds[k].h, PF_U8, 4);
        if (rc != PF_OK) {
            fprintf(stderr, "cannot allocate an output frame\n");
            exit(1);
        }
        memset(o->f[i].data, 0xa5, o->f[i].pitch * (size_t)o->f[i].height); /* poison */
    }
}

static void outs_free(outs *o)
{
    for (int i = 0; i < MAX_OUT; i++) {
        if (o->pinned)
            pf_frame_free_host(eng, &o->f[i]);
        else if (o->f[i].data)
            pf_frame_free(&o->f[i]);
    }
}

/* Compares a completed frame's outputs (and tables, read from p) with the reference. */
static int check_frame(pf_pipeline *p, int k, int idx, const outs *o, const char *who)
{
    int bad = 0;
    for (int i = 0; i < n_out[k]; i++) {
        if (is_table[k][i]) {
            pf_table t;
            int rc = pf_pipeline_table(p, i, &t);
            bad |= rc != PF_OK ||
                   memcmp(t.data, ref_tab[k][idx][i], sizeof(double) * ref_tab_len[k][i]) != 0;
        } else {
            size_t row = (size_t)kinds[k].w * 4;
            for (int y = 0; y < kinds[k].h && !bad; y++)
                bad |= memcmp((char *)o->f[i].data + (size_t)y * o->f[i].pitch,
                              ref_img[k][idx][i] + row * (size_t)y, row) != 0;
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %s, input %d: output differs from the single-threaded run\n", who,
                kinds[k].name, idx);
        pf_test_failures++;
    }
    return bad;
}

/* ---- The reference: one thread ---------------------------------------------------------- */

static void make_references(void)
{
    pf_rng r;
    pf_rng_seed(&r, 14);
    for (int k = 0; k < N_KINDS; k++) {
        pf_pipeline *p = load_kind(k);
        n_out[k] = pf_pipeline_output_count(p);
        if (n_out[k] > MAX_OUT) {
            fprintf(stderr, "%s: too many outputs\n", kinds[k].name);
            exit(1);
        }
        for (int i = 0; i < n_out[k]; i++) {
            pf_output_info oi;
            CHECK(pf_pipeline_output_info(p, i, &oi) == PF_OK);
            is_table[k][i] = oi.kind == PF_OUTPUT_TABLE;
        }
        for (int n = 0; n < N_INPUTS; n++) {
            pf_frame *f = &input[k][n];
            if (pf_frame_alloc(f, kinds[k].w, kinds[k].h, PF_U8, 4) != PF_OK)
                exit(1);
            pf_test_frame_random(&r, f);
            outs o;
            outs_make(&o, k, 0);
            int rc = pf_pipeline_run(p, f, 1, o.f, n_out[k]);
            if (rc != PF_OK) {
                fprintf(stderr, "%s: %s\n", kinds[k].name, pf_pipeline_errmsg(p));
                exit(1);
            }
            for (int i = 0; i < n_out[k]; i++) {
                if (is_table[k][i]) {
                    pf_table t;
                    CHECK(pf_pipeline_table(p, i, &t) == PF_OK);
                    ref_tab_len[k][i] = (size_t)t.rows * (size_t)t.cols;
                    ref_tab[k][n][i] = malloc(sizeof(double) * ref_tab_len[k][i]);
                    memcpy(ref_tab[k][n][i], t.data, sizeof(double) * ref_tab_len[k][i]);
                } else {
                    size_t row = (size_t)kinds[k].w * 4;
                    ref_img[k][n][i] = malloc(row * (size_t)kinds[k].h);
                    for (int y = 0; y < kinds[k].h; y++)
                        memcpy(ref_img[k][n][i] + row * (size_t)y,
                               (char *)o.f[i].data + (size_t)y * o.f[i].pitch, row);
                }
            }
            outs_free(&o);
        }
        pf_pipeline_destroy(p);
    }
}

/* ---- Many threads, each with its own pipelines ----------------------------------------------- */

typedef struct worker {
    int id;
    unsigned long frames;
    int failed;
} worker;

/* A frame's input in pinned memory (GPU runs, odd frames): copied from the reference. */
static pf_frame pinned_copy(const pf_frame *src)
{
    pf_frame f;
    if (pf_frame_alloc_host(eng, src->width, src->height, src->sample, src->channels, &f) !=
        PF_OK) {
        fprintf(stderr, "pf_frame_alloc_host: %s\n", pf_engine_errmsg(eng));
        exit(1);
    }
    for (int y = 0; y < src->height; y++)
        memcpy((char *)f.data + (size_t)y * f.pitch, (char *)src->data + (size_t)y * src->pitch,
               (size_t)src->width * 4);
    return f;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pf_pipeline *p[N_KINDS];
    for (int k = 0; k < N_KINDS; k++)
        p[k] = load_kind(k);
    char who[32];
    snprintf(who, sizeof who, "thread %d", w->id);
    for (int f = 0; f < frames_per_thread && !w->failed; f++) {
        for (int k = 0; k < N_KINDS && !w->failed; k++) {
            int idx = (w->id * 5 + f * 3 + k) % N_INPUTS;
            if (!gpu) {
                outs o;
                outs_make(&o, k, 0);
                int ticket = 0,
                    rc = pf_pipeline_submit(p[k], &input[k][idx], 1, o.f, n_out[k], &ticket);
                /* Completion through each of the three calls in turn. */
                if (rc == PF_OK)
                    rc = f % 3 == 0   ? pf_pipeline_wait(p[k], ticket)
                         : f % 3 == 1 ? pf_pipeline_poll(p[k], ticket)
                                      : pf_pipeline_wait_timeout(p[k], ticket, 1000);
                if (rc != PF_OK) {
                    fprintf(stderr, "%s: %s: %s\n", who, pf_status_name(rc),
                            pf_pipeline_errmsg(p[k]));
                    pf_test_failures++;
                    w->failed = 1;
                }
                w->failed |= !w->failed && check_frame(p[k], k, idx, &o, who);
                outs_free(&o);
                w->frames++;
                continue;
            }
            /* GPU: two frames in flight, pageable or pinned by turns. */
            int pinned = (f + k) & 1, idx2 = (idx + 1) % N_INPUTS, t1 = 0, t2 = 0;
            outs o1, o2;
            outs_make(&o1, k, pinned);
            outs_make(&o2, k, pinned);
            pf_frame in1 = pinned ? pinned_copy(&input[k][idx]) : input[k][idx];
            pf_frame in2 = pinned ? pinned_copy(&input[k][idx2]) : input[k][idx2];
            int rc = pf_pipeline_submit(p[k], &in1, 1, o1.f, n_out[k], &t1);
            if (rc == PF_OK)
                rc = pf_pipeline_submit(p[k], &in2, 1, o2.f, n_out[k], &t2);
            if (rc == PF_OK)
                rc = pf_pipeline_wait(p[k], t1);
            /* Tables belong to the last completed frame: check the first before the
               second completes. */
            if (rc == PF_OK)
                w->failed |= check_frame(p[k], k, idx, &o1, who);
            if (rc == PF_OK) /* PF_NOT_READY after 1 ms: try again */
                while ((rc = pf_pipeline_wait_timeout(p[k], t2, 1)) == PF_NOT_READY)
                    ;
            if (rc == PF_OK)
                w->failed |= check_frame(p[k], k, idx2, &o2, who);
            if (rc != PF_OK) {
                fprintf(stderr, "%s: %s: %s\n", who, pf_status_name(rc), pf_pipeline_errmsg(p[k]));
                pf_test_failures++;
                w->failed = 1;
            }
            if (pinned) {
                pf_frame_free_host(eng, &in1);
                pf_frame_free_host(eng, &in2);
            }
            outs_free(&o1);
            outs_free(&o2);
            w->frames += 2;
        }
    }
    for (int k = 0; k < N_KINDS; k++)
        pf_pipeline_destroy(p[k]);
    return NULL;
}

static void test_many_threads(void)
{
    pthread_t tid[N_THREADS];
    worker w[N_THREADS];
    memset(w, 0, sizeof w);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N_THREADS; i++) {
        w[i].id = i;
        if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "cannot start thread %d\n", i);
            exit(1);
        }
    }
    unsigned long total = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(tid[i], NULL);
        total += w[i].frames;
        CHECKF(!w[i].failed, "thread %d failed", i);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d threads x %d pipelines: %lu frames in %.2f s\n", N_THREADS, N_KINDS, total,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    CHECK(total == (unsigned long)N_THREADS * N_KINDS * frames_per_thread * (gpu ? 2 : 1));
}

/* ---- Two threads on one pipeline ---------------------------------------------------------- */

typedef struct shared {
    pf_pipeline *p;
    int stop; /* atomic */
    unsigned long ok, busy, other;
} shared;

/* Runs frames on the shared pipeline as fast as it can: every PF_OK frame must be
   right, every refusal PF_BUSY. */
static void *contender(void *arg)
{
    shared *s = arg;
    int k = 1; /* demo: long enough frames that the other thread often finds it busy */
    for (unsigned n = 0; !__atomic_load_n(&s->stop, __ATOMIC_RELAXED); n++) {
        outs o;
        outs_make(&o, k, 0);
        int idx = (int)(n % N_INPUTS);
        int rc = pf_pipeline_run(s->p, &input[k][idx], 1, o.f, n_out[k]);
        if (rc == PF_OK) {
            /* The table is read after the run: the other thread may have run a frame
               since, so compare images only here. */
            int bad = 0;
            size_t row = (size_t)kinds[k].w * 4;
            for (int y = 0; y < kinds[k].h; y++)
                bad |= memcmp((char *)o.f[0].data + (size_t)y * o.f[0].pitch,
                              ref_img[k][idx][0] + row * (size_t)y, row) != 0;
            CHECKF(!bad, "shared pipeline: frame %d differs", idx);
            __atomic_fetch_add(&s->ok, 1, __ATOMIC_RELAXED);
        } else if (rc == PF_BUSY) {
            __atomic_fetch_add(&s->busy, 1, __ATOMIC_RELAXED);
        } else {
            __atomic_fetch_add(&s->other, 1, __ATOMIC_RELAXED);
        }
        outs_free(&o);
    }
    return NULL;
}

static void test_shared_pipeline(void)
{
    shared s;
    memset(&s, 0, sizeof s);
    s.p = load_kind(1);
    pthread_t a, b;
    if (pthread_create(&a, NULL, contender, &s) != 0 ||
        pthread_create(&b, NULL, contender, &s) != 0) {
        fprintf(stderr, "cannot start threads\n");
        exit(1);
    }
    /* Until both outcomes were seen many times, at most 20 s. */
    for (int ms = 0; ms < 20000; ms += 10) {
        if (__atomic_load_n(&s.busy, __ATOMIC_RELAXED) > 20 &&
            __atomic_load_n(&s.ok, __ATOMIC_RELAXED) > 100)
            break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELAXED);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("one pipeline, two threads: %lu frames, %lu PF_BUSY, %lu other\n", s.ok, s.busy,
           s.other);
    CHECK(s.ok > 100);
    CHECK(s.busy > 0);
    CHECK(s.other == 0);
    /* The pipeline is usable afterwards, and a refused call left no mark on it. */
    outs o;
    outs_make(&o, 1, 0);
    CHECK(pf_pipeline_run(s.p, &input[1][0], 1, o.f, n_out[1]) == PF_OK);
    check_frame(s.p, 1, 0, &o, "after contention");
    outs_free(&o);
    pf_pipeline_destroy(s.p);
}

/* ---- Counts read during frames ------------------------------------------------------------ */

typedef struct replanning {
    pf_pipeline *p;
    int stop; /* atomic */
    unsigned long reads, bad;
} replanning;

/* pf_pipeline_unit_count and pf_pipeline_slots, read in a loop from another thread: any
   thread may ask at any time (pipefuse.h), so each read is a count the pipeline has had
   and never touches a plan being freed. */
static void *count_reader(void *arg)
{
    replanning *r = arg;
    while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
        int units = pf_pipeline_unit_count(r->p), slots = pf_pipeline_slots(r->p);
        if (units < 0 || units > 16 || slots < 1 || slots > 8)
            __atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&r->reads, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Frames whose size changes every time, so that every frame plans again (freeing the
   last plan), and the slots option changed between them, while a second thread reads
   the counts. Under the asan and tsan presets a read of a freed plan or an unguarded
   field is an error here. */
static void test_counts_while_replanning(void)
{
    replanning r;
    memset(&r, 0, sizeof r);
    r.p = load_kind(1);
    pthread_t t;
    if (pthread_create(&t, NULL, count_reader, &r) != 0) {
        fprintf(stderr, "cannot start a thread\n");
        exit(1);
    }
    int frames = 0;
    /* at least 60 frames, and on until the reader has read during many of them */
    for (int n = 0; n < 60 || (__atomic_load_n(&r.reads, __ATOMIC_RELAXED) < 1000 && n < 20000);
         n++) {
        int w = 8 + n % 7, h = 5 + n % 3;
        pf_frame in, out[MAX_OUT];
        memset(out, 0, sizeof out);
        CHECK(pf_frame_alloc(&in, w, h, PF_U8, 4) == PF_OK);
        memset(in.data, 0x40 + n, in.pitch * (size_t)h);
        CHECK(pf_frame_alloc(&out[0], w, h, PF_U8, 4) == PF_OK);
        char slots[8];
        snprintf(slots, sizeof slots, "%d", 1 + n % 8);
        CHECK(pf_pipeline_set_option(r.p, "slots", slots) == PF_OK);
        CHECK(pf_pipeline_slots(r.p) == 1 + n % 8);
        int rc = pf_pipeline_run(r.p, &in, 1, out, n_out[1]);
        CHECKF(rc == PF_OK, "frame %d (%dx%d): %s", n, w, h, pf_pipeline_errmsg(r.p));
        frames += rc == PF_OK;
        CHECK(pf_pipeline_unit_count(r.p) > 0);
        pf_frame_free(&in);
        pf_frame_free(&out[0]);
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    printf("counts while re-planning: %d frames, %lu reads, %lu out of range\n", frames, r.reads,
           r.bad);
    CHECK(r.reads > 0 && r.bad == 0);
    pf_pipeline_destroy(r.p);
}

/* ---- The engine's message per thread ------------------------------------------------------- */

typedef struct loader_arg {
    int id;
    unsigned long wrong;
} loader_arg;

/* Loads broken pipelines named after this thread, and reads the engine's message after
   each: always this thread's own failure, never another thread's that failed meanwhile. */
static void *failing_loader(void *arg)
{
    loader_arg *a = arg;
    char json[256], name[32];
    snprintf(name, sizeof name, "thread%d.json", a->id);
    for (int n = 0; n < 2000; n++) {
        snprintf(json, sizeof json,
                 "{\"pipefuse\": 1, \"inputs\": [\"a\"], \"stages\": [{\"id\": \"s\", "
                 "\"op\": \"nosuch%d\"}], \"outputs\": {\"o\": \"s\"}}",
                 a->id);
        pf_pipeline *p = NULL;
        if (pf_pipeline_load_string(eng, json, name, &p) == PF_OK) {
            pf_pipeline_destroy(p);
            a->wrong++;
            continue;
        }
        const char *m = pf_engine_errmsg(eng);
        char op[16];
        snprintf(op, sizeof op, "nosuch%d", a->id);
        a->wrong += !strstr(m, name) || !strstr(m, op);
    }
    return NULL;
}

static void test_engine_message_per_thread(void)
{
    pthread_t t[4];
    loader_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (loader_arg){i, 0};
        if (pthread_create(&t[i], NULL, failing_loader, &a[i]) != 0) {
            fprintf(stderr, "cannot start threads\n");
            exit(1);
        }
    }
    unsigned long wrong = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        wrong += a[i].wrong;
    }
    printf("engine messages, 4 threads failing loads: %lu of 8000 not their own\n", wrong);
    CHECK(wrong == 0);
}

/* ---- Tickets ----------------------------------------------------------------------------- */

static void test_tickets(void)
{
    pf_pipeline *p = load_kind(0);
    CHECK(pf_pipeline_wait(p, 1) == PF_INVALID_ARGUMENT); /* nothing submitted yet */
    CHECK(pf_pipeline_poll(p, 0) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_wait_timeout(p, -3, 10) == PF_INVALID_ARGUMENT);
    outs o;
    outs_make(&o, 0, 0);
    int t1 = 0, t2 = 0;
    CHECK(pf_pipeline_submit(p, &input[0][0], 1, o.f, 1, &t1) == PF_OK);
    CHECK(pf_pipeline_submit(p, &input[0][1], 1, o.f, 1, &t2) == PF_OK);
    CHECK(t1 > 0 && t2 > t1);
    CHECK(pf_pipeline_wait(p, t2 + 1) == PF_INVALID_ARGUMENT);
    CHECK(strstr(pf_pipeline_errmsg(p), "never issued") != NULL || gpu);
    int rc = pf_pipeline_wait_timeout(p, t2, 5000);
    CHECK(rc == PF_OK);
    check_frame(p, 0, 1, &o, "tickets");
    CHECK(pf_pipeline_wait(p, t1) == PF_OK); /* done long ago: at once */
    CHECK(pf_pipeline_poll(p, t2) == PF_OK);
    /* Another pipeline's tickets are not this one's, though both issued as many. */
    pf_pipeline *q = load_kind(0);
    int u1 = 0, u2 = 0;
    CHECK(pf_pipeline_submit(q, &input[0][0], 1, o.f, 1, &u1) == PF_OK);
    CHECK(pf_pipeline_submit(q, &input[0][1], 1, o.f, 1, &u2) == PF_OK);
    CHECK(pf_pipeline_wait(q, u2) == PF_OK);
    CHECK(u1 != t1 && u2 != t2);
    CHECK(pf_pipeline_wait(q, t1) == PF_INVALID_ARGUMENT);
    CHECK(strstr(pf_pipeline_errmsg(q), "never issued by this pipeline") != NULL);
    CHECK(pf_pipeline_poll(p, u1) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_wait_timeout(q, t2, 0) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_wait(q, u1) == PF_OK);
    pf_pipeline_destroy(q);
    outs_free(&o);
    pf_pipeline_destroy(p);
}

int main(int argc, char **argv)
{
    gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    const char *env = getenv("PF_STRESS_FRAMES");
    frames_per_thread = env && atoi(env) > 0 ? atoi(env) : gpu ? 100 : 150;
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.threads = 4; /* fewer workers than callers: jobs must share them */
    eng = pf_test_engine_with(&cfg);
    if (gpu) {
        pf_pipeline *p = load_kind(0);
        pf_shape s = {kinds[0].w, kinds[0].h};
        int rc = pf_pipeline_plan(p, &s, 1);
        if (rc == PF_NO_DEVICE) {
            printf("SKIPPED: %s\n", pf_pipeline_errmsg(p));
            pf_pipeline_destroy(p);
            pf_engine_destroy(eng);
            return 77;
        }
        pf_pipeline_destroy(p);
    }
    make_references();
    test_tickets();
    test_many_threads();
    test_shared_pipeline();
    test_counts_while_replanning();
    test_engine_message_per_thread();
    for (int k = 0; k < N_KINDS; k++)
        for (int n = 0; n < N_INPUTS; n++) {
            pf_frame_free(&input[k][n]);
            for (int i = 0; i < MAX_OUT; i++)
                free(ref_img[k][n][i]), free(ref_tab[k][n][i]);
        }
    pf_engine_destroy(eng);
    return pf_test_done(gpu ? "test_threads gpu" : "test_threads");
}
