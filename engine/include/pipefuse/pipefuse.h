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
 *
 * Threads. One engine serves many pipelines on many threads at once: loading, running
 * and destroying pipelines of one engine from different threads is safe, and the CPU
 * worker pool and the GPU are shared between them. A pipeline is used by one thread at
 * a time: a call on a pipeline while another thread is inside a call on the same
 * pipeline returns PF_BUSY at once (nothing done, its errmsg untouched); it never
 * blocks or mixes two frames. Handing a pipeline from one thread to another between
 * calls is fine. pf_pipeline_destroy and pf_engine_destroy must not race with other
 * calls on the object they destroy, and an engine outlives its pipelines. The engine's
 * errmsg (failed loads, host memory calls) is per thread: a thread reads its own latest
 * failure on the engine, whatever other threads fail meanwhile (one that has had none
 * reads the engine's latest). Devices, NVRTC and plugins are set up once per process or engine,
 * under a lock, whichever thread comes first.
 *
 * Growth. Signatures never change once released; new behaviour gets new functions.
 * Status codes and enum values keep their numbers for ever. A struct that may grow
 * carries its size as its first field (set it to sizeof, or use its _init function):
 * the library accepts the smaller struct of an older header, and fields past its size
 * take their defaults. Structs without a size field (pf_frame, pf_output_info,
 * pf_table, pf_unit_info) never grow: more facts come through new functions.
 */
#ifndef PIPEFUSE_PIPEFUSE_H
#define PIPEFUSE_PIPEFUSE_H

#include <stddef.h>
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

/* Each status keeps its number for ever: new ones are added at the end with the next
   number, and none is renumbered or reused. X(name, number, text). */
#define PF_STATUS_MAP(X)                                                                           \
    X(OK, 0, "success")                                                                            \
    X(INVALID_ARGUMENT, 1, "invalid argument")                                                     \
    X(NO_MEMORY, 2, "out of memory")                                                               \
    X(IO, 3, "input/output error")                                                                 \
    X(PARSE, 4, "malformed pipeline file")                                                         \
    X(PIPELINE, 5, "invalid pipeline")                                                             \
    X(PARAM, 6, "invalid parameter")                                                               \
    X(PLUGIN, 7, "plugin error")                                                                   \
    X(IMAGE, 8, "bad image")                                                                       \
    X(TOO_LARGE, 9, "image too large")                                                             \
    X(SHAPE, 10, "shape mismatch")                                                                 \
    X(NOT_PLANNED, 11, "pipeline not planned for this shape")                                      \
    X(STAGE, 12, "stage failed")                                                                   \
    X(UNSUPPORTED, 13, "not supported")                                                            \
    X(NO_DEVICE, 14, "no CUDA device")                                                             \
    X(CUDA, 15, "CUDA error")                                                                      \
    X(INTERNAL, 16, "internal error")                                                              \
    X(BUSY, 17, "pipeline in use by another thread")                                               \
    X(NOT_READY, 18, "frame still in flight")                                                      \
    X(CANCELLED, 19, "frame cancelled")

typedef enum pf_status {
#define PF_STATUS_ENUM_(name, number, text) PF_##name = number,
    PF_STATUS_MAP(PF_STATUS_ENUM_)
#undef PF_STATUS_ENUM_
        PF_STATUS_COUNT_
} pf_status;

const char *pf_status_name(int status); /* "PF_PARSE" */
const char *pf_status_str(int status);  /* "malformed pipeline file" */

/* ---- Frames ------------------------------------------------------------------------ */

typedef enum pf_sample { PF_U8 = 0, PF_U16 = 1, PF_F32 = 2 } pf_sample;

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

/* The level argument of the log callback. */
typedef enum pf_log_level { PF_LOG_NOTICE = 0, PF_LOG_WARNING = 1, PF_LOG_ERROR = 2 } pf_log_level;

typedef struct pf_engine_config {
    uint32_t size;           /* sizeof(pf_engine_config); older, smaller sizes accepted */
    const char *plugin_path; /* extra plugin directories, ':'-separated; NULL: none */
    int use_env_path;        /* also search PIPEFUSE_PLUGIN_PATH */
    int no_builtin;          /* skip the built-in plugin directory */
    int threads;             /* CPU worker threads, 0 to 1024; 0: one per core */
    /* Where notices and warnings go (level: a pf_log_level); NULL: stderr, prefixed
       "pipefuse: ". Called from whichever thread the notice arises on. */
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
    /* ---- 0.2: fields below are read only when size covers them ---- */
    /* Worker threads that copy pageable host frames to and from pinned staging (CUDA),
       taken from the pool; 0 to 1024, 0: up to 8. Out of range: PF_INVALID_ARGUMENT. */
    int copy_threads;
} pf_engine_config;

/* The size of the first released pf_engine_config (0.1), the smallest accepted. */
#define PF_ENGINE_CONFIG_SIZE_0_1 (offsetof(pf_engine_config, log_user) + sizeof(void *))

/* Fills cfg with defaults: built-in plugins, PIPEFUSE_PLUGIN_PATH, threads per core.
   The macro passes the caller's sizeof, so a caller built against an older header has
   only its own, smaller struct written. */
void pf_engine_config_init_size(pf_engine_config *cfg, size_t size);
void pf_engine_config_init(pf_engine_config *cfg); /* fills the 0.1 fields only */
#define pf_engine_config_init(cfg) pf_engine_config_init_size((cfg), sizeof *(cfg))

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
   unless it changes an output shape or outgrows what the plan allocated for the stage
   (a histogram's bins, for one). A change that plans again first completes
   the frames in flight (their outputs delivered), then drops the plan at once: until
   pf_pipeline_plan or the next frame plans again, pf_pipeline_unit, the prints and
   build_kernels find no plan, pf_output_info.shape is zero and pf_stats has backend
   "none"; pf_pipeline_table still gives the last completed frame's table. */
int pf_pipeline_set_param(pf_pipeline *p, const char *key, const char *json_value);
/* The same for a number (accepted, refused and said as set_param would the number written
   as a JSON real: 5.0 sets an int param, 5.5 does not). It allocates nothing: the call
   for a frame loop's changes, where set_param's parse of its text allocates. */
int pf_pipeline_set_float(pf_pipeline *p, const char *key, double value);

/* Sets a pipeline option as in the file's "options" (backend auto|cpu|cuda, fusion
   true|false, graph true|false, streams, threads, max_launch_ms), value as text, and
   the API-only ones: slots (CUDA frames in flight, 1-8; 0: the default, 3), profile (true: time every
   launch with CUDA events; read them with pf_pipeline_unit), dump_kernels (a
   directory where the sources of fused kernels are written as they are generated; ""
   for none) and max_memory (bytes of buffers a plan may take, checked before any is
   allocated; 0, the default: no limit; see pf_pipeline_memory). backend, fusion,
   streams, slots, max_launch_ms and max_memory make the next frame plan again (the
   plan is dropped at once, as for a parameter that plans again); graph, threads,
   profile and dump_kernels do not. */
int pf_pipeline_set_option(pf_pipeline *p, const char *name, const char *value);

typedef enum pf_output_kind { PF_OUTPUT_IMAGE = 0, PF_OUTPUT_TABLE = 1 } pf_output_kind;

typedef enum pf_table_format {
    PF_TABLE_ANY = 0, /* the caller's choice */
    PF_TABLE_CSV = 1,
    PF_TABLE_JSON = 2
} pf_table_format;

typedef struct pf_output_info {
    const char *name;
    const char *stage; /* the stage id (or input name) it comes from */
    pf_output_kind kind;
    int channels;                 /* requested channels for images, 0 = like the input */
    int bits;                     /* requested bits (8, 16, 32 = float), 0 = like the input */
    pf_table_format table_format; /* tables: as the pipeline file asks */
    pf_shape shape;               /* after pf_pipeline_plan: image size or table columns x rows */
} pf_output_info;

int pf_pipeline_input_count(const pf_pipeline *p);
const char *pf_pipeline_input_name(const pf_pipeline *p, int i);
int pf_pipeline_output_count(const pf_pipeline *p);
int pf_pipeline_output_info(const pf_pipeline *p, int i, pf_output_info *info);
/* The channels image output i is written with for a primary input of in_channels: its
   declared format's (info.channels), or for "auto" the input's, widened when a stage on
   the way declares that its output needs more (pf_stage_desc.out_channels): colour
   makes gray 1 -> 3 and gray+alpha 2 -> 4, alpha makes 1 -> 2 and 3 -> 4. A sepia stage
   on a gray photo is so written as RGB. 0 for a bad index or a table output. */
int pf_pipeline_output_channels(const pf_pipeline *p, int i, int in_channels);

/* Whether input i reaches an output: 1, or 0 for an input no output needs (its frame is
   never read: pass any valid frame, such as 1x1) or a bad index. */
int pf_pipeline_input_used(const pf_pipeline *p, int i);

/* Plans the pipeline for input shapes (one per input, in order): shape inference,
   fusion groups, launch units and buffers. Done once per shape; run() plans again
   by itself when the input shapes change. */
int pf_pipeline_plan(pf_pipeline *p, const pf_shape *inputs, int n_inputs);

/* Runs one frame synchronously on host frames. inputs in input order; outputs in
   output order, entries with NULL data (or n_out, 0 or more, smaller than the count)
   skip an output, entries past the count are not read (outputs NULL reads none); table outputs are read with pf_pipeline_table. Image outputs must
   have the planned size. A bad frame is PF_INVALID_ARGUMENT naming the frame and the
   field at fault.
   Memory shared between frames: a host output may overlap an input, or be the input
   itself (in place, in any format): it is written after the frame has read its
   inputs, so the result is the same as with separate buffers. Two image outputs that
   overlap are PF_INVALID_ARGUMENT. */
int pf_pipeline_run(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs, int n_out);

/* A table output of the last completed frame (run, or submit then wait or poll): rows x
   cols doubles, row-major, owned by p, with the stage's params that frame ran with (for
   row_name; later changes do not touch them). It stays the last completed frame's until
   another frame completes: a change that plans again (a parameter, an option, a new
   shape) or a frame that fails keeps it. Its pointers stay valid and its data unchanged
   until the next frame completes or p is destroyed. Before any frame has completed (a
   plan alone makes no table): PF_INVALID_ARGUMENT. */
typedef struct pf_table {
    const double *data;
    int rows, cols;
    const char *const *columns;
    const char *(*row_name)(const void *params, int row);
    const void *params;
} pf_table;
int pf_pipeline_table(const pf_pipeline *p, int output, pf_table *t);

/* Buffer memory for input shapes (one per input, in order), computed from the shapes
   and launch units alone: nothing is allocated and the current plan stays. host_bytes:
   what pf_pipeline_plan allocates for the CPU executor (images kept between units,
   per-thread scratch, tables, reduce partials). device_bytes: the CUDA executor's
   device memory, counted without the reuse of buffers it does (so at most this when
   point stages fuse): float RGBA images of inputs and of results read across units,
   stage scratch, tables and partials. pinned_bytes: a bound of its pinned host staging
   (every input and output as float RGBA, per frame slot) and tables. largest_stage
   (owned by p) is the stage or input whose image is largest, largest_bytes its size.
   Fails as pf_pipeline_plan does (PF_SHAPE naming the stage, ...). The option
   max_memory (pf_pipeline_set_option, bytes, 0: none) makes planning fail with
   PF_NO_MEMORY, naming the largest stage and the sizes, before allocating anything when
   a plan needs more: host_bytes on the CPU, device_bytes or pinned_bytes with CUDA. */
typedef struct pf_memory {
    uint32_t size; /* set to sizeof(pf_memory) before the call */
    unsigned long long host_bytes, device_bytes, pinned_bytes;
    const char *largest_stage;
    unsigned long long largest_bytes;
} pf_memory;
int pf_pipeline_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, pf_memory *m);

/* ---- Frames in flight (real-time loops) -------------------------------------------------

   With the CUDA backend a frame is submitted and waited for separately, so that up to
   pf_pipeline_slots() frames are in flight: the upload, compute and download of
   consecutive frames overlap. Nothing is allocated and nothing synchronises the whole
   device after the first frame of a size. With the CPU backend, submit runs the frame
   at once and wait returns at once; pf_pipeline_submit_async queues it instead. */

/* Host frames. Two kinds (docs/realtime.md):
   - pinned: frames from pf_frame_alloc_host, or inside memory registered with
     pf_engine_register_host. The GPU reads inputs and writes outputs there by DMA as
     the frame runs: leave inputs unchanged and do not read outputs until the frame
     completes (pf_pipeline_wait, or pf_pipeline_poll returning PF_OK).
   - pageable: any other memory. Inputs are copied into the engine's pinned staging
     before submit returns (the caller may reuse them at once); outputs are copied out
     by the wait (or the poll) that sees the frame complete.
   Either way outputs must stay valid until then. Every submit hands out a new ticket
   (on the CPU backend too, where the frame has run when submit returns). Fails with
   PF_UNSUPPORTED when every slot holds a frame not yet waited for. */
int pf_pipeline_submit(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                       int n_out, int *ticket);

/* pf_pipeline_submit, except that on the CPU backend the frame is queued and submit
   returns at once: a thread of the pipeline's own drives the engine's worker threads
   through it, as pf_pipeline_run would, while the caller goes on. Inputs are read and
   outputs written while the frame runs, so leave the inputs unchanged and the outputs
   unread until it completes (pf_pipeline_wait, or pf_pipeline_poll returning PF_OK),
   as for pinned frames; its errors (a stage failed, PF_CANCELLED) come from that wait.
   One CPU frame is in flight at a time: a second submit first completes the one before
   (its wait then returns its status at once). A call that changes or reads the plan
   (set_param, set_float, set_option, plan, memory, unit, the prints, build_kernels)
   first lets the frame in flight complete, since it reads the parameters and the plan
   as it runs. With the CUDA backend, the same as pf_pipeline_submit. */
int pf_pipeline_submit_async(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                             int n_out, int *ticket);

/* Device frames (data are device pointers) on the application's CUDA stream (a
   cudaStream_t; NULL: the legacy default stream). The frame's work is ordered on that
   stream and nothing is copied: the first kernel reads the inputs where they are and
   the last ones write the outputs in place. Synchronise the stream, or call
   pf_pipeline_wait(ticket), before reading outputs; call wait before reading tables.
   An output may overlap an input, or be it (in place): the kernels write it to the
   engine's device memory and it is copied over after the last of them, one
   device-to-device copy a frame. Outputs must not overlap each other
   (PF_INVALID_ARGUMENT). PF_UNSUPPORTED on the CPU backend. */
int pf_pipeline_submit_device(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                              int n_out, void *stream, int *ticket);

/* Waits for a submitted frame; its outputs and tables are then ready. A frame already
   waited for (or retired when a later device submit needed its slot) returns PF_OK at
   once; a ticket never issued is PF_INVALID_ARGUMENT. */
int pf_pipeline_wait(pf_pipeline *p, int ticket);

/* Whether a submitted frame has completed, without blocking: PF_OK (it has, and its
   outputs and tables are ready, exactly as after pf_pipeline_wait), PF_NOT_READY (still
   in flight; errmsg untouched), or an error as pf_pipeline_wait would return it. */
int pf_pipeline_poll(pf_pipeline *p, int ticket);

/* pf_pipeline_wait for at most timeout_ms milliseconds: PF_NOT_READY when the frame is
   still in flight then. 0 polls; a negative timeout waits as long as it takes. */
int pf_pipeline_wait_timeout(pf_pipeline *p, int ticket, int timeout_ms);

/* Asks every frame submitted to p before this call, and not yet complete, to stop: a CPU
   frame stops at its next cancel point (between row bands and between launch units), and
   its wait (or pf_pipeline_run, on the thread running it) returns PF_CANCELLED; its image
   outputs are then partly written, its tables are not made (pf_pipeline_table keeps the
   last completed frame's), and the pipeline takes the next frame as usual. A frame that
   completes before its next cancel point completes as usual, and frames submitted after
   the call are not touched. With the CUDA backend, work already on the device runs to its
   end (launches stay within the watchdog budget) and completes as usual.
   Unlike every other call on a pipeline it may be made at any time, from any thread, while
   another thread is inside a call on p (a wait, a run), and from a signal handler: it
   only increments an atomic counter. PF_OK, or PF_INVALID_ARGUMENT for a NULL p. */
int pf_pipeline_cancel(pf_pipeline *p);

/* Frames that can be in flight at once (CUDA: the "slots" option, default 3). Like
   pf_pipeline_unit_count, a count any thread may read at any time, never PF_BUSY. */
int pf_pipeline_slots(const pf_pipeline *p);

/* ---- Pinned host memory -------------------------------------------------------------------

   Host frames the GPU reaches by DMA, so that submit and wait copy nothing on the
   calling thread (docs/realtime.md). Page-locked memory is a scarce system resource:
   allocate or register it once, outside the frame loop. Thread-safe.
   Each engine owns what it allocates and registers: only it frees or unregisters that
   memory (another engine's call is PF_INVALID_ARGUMENT naming the range), and only its
   own pipelines move frames there by DMA; a pipeline of another engine takes them as
   pageable frames, so that the owner freeing or unregistering them cannot pull memory
   from under its frames in flight. */

/* Allocates a page-locked frame of this format, rows packed (pitch = width * bytes per
   pixel), uninitialised. Without a usable CUDA device the memory is ordinary (the CPU
   backend needs no pinning) and the call still succeeds. Errors in pf_engine_errmsg. */
int pf_frame_alloc_host(pf_engine *e, int width, int height, pf_sample sample, int channels,
                        pf_frame *out);
/* Frees a frame from pf_frame_alloc_host(e, ...) and zeroes *f; e or f NULL, or an empty
   frame: nothing. No frame in flight may use it. A frame that is not one e allocated
   (another engine's, registered memory, a frame moved from its start) is neither freed
   nor zeroed; the reason, naming the range, is in pf_engine_errmsg(e). */
void pf_frame_free_host(pf_engine *e, pf_frame *f);

/* Page-locks the application's own memory [ptr, ptr + bytes) (cudaHostRegister), so
   that host frames inside it are moved by DMA; memory the application allocated with
   cudaHostAlloc is recorded as it is. Without a usable device the range is recorded
   and nothing else happens. Page-locking is the process's, and CUDA takes a range
   once: several engines may register exactly the same range, sharing one page-locking
   that the last of them to unregister it (or be destroyed) undoes. A range overlapping
   one that e already allocated or registered, or another engine's otherwise than
   exactly, is PF_INVALID_ARGUMENT naming both ranges. */
int pf_engine_register_host(pf_engine *e, void *ptr, size_t bytes);
/* Undoes pf_engine_register_host(e, ptr, ...) for e alone (another engine's registration
   of the same range stays, page-locked). No frame of e in flight may use the range. A
   ptr that e did not register (another engine's, a frame from pf_frame_alloc_host) is
   PF_INVALID_ARGUMENT naming the range. The engine's destruction unregisters and frees
   what is left of its own. */
int pf_engine_unregister_host(pf_engine *e, void *ptr);
/* The free and total memory of e's CUDA device now (cudaMemGetInfo), for a caller
   budgeting frames in flight on it; PF_NO_DEVICE (both 0) without a usable device. */
int pf_engine_device_memory(pf_engine *e, unsigned long long *free_bytes,
                            unsigned long long *total_bytes);

/* ---- Statistics -------------------------------------------------------------------------- */

typedef struct pf_stats {
    uint32_t size;             /* set to sizeof(pf_stats) before the call */
    const char *backend;       /* "cpu", "cuda-graph" or "cuda-eager" */
    unsigned long long frames; /* frames submitted (a refused submit is none) */
    int launches_per_frame;    /* kernel launches (CUDA) or launch units (CPU) */
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
    /* CUDA: copies of the parameter block and frame descriptors to the device. A frame
       copies them only when a parameter changed since its frame slot's last frame, or a
       frame's address or format did and a kernel reads descriptors from device memory
       (fused kernels take theirs as arguments: graph_node_updates); a loop over the same
       buffers copies nothing. */
    unsigned long long param_uploads;
    /* Fused kernels built since load: compiled by NVRTC, or found in the kernel cache
       (pf_pipeline_build_kernels and `pipefuse check --build` fill it ahead of a run). */
    unsigned long long kernel_compiles, kernel_cache_hits;
    /* CUDA graphs: fused kernel nodes given new arguments in place (their parameters or
       frame descriptors, passed by value) after a parameter change or a frame whose
       buffers changed: no capture, no instantiation, no copy to the device. */
    unsigned long long graph_node_updates;
    /* ---- 0.2: fields below are read only when size covers them ---- */
    /* The arithmetic of the GPU's generated kernels: "exact" (the CPU's values) or
       "fast" (the "precision" option). */
    const char *precision;
} pf_stats;

int pf_pipeline_stats(const pf_pipeline *p, pf_stats *s);

/* ---- The plan ---------------------------------------------------------------------- */

typedef enum pf_unit_kind {
    PF_UNIT_POINT = 0, /* a fusion group of one or more point stages */
    PF_UNIT_STENCIL = 1,
    PF_UNIT_RESAMPLE = 2,
    PF_UNIT_REDUCE = 3
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

/* Launch units per frame, after pf_pipeline_plan, in execution order (0 without a
   plan). The count may be read from any thread, even while another is inside a call on
   the pipeline (it is then the count at some moment of that call); pf_pipeline_unit
   follows the one-thread rule. */
int pf_pipeline_unit_count(const pf_pipeline *p);
int pf_pipeline_unit(const pf_pipeline *p, int i, pf_unit_info *info);

/* Generates and compiles with NVRTC (no GPU needed) the fused kernel of every point
   unit of the current plan that can fuse, for sm_<arch> (e.g. 90; 0: the device's, or
   90 without one), assuming 8-bit RGBA pipeline inputs and outputs; writes each source
   to dump_dir/<name>.cu when dump_dir is not NULL. The kernels go into the kernel cache
   (unless PIPEFUSE_CACHE_DIR is "off"), so that a run of the same plan on a device of
   that architecture compiles nothing. *n_kernels: the kernels built. PF_UNSUPPORTED
   without NVRTC; PF_STAGE with NVRTC's log on an error. */
int pf_pipeline_build_kernels(pf_pipeline *p, int arch, const char *dump_dir, int *n_kernels);
/* The same for n_formats frame formats (samples[i], channels[i]), each taken by every
   pipeline input and output: the formats a batch of files will bring. */
int pf_pipeline_build_kernels_for(pf_pipeline *p, int arch, const char *dump_dir,
                                  const pf_sample *samples, const int *channels, int n_formats,
                                  int *n_kernels);

/* Writes the plan as text (pipefuse check) or as a Graphviz digraph. */
int pf_pipeline_print_plan(const pf_pipeline *p, FILE *f);
int pf_pipeline_print_dot(const pf_pipeline *p, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_PIPEFUSE_H */
