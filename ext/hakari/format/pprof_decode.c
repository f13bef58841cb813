/* pprof_decode.c — reads profile.proto into the profile model.
 *
 * Fields of the top-level Profile may come in any order (our encoder writes
 * samples before the locations they name), so the message is walked once per
 * dependency level instead of being buffered: strings and scalars, then
 * functions, then locations, then sample types and comments, then samples.
 * The first walk meets every top-level byte, so framing errors surface there.
 * File ids become model ids through u64 maps (file id -> model id) and file
 * string indexes through `strmap`. Byte offsets in messages count from the
 * start of the (inflated) protobuf. Field numbers: pprof_fields.h.
 */
#include "pprof_decode.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof_fields.h"
#include "protobuf.h"
#include "u64_map.h"


/* one field as read: a varint value or a length-delimited payload */
typedef struct field {
    uint32_t num;
    int wire;
    uint64_t v;       /* wire type 0 */
    hk_pb_reader sub; /* wire type 2 */
    size_t off;       /* byte offset of the field's key */
} field;

/* location ids below this are also kept in an array (4 MB at most) */
#define DENSE_IDS ((uint64_t)1 << 20)

typedef struct dec {
    const uint8_t *base;
    char *err;
    size_t errlen;
    hk_profile *p;
    uint32_t *strmap; /* file string index -> model string index */
    size_t nstrings, strmap_cap;
    hk_u64_map funcs, locs; /* file id -> model id */
    uint32_t *loc_dense;    /* the same for location ids under DENSE_IDS, which most files use (0: none) */
    size_t loc_dense_cap;
    size_t nsamples;        /* the samples counted before they are read, for the room they take */
    size_t nsample;         /* index of the sample being read, for messages */
    /* one sample at a time, reused */
    uint32_t *loc_ids; size_t nloc, loc_cap;
    int64_t *vals; size_t nval, val_cap;
    hk_label *labels; size_t nlabel, label_cap;
} dec;

typedef int (*visit_fn)(dec *d, const field *f);

__attribute__((format(printf, 2, 3)))
static int fail(dec *d, const char *fmt, ...)
{
    if (d->err && d->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, d->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static size_t at(const dec *d, const uint8_t *p) { return (size_t)(p - d->base); }

/* grows *arr to hold need elements of elem bytes */
static inline int grow(dec *d, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0; /* every frame of every sample comes here: most often, room */
    return hk_array_grow(arr, cap, need, elem) == 0 ? 0 : fail(d, "out of memory");
}

static int varint(dec *d, hk_pb_reader *r, uint64_t *v)
{
    const uint8_t *start = r->p;
    if (hk_pb_read_varint(r, v) == 0) return 0;
    /* the reader stops at the end, or on an 11th byte / overflowing 10th */
    int truncated = r->p >= r->end && (r->p == start || (r->end[-1] & 0x80));
    return fail(d, "%s varint at byte %zu", truncated ? "truncated" : "malformed", at(d, start));
}

/* reads the next field of r: 1 = got one, 0 = end of message, -1 = error.
 * Fixed-width values (wire types 1 and 5) are skipped: pprof has none. */
static int next_field(dec *d, hk_pb_reader *r, field *f)
{
    uint64_t key;
    if (r->p >= r->end) return 0;
    f->off = at(d, r->p);
    if (varint(d, r, &key) < 0) return -1;
    if ((key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return fail(d, "invalid field number %llu at byte %zu", (unsigned long long)(key >> 3), f->off);
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    const uint8_t *val = r->p;
    switch (f->wire) {
    case HK_PB_VARINT: return varint(d, r, &f->v) < 0 ? -1 : 1;
    case HK_PB_LEN:
        if (varint(d, r, &f->v) < 0) return -1;
        if (f->v > (uint64_t)(r->end - r->p))
            return fail(d, "field %u at byte %zu is %llu bytes long, but only %zu remain", f->num,
                        f->off, (unsigned long long)f->v, (size_t)(r->end - r->p));
        f->sub.p = r->p;
        f->sub.end = r->p + f->v;
        r->p = f->sub.end;
        return 1;
    case HK_PB_I64:
    case HK_PB_I32:
        if (hk_pb_skip(r, f->wire) < 0) return fail(d, "truncated fixed-width value at byte %zu", at(d, val));
        return 1;
    default: return fail(d, "unsupported wire type %d at byte %zu", f->wire, f->off);
    }
}

static int want(dec *d, const field *f, int wire, const char *what)
{
    if (f->wire == wire) return 0;
    return fail(d, "%s at byte %zu has wire type %d, expected %d", what, f->off, f->wire, wire);
}

/* file string index -> model index; the message names "<owner> <id>: <name>",
 * or just <name> when owner is NULL */
static int str_ref(dec *d, uint64_t i, uint32_t *out, const char *owner, uint64_t id, const char *name)
{
    if (i < d->nstrings) {
        *out = d->strmap[i];
        return 0;
    }
    if (owner)
        return fail(d, "%s %llu: %s refers to string %llu, but the string table has %zu entries", owner,
                    (unsigned long long)id, name, (unsigned long long)i, d->nstrings);
    return fail(d, "%s refers to string %llu, but the string table has %zu entries", name,
                (unsigned long long)i, d->nstrings);
}

/* calls one(d, v) for each value of a repeated varint field, packed or not */
static int each_varint(dec *d, const field *f, const char *what, int (*one)(dec *, uint64_t))
{
    if (f->wire == HK_PB_VARINT) return one(d, f->v);
    if (want(d, f, HK_PB_LEN, what) < 0) return -1;
    hk_pb_reader r = f->sub;
    uint64_t v;
    while (r.p < r.end)
        if (varint(d, &r, &v) < 0 || one(d, v) < 0) return -1;
    return 0;
}

static int walk(dec *d, hk_pb_reader r, visit_fn visit)
{
    field f;
    int rc;
    while ((rc = next_field(d, &r, &f)) > 0)
        if (visit(d, &f) < 0) return -1;
    return rc;
}

/* ---- walk 1: strings and scalars ---- */

static int visit_strings(dec *d, const field *f)
{
    switch (f->num) {
    case PROFILE_STRING_TABLE: {
        if (want(d, f, HK_PB_LEN, "string_table entry") < 0) return -1;
        size_t len = (size_t)(f->sub.end - f->sub.p);
        if (d->nstrings == 0 && len != 0) return fail(d, "string_table[0] must be \"\", but is %zu bytes long", len);
        if (grow(d, (void **)&d->strmap, &d->strmap_cap, d->nstrings + 1, sizeof(*d->strmap)) < 0) return -1;
        int64_t i = hk_strtab_intern(&d->p->strings, (const char *)f->sub.p, len);
        if (i < 0) return fail(d, "out of memory (string %zu, %zu bytes)", d->nstrings, len);
        d->strmap[d->nstrings++] = (uint32_t)i;
        return 0;
    }
    case PROFILE_TIME_NANOS:
        if (want(d, f, HK_PB_VARINT, "time_nanos") < 0) return -1;
        d->p->time_nanos = (int64_t)f->v;
        return 0;
    case PROFILE_DURATION_NANOS:
        if (want(d, f, HK_PB_VARINT, "duration_nanos") < 0) return -1;
        d->p->duration_nanos = (int64_t)f->v;
        return 0;
    case PROFILE_PERIOD:
        if (want(d, f, HK_PB_VARINT, "period") < 0) return -1;
        d->p->period = (int64_t)f->v;
        return 0;
    default: return 0;
    }
}

/* ---- walk 2: functions ---- */

static int visit_function(dec *d, const field *f)
{
    if (f->num != PROFILE_FUNCTION) return 0;
    if (want(d, f, HK_PB_LEN, "function") < 0) return -1;
    uint64_t id = 0, name = 0, sys = 0, file = 0, start = 0;
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        uint64_t *dst = g.num == FUNCTION_ID ? &id : g.num == FUNCTION_NAME ? &name
                      : g.num == FUNCTION_SYSTEM_NAME ? &sys : g.num == FUNCTION_FILENAME ? &file
                      : g.num == FUNCTION_START_LINE ? &start : NULL;
        if (!dst) continue;
        if (want(d, &g, HK_PB_VARINT, "function field") < 0) return -1;
        *dst = g.v;
    }
    if (rc < 0) return -1;
    if (id == 0) return fail(d, "function at byte %zu has id 0 (ids start at 1)", f->off);
    uint32_t model;
    if (hk_u64_map_get(&d->funcs, id, &model)) return fail(d, "function id %llu appears twice", (unsigned long long)id);
    uint32_t sname = 0, ssys = 0, sfile = 0;
    if (str_ref(d, name, &sname, "function", id, "name") < 0 ||
        str_ref(d, sys, &ssys, "function", id, "system_name") < 0 ||
        str_ref(d, file, &sfile, "function", id, "filename") < 0)
        return -1;
    model = hk_profile_function(d->p, sname, ssys, sfile, (int64_t)start);
    if (model == 0 || hk_u64_map_put(&d->funcs, id, model) < 0) return fail(d, "out of memory");
    return 0;
}

/* ---- walk 3: locations ---- */

/* one Line message of a location: its function id and line */
static int read_line(dec *d, const field *f, uint64_t *fn, int64_t *line)
{
    if (want(d, f, HK_PB_LEN, "location line") < 0) return -1;
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        if (g.num != LINE_FUNCTION_ID && g.num != LINE_LINE) continue;
        if (want(d, &g, HK_PB_VARINT, "line field") < 0) return -1;
        if (g.num == LINE_FUNCTION_ID) *fn = g.v;
        else *line = (int64_t)g.v;
    }
    return rc;
}

/* a function standing for a location nobody symbolised: its address is all we know */
static uint32_t address_function(dec *d, uint64_t address)
{
    char name[24];
    snprintf(name, sizeof(name), "0x%llx", (unsigned long long)address);
    return hk_profile_function(d->p, hk_profile_string(d->p, name), 0, 0, 0);
}

static int visit_location(dec *d, const field *f)
{
    if (f->num != PROFILE_LOCATION) return 0;
    if (want(d, f, HK_PB_LEN, "location") < 0) return -1;
    uint64_t id = 0, address = 0, fn = 0;
    int64_t line = 0;
    int nlines = 0;
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        if (g.num == LOCATION_LINE) {
            /* later lines are the frames this one was inlined into: read, not kept */
            uint64_t fn2 = 0;
            int64_t line2 = 0;
            if (read_line(d, &g, &fn2, &line2) < 0) return -1;
            if (nlines++ == 0) { fn = fn2; line = line2; }
        } else if (g.num == LOCATION_ID || g.num == LOCATION_ADDRESS) {
            if (want(d, &g, HK_PB_VARINT, "location field") < 0) return -1;
            *(g.num == LOCATION_ID ? &id : &address) = g.v;
        }
    }
    if (rc < 0) return -1;
    if (id == 0) return fail(d, "location at byte %zu has id 0 (ids start at 1)", f->off);
    uint32_t model;
    if (hk_u64_map_get(&d->locs, id, &model)) return fail(d, "location id %llu appears twice", (unsigned long long)id);
    uint32_t func = 0;
    if (fn == 0) {
        func = address_function(d, address);
    } else if (!hk_u64_map_get(&d->funcs, fn, &func)) {
        return fail(d, "location %llu refers to function %llu, which does not exist", (unsigned long long)id,
                    (unsigned long long)fn);
    }
    model = func ? hk_profile_location(d->p, func, line) : 0;
    if (model == 0 || hk_u64_map_put(&d->locs, id, model) < 0) return fail(d, "out of memory");
    /* a sample's every frame is looked up: by index for the small ids most files have */
    if (id < DENSE_IDS) {
        size_t cap = d->loc_dense_cap;
        if (id >= cap) {
            if (hk_array_grow((void **)&d->loc_dense, &d->loc_dense_cap, id + 1, sizeof(*d->loc_dense)) < 0)
                return fail(d, "out of memory");
            memset(d->loc_dense + cap, 0, (d->loc_dense_cap - cap) * sizeof(*d->loc_dense));
        }
        d->loc_dense[id] = model;
    }
    return 0;
}

/* ---- walk 4: sample types, period type, comments, default sample type ---- */

/* a ValueType; owner/id/names say which one in messages (see str_ref) */
static int value_type(dec *d, const field *f, const char *owner, uint64_t id, const char *const names[2],
                      hk_value_type *vt)
{
    if (want(d, f, HK_PB_LEN, owner ? owner : "period_type") < 0) return -1;
    uint64_t type = 0, unit = 0;
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        if (g.num != VALUE_TYPE_TYPE && g.num != VALUE_TYPE_UNIT) continue;
        if (want(d, &g, HK_PB_VARINT, "value type field") < 0) return -1;
        *(g.num == VALUE_TYPE_TYPE ? &type : &unit) = g.v;
    }
    if (rc < 0) return -1;
    if (str_ref(d, type, &vt->type, owner, id, names[0]) < 0 || str_ref(d, unit, &vt->unit, owner, id, names[1]) < 0)
        return -1;
    return 0;
}

static int one_comment(dec *d, uint64_t v)
{
    hk_profile *p = d->p;
    uint32_t s = 0;
    if (str_ref(d, v, &s, "comment", p->ncomments, "text") < 0) return -1;
    if (grow(d, (void **)&p->comments, &p->comments_cap, p->ncomments + 1, sizeof(*p->comments)) < 0) return -1;
    p->comments[p->ncomments++] = s;
    return 0;
}

/* one of a trace's fold edges (hakari's own field, pprof_fields.h), its ids the model's */
static int fold_edge(dec *d, const field *f)
{
    if (want(d, f, HK_PB_LEN, "fold edge") < 0) return -1;
    uint64_t v[FOLD_EDGE_OUTER_WAIT_TOTAL + 1] = {0};
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        if (g.num < FOLD_EDGE_CALLER || g.num > FOLD_EDGE_OUTER_WAIT_TOTAL) continue;
        if (want(d, &g, HK_PB_VARINT, "fold edge field") < 0) return -1;
        v[g.num] = g.v;
    }
    if (rc < 0) return -1;
    uint32_t ids[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        uint64_t id = v[FOLD_EDGE_CALLER + k];
        if (id == 0 && k == 0) continue; /* a caller of 0 is a thread's root */
        if (id == 0) return fail(d, "fold edge at byte %zu has no callee location", f->off);
        if (!hk_u64_map_get(&d->locs, id, &ids[k]))
            return fail(d, "fold edge at byte %zu names location %llu, which does not exist", f->off,
                        (unsigned long long)id);
    }
    hk_fold_edge e = {ids[0], ids[1], (int64_t)v[FOLD_EDGE_CALLS], (int64_t)v[FOLD_EDGE_SELF],
                      (int64_t)v[FOLD_EDGE_WAIT], (int64_t)v[FOLD_EDGE_OUTER_CALLS], (int64_t)v[FOLD_EDGE_TOTAL],
                      (int64_t)v[FOLD_EDGE_OUTER_SELF], (int64_t)v[FOLD_EDGE_OUTER_WAIT],
                      (int64_t)v[FOLD_EDGE_OUTER_WAIT_TOTAL]};
    return hk_profile_add_fold_edge(d->p, &e) < 0 ? fail(d, "out of memory") : 0;
}

static int visit_types(dec *d, const field *f)
{
    static const char *const sample_names[2] = {"type", "unit"};
    static const char *const period_names[2] = {"period_type.type", "period_type.unit"};
    hk_profile *p = d->p;
    switch (f->num) {
    case PROFILE_SAMPLE_TYPE:
        if (p->nvalues == HK_MAX_SAMPLE_TYPES)
            return fail(d, "more than %d sample types (hakari reads at most %d)", HK_MAX_SAMPLE_TYPES,
                        HK_MAX_SAMPLE_TYPES);
        if (value_type(d, f, "sample type", p->nvalues, sample_names, &p->sample_types[p->nvalues]) < 0)
            return -1;
        p->nvalues++;
        return 0;
    case PROFILE_PERIOD_TYPE: return value_type(d, f, NULL, 0, period_names, &p->period_type);
    case PROFILE_COMMENT: return each_varint(d, f, "comment", one_comment);
    case PROFILE_HAKARI_FOLD_EDGE: return fold_edge(d, f);
    case PROFILE_DEFAULT_SAMPLE_TYPE:
        if (want(d, f, HK_PB_VARINT, "default_sample_type") < 0) return -1;
        return str_ref(d, f->v, &p->default_sample_type, NULL, 0, "default_sample_type");
    default: return 0;
    }
}

/* ---- walk 5: samples ---- */

static int one_location(dec *d, uint64_t id)
{
    uint32_t model = id < d->loc_dense_cap ? d->loc_dense[id] : 0;
    if (!model && (id == 0 || !hk_u64_map_get(&d->locs, id, &model)))
        return fail(d, "sample %zu refers to location %llu, which does not exist", d->nsample,
                    (unsigned long long)id);
    if (grow(d, (void **)&d->loc_ids, &d->loc_cap, d->nloc + 1, sizeof(*d->loc_ids)) < 0) return -1;
    d->loc_ids[d->nloc++] = model;
    return 0;
}

static int one_value(dec *d, uint64_t v)
{
    if (grow(d, (void **)&d->vals, &d->val_cap, d->nval + 1, sizeof(*d->vals)) < 0) return -1;
    d->vals[d->nval++] = (int64_t)v;
    return 0;
}

static int label(dec *d, const field *f)
{
    if (want(d, f, HK_PB_LEN, "label") < 0) return -1;
    uint64_t raw[5] = {0}; /* indexed by Label field number */
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        if (g.num < LABEL_KEY || g.num > LABEL_NUM_UNIT) continue;
        if (want(d, &g, HK_PB_VARINT, "label field") < 0) return -1;
        raw[g.num] = g.v;
    }
    if (rc < 0) return -1;
    hk_label l = {0, 0, 0, 0};
    if (str_ref(d, raw[LABEL_KEY], &l.key, "sample", d->nsample, "label key") < 0 ||
        str_ref(d, raw[LABEL_STR], &l.str, "sample", d->nsample, "label str") < 0 ||
        str_ref(d, raw[LABEL_NUM_UNIT], &l.num_unit, "sample", d->nsample, "label num_unit") < 0)
        return -1;
    if (l.str == 0) l.num = (int64_t)raw[LABEL_NUM];
    else l.num_unit = 0; /* the model's label is a string or a number, not both */
    if (grow(d, (void **)&d->labels, &d->label_cap, d->nlabel + 1, sizeof(*d->labels)) < 0) return -1;
    d->labels[d->nlabel++] = l;
    return 0;
}

/* the samples' number, so that the model takes its room for them at once: grown by doubling,
 * a million samples' arrays would take up to twice their size while they grow */
static int count_samples(dec *d, const field *f)
{
    d->nsamples += f->num == PROFILE_SAMPLE;
    return 0;
}

static int visit_sample(dec *d, const field *f)
{
    if (d->nsample == 0 && hk_profile_reserve(d->p, d->nsamples) < 0) return fail(d, "out of memory");
    if (f->num != PROFILE_SAMPLE) return 0;
    if (want(d, f, HK_PB_LEN, "sample") < 0) return -1;
    d->nloc = d->nval = d->nlabel = 0;
    field g;
    int rc;
    hk_pb_reader r = f->sub;
    while ((rc = next_field(d, &r, &g)) > 0) {
        int ok = 0;
        if (g.num == SAMPLE_LOCATION_ID) ok = each_varint(d, &g, "sample location_id", one_location);
        else if (g.num == SAMPLE_VALUE) ok = each_varint(d, &g, "sample value", one_value);
        else if (g.num == SAMPLE_LABEL) ok = label(d, &g);
        if (ok < 0) return -1;
    }
    if (rc < 0) return -1;
    hk_profile *p = d->p;
    /* as Go's pprof does: a sample's values mean nothing without their types, and
     * every reader of the model picks one of them */
    if (p->nvalues == 0) return fail(d, "sample %zu, but the profile has no sample type", d->nsample);
    if (d->nval != p->nvalues)
        return fail(d, "sample %zu has %zu values, but the profile has %zu sample types", d->nsample, d->nval,
                    p->nvalues);
    if (d->nloc > UINT32_MAX || d->nlabel > UINT32_MAX) return fail(d, "sample %zu is too large", d->nsample);
    if (hk_profile_add_sample(p, d->loc_ids, (uint32_t)d->nloc, d->vals, d->labels, (uint32_t)d->nlabel) < 0)
        return fail(d, "out of memory");
    d->nsample++;
    return 0;
}

/* ---- gzip ---- */

int hk_gunzip(const uint8_t *data, size_t n, size_t max, hk_buf *out, char *err, size_t errlen)
{
    dec d = {.err = err, .errlen = errlen};
    const size_t start = out->len, chunk = 64 * 1024;
    z_stream z;
    memset(&z, 0, sizeof(z));
    /* 15 + 32: largest window, and let zlib detect a gzip or zlib header */
    if (inflateInit2(&z, 15 + 32) != Z_OK) return fail(&d, "gzip: zlib could not start (out of memory)");
    size_t left = n;
    for (;;) {
        if (z.avail_in == 0 && left) { /* avail_in is 32 bits: feed a large input in slices */
            z.next_in = (Bytef *)(data + (n - left));
            z.avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
            left -= z.avail_in;
        }
        size_t produced = out->len - start, room = max - produced;
        uint8_t probe; /* once at the limit, one more byte of output proves the stream exceeds it */
        if (room == 0) {
            z.next_out = &probe;
            z.avail_out = 1;
        } else {
            size_t want_room = room < chunk ? room : chunk;
            if (hk_buf_reserve(out, want_room) < 0) { fail(&d, "gzip: out of memory"); goto fail; }
            size_t space = out->cap - out->len;
            if (space > room) space = room;
            z.next_out = out->data + out->len;
            z.avail_out = space > UINT_MAX ? UINT_MAX : (uInt)space;
        }
        uInt before = z.avail_out;
        int rc = inflate(&z, Z_NO_FLUSH);
        size_t got = before - z.avail_out;
        if (room == 0 && got) { fail(&d, "gzip: inflates to more than %zu bytes", max); goto fail; }
        out->len += got;
        if (rc == Z_STREAM_END) {
            if (z.avail_in == 0 && left == 0) break;
            /* concatenated members are one gzip file; anything else after the end is not */
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b && inflateReset(&z) == Z_OK)
                continue;
            fail(&d, "gzip: unexpected bytes after the compressed data");
            goto fail;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && left == 0) { fail(&d, "gzip: compressed data is truncated"); goto fail; }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            fail(&d, "gzip: %s", rc == Z_MEM_ERROR ? "out of memory" : z.msg ? z.msg : "corrupt data");
            goto fail;
        }
    }
    inflateEnd(&z);
    return 0;
fail:
    inflateEnd(&z);
    out->len = start;
    return -1;
}

/* ---- entry ---- */

hk_profile *hk_pprof_decode(const uint8_t *data, size_t n, char *err, size_t errlen)
{
    static const visit_fn walks[] = {visit_strings, visit_function, visit_location, visit_types, count_samples,
                                     visit_sample};
    dec d = {.err = err, .errlen = errlen};
    hk_buf inflated;
    hk_buf_init(&inflated);
    hk_u64_map_init(&d.funcs);
    hk_u64_map_init(&d.locs);
    if (err && errlen) err[0] = '\0';
    if (n >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if (hk_gunzip(data, n, HK_PPROF_MAX_INFLATED, &inflated, err, errlen) < 0) goto fail;
        data = inflated.data;
        n = inflated.len;
    }
    /* an empty message is valid protobuf, but it has no string table */
    if (n == 0) { fail(&d, "empty input: not a pprof profile"); goto fail; }
    d.base = data;
    d.p = hk_profile_new();
    if (!d.p) { fail(&d, "out of memory"); goto fail; }
    hk_pb_reader all = {data, data + n};
    for (size_t i = 0; i < sizeof(walks) / sizeof(walks[0]); i++) {
        if (walk(&d, all, walks[i]) < 0) goto fail;
        if (i == 0 && d.nstrings == 0) { fail(&d, "string_table is missing (it must start with \"\")"); goto fail; }
    }
    if (!hk_profile_ok(d.p)) { fail(&d, "out of memory"); goto fail; }
    goto done;
fail:
    hk_profile_free(d.p);
    d.p = NULL;
done:
    hk_buf_free(&inflated);
    hk_u64_map_free(&d.funcs);
    hk_u64_map_free(&d.locs);
    free(d.strmap);
    free(d.loc_dense);
    free(d.loc_ids);
    free(d.vals);
    free(d.labels);
    return d.p;
}
