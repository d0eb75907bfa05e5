/* cli/batch/worker.h: what the files of the worker process of `pipefuse run` share
 * (batch.h is what the supervisor and the worker share; this header is the worker's).
 *
 * The worker, one file a mechanism: worker.c (setup, the starter thread, the main loop
 * reading jobs), report.c (the reports below, notices, engines and pipelines),
 * backend.c (--backend auto's choice), budget.c (a file's bytes and its bands),
 * codec.c (decode, encode and write), lanes.c (the engine lanes: the GPU's scheduler
 * and the CPU's lanes), pinned.c (page-locked frames), attrib.c (crash attribution),
 * config.c (an exec'd worker's options). Calls go one way: worker.c calls the others;
 * lanes.c calls codec.c's queue functions; every file calls report.c and attrib.c.
 *
 * The supervisor (run.c) starts it (executing pipefuse again, see worker_entry) and
 * sends it files; it decodes, runs and encodes them with threads and reports each
 * result. Inside:
 *
 *   job pipe -> decode (codec threads) -> engine lanes -> encode (codec threads) -> reports
 *
 * Codec threads take an encode before a decode, so finished frames leave memory
 * first; a decode waits while the frames in flight would exceed half of the memory
 * budget (a file alone is always admitted). Each engine lane has its own engine and
 * its own pipelines (a pipeline is used by one thread at a time), one per recent input
 * shape, least recently used dropped first, so a batch of mixed sizes plans each size
 * once per lane. A lane submits frames and waits for them in order, so on the GPU the
 * upload, compute and download of consecutive files overlap; on the CPU, submit runs
 * the frame at once and the lanes run whole files side by side.
 *
 * Jobs, one line each: "J index<TAB>path<TAB>name<TAB>name..." (the input and the
 * names of its outputs inside OUTDIR, escaped as in the joblog); "H" asks every
 * thread where it is (a file ran past its time limit). End of file: finish and exit.
 *
 * Reports, one line each (a single write, so lines from threads never mix):
 *   X message            setup failed (the supervisor exits 2)
 *   O kind json name     an output of the pipeline (kind i: image, t: table), then
 *   R lanes codecs       ready
 *   P width height       a lane planned the pipeline for a new shape
 *   B index              the file's decode began (its time limit starts)
 *   E index              the file entered the engine
 *   T index dec eng enc rows  milliseconds of a file done: decode, engine (submit to
 *                        wait done), encode and write; the rows of its bands (0: whole)
 *   D index 0 ms outs    done; D index 1 ms message: failed
 *   C index sig<TAB>where  a fatal signal or exit() while working on index (-1: unknown)
 *   W where              where a thread in plugin code is (answer to "H")
 *   L                    the GPU context is lost: the worker exits to get a fresh one
 *   N level message      the engine logged (escaped); the supervisor prints each once
 *   Z plans              the worker ends normally
 * A crash record is written by the signal handler with write(2) only; it names the
 * stage by the code addresses on the crashing thread's stack: each plugin's mapped
 * range and its stages' entry points are recorded at start, so the handler only
 * compares numbers. The engine offers no hook naming the stage it is running, so a
 * stage is named from the nearest entry point below the faulting address in the
 * plugin's code; stages of one op are listed together.
 */
#ifndef PF_CLI_WORKER_H
#define PF_CLI_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "batch.h"
#include "images.h"
#include "pinned.h"
#include "pipefuse/bands.h"

#define PLAN_CACHE 8 /* pipelines per lane, one per recent shape */
#define MAX_LANES  64

typedef struct job job;
struct job {
    int index;
    char *path;
    char *names[RUN_MAX_IO];   /* its outputs' names inside OUTDIR, from the supervisor */
    unsigned long long est;    /* bytes counted against the budget */
    unsigned long long pixels; /* from its PNG header (0: unreadable) */
    pf_frame in[RUN_MAX_IO];
    pf_frame out[RUN_MAX_IO];
    pf_table tab[RUN_MAX_IO]; /* copies of the table outputs */
    /* The input's colour, density and text chunks, kept by its decode (NULL with --strip),
       and its header, which says which of them still apply to an output. */
    pf_png_meta *meta;
    pf_png_info src;
    pf_jpeg_meta *jmeta; /* a JPEG input's ICC profile and EXIF (NULL with --strip) */
    cli_format fmt;      /* the input's format, by its bytes */
    char **row_names[RUN_MAX_IO];
    int status; /* 0 ok */
    int ticket;
    double t0;
    double dec_ms, eng_ms, enc_ms; /* where its time went */
    /* Banded (run_banded): rows per band (0: whole frames), whether the bands are strips
       of output rows (pipefuse/bands.h: a pipeline with resample stages), the input open
       for rows from its decode on, and the outputs' names once the lane has written and
       committed them. */
    int band_rows, strips;
    cli_rows *rows;
    int written;
    char outs[3000];
    char err[2048];
    job *next;
};

typedef struct queue {
    job *head, *tail;
    int n;
} queue;

typedef struct cached {
    pf_pipeline *p;
    pf_shape shape;
    int banded; /* planned for bands: every input has the band's shape; 2: strips of
                   `rows` output rows of whole inputs */
    int rows;
    unsigned long long use;
    unsigned long long bytes, dev_bytes;
} cached;

typedef struct lane lane;
struct lane {
    pf_engine *e; /* its own: a lane's frames never wait on another lane's threads */
    cached c[PLAN_CACHE];
    unsigned long long clock;
    pthread_t tid;
};

struct worker_state {
    const run_opts *o;
    int rep_fd, dirfd;
    pf_engine *e;
    pf_frame bound[RUN_MAX_IO];
    int unused[RUN_MAX_IO]; /* inputs no output uses: bound to one pixel, never banded */
    int n_in, n_out, n_images, has_tables;
    pf_output_info oi[RUN_MAX_IO];
    char *out_name[RUN_MAX_IO];
    int json[RUN_MAX_IO];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    queue decode, ready, encode;
    int input_closed;
    int decoding, in_engine, encoding; /* jobs held by threads */
    unsigned long long bytes_in_flight;
    int lanes, codecs;
    /* The backend the lanes' plans get (setup's trial plan): on the GPU a plan's host
       memory is its pinned staging, and its device memory counts against dev_budget
       (taken from the device's free memory at setup), not against --max-memory. */
    atomic_int gpu;
    atomic_ullong dev_budget;
    /* The pipeline whose trial plan tells the backend (setup loads it; the starter
       thread plans it while the codec threads already decode), and the lanes. */
    pf_pipeline *trial;
    struct lane *lane_list;
    /* --backend auto decided for the CPU before CUDA was touched (auto_backend): the
       backend every pipeline of this worker is given (NULL: the options'). */
    const char *backend;
    /* On the GPU: page-locked frames every lane's engine registered, for decoded inputs
       and for outputs, so that the lanes' frames move by DMA (NULL: none, pageable). */
    pinned_pool *pool;
    atomic_ullong plans;
    void *lane0;      /* the lane whose pipeline --profile prints */
    int lane_threads; /* engine threads of each lane */
    /* Bands: whether the pipeline runs in bands and the halo rows a band needs (setup),
       and a pipeline never planned that tells the whole-frame memory of a shape (the
       job reader's, for --band-rows auto), with the last answer. */
    int bandable, halo;
    /* Or, a pipeline with resample stages that cannot be cut into frames of bands (with
       no reduce stage), whether it runs in strips of output rows on the CPU. */
    int stripable;
    pf_pipeline *probe;
    /* A pipeline never planned that tells each output's PNG form and its geometry from
       the input's (job_items: pHYs through resize, crop, quarter turns). */
    pf_pipeline *forms;
    pf_shape probe_shape;
    unsigned long long probe_bytes, probe_dev;
    pthread_mutex_t wmu;
    /* What a stage must leave as it found it (process_intact): this process (a child a
       stage forks reports nothing), its descriptors and its working directory. */
    pid_t pid;
    struct stat fd_st[6];
    int fd_num[6];
    int n_fds;
    struct stat cwd_st;
    char *cwd; /* relative paths are opened from here, whatever a stage did */
};
extern struct worker_state W;

typedef struct size_text {
    char s[32];
} size_text;

/* The file a thread is working on (-1: none) and its step ("decode", "encode"), for a
   crash record (attrib.c). */
extern __thread int tls_job;
extern __thread const char *tls_step;

/* report.c */
int load_pipeline(pf_engine *e, pf_pipeline **out, char *err, size_t errn);
pf_engine *new_engine(int threads, char *err, size_t errn);
const char *not_regular(const char *path);
void notice(int level, const char *msg);
double now_ms(void);
unsigned long long plan_host_bytes(const pf_memory *m);
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void report_done(const job *j, int failed, const char *text, const char *suffix);
size_text size_str(unsigned long long b);

/* attrib.c */
void ask_threads(void);
void build_attribution(void);
void engine_enter(job *j);
void engine_leave(const job *j);
int engine_count(void); /* files between engine_enter and engine_leave now */
void install_handlers(void);
void process_intact(int index);
void record_process(int job_fd);
void thread_altstack(void);

/* backend.c */
int auto_backend(void);
/* The lanes of a batch on the CPU (cpu) or the GPU: their count (--jobs, else one per
   core up to 8 on the CPU, one on the GPU), each lane's engine threads, and the cores
   (the machine's, or fewer by --threads). */
void batch_lanes(int cpu, int *lanes, int *threads, int *cores);

/* budget.c */
void plan_job(job *j);

/* codec.c */
void *codec_main(void *arg);
int job_items(job *j, const pf_frame *frames, out_item *items, int *order);
void job_outs(job *j, const out_item *items, const int *order, int n);
job *pop(queue *q);
void push(queue *q, job *j);
void reader_error(job *j, const char *err);
void to_encode(job *j);
int png_threads(void);

/* lanes.c */
void *lane_main(void *arg);

#endif
