/* pprof_encode.c — writes profile.proto from the profile model.
 *
 * Each nested message is written into a scratch buffer and then appended as
 * a length-delimited field, which keeps the writer single-pass and simple.
 * Field numbers follow profile.proto (pprof_fields.h).
 */
#include "pprof_encode.h"

#include <string.h>
#include <zlib.h>

#include "pprof_fields.h"
#include "protobuf.h"


static void put_message(hk_buf *out, uint32_t field, hk_buf *msg)
{
    hk_pb_bytes(out, field, msg->data, msg->len);
    if (msg->oom) out->oom = 1;
    msg->len = 0;
}

static void value_type(hk_buf *out, uint32_t field, const hk_value_type *vt, hk_buf *tmp)
{
    hk_pb_uint(tmp, VALUE_TYPE_TYPE, vt->type);
    hk_pb_uint(tmp, VALUE_TYPE_UNIT, vt->unit);
    put_message(out, field, tmp);
}

static void sample(hk_buf *out, const hk_profile *p, size_t i, hk_buf *tmp, hk_buf *lab, hk_locbuf *stack)
{
    const hk_sample *s = &p->samples[i];
    const uint32_t *locs = hk_profile_sample_locs(p, i, stack);
    if (locs) hk_pb_packed_u32(tmp, SAMPLE_LOCATION_ID, locs, s->nloc);
    else tmp->oom = 1;
    hk_pb_packed_i64(tmp, SAMPLE_VALUE, hk_profile_sample_values(p, i), p->nvalues);
    const hk_label *labels = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < s->nlabel; j++) {
        hk_pb_uint(lab, LABEL_KEY, labels[j].key);
        if (labels[j].str) {
            hk_pb_uint(lab, LABEL_STR, labels[j].str);
        } else {
            hk_pb_int(lab, LABEL_NUM, labels[j].num);
            hk_pb_uint(lab, LABEL_NUM_UNIT, labels[j].num_unit);
        }
        put_message(tmp, SAMPLE_LABEL, lab);
    }
    put_message(out, PROFILE_SAMPLE, tmp);
}

/* one of a trace's fold edges (profile.h), in hakari's own field: its locations by the ids
 * written for them */
static void fold_edge(hk_buf *out, const hk_fold_edge *e, hk_buf *tmp)
{
    hk_pb_uint(tmp, FOLD_EDGE_CALLER, e->caller);
    hk_pb_uint(tmp, FOLD_EDGE_CALLEE, e->callee);
    hk_pb_int(tmp, FOLD_EDGE_CALLS, e->calls);
    hk_pb_int(tmp, FOLD_EDGE_SELF, e->self);
    hk_pb_int(tmp, FOLD_EDGE_WAIT, e->wait);
    hk_pb_int(tmp, FOLD_EDGE_OUTER_CALLS, e->outer_calls);
    hk_pb_int(tmp, FOLD_EDGE_TOTAL, e->total);
    hk_pb_int(tmp, FOLD_EDGE_OUTER_SELF, e->outer_self);
    hk_pb_int(tmp, FOLD_EDGE_OUTER_WAIT, e->outer_wait);
    hk_pb_int(tmp, FOLD_EDGE_OUTER_WAIT_TOTAL, e->outer_wait_total);
    put_message(out, PROFILE_HAKARI_FOLD_EDGE, tmp);
}

static void location(hk_buf *out, const hk_profile *p, size_t i, hk_buf *tmp, hk_buf *line)
{
    const hk_location *l = &p->locations[i];
    hk_pb_uint(tmp, LOCATION_ID, i + 1);
    hk_pb_uint(line, LINE_FUNCTION_ID, l->function_id);
    hk_pb_int(line, LINE_LINE, l->line);
    put_message(tmp, LOCATION_LINE, line);
    put_message(out, PROFILE_LOCATION, tmp);
}

static void function(hk_buf *out, const hk_profile *p, size_t i, hk_buf *tmp)
{
    const hk_function *f = &p->functions[i];
    hk_pb_uint(tmp, FUNCTION_ID, i + 1);
    hk_pb_uint(tmp, FUNCTION_NAME, f->name);
    hk_pb_uint(tmp, FUNCTION_SYSTEM_NAME, f->system_name);
    hk_pb_uint(tmp, FUNCTION_FILENAME, f->filename);
    hk_pb_int(tmp, FUNCTION_START_LINE, f->start_line);
    put_message(out, PROFILE_FUNCTION, tmp);
}

/* Where the encoded bytes go: straight into out, or through one deflate stream into it. The
 * encoder hands over its bytes every FLUSH_AT bytes, so a profile of millions of samples
 * never holds its whole uncompressed encoding (hundreds of MB) beside the compressed one. */
#define FLUSH_AT (1u << 20)

typedef struct sink {
    hk_buf *out;
    int gzip, failed;
    z_stream z;
} sink;

static int sink_open(sink *k, hk_buf *out, int gzip)
{
    memset(k, 0, sizeof(*k));
    k->out = out;
    k->gzip = gzip;
    /* windowBits 15 + 16 asks zlib for a gzip header and trailer */
    return gzip && deflateInit2(&k->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK ? -1 : 0;
}

/* moves raw's bytes to the sink (all of them when finish, closing the gzip member) */
static void sink_feed(sink *k, hk_buf *raw, int finish)
{
    if (raw->oom) k->failed = 1;
    if (k->failed) return;
    if (!k->gzip) {
        hk_buf_append(k->out, raw->data, raw->len);
        if (k->out->oom) k->failed = 1;
        raw->len = 0;
        return;
    }
    k->z.next_in = raw->data;
    size_t left = raw->len;
    int rc;
    do {
        /* zlib counts in 32 bits: feed at most 1 GB per call */
        uInt in = left > (1u << 30) ? (1u << 30) : (uInt)left;
        k->z.avail_in = in;
        int flush = finish && in == left ? Z_FINISH : Z_NO_FLUSH;
        do {
            if (hk_buf_reserve(k->out, FLUSH_AT / 4) < 0) { k->failed = 1; return; }
            size_t room = k->out->cap - k->out->len;
            if (room > (1u << 30)) room = 1u << 30;
            k->z.next_out = k->out->data + k->out->len;
            k->z.avail_out = (uInt)room;
            rc = deflate(&k->z, flush);
            k->out->len += room - k->z.avail_out;
            if (rc == Z_STREAM_ERROR) { k->failed = 1; return; }
        } while (k->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
        left -= in;
    } while (left);
    raw->len = 0;
}

static void sink_close(sink *k)
{
    if (k->gzip) deflateEnd(&k->z);
}

static void encode_raw(const hk_profile *p, hk_buf *out, sink *k)
{
    hk_buf tmp, sub;
    hk_buf_init(&tmp);
    hk_buf_init(&sub);
    hk_locbuf stack = {0};
    for (size_t i = 0; i < p->nvalues; i++) value_type(out, PROFILE_SAMPLE_TYPE, &p->sample_types[i], &tmp);
    for (size_t i = 0; i < p->nsamples; i++) {
        sample(out, p, i, &tmp, &sub, &stack);
        if (out->len >= FLUSH_AT) sink_feed(k, out, 0);
    }
    for (size_t i = 0; i < p->nlocations; i++) location(out, p, i, &tmp, &sub);
    for (size_t i = 0; i < p->nfunctions; i++) function(out, p, i, &tmp);
    for (size_t i = 0; i < p->strings.count; i++) {
        size_t len;
        const char *s = hk_strtab_get(&p->strings, (uint32_t)i, &len);
        hk_pb_bytes(out, PROFILE_STRING_TABLE, s, len);
        if (out->len >= FLUSH_AT) sink_feed(k, out, 0);
    }
    hk_pb_int(out, PROFILE_TIME_NANOS, p->time_nanos);
    hk_pb_int(out, PROFILE_DURATION_NANOS, p->duration_nanos);
    if (p->period_type.type || p->period_type.unit) value_type(out, PROFILE_PERIOD_TYPE, &p->period_type, &tmp);
    hk_pb_int(out, PROFILE_PERIOD, p->period);
    for (size_t i = 0; i < p->ncomments; i++) {
        hk_pb_tag(out, PROFILE_COMMENT, HK_PB_VARINT);
        hk_pb_varint(out, p->comments[i]);
    }
    for (size_t i = 0; i < p->nfold_edges; i++) fold_edge(out, &p->fold_edges[i], &tmp);
    hk_pb_uint(out, PROFILE_DEFAULT_SAMPLE_TYPE, p->default_sample_type);
    if (tmp.oom || sub.oom || stack.oom) out->oom = 1;
    sink_feed(k, out, 1);
    hk_buf_free(&tmp);
    hk_buf_free(&sub);
    hk_locbuf_free(&stack);
}

int hk_pprof_encode(const hk_profile *p, hk_buf *out, int gzip)
{
    size_t len0 = out->len;
    int oom0 = out->oom;
    sink k;
    hk_buf raw;
    hk_buf_init(&raw);
    int rc = sink_open(&k, out, gzip);
    if (rc == 0) {
        encode_raw(p, &raw, &k);
        rc = k.failed || out->oom ? -1 : 0;
    }
    sink_close(&k);
    hk_buf_free(&raw);
    if (rc < 0) { /* the contract: out is left as it was */
        out->len = len0;
        out->oom = oom0;
    }
    return rc;
}
