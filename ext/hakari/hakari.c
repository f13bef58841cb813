/* hakari.c — the Ruby bindings' entry: Hakari::Native (engine control, reading and diffing
 * profile files); Hakari::Profile is profile_api.c's, Hakari.label and Hakari.labels are
 * label_api.c's.
 *
 * These three are the only files that define Ruby methods and raise. Arguments are
 * checked here, before any C state changes, and every error names the bad
 * value and what is accepted.
 */
#include <ruby.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bindings.h"
#include "buf.h"
#include "clocks.h"
#include "diff_report.h"
#include "formats.h"
#include "html_encode.h"
#include "label_api.h"
#include "pprof_decode.h"
#include "profile.h"
#include "profile_api.h"
#include "sampler.h"
#include "stack_walk.h"
#include "tracer.h"

static VALUE mHakari, mNative;

static ID id_cpu, id_wall, id_object, id_retained, id_allocations;

/* ---- Hakari::Native ------------------------------------------------------- */

/* a Symbol's or a String's ID, or 0 when it is neither or names nothing known (no ID is made) */
static ID option_id(VALUE v)
{
    return SYMBOL_P(v) || RB_TYPE_P(v, T_STRING) ? rb_check_id(&v) : 0;
}

/* true or false, or ArgumentError naming the keyword and the value: "no" is not false */
static int boolean_option(const char *what, VALUE v)
{
    if (v != Qtrue && v != Qfalse) rb_raise(rb_eArgError, "invalid %s: %+" PRIsVALUE " (expected true or false)", what, v);
    return v == Qtrue;
}

/* An environment knob's value: index in `accepted` (0 for unset or empty), or
 * ArgumentError naming the variable, the value and what is accepted. Read at
 * each start, here only, into the configuration. */
static int env_choice(const char *var, const char *const *accepted, int n)
{
    const char *v = getenv(var);
    if (!v || !*v) return 0;
    for (int i = 1; i < n; i++)
        if (strcmp(v, accepted[i]) == 0) return i;
    VALUE list = rb_str_new_cstr("");
    for (int i = 1; i < n; i++) rb_str_catf(list, "%s%s", i == 1 ? "" : " or ", accepted[i]);
    rb_raise(rb_eArgError, "invalid %s=%s (expected %" PRIsVALUE ", or unset)", var, v, list);
}

/* object mode's watch: a share of the objects from 0.001 to 1, in thousandths */
static int watch_option(VALUE watch)
{
    double w = RB_FLOAT_TYPE_P(watch) || RB_INTEGER_TYPE_P(watch) || RB_TYPE_P(watch, T_RATIONAL) ? NUM2DBL(watch) : -1;
    if (!(w >= 0.001 && w <= 1))
        rb_raise(rb_eArgError, "invalid watch %+" PRIsVALUE " (expected a share of the objects from 0.001 to 1)", watch);
    return (int)(w * HK_WATCH_ALL + 0.5);
}

/* Native.start(mode, frequency, aggregate, max_depth, synthesize, interval, watch) -> true; object
 * mode takes interval (objects per sample) and watch, and no frequency; retained mode interval;
 * the others a frequency */
static VALUE native_start(VALUE mod, VALUE mode, VALUE frequency, VALUE aggregate, VALUE max_depth, VALUE synthesize,
                          VALUE interval, VALUE watch)
{
    hk_sampler_config cfg;
    long x;
    ID m = option_id(mode);
    if (m == id_cpu) cfg.mode = HK_MODE_CPU;
    else if (m == id_wall) cfg.mode = HK_MODE_WALL;
    else if (m == id_object) cfg.mode = HK_MODE_OBJECT;
    else if (m == id_retained) cfg.mode = HK_MODE_RETAINED;
    else rb_raise(rb_eArgError, "unknown mode %+" PRIsVALUE " (expected :cpu, :wall, :object, :retained or :trace)", mode);
    cfg.frequency = cfg.interval = 0;
    cfg.watch = HK_WATCH_ALL;
    if (cfg.mode == HK_MODE_OBJECT && !NIL_P(watch)) cfg.watch = watch_option(watch);
    if (cfg.mode == HK_MODE_RETAINED && !NIL_P(watch))
        rb_raise(rb_eArgError, "watch: applies to mode: :object (retained mode follows every sampled object)");
    if (HK_MODE_COUNTS_OBJECTS(cfg.mode)) {
        if (!NIL_P(frequency))
            rb_raise(rb_eArgError, "frequency: applies to mode: :cpu and :wall (mode: :%s takes interval:)", rb_id2name(m));
        if (!hk_int_in(interval, 1, HK_MAX_INTERVAL, &x))
            rb_raise(rb_eArgError, "invalid interval %+" PRIsVALUE " (expected an Integer from 1 to %d objects)", interval,
                     HK_MAX_INTERVAL);
        cfg.interval = (int)x;
    } else {
        if (!NIL_P(watch)) rb_raise(rb_eArgError, "watch: applies to mode: :object");
        if (!NIL_P(interval))
            rb_raise(rb_eArgError, "interval: applies to mode: :object and :retained (mode: :%s takes frequency:)", rb_id2name(m));
        if (!hk_int_in(frequency, HK_MIN_FREQUENCY, HK_MAX_FREQUENCY, &x))
            rb_raise(rb_eArgError, "invalid frequency %+" PRIsVALUE " (expected an Integer from %d to %d Hz)", frequency,
                     HK_MIN_FREQUENCY, HK_MAX_FREQUENCY);
        cfg.frequency = (int)x;
    }
    if (!hk_int_in(max_depth, 1, HK_MAX_MAX_DEPTH, &x))
        rb_raise(rb_eArgError, "invalid max_depth %+" PRIsVALUE " (expected an Integer from 1 to %d)", max_depth,
                 HK_MAX_MAX_DEPTH);
    cfg.max_depth = (int)x;
    cfg.aggregate = boolean_option("aggregate", aggregate);
    if (cfg.mode == HK_MODE_RETAINED && !cfg.aggregate)
        rb_raise(rb_eArgError, "aggregate: false does not apply to mode: :retained (its samples are the objects alive at stop)");
    cfg.synthesize = boolean_option("synthesize", synthesize);
    static const char *const clocks[] = {"", "perf"}, *const walks[] = {"", "ruby", "verify"}, *const offs[] = {"", "off"};
    cfg.cpu_clock = (hk_cpu_clock_choice)env_choice("HAKARI_CPU_CLOCK", clocks, 2);
    cfg.walk = env_choice("HAKARI_STACK_WALK", walks, 3);
    cfg.no_state_hooks = env_choice("HAKARI_STATE_HOOKS", offs, 2);
    char err[256];
    if (hk_tracer_running()) rb_raise(rb_eRuntimeError, "hakari: hakari is already running");
    if (hk_sampler_start(&cfg, err, sizeof(err)) < 0) rb_raise(rb_eRuntimeError, "hakari: %s", err);
    return Qtrue;
}

/* Native.ractor_starting(count) -> nil, :let_go (retained mode: its objects let go, sampling
 * stopped) or :hooks_off (object mode: sampling stopped); called by Hakari::RactorHook before a
 * Ractor starts (1), and at start with the count of Ractors besides the main one that run */
static VALUE native_ractor_starting(VALUE mod, VALUE count)
{
    switch (hk_sampler_ractor_starting(NUM2LONG(count))) {
    case HK_RACTOR_LET_GO: return ID2SYM(rb_intern("let_go"));
    case HK_RACTOR_HOOKS_OFF: return ID2SYM(rb_intern("hooks_off"));
    default: return Qnil;
    }
}

/* Native.write_file(path, bytes, drop) -> true: bytes into path whole (a temporary file beside it,
 * then a rename), then the file drop (a String, or nil) removed. All with the GVL held: the
 * thread that writes continuous snapshots would otherwise wait for the GVL after each system call,
 * up to a time slice (100 ms) each while the program runs, and fall behind its schedule. The
 * files are small; the encoding before took the GVL longer. Raises SystemCallError naming the path. */
static VALUE native_write_file(VALUE mod, VALUE path, VALUE bytes, VALUE drop)
{
    const char *dst = StringValueCStr(path);
    StringValue(bytes);
    VALUE tmp = rb_sprintf("%s.%ld.tmp", dst, (long)getpid());
    const char *t = StringValueCStr(tmp);
    int fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) rb_sys_fail(t);
    const char *p = RSTRING_PTR(bytes);
    size_t left = (size_t)RSTRING_LEN(bytes);
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlink(t);
            errno = e;
            rb_sys_fail(dst);
        }
        p += n;
        left -= (size_t)n;
    }
    if (close(fd) != 0 || rename(t, dst) != 0) {
        int e = errno;
        unlink(t);
        errno = e;
        rb_sys_fail(dst);
    }
    if (!NIL_P(drop) && unlink(StringValueCStr(drop)) != 0 && errno != ENOENT) rb_sys_fail(StringValueCStr(drop));
    RB_GC_GUARD(tmp);
    return Qtrue;
}

/* Native.own_thread(thread) -> true, or false when not sampling: the thread is hakari's own
 * (Hakari::Snapshots' writer), never sampled */
static VALUE native_own_thread(VALUE mod, VALUE thread)
{
    if (!rb_obj_is_kind_of(thread, rb_cThread)) rb_raise(rb_eTypeError, "expected a Thread, got %+" PRIsVALUE, thread);
    return hk_sampler_own_thread((uintptr_t)thread) == 0 ? Qtrue : Qfalse;
}

/* fills the Hash arg with GC.stat (rb_gc_stat) */
static void gc_stat_into(void *arg) { rb_gc_stat(*(VALUE *)arg); }

/* Native.stop(gc = nil): the profile, or nil when not running. A Hash gc is filled with GC.stat
 * as the sampler's time ends, before the profile is built: the program's GC figures, read where
 * no sample can land (a tick in a GC.stat called before stop put hakari's at_exit frames in the
 * profile) and before the build's allocations. A trace, paused by then, fills it first. */
/* how long the last stop took (its profile's build), for -v: read here, in C, because a
 * clock read from Ruby before the stop would be a call the trace counts */
static int64_t last_stop_ns;

static VALUE native_last_stop_ns(VALUE mod) { return LL2NUM(last_stop_ns); }

static VALUE stop_profile(VALUE gc);

static VALUE native_stop(int argc, VALUE *argv, VALUE mod)
{
    if (argc > 1) rb_error_arity(argc, 0, 1);
    VALUE gc = argc > 0 ? argv[0] : Qnil;
    int64_t began = hk_clock_ns(CLOCK_MONOTONIC);
    last_stop_ns = 0;
    VALUE profile = stop_profile(gc);
    last_stop_ns = hk_clock_ns(CLOCK_MONOTONIC) - began;
    return profile;
}

static VALUE stop_profile(VALUE gc)
{
    if (!NIL_P(gc) && !RB_TYPE_P(gc, T_HASH))
        rb_raise(rb_eArgError, "gc_stat_into must be a Hash, not %+" PRIsVALUE, gc);
    hk_sampler_stats st;
    hk_tracer_stats ts;
    hk_profile *p;
    if (hk_tracer_running()) {
        if (!NIL_P(gc)) rb_gc_stat(gc);
        p = hk_tracer_stop(&ts);
        if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
        return hk_profile_api_wrap(p, NULL, &ts);
    }
    if (!hk_sampler_running()) return Qnil;
    p = hk_sampler_stop(&st, NIL_P(gc) ? NULL : gc_stat_into, &gc);
    if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
    return hk_profile_api_wrap(p, &st, NULL);
}

/* optional Array of String/Regexp (a single one is accepted too); raises naming the bad element */
static VALUE check_patterns(VALUE v)
{
    if (NIL_P(v)) return Qnil;
    if (!RB_TYPE_P(v, T_ARRAY)) v = rb_ary_new_from_args(1, v);
    for (long i = 0; i < RARRAY_LEN(v); i++) {
        VALUE e = RARRAY_AREF(v, i);
        if (!RB_TYPE_P(e, T_STRING) && !RB_TYPE_P(e, T_REGEXP))
            rb_raise(rb_eArgError, "invalid exclude: %+" PRIsVALUE " (expected a String or a Regexp, or an Array of them)", e);
    }
    return rb_obj_freeze(rb_ary_dup(v));
}

static VALUE check_threads(const char *what, VALUE v)
{
    if (NIL_P(v)) return Qnil;
    if (!RB_TYPE_P(v, T_ARRAY)) v = rb_ary_new_from_args(1, v);
    for (long i = 0; i < RARRAY_LEN(v); i++)
        if (!rb_obj_is_kind_of(RARRAY_AREF(v, i), rb_cThread))
            rb_raise(rb_eArgError, "invalid %s: %+" PRIsVALUE " (expected a Thread or an Array of Threads)", what,
                     RARRAY_AREF(v, i));
    return rb_obj_freeze(rb_ary_dup(v));
}

/* Native.trace_start(measure, exclude, threads, exclude_threads, merge_fibers, merge_threads, allocations,
 *                    max_paths) -> true */
static VALUE native_trace_start(VALUE mod, VALUE measure, VALUE exclude, VALUE threads, VALUE exclude_threads,
                                VALUE merge_fibers, VALUE merge_threads, VALUE allocations, VALUE max_paths)
{
    hk_tracer_config cfg;
    ID m = option_id(measure);
    if (m == id_wall) cfg.measure = HK_MEASURE_WALL;
    else if (m == id_cpu) cfg.measure = HK_MEASURE_CPU;
    else if (m == id_allocations) cfg.measure = HK_MEASURE_ALLOCATIONS;
    else rb_raise(rb_eArgError, "unknown measure %+" PRIsVALUE " (expected :wall, :cpu or :allocations)", measure);
    cfg.exclude = check_patterns(exclude);
    cfg.threads = check_threads("threads", threads);
    cfg.exclude_threads = check_threads("exclude_threads", exclude_threads);
    cfg.merge_fibers = boolean_option("merge_fibers", merge_fibers);
    cfg.merge_threads = boolean_option("merge_threads", merge_threads);
    cfg.allocations = boolean_option("allocations", allocations);
    cfg.max_paths = 0;
    if (!NIL_P(max_paths)) {
        /* an Integer past the fixnum range is past the limit too */
        if (!FIXNUM_P(max_paths) || FIX2LONG(max_paths) < 1 || FIX2LONG(max_paths) > (long)HK_MAX_MAX_PATHS)
            rb_raise(rb_eArgError, "invalid max_paths: %+" PRIsVALUE " (expected an Integer from 1 to %u)", max_paths,
                     HK_MAX_MAX_PATHS);
        cfg.max_paths = NUM2UINT(max_paths);
    }
    if (hk_sampler_running()) rb_raise(rb_eRuntimeError, "hakari: hakari is already running");
    char err[256];
    if (hk_tracer_start(&cfg, err, sizeof(err)) < 0) rb_raise(rb_eRuntimeError, "hakari: %s", err);
    return Qtrue;
}

/* Native.trace_memory -> {paths:, methods:, path_bytes:, method_bytes:, total_bytes:} while
 * tracing, else nil: what the call tree costs, for bench/trace_scale.rb */
static VALUE native_trace_memory(VALUE mod)
{
    if (!hk_tracer_running()) return Qnil;
    hk_tracer_memory_use m;
    hk_tracer_memory(&m);
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("paths")), SIZET2NUM(m.paths));
    rb_hash_aset(h, ID2SYM(rb_intern("methods")), SIZET2NUM(m.methods));
    rb_hash_aset(h, ID2SYM(rb_intern("path_bytes")), SIZET2NUM(m.path_bytes));
    rb_hash_aset(h, ID2SYM(rb_intern("method_bytes")), SIZET2NUM(m.method_bytes));
    rb_hash_aset(h, ID2SYM(rb_intern("total_bytes")), SIZET2NUM(m.total_bytes));
    return h;
}

static VALUE native_pause(VALUE mod) { return hk_tracer_pause() == 0 ? Qtrue : Qfalse; }
static VALUE native_resume(VALUE mod) { return hk_tracer_resume() == 0 ? Qtrue : Qfalse; }
static VALUE native_paused_p(VALUE mod) { return hk_tracer_paused() ? Qtrue : Qfalse; }

static VALUE native_snapshot(VALUE mod, VALUE clear)
{
    hk_sampler_stats st;
    if (!hk_sampler_running() || hk_sampler_ended()) return Qnil;
    hk_profile *p = hk_sampler_snapshot(RTEST(clear), &st);
    if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
    return hk_profile_api_wrap(p, &st, NULL);
}

/* The exit hook's: the Hash that gets GC.stat as the profile's time ends, and the process
 * whose hook it is (a forked child inherits the hook, not the profile). */
static VALUE end_gc_hash = Qnil;
static rb_pid_t end_pid;

static void end_at_exit(VALUE unused)
{
    (void)unused;
    if (getpid() != end_pid) return;
    /* a trace stands still from here: the exit hooks hakari runs after it are not the program's
     * (Kernel#at_exit's own call of the CLI's hook makes an Array in the program's main frame) */
    if (hk_tracer_running()) {
        if (!hk_tracer_paused()) hk_tracer_pause();
        return;
    }
    if (!hk_sampler_running() || hk_sampler_ended()) return;
    hk_sampler_end(NIL_P(end_gc_hash) ? NULL : gc_stat_into, &end_gc_hash);
}

/* Native.end_at_exit(gc = nil) -> true: at exit, the sampling profile's time ends (a trace is
 * paused, and gc is filled at stop instead) before any
 * exit hook registered earlier runs (Ruby runs them last first), and a Hash gc gets GC.stat
 * there; the next Native.stop builds the profile. The CLI's hook (lib/hakari/autorun.rb),
 * registered before start, then runs no Ruby frame of hakari's inside the profile's time. */
static VALUE native_end_at_exit(int argc, VALUE *argv, VALUE mod)
{
    VALUE gc = argc > 0 ? argv[0] : Qnil;
    if (argc > 1) rb_error_arity(argc, 0, 1);
    if (!NIL_P(gc)) Check_Type(gc, T_HASH);
    if (!hk_tracer_running() && (!hk_sampler_running() || hk_sampler_ended()))
        rb_raise(rb_eRuntimeError, "hakari: end_at_exit needs a running profile");
    end_gc_hash = gc;
    end_pid = getpid();
    rb_set_end_proc(end_at_exit, Qnil);
    return Qtrue;
}

/* At exit, after the program's own exit hooks (those registered after hakari was loaded, the
 * CLI's among them), a sampling profile still running (started without a block and never
 * stopped, as by a server's master that forks its workers) has its sampling ended: its worker
 * threads are joined and its hooks removed before Ruby frees the threads they read. Without it,
 * 7 of 40 runs of a script that exits while profiling four threads died of SIGSEGV (3.4+YJIT),
 * and a puma master in the Rack test 1 shutdown in 9. */
static void halt_at_exit(VALUE unused)
{
    (void)unused;
    if (hk_sampler_running() && !hk_sampler_ended()) hk_sampler_end(NULL, NULL);
}

static VALUE native_running_p(VALUE mod) { return hk_sampler_running() || hk_tracer_running() ? Qtrue : Qfalse; }

/* Native.formats -> [[name, default_file, text?], ...]: the list of formats (formats.h) */
static VALUE native_formats(VALUE mod)
{
    VALUE out = rb_ary_new_capa((long)hk_nformats);
    for (size_t i = 0; i < hk_nformats; i++) {
        const hk_format *f = &hk_formats[i];
        VALUE row = rb_ary_new_from_args(3, ID2SYM(rb_intern(f->name)), rb_str_freeze(rb_str_new_cstr(f->default_file)),
                                         f->text ? Qtrue : Qfalse);
        rb_ary_push(out, rb_obj_freeze(row));
    }
    return rb_obj_freeze(out);
}

/* Native.format_for(path) -> Symbol: the format the path's name selects (formats.h) */
static VALUE native_format_for(VALUE mod, VALUE path)
{
    return ID2SYM(rb_intern(hk_format_for_path(StringValueCStr(path))->name));
}

/* Native.read(bytes) -> Profile: a pprof profile, gzipped or not, from any program; a
 * file that is not one raises ArgumentError saying what is wrong with it */
static VALUE native_read(VALUE mod, VALUE bytes)
{
    StringValue(bytes);
    char err[256];
    hk_profile *p = hk_pprof_decode((const uint8_t *)RSTRING_PTR(bytes), (size_t)RSTRING_LEN(bytes), err, sizeof(err));
    RB_GC_GUARD(bytes);
    if (!p) rb_raise(rb_eArgError, "%s", err);
    VALUE obj = hk_profile_api_wrap(p, NULL, NULL); /* read: its counters are its header's */
    return obj;
}

/* Native.read_file(path) -> Profile: the file's pprof profile (Native.read). Read here rather
 * than from a Ruby String: a gzipped file is inflated and its compressed bytes freed before the
 * decoding, which keeps a big profile's reading near twice the inflated size in memory. */
static VALUE native_read_file(VALUE mod, VALUE path)
{
    FilePathValue(path);
    const char *name = StringValueCStr(path);
    FILE *f = fopen(name, "rb");
    if (!f) rb_sys_fail_str(path);
    hk_buf raw, inflated;
    hk_buf_init(&raw);
    hk_buf_init(&inflated);
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) hk_buf_append(&raw, chunk, got);
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        hk_buf_free(&raw);
        rb_sys_fail_str(path);
    }
    char err[256] = "out of memory";
    const hk_buf *bytes = &raw;
    int ok = hk_buf_ok(&raw);
    if (ok && raw.len >= 2 && raw.data[0] == 0x1f && raw.data[1] == 0x8b) {
        ok = hk_gunzip(raw.data, raw.len, HK_PPROF_MAX_INFLATED, &inflated, err, sizeof(err)) == 0;
        hk_buf_free(&raw);
        bytes = &inflated;
    }
    hk_profile *p = ok ? hk_pprof_decode(bytes->data, bytes->len, err, sizeof(err)) : NULL;
    hk_buf_free(&raw);
    hk_buf_free(&inflated);
    if (!p) rb_raise(rb_eArgError, "%s", err);
    VALUE obj = hk_profile_api_wrap(p, NULL, NULL); /* read: its counters are its header's */
    return obj;
}

/* Native.diff_html(base, new) -> String: the differential flame graph (html_encode.h) */
static VALUE native_diff_html(VALUE mod, VALUE base, VALUE new)
{
    const hk_profile *a = hk_profile_api_get(base), *b = hk_profile_api_get(new);
    hk_buf out;
    hk_buf_init(&out);
    if (hk_html_diff_encode(a, b, &out) < 0) {
        hk_buf_free(&out);
        rb_raise(rb_eNoMemError, "hakari: out of memory while comparing the profiles");
    }
    VALUE html = rb_utf8_str_new((const char *)out.data, (long)out.len);
    hk_buf_free(&out);
    return html;
}

/* Native.diff(base, new, absolute, top_n) -> [String, Float]: the report of what changed
 * between two profiles (diff_report.h) and the largest rise of a self share, in points */
static VALUE native_diff(VALUE mod, VALUE base, VALUE new, VALUE absolute, VALUE top_n)
{
    const hk_profile *a = hk_profile_api_get(base), *b = hk_profile_api_get(new);
    long n;
    if (!hk_int_in(top_n, 1, INT32_MAX, &n)) rb_raise(rb_eArgError, "invalid top %+" PRIsVALUE " (expected 1 or more)", top_n);
    hk_diff_options o = {hk_profile_default_value(a), hk_profile_default_value(b), RTEST(absolute), (size_t)n};
    if (!a->nvalues || !b->nvalues) rb_raise(rb_eArgError, "a profile without sample types has nothing to compare");
    hk_buf out;
    hk_buf_init(&out);
    double growth = 0;
    if (hk_diff_report(a, b, &o, &out, &growth) < 0) {
        hk_buf_free(&out);
        rb_raise(rb_eNoMemError, "hakari: out of memory while comparing the profiles");
    }
    VALUE text = rb_utf8_str_new((const char *)out.data, (long)out.len);
    hk_buf_free(&out);
    return rb_ary_new_from_args(2, text, DBL2NUM(growth));
}

static VALUE tv_ns(struct timeval tv) { return LL2NUM((long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL); }

/* Native.children_rusage -> Hash: getrusage(RUSAGE_CHILDREN), for `hakari stat` */
static VALUE native_children_rusage(VALUE mod)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0) rb_sys_fail("getrusage");
    VALUE h = rb_hash_new();
    SET(h, "utime_ns", tv_ns(ru.ru_utime));
    SET(h, "stime_ns", tv_ns(ru.ru_stime));
    SET(h, "maxrss_kb", LONG2NUM(ru.ru_maxrss));
    SET(h, "nvcsw", LONG2NUM(ru.ru_nvcsw));
    SET(h, "nivcsw", LONG2NUM(ru.ru_nivcsw));
    SET(h, "inblock", LONG2NUM(ru.ru_inblock));
    SET(h, "oublock", LONG2NUM(ru.ru_oublock));
    return h;
}

/* ---- GC root for the sampler's frame and thread VALUEs -------------------- */

static void root_mark(void *ptr)
{
    hk_sampler_mark();
    hk_tracer_mark();
}
static void root_compact(void *ptr) { hk_sampler_compact(); }
static size_t root_memsize(const void *ptr) { return hk_sampler_memsize() + hk_tracer_memsize(); }
static const rb_data_type_t root_type = {
    "Hakari::SamplerRoot", {root_mark, NULL, root_memsize, root_compact, {0}}, NULL, NULL, 0};

RUBY_FUNC_EXPORTED void Init_hakari(void)
{
    id_cpu = rb_intern("cpu");
    id_wall = rb_intern("wall");
    id_allocations = rb_intern("allocations");
    id_object = rb_intern("object");
    id_retained = rb_intern("retained");

    mHakari = rb_define_module("Hakari");
    mNative = rb_define_module_under(mHakari, "Native");
    rb_define_module_function(mNative, "start", native_start, 7);
    rb_define_module_function(mNative, "stop", native_stop, -1);
    rb_define_module_function(mNative, "snapshot", native_snapshot, 1);
    rb_define_module_function(mNative, "running?", native_running_p, 0);
    rb_define_module_function(mNative, "own_thread", native_own_thread, 1);
    rb_define_module_function(mNative, "write_file", native_write_file, 3);
    rb_define_module_function(mNative, "end_at_exit", native_end_at_exit, -1);
    rb_gc_register_address(&end_gc_hash);
    rb_define_module_function(mNative, "trace_start", native_trace_start, 8);
    rb_define_module_function(mNative, "last_stop_ns", native_last_stop_ns, 0);
    rb_define_module_function(mNative, "trace_memory", native_trace_memory, 0);
    rb_define_module_function(mNative, "pause", native_pause, 0);
    rb_define_module_function(mNative, "resume", native_resume, 0);
    rb_define_module_function(mNative, "paused?", native_paused_p, 0);
    rb_define_module_function(mNative, "children_rusage", native_children_rusage, 0);
    rb_define_module_function(mNative, "formats", native_formats, 0);
    rb_define_module_function(mNative, "format_for", native_format_for, 1);
    rb_define_module_function(mNative, "read", native_read, 1);
    rb_define_module_function(mNative, "ractor_starting", native_ractor_starting, 1);
    rb_define_module_function(mNative, "read_file", native_read_file, 1);
    rb_define_module_function(mNative, "diff", native_diff, 4);
    rb_define_module_function(mNative, "diff_html", native_diff_html, 2);
    rb_define_const(mNative, "MIN_FREQUENCY", INT2NUM(HK_MIN_FREQUENCY));
    rb_define_const(mNative, "MAX_FREQUENCY", INT2NUM(HK_MAX_FREQUENCY));
    rb_define_const(mNative, "MAX_INTERVAL", INT2NUM(HK_MAX_INTERVAL));
    rb_define_const(mNative, "MAX_MAX_PATHS", UINT2NUM(HK_MAX_MAX_PATHS));
    rb_define_const(mNative, "DEFAULT_MAX_PATHS", UINT2NUM(HK_DEFAULT_MAX_PATHS));

    hk_profile_api_init(mHakari);

    /* the GC calls dmark only when the data pointer is non-NULL: point it at anything */
    static int root_data;
    VALUE root = TypedData_Wrap_Struct(rb_cObject, &root_type, &root_data);
    rb_gc_register_mark_object(root);
    hk_label_api_init(mHakari);
    hk_sampler_init();
    hk_tracer_init();
    rb_set_end_proc(halt_at_exit, Qnil);
}
