/* engine/internal.h: the engine's own structures, shared by its source files only.
 *
 * Data flows one way: pipeline file --load--> graph IR (pf_node) --plan--> launch
 * units (pf_plan) --execute--> frames. The loader fills the IR; the planner reads it
 * and writes a plan; executors only carry plans out.
 */
#ifndef PIPEFUSE_INTERNAL_H
#define PIPEFUSE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "pipefuse/pipefuse.h"

#define PF_ERRMSG_MAX 4096

/* ---- Errors and notices -------------------------------------------------------------- */

/* printf into an error buffer of PF_ERRMSG_MAX bytes (truncates, always terminated). */
void pf_errf(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pf_verrf(char *buf, size_t size, const char *fmt, va_list ap);

/* A message buffer of size bytes after a plugin wrote into it: terminated at its last
   byte, since a plugin may fill it to the end without one. Returns err. */
static inline char *pf_plugin_msg(char *err, size_t size)
{
    if (err && size)
        err[size - 1] = 0;
    return err;
}
/* printf into the engine's errmsg, under a lock, and into the calling thread's own copy,
   which pf_engine_errmsg gives that thread (api.c). */
void pf_engine_errf(pf_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's latest message on engine e, or NULL when it has none. */
const char *pf_engine_thread_msg(const pf_engine *e);
/* A notice (level 0), warning (1) or error (2) through the engine's log callback. */
void pf_log(const pf_engine *e, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The name among cands[0..n) closest to name (edit distance), or NULL when none is
   close enough to be a plausible typo. */
const char *pf_closest(const char *name, const char *const *cands, int n);

/* [A-Za-z_][A-Za-z0-9_]*: stage, input, output and parameter names. */
int pf_is_identifier(const char *s);
/* Whether n bytes at p (not NULL) can be read; whether s (not NULL) is a string ending
   within max bytes that can all be read. For a plugin's pointers, before reading them. */
int pf_readable(const void *p, size_t n);
int pf_readable_str(const char *s, size_t max);

/* malloc/calloc/strdup that never return NULL silently: callers still check. */
char *pf_strdup(const char *s);

/* ---- Formats and limits --------------------------------------------------------------- */

/* A frame format (sample type and 1..4 channels) as one small integer, 1..20: keys of
   compiled kernel variants and captured graphs, and the formats of a fused kernel's
   loads and stores. PF_FORMAT_NONE (0) is "no frame". */
typedef int pf_format;
#define PF_FORMAT_NONE     0
#define PF_FORMAT_CHANNELS 8 /* codes per sample type: room for channels 1..4 */

static inline pf_format pf_format_code(pf_sample sample, int channels)
{
    return (int)sample * PF_FORMAT_CHANNELS + channels;
}
static inline pf_sample pf_format_sample(pf_format f)
{
    return (pf_sample)(f / PF_FORMAT_CHANNELS);
}
static inline int pf_format_channels(pf_format f)
{
    return f % PF_FORMAT_CHANNELS;
}

/* Pipeline inputs, or outputs: the frames of one pf_pipeline_run call
   (docs/pipeline-format.md, "Limits"). */
#define PF_MAX_FRAMES 64
/* Loads, or stores, of one fused kernel; a unit with more runs unfused. */
#define PF_MAX_FUSED_IO 64

/* ---- Engine ------------------------------------------------------------------------------ */

typedef struct pf_plugin {
    char *path;
    void *handle;
    const pf_plugin_desc *desc;
} pf_plugin;

typedef struct pf_stage_entry {
    const pf_stage_desc *desc;
    int plugin; /* index into engine->plugins */
} pf_stage_entry;

struct pf_threadpool;
struct pf_cuda_dev;

struct pf_engine {
    pf_plugin *plugins;
    int n_plugins;
    pf_stage_entry *stages;
    int n_stages;
    int threads;
    int copy_threads; /* pool threads copying pageable host frames (CUDA staging) */
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
    struct pf_threadpool *pool;
    struct pf_cuda_dev *cuda; /* device state, created on first use (exec_cuda.c) */
    char *skipped;            /* plugins and directories not loaded: "path: why" lines */
    char *refused;            /* their stages, where known: "stage\tplugin\tpath: why" lines */
    unsigned long serial;     /* unique to this engine in the process (pf_engine_errmsg) */
    char errmsg[PF_ERRMSG_MAX];
};

/* The stage a pipeline's op names: "name" (the first plugin on the search path that
   has it) or "plugin.name". Its index into e->stages, or -1 with a message in err
   (the closest name, plugins that were skipped, where plugins come from). */
int pf_engine_lookup_stage(const pf_engine *e, const char *op, char *err, size_t err_size);
/* A stage's params as the engine accepts them: d->check() passes and a stencil's
   radius() is within [0, PF_MAX_RADIUS]. 0, or with a message in err 1 (check() refuses
   them) or 2 (the radius). stage_check.c, with the descriptor rules. */
int pf_stage_params_ok(const pf_stage_desc *d, const void *params, char *err, size_t err_size);

/* ---- Parameters (params.c) ----------------------------------------------------------------- */

/* Writes every default of d's table into params (params_size bytes, zeroed first). */
void pf_params_init(const pf_stage_desc *d, void *params);
/* The bytes of a row's field (0 for an array of no elements), and an enum's choices. */
size_t pf_param_bytes(const pf_param_desc *pd);
int pf_param_enum_count(const pf_param_desc *pd);
/* The table row named name, or NULL. */
const pf_param_desc *pf_param_find(const pf_stage_desc *d, const char *name);
/* Type-checks and range-checks a JSON value for one row and stores it into params.
   Returns PF_OK or PF_PARAM with a message (without location) in err. */
struct json_t;
int pf_param_set_json(const pf_param_desc *pd, const struct json_t *v, void *params, char *err,
                      size_t err_size);
/* The same for a number x, as pf_param_set_json with a JSON real x would set it (the same
   checks and messages), with no JSON value made for a float or int row (a number for
   another kind goes through pf_param_set_json to be refused): pf_pipeline_set_float's
   path, which a frame loop takes. */
int pf_param_set_real(const pf_param_desc *pd, double x, void *params, char *err, size_t err_size);
/* Formats a param's current value as JSON text (for plan prints and `stages`). */
void pf_param_format(const pf_param_desc *pd, const void *params, char *buf, size_t size);
const char *pf_param_type_name(pf_param_type t);

/* ---- Graph IR (pipeline_load.c fills it) ------------------------------------------------------------ */

/* A parameter bound to a reduction (docs/pipeline-format.md, "Parameters bound to a
   reduction"): per frame, the value a rule reads from a reduce stage's table, times
   scale plus offset, clamped to the parameter's range (bind.c). */
typedef enum pf_bind_rule {
    PF_BIND_PERCENTILE, /* histogram: the centre of the bin where arg percent is reached */
    PF_BIND_MEAN,       /* histogram or stats */
    PF_BIND_MIN,
    PF_BIND_MAX,
    PF_BIND_OTSU,      /* histogram: the level between Otsu's two classes */
    PF_BIND_GAIN_TO,   /* histogram or stats: arg / mean */
    PF_BIND_GREY_GAIN, /* histogram or stats: the mean of R, G and B's means / this mean */
    PF_BIND_RULES
} pf_bind_rule;
#define PF_BIND_RGB        4    /* pf_binding.channel: R, G and B together */
#define PF_MAX_BINDS       8    /* bound parameters of one stage */
#define PF_BIND_PARAMS_MAX 1024 /* bytes of params of a stage with bound parameters */
typedef struct pf_binding {
    int param;   /* index into desc->params (a float) */
    int src;     /* the reduce node (histogram or stats) */
    int rule;    /* pf_bind_rule */
    int channel; /* 0 to 3: R, G, B, A; PF_BIND_RGB */
    double arg, scale, offset;
} pf_binding;

typedef struct pf_node {
    char *id;                  /* stage id, or the input's name */
    const pf_stage_desc *desc; /* NULL for a pipeline input */
    int plugin;                /* index into engine->plugins, -1 for inputs */
    int n_in;
    int in[PF_MAX_INPUTS]; /* producer node indices, always < this node's index */
    void *params;          /* desc->params_size bytes; NULL for inputs */
    char *path;            /* JSON path for messages: "stages[3]", "inputs[0]" */
    int used;              /* reaches an output (unused stages are not run) */
    int n_bind;            /* params bound to reductions; their sources are earlier nodes */
    pf_binding *bind;
    void *unbound; /* with bindings: the params as the file gives them, bound ones at
                              their defaults: what runs when a frame gives no value */
} pf_node;

#define PF_BITS_LIKE_INPUT 0 /* an output whose sample size follows the primary input */

typedef struct pf_output_decl {
    char *name;
    int node;                     /* producer */
    int channels;                 /* 0: like the primary input */
    int bits;                     /* PF_BITS_LIKE_INPUT, 8, 16, or 32 (float) */
    pf_table_format table_format; /* tables: PF_TABLE_ANY is the caller's choice */
    char *path;                   /* JSON path: "outputs.result" */
    int png_form;                 /* images: pf_png_form (pipefuse/png.h), how a PNG stores it */
} pf_output_decl;

typedef enum pf_backend { PF_BACKEND_AUTO = 0, PF_BACKEND_CPU, PF_BACKEND_CUDA } pf_backend;

typedef struct pf_options {
    pf_backend backend;
    int fusion;           /* 1: fuse point groups (default) */
    int graph;            /* 1: CUDA Graph replay (default) */
    int streams;          /* 0: from the graph's width */
    double max_launch_ms; /* 0: from the device's watchdog */
    int threads;          /* 0: the engine's */
    size_t max_memory;    /* bytes of buffers a plan may take; 0: no limit */
    int slots;            /* CUDA frames in flight; 0: 3 */
    int profile;          /* time every launch with events (off in the hot path) */
    int clusters;         /* 1: column sums combine through thread-block clusters where possible */
    int precision;        /* PF_PRECISION_EXACT (default) or PF_PRECISION_FAST */
} pf_options;
#define PF_PRECISION_EXACT 0
#define PF_PRECISION_FAST  1

/* The options table (options.c), shared by the loader and pf_pipeline_set_option.
   pf_option_set takes a JSON value, pf_option_set_text the API's text ("2.5", "true",
   "cuda"); both return PF_OK, or PF_PIPELINE with a message without location in err
   (an unknown name: with the closest one). *replan (may be NULL) is set when the
   value changed and the option makes the next frame plan again. */
#define PF_MAX_SLOTS 8
void pf_options_default(pf_options *o);
int pf_option_set(pf_options *o, const char *name, const struct json_t *v, int *replan, char *err,
                  size_t err_size);
int pf_option_set_text(pf_options *o, const char *name, const char *text, int *replan, char *err,
                       size_t err_size);
int pf_option_count(void);
const char *pf_option_name(int i);

struct pf_plan;
struct pf_executor;
struct pf_watchdog;

/* A reduce stage's result table, written by the executor that runs the frame, and the
   stage's params that frame ran with (a copy: row names follow them, not later changes). */
typedef struct pf_table_buf {
    double *data;
    int rows, cols;
    void *params;
} pf_table_buf;

struct pf_pipeline {
    pf_engine *eng;
    char *source;   /* file name, or load_string's name */
    pf_node *nodes; /* inputs first (n_inputs of them), then stages in topological order */
    int n_nodes;
    int n_inputs;
    pf_output_decl *outputs;
    int n_outputs;
    pf_options opts;
    struct pf_plan *plan;           /* pure data (plan.h) */
    int strip_rows;                 /* the plan being made is for strips of this many rows
                                       (pf_pipeline_plan_strips); 0: whole frames */
    const struct pf_executor *exec; /* the executor carrying it out (executor.h) */
    void *exec_state;               /* its state for this plan */
    pf_table_buf *tables;           /* per node, reduce stages: the plan's tables */
    int tables_done;                /* tables hold a frame completed on the current plan */
    pf_table_buf *kept_tables;      /* per node: the last completed frame's tables when that
                                       frame ran on an earlier plan (pf_pipeline_table) */
    size_t plan_host_bytes;         /* host bytes allocated for this plan */
    pf_stats stats;                 /* counters; backend and per-frame fields set on read */
    int notified_cpu;               /* the one-line CPU fallback notice was given */
    int notified_unfused;           /* the notice that point stages run unfused was given */
    int notified_dump;              /* the notice that the CPU backend dumps no kernels */
    struct pf_watchdog *watchdog;   /* the cost model's state, across plans (watchdog.c) */
    unsigned long param_version;    /* bumped by every accepted parameter change */
    char *dump_dir;                 /* --dump-kernels: where generated sources are written */
    _Atomic int in_use;             /* a thread is inside a call on it (PF_BUSY for others) */
    const void *context_before;     /* that thread's pf_thread_context before the call */
    _Atomic int units_now;          /* the plan's units, 0 with no plan: unit_count() */
    _Atomic int slots_now;          /* frames in flight by the options: slots() */
    _Atomic unsigned cancels;       /* pf_pipeline_cancel calls: frames submitted before one stop */
    int ticket_tag;                 /* its tickets' high bits, 1 to 1023 (PF_TICKET_SEQ_BITS) */
    int last_ticket;                /* the sequence number of the last ticket issued */
    int tickets_wrapped;            /* the sequence went past its last and started again */
    char errmsg[PF_ERRMSG_MAX];
};

/* Parses and validates pipeline JSON text into p (whose eng is set and the rest zero).
   source names the text in messages. On failure returns PF_PARSE or PF_PIPELINE (or
   PF_NO_MEMORY) with the message in p->errmsg (the API's load copies it to the engine's);
   p's partial contents are freed by
   pf_pipeline_free_ir. Unused stages are warned about through pf_log. */
int pf_load_pipeline(pf_pipeline *p, const char *text, const char *source);
void pf_pipeline_free_ir(pf_pipeline *p);

/* bind.c: writes the values of node's bound params for this frame into its params,
   from the tables of their sources (tables[src]: the combined table, rows x 4); returns
   whether the params changed. */
int pf_bind_apply(const pf_pipeline *p, int node, const double *const *tables);

/* Index of the node with this id, or -1. */
int pf_find_node(const pf_pipeline *p, const char *id);

/* Frame tickets (api.c), one sequence per pipeline across backends and plans: the next
   one (positive; wraps to 1 after INT_MAX), and whether a ticket was ever handed out. */
int pf_issue_ticket(pf_pipeline *p);
int pf_ticket_issued(const pf_pipeline *p, int ticket);

#endif /* PIPEFUSE_INTERNAL_H */
