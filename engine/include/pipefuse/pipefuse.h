/* pipefuse/pipefuse.h: the public C API.
 *
 * An engine holds the loaded plugins; a pipeline is a loaded pipeline file bound to
 * an engine. Both are opaque handles the library allocates; destructors accept NULL.
 * Every function returning int returns a pf_status: PF_OK (0) or an error whose text
 * is in the handle's errmsg (the engine's for failures to create a pipeline).
 *
 * Typical use:
 *     pf_engine *e;   pf_engine_create(NULL, &e);
 *     pf_pipeline *p; pf_pipeline_load_file(e, "blur.json", &p);
 *     pf_pipeline_plan(p, &shape, 1);        // once per input shape
 *     pf_pipeline_run(p, &in, 1, &out, 1);    // per frame
 *     pf_pipeline_set_param(p, "blur0.sigma", "2.5");   // between frames
 */
#ifndef PIPEFUSE_PIPEFUSE_H
#define PIPEFUSE_PIPEFUSE_H

#include <stdio.h>

#include "pipefuse/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_VERSION_MAJOR  0
#define PF_VERSION_MINOR  1
#define PF_VERSION_PATCH  0
#define PF_VERSION_STRING "0.1.0"
#define PF_VERSION_NUMBER (PF_VERSION_MAJOR * 10000 + PF_VERSION_MINOR * 100 + PF_VERSION_PATCH)

/* The library's PF_VERSION_NUMBER and PF_VERSION_STRING, to check against the header. */
int pf_version(void);
const char *pf_version_string(void);

/* ---- Status codes ------------------------------------------------------------------ */

#define PF_STATUS_MAP(X)                                                                           \
    X(OK, "success")                                                                               \
    X(INVALID_ARGUMENT, "invalid argument")                                                        \
    X(NO_MEMORY, "out of memory")                                                                  \
    X(IO, "input/output error")                                                                    \
    X(PARSE, "malformed pipeline file")                                                            \
    X(PIPELINE, "invalid pipeline")                                                                \
    X(PARAM, "invalid parameter")                                                                  \
    X(PLUGIN, "plugin error")                                                                      \
    X(IMAGE, "bad image")                                                                          \
    X(TOO_LARGE, "image too large")                                                                \
    X(SHAPE, "shape mismatch")                                                                     \
    X(NOT_PLANNED, "pipeline not planned for this shape")                                          \
    X(STAGE, "stage failed")                                                                       \
    X(UNSUPPORTED, "not supported")                                                                \
    X(NO_DEVICE, "no CUDA device")                                                                 \
    X(CUDA, "CUDA error")                                                                          \
    X(INTERNAL, "internal error")

typedef enum pf_status {
#define PF_STATUS_ENUM_(name, text) PF_##name,
    PF_STATUS_MAP(PF_STATUS_ENUM_)
#undef PF_STATUS_ENUM_
        PF_STATUS_COUNT_
} pf_status;

const char *pf_status_name(int status); /* "PF_PARSE" */
const char *pf_status_str(int status);  /* "malformed pipeline file" */

/* ---- Frames ------------------------------------------------------------------------ */

typedef enum pf_sample { PF_U8 = 0, PF_U16, PF_F32 } pf_sample;

/* An image in an application's or a file's own format: 1 (gray), 2 (gray+alpha),
   3 (RGB) or 4 (RGBA) interleaved channels of u8, u16 (host order) or f32. Integer
   samples map [0, max] to [0, 1] in the working format; f32 passes through. */
typedef struct pf_frame {
    void *data;
    int width, height;
    size_t pitch; /* bytes between rows: at least width * pixel bytes; data and pitch are
                     multiples of the sample size (1, 2 or 4 bytes) */
    pf_sample sample;
    int channels;
} pf_frame;

/* Bytes per pixel of a frame format. */
size_t pf_frame_pixel_bytes(pf_sample sample, int channels);

/* ---- Engine ------------------------------------------------------------------------ */

typedef struct pf_engine pf_engine;

typedef struct pf_engine_config {
    uint32_t size;           /* sizeof(pf_engine_config) */
    const char *plugin_path; /* extra plugin directories, ':'-separated; NULL: none */
    int use_env_path;        /* also search PIPEFUSE_PLUGIN_PATH */
    int no_builtin;          /* skip the built-in plugin directory */
    int threads;             /* CPU worker threads; 0: one per core */
    /* Where notices and warnings go; NULL: stderr, prefixed "pipefuse: ". */
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
} pf_engine_config;

/* Fills cfg with defaults: built-in plugins, PIPEFUSE_PLUGIN_PATH, threads per core. */
void pf_engine_config_init(pf_engine_config *cfg);

/* Creates an engine and loads every plugin (cfg NULL: defaults). On failure *out is
   still an engine when memory allowed, holding the message: read it, then destroy. */
int pf_engine_create(const pf_engine_config *cfg, pf_engine **out);
void pf_engine_destroy(pf_engine *e);
const char *pf_engine_errmsg(const pf_engine *e);

/* The registered stages, in plugin load order; file is the library it came from. */
int pf_engine_stage_count(const pf_engine *e);
const pf_stage_desc *pf_engine_stage(const pf_engine *e, int i, const char **plugin_file,
                                     const char **plugin_name);
const pf_stage_desc *pf_engine_find_stage(const pf_engine *e, const char *name);

/* Prints versions, plugins, CUDA runtime/driver and devices (pipefuse info). e may be
   NULL. */
int pf_engine_print_info(const pf_engine *e, FILE *f);

/* ---- Pipelines ----------------------------------------------------------------------- */

typedef struct pf_pipeline pf_pipeline;

/* Loads and validates a pipeline. On failure returns the status, *out is NULL and the
   message (with the file, line/column or JSON path) is in pf_engine_errmsg(e). The
   engine must outlive the pipeline. name labels messages for load_string. */
int pf_pipeline_load_file(pf_engine *e, const char *path, pf_pipeline **out);
int pf_pipeline_load_string(pf_engine *e, const char *json, const char *name, pf_pipeline **out);
void pf_pipeline_destroy(pf_pipeline *p);
const char *pf_pipeline_errmsg(const pf_pipeline *p);

/* Sets "stage_id.param" from JSON text ("0.5", "true", "\"nearest\"", "[1, 2]"),
   validated as in a pipeline file. Takes effect on the next frame without re-planning
   unless it changes an output shape. */
int pf_pipeline_set_param(pf_pipeline *p, const char *key, const char *json_value);
int pf_pipeline_set_float(pf_pipeline *p, const char *key, double value);

/* Sets a pipeline option as in the file's "options" (backend auto|cpu|cuda, fusion
   true|false, graph true|false, streams, threads, max_launch_ms), value as text, and
   the API-only ones: slots (CUDA frames in flight, 1-8), profile (true: time every
   launch with CUDA events; read them with pf_pipeline_unit) and dump_kernels (a
   directory where the sources of fused kernels are written as they are generated; ""
   for none). backend, fusion, streams, slots and max_launch_ms make the next frame plan
   again; graph, threads, profile and dump_kernels do not. */
int pf_pipeline_set_option(pf_pipeline *p, const char *name, const char *value);

typedef enum pf_output_kind { PF_OUTPUT_IMAGE = 0, PF_OUTPUT_TABLE } pf_output_kind;

typedef struct pf_output_info {
    const char *name;
    const char *stage; /* the stage id (or input name) it comes from */
    pf_output_kind kind;
    int channels;     /* requested channels for images, 0 = like the input */
    int bits;         /* requested bits (8, 16, 32 = float), 0 = like the input */
    int table_format; /* tables: 0 the caller's choice, 1 CSV, 2 JSON */
    pf_shape shape;   /* after pf_pipeline_plan: image size or table columns x rows */
} pf_output_info;

int pf_pipeline_input_count(const pf_pipeline *p);
const char *pf_pipeline_input_name(const pf_pipeline *p, int i);
int pf_pipeline_output_count(const pf_pipeline *p);
int pf_pipeline_output_info(const pf_pipeline *p, int i, pf_output_info *info);

/* Plans the pipeline for input shapes (one per input, in order): shape inference,
   fusion groups, launch units and buffers. Done once per shape; run() plans again
   by itself when the input shapes change. */
int pf_pipeline_plan(pf_pipeline *p, const pf_shape *inputs, int n_inputs);

/* Runs one frame synchronously on host frames. inputs in input order; outputs in
   output order, entries with NULL data (or n_out smaller than the count) skip an
   output; table
   outputs are read with pf_pipeline_table. Image outputs must have the planned size. */
int pf_pipeline_run(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs, int n_out);

/* A table output of the last run: rows x cols doubles, row-major, owned by p. */
typedef struct pf_table {
    const double *data;
    int rows, cols;
    const char *const *columns;
    const char *(*row_name)(const void *params, int row);
    const void *params;
} pf_table;
int pf_pipeline_table(const pf_pipeline *p, int output, pf_table *t);

/* ---- Frames in flight (real-time loops) -------------------------------------------------

   With the CUDA backend a frame is submitted and waited for separately, so that up to
   pf_pipeline_slots() frames are in flight: the upload, compute and download of
   consecutive frames overlap. Nothing is allocated and nothing synchronises the whole
   device after the first frame of a size. With the CPU backend, submit runs the frame
   at once and wait returns at once. */

/* Host frames: inputs are copied before submit returns (the caller may reuse them);
   outputs are filled by pf_pipeline_wait(ticket), and must stay valid until then.
   Fails with PF_UNSUPPORTED when every slot holds a frame not yet waited for. */
int pf_pipeline_submit(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                       int n_out, int *ticket);

/* Device frames (data are device pointers) on the application's CUDA stream (a
   cudaStream_t; NULL: the legacy default stream). The frame's work is ordered on that
   stream and nothing is copied: the first kernel reads the inputs where they are and
   the last ones write the outputs in place. Synchronise the stream, or call
   pf_pipeline_wait(ticket), before reading outputs; call wait before reading tables.
   PF_UNSUPPORTED on the CPU backend. */
int pf_pipeline_submit_device(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                              int n_out, void *stream, int *ticket);

/* Waits for a submitted frame; its outputs and tables are then ready. A frame already
   waited for (or retired when a later device submit needed its slot) returns PF_OK at
   once; a ticket never issued is PF_INVALID_ARGUMENT. */
int pf_pipeline_wait(pf_pipeline *p, int ticket);

/* Frames that can be in flight at once (CUDA: the "slots" option, default 3). */
int pf_pipeline_slots(const pf_pipeline *p);

/* ---- Statistics -------------------------------------------------------------------------- */

typedef struct pf_stats {
    uint32_t size;       /* set to sizeof(pf_stats) before the call */
    const char *backend; /* "cpu", "cuda-graph" or "cuda-eager" */
    unsigned long long frames;
    int launches_per_frame; /* kernel launches (CUDA) or launch units (CPU) */
    int units_per_frame;
    int streams;
    unsigned long long allocations; /* device, pinned and plan buffers, since load */
    unsigned long long allocations_last_frame;
    unsigned long long device_syncs; /* cudaDeviceSynchronize: never in the frame loop */
    unsigned long long device_syncs_last_frame;
    unsigned long long frame_waits; /* host waits on one frame's completion event */
    unsigned long long plans;       /* plans built (first frame of each size, changes) */
    unsigned long long graph_captures, graph_instantiations, graph_updates, graph_launches;
    unsigned long long device_bytes, pinned_bytes, host_bytes;
    /* Launch times measured with CUDA events (first frames of a plan, and every frame
       with the "profile" option): how many, the longest, and how many ran over the
       watchdog budget. */
    unsigned long long timed_launches, launches_over_budget;
    double max_launch_ms;
    double budget_ms; /* the plan's watchdog budget per launch, 0 for none */
} pf_stats;

int pf_pipeline_stats(const pf_pipeline *p, pf_stats *s);

/* ---- The plan ---------------------------------------------------------------------- */

typedef enum pf_unit_kind {
    PF_UNIT_POINT = 0, /* a fusion group of one or more point stages */
    PF_UNIT_STENCIL,
    PF_UNIT_RESAMPLE,
    PF_UNIT_REDUCE
} pf_unit_kind;

typedef struct pf_unit_info {
    pf_unit_kind kind;
    int n_stages;
    const char *const *stages; /* stage ids, in evaluation order */
    pf_shape shape;            /* output shape (input shape for reduce) */
    int stream;                /* stream it is coloured onto */
    int bands;                 /* row bands (launches) it is split into */
    int fused;                 /* 1 when n_stages > 1 run as one kernel */
    double predicted_ms;       /* the cost model's GPU time for the whole unit */
    double measured_ms;        /* measured GPU time of its launches, last timed frame */
    double measured_band_ms;   /* its longest launch then */
    double bytes;              /* bytes it moves per frame, as the cost model counts */
} pf_unit_info;

/* Launch units per frame, after pf_pipeline_plan, in execution order. */
int pf_pipeline_unit_count(const pf_pipeline *p);
int pf_pipeline_unit(const pf_pipeline *p, int i, pf_unit_info *info);

/* Generates and compiles with NVRTC (no GPU needed) the fused kernel of every point
   unit of the current plan that can fuse, for sm_<arch> (e.g. 90), assuming 8-bit RGBA
   pipeline inputs and outputs; writes each source to dump_dir/<name>.cu when dump_dir
   is not NULL. PF_UNSUPPORTED without NVRTC; PF_STAGE with NVRTC's log on an error. */
int pf_pipeline_build_kernels(pf_pipeline *p, int arch, const char *dump_dir, int *n_kernels);

/* Writes the plan as text (pipefuse check) or as a Graphviz digraph. */
int pf_pipeline_print_plan(const pf_pipeline *p, FILE *f);
int pf_pipeline_print_dot(const pf_pipeline *p, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_PIPEFUSE_H */
