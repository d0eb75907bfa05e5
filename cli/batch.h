/* cli/batch.h: what the files of `pipefuse run` share.
 *
 * batch/ holds the supervisor (batch/supervisor.h: the command line, the inputs, the
 * log) and the worker process (batch/worker.h: the engine, decode and encode threads);
 * batch/outfile.c (and pngout.c) writes an input's outputs safely and commits them together. The supervisor
 * forks the worker before it touches the engine or CUDA, and forks a fresh one whenever
 * a worker dies.
 */
#ifndef PF_CLI_BATCH_H
#define PF_CLI_BATCH_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli.h"
#include "pipefuse/jpeg.h"

#define RUN_MAX_IO 64 /* pipeline inputs and outputs */

typedef struct run_opts {
    const char *pipeline;
    const char *outdir;
    const char *backend;
    const char *precision; /* --precision, or NULL: the pipeline's */
    const char *dump_kernels;
    const char *max_launch_ms;
    const char *joblog;
    const char *retry_failed;
    int profile;
    int verbose; /* -v: the run's diagnostics after the summary (also with --profile) */
    int no_fuse;
    int quiet;
    int progress; /* -1 auto (a terminal), 0 off, 1 on */
    int json_tables;
    int zlib;
    int png_filter; /* libpng PNG_FILTER_* mask */
    int skip_existing;
    int strip;                    /* --strip: no colour, density or text chunks in PNG outputs */
    int shard_index, shard_count; /* count 0: no sharding */
    int lanes;                    /* files in the engine at once (0: automatic) */
    int band_rows; /* rows per band for large images: -1 automatic, 0 never (whole frames) */
    double file_timeout_s; /* 0: none */
    unsigned long long max_pixels;
    unsigned long long max_memory; /* bytes */
    /* the inputs' pixels, from their headers (1 MP for a header that cannot be read),
       for --backend auto's choice (batch/backend.c, auto_backend) */
    unsigned long long batch_pixels;
    const char **sets;
    int n_sets;
    const char **binds; /* NAME=FILE */
    int n_binds;
    char **inputs; /* files after expanding directories */
    int n_inputs;
    /* --retry-failed: the joblog's failed inputs (sorted) with their name keys ("" where
       the joblog has none), and the output names it says other inputs wrote */
    char **failed, **failed_key;
    int n_failed, n_failed_key;
    char **claimed, **claimed_by;
    int n_claimed, n_claimed_by;
    char **logged; /* every input the joblog names (sorted): the others never ran */
    int n_logged;
    /* inputs.c's stdin and stdout: the spooled file shown as "-", and the temporary
       folder shown as "stdout" (NULL: none) */
    const char *stdin_path, *stdout_dir;
    /* -o -: the real stdout, to which the supervisor copies the one image output as its
       input ends, so that a failed write fails that input in the log and the summary;
       closed by the supervisor (-1: none) */
    int stdout_fd;
    /* the pipeline came from a pipe and o->pipeline is its private copy: it has no time
       of its own for --skip-existing */
    int pipeline_piped;
    const cli_common *common;
} run_opts;

/* inputs.c, before cli_run (beside cli_run_stdio): the real stdout of -o - (-1: none;
   cli_run closes it) and whether the pipeline was copied from a pipe. */
void cli_run_streams(int stdout_fd, int pipeline_piped);
/* inputs.c, before cli_run: the identities of the plugins the pipeline's stages come from
   (for the fingerprint; copied). */
void cli_run_plugins(const char *ids);

/* ---- batch/outfile.c: an input's outputs, written safely and committed together ---------------- */

/* Temporary files are "<OUTDIR>/.pftmp-<host>-<pid>-<random>": created with
   O_CREAT|O_EXCL|O_NOFOLLOW (never through a link), synced, then renamed; the prefix
   is OUT_TMP_PREFIX (cli.h, where names.c refuses it in output names). */

typedef struct out_item {
    const char *final_name; /* a name inside OUTDIR (no '/') */
    int is_png;
    const pf_frame *frame; /* PNG */
    const pf_table *table; /* table */
    int json;
    /* The input's metadata chunks and header (PNG; meta NULL: none), written where they
       still describe the frame, by pf_png_write_meta's rules (pipefuse/png.h). */
    const pf_png_meta *meta;
    const pf_png_info *src;
    /* A JPEG input's ICC profile and EXIF (NULL: none), and the input's format: an image
       item is written as PNG or JPEG by cli_image_out_format (images.h). A PNG output
       takes the profile as iCCP and the EXIF as eXIf; a JPEG output the profile (a PNG
       input's iCCP too) while it is of the frame's colour kind, and the EXIF. */
    const pf_jpeg_meta *jmeta;
    cli_format src_fmt;
    /* PNG: the form written (pf_png_form: 0 the frame's own), and the input's density
       (pHYs): kept at the same size (OUT_PHYS_SIZE, 0), carried through geometry
       (OUT_PHYS_GEOMETRY: pf_png_meta_phys) or dropped (OUT_PHYS_DROP). */
    int png_form;
    int phys;
    pf_png_geometry geometry;
} out_item;

enum { OUT_PHYS_SIZE = 0, OUT_PHYS_GEOMETRY, OUT_PHYS_DROP };

typedef struct out_opts {
    int dirfd;
    int zlib;
    int png_filter;
    /* threads deflating one large PNG's image data in segments (engine/png_deflate.h;
       the bytes do not depend on it); 0 or 1: the writer's thread alone */
    int png_threads;
} out_opts;

/* Writes every item to its own temporary file, syncs them all, renames them in order
   (the last item is the commit point: it appears last) and syncs the directory. On
   failure no temporary remains and the first failure is in err; items already renamed
   are complete files. */
int out_write_set(const out_opts *o, const out_item *items, int n, char *err, size_t errn);

/* The same a row at a time, for images run in bands: out_stream_open creates every
   item's temporary and writes each PNG's header and metadata (frame gives the size and
   format; its data is not read) and each table whole (a PNG of form palette, which
   looks at every pixel first, is kept in memory as it comes and written at the commit;
   auto is written in the frame's form as it comes while its rows are surveyed, and read
   back and written again at the commit where its smallest form is another; the gray
   forms are packed a band at a time); out_stream_rows appends the next
   n rows of PNG item k from rows 0..n-1 of rows; out_stream_commit finishes, syncs and
   renames them as out_write_set does and frees s; out_stream_abort removes every
   temporary and frees s. On failure open, rows and commit have removed nothing yet
   (rows) or everything (open, commit); the message names the output. */
typedef struct out_stream out_stream;
int out_stream_open(const out_opts *o, const out_item *items, int n, out_stream **s, char *err,
                    size_t errn);
int out_stream_rows(out_stream *s, int k, const pf_frame *rows, int n, char *err, size_t errn);
int out_stream_commit(out_stream *s, char *err, size_t errn);
void out_stream_abort(out_stream *s);

/* Removes temporaries of earlier runs in dirfd: those of this host whose process is
   gone, and any older than an hour. Returns how many were removed. */
int out_remove_stale(int dirfd);
/* The same in folder (relative to dirfd; a link there is not followed): 0 where it
   is not there. */
int out_remove_stale_in(int dirfd, const char *folder);

/* The host part of temporary names (a hash of the host name, 8 hex digits). */
const char *out_host_id(void);

/* ---- freshness.c: what made each output (--skip-existing, names kept) ---------------------------- */

/* In OUTDIR: a line per input committed (docs/batch.md); no output may take this name. */
#define FRESH_FILE OUT_RECORDS

/* A path by where it is: its folder resolved (realpath: "./x.png", "tree/a/../a/x.png"
   and a symlinked folder name one place) and its own name as given, malloc'd; the path
   itself when its folder is gone; NULL without memory. A file's own name is kept: two
   names of one file are two inputs with two sets of outputs. */
char *cli_where(const char *path);

/* The fingerprint (32 hex digits) of everything besides the input that shapes the bytes
   of the outputs: the pipefuse version, the pipeline file's content, every --set, every
   --input's name and file content, the table format, zlib level, PNG filters, --strip,
   and plugins (the identities of the plugins the pipeline's stages come from). 0, or -1
   with why (a file that cannot be read) in err. */
int fresh_fingerprint(const run_opts *o, const char *plugins, char fp[33], char *err, size_t errn);

typedef struct fresh_db fresh_db;
/* The records of OUTDIR (dirfd); *db is empty without a manifest. -1 when it cannot be
   read (*db may still be non-NULL: close it). */
int fresh_open(int dirfd, fresh_db **db);
void fresh_close(fresh_db *db); /* NULL: nothing */
enum { FRESH_YES, FRESH_NO_RECORD, FRESH_OTHER, FRESH_CHANGED };
/* Whether outputs names[0..n) (inside dirfd, all existing) are what fp makes of the input
   at where (cli_where), which is now as in: FRESH_YES; FRESH_OTHER: made with another
   fingerprint; FRESH_NO_RECORD: no record of this input writing them; FRESH_CHANGED: the
   input or an output changed since. */
int fresh_judge(const fresh_db *db, int dirfd, const char *where, const struct stat *in,
                const char *fp, char *const *names, int n);
/* The folder and stem (cli_output_key) the outputs of the input at where were named from
   by its latest record, while those outputs are still its own; NULL: none. */
const char *fresh_key_of(const fresh_db *db, const char *where);
/* fn for each input the records hold (its where and the key its outputs were named from,
   while they are still its), until fn returns non-zero, which is returned. */
int fresh_each_key(const fresh_db *db, int (*fn)(void *ctx, const char *where, const char *key),
                   void *ctx);
/* Appends the record of an input just committed (as in, named from key, made with fp):
   one line, one write. 0, or -1 with errno (the caller says it once). */
int fresh_record(fresh_db *db, int dirfd, const char *where, const char *key, const char *fp,
                 const struct stat *in, char *const *names, int n);
/* Rewrites the manifest with only its latest records when most of its lines are
   superseded (each run appends a line per input), holding it locked so that no line of
   a run appending meanwhile is lost. 1 rewritten, 0 not needed (or no locks here), -1
   failed (the manifest stays as it was). */
int fresh_compact(int dirfd);

/* ---- batch/ (the worker process) ------------------------------------------------------------ */

/* Runs the worker process: reads "J <index>\t<path>\n" jobs from job_fd, writes
   reports to rep_fd (see batch/worker.h for the protocol). Never returns. */
void worker_main(const run_opts *o, int job_fd, int rep_fd, int dirfd);

/* Writes the options a worker needs to fd, for a worker started by exec. */
int run_config_write(int fd, const run_opts *o);

/* Joblog and job-line escaping: tab, newline, carriage return and backslash as \t \n
   \r \\ (batch/joblog.c); cli_unescape takes any other escaped byte as itself (the joblog's
   outputs column escapes commas as \,). */
void cli_escape(FILE *f, const char *s);
void cli_unescape(char *s);

/* Bytes a file's frames need, from its PNG header, for the memory budget; 0 when the
   header cannot be read (the decoder then reports why). */
unsigned long long worker_estimate_bytes(const char *path, int n_image_outputs,
                                         unsigned long long *pixels);

#endif
