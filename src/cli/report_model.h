/* report_model.h — `vramguard report`: snapshot files loaded, checked against the
 * documented format (docs/snapshot-format.md), and turned into what the outputs draw: a
 * memory timeline per device stacked by allocation site (or by size class when every
 * allocation comes from one site), the reserved-memory line, error markers and the
 * segment map; the process's pinned host memory as one more timeline, after its devices.
 * One rp_file per snapshot (a rank); the outputs put them side by side. */
#ifndef VG_CLI_REPORT_MODEL_H
#define VG_CLI_REPORT_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"

#define RP_MAX_SERIES 9 /* the 8 largest groups, then "everything else" */
#define RP_MAX_SAMPLES 1000
/* A timeline whose peak reserved memory is more than this many times its peak live
 * memory is drawn on live memory's scale, the reserved line marked as above it. */
#define RP_OFF_SCALE 8

typedef struct rp_series {
    char label[200];   /* "run_once (cmd_replay.c:70) < cmd_replay (...)", or a size class */
    uint64_t peak;     /* its largest live bytes */
} rp_series_t;

typedef struct rp_marker {
    int sample;        /* the timeline sample it falls on */
    const char *kind;  /* the report's JSON kind */
    const char *message;
    uint64_t at_event;
} rp_marker_t;

typedef struct rp_device {
    const json_t *j;
    int device;
    const char *name;  /* the device's name; for the heap of a context's managed memory
                          (guard mode) "NAME, managed memory", kept in name_buf */
    char name_buf[320];
    bool pinned;       /* the process's pinned host memory (device -1), not a device */
    uint64_t total;
    int64_t events_dropped;
    size_t nevents;
    bool by_size;      /* series are size classes (one allocation site only) */
    int nseries;
    rp_series_t series[RP_MAX_SERIES];
    int nsamples;
    uint64_t *sample_seq;   /* event sequence number of each sample */
    uint64_t *sample_t_ns;
    double *live;           /* [sample * RP_MAX_SERIES + series]: live bytes */
    double *reserved;       /* [sample] */
    double peak_live, peak_reserved;
    int nmarkers;
    rp_marker_t *markers;
} rp_device_t;

typedef struct rp_file {
    const char *path;
    json_doc_t *doc;
    const json_t *root;
    int rank, local_rank, pid;
    const char *host, *mode, *reason;
    int ndevices;
    rp_device_t *devices;
    const json_t *sites, *errors, *kernels;
} rp_file_t;

/* How the timeline groups live memory: by allocation site unless every allocation comes
 * from one site (auto), always by site, or always by size class. Set before rp_load. */
typedef enum { RP_GROUP_AUTO, RP_GROUP_SITE, RP_GROUP_SIZE } rp_group_t;
extern rp_group_t rp_group;

/* Load and check one snapshot; false with a message naming the file and the problem. */
bool rp_load(const char *path, rp_file_t *out, char *err, size_t errlen);
/* The same from text in memory (`path` names it in messages). */
bool rp_load_text(const char *path, const char *text, size_t len, rp_file_t *out, char *err,
                  size_t errlen);
void rp_free(rp_file_t *f);

/* The frames of allocation site `id` of f (a JSON array), or NULL. */
const json_t *rp_site_frames(const rp_file_t *f, int64_t id);
/* "run_once (cmd_replay.c:70)": a frame without the directory. */
void rp_frame_short(const char *frame, char *out, size_t n);
/* A timeline's title: "device 0: NAME", or "pinned host memory". */
void rp_device_label(const rp_device_t *d, char *out, size_t n);
/* The label of a rank: "rank 3", or "pid 1234" when the process had no rank. */
void rp_rank_label(const rp_file_t *f, char *out, size_t n);
/* Bytes as "1.50 GiB". */
const char *rp_bytes(char out[32], double bytes);

/* The outputs. Each returns 0, or 2 after printing why it could not write. */
int rp_write_text(FILE *out, rp_file_t *files, int n);
int rp_write_svg(const char *path, rp_file_t *files, int n);
int rp_write_html(const char *path, rp_file_t *files, int n);
int rp_write_chrome(const char *path, rp_file_t *files, int n);

#endif /* VG_CLI_REPORT_MODEL_H */
