/* sampler_stats.c — the counters a profile reports (sampler.h's HK_SAMPLER_COUNTERS and the
 * rest of hk_sampler_stats): read from the sampler's state and from each part that counts its
 * own (clocks, hooks, Ractors, objects), since start or since the last clearing snapshot. */
#include "sampler_int.h"

#include <string.h>

#include "cpu_clock.h"
#include "stack_walk.h"
#include "timer.h"

/* the stats from start */
static void fill_totals(hk_sampler_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->mode = S.cfg.mode;
    st->frequency = S.cfg.frequency;
    st->interval = S.cfg.interval;
    st->watch = S.cfg.watch;
    st->aggregate = S.cfg.aggregate;
    st->start_time_ns = S.start_real_ns;
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC);
    st->duration_ns = (S.stop_mono_ns ? S.stop_mono_ns : now) - S.start_mono_ns;
    st->trigger_count = __atomic_load_n(&S.trigger_count, __ATOMIC_RELAXED);
    st->sampling_count = S.sampling_count;
    st->sample_count = S.sample_count;
    /* a clock that failed as it fell back from perf counters takes no sample: said once */
    st->dropped_count = S.dropped_count + S.unresolved_count + (S.cfg.mode == HK_MODE_CPU && hk_cpu_clock_failed()) +
                        hk_ractors_dropped();
    st->moved_count = S.moved_count;
    st->off_gvl_count = S.off_gvl_count;
    st->label_change_count = S.label_change_count;
    st->stale_count = S.stale_count;
    st->synthesized_count = S.synthesized_count;
    st->synthesized = S.synth && hk_synth_yjit_now() ? "on until YJIT was enabled: compiled code does not keep a frame's pc current"
                                                     : S.synth_how;
    /* TSC ticks -> ns, calibrated against the monotonic clock since start */
    double scale = 1.0;
    uint64_t ticks = hk_tsc() - S.start_tsc;
    if (S.cost_tsc && ticks > 0) scale = (double)(now - S.start_mono_ns) / (double)ticks;
    st->sampling_time_ns = (uint64_t)((double)S.sampling_time * scale);
    st->stack_walk_time_ns = (uint64_t)((double)S.capture_time * scale);
    uint64_t ractor_jobs, ractor_job_ns; /* other Ractors' threads pay for theirs */
    hk_ractors_jobs(&ractor_jobs, &ractor_job_ns);
    st->sampling_count += ractor_jobs;
    st->sampling_time_ns += ractor_job_ns;
    st->resolve_time_ns = (uint64_t)((double)S.resolve_time * scale);
    st->thread_count = S.nseq;
    st->stack_walker = hk_stack_walk_kind();
    st->states = HK_MODE_COUNTS_OBJECTS(S.cfg.mode) ? "none (objects are counted, not time)" : hk_states_how();
    st->walk_mismatch_count = hk_stack_walk_mismatches();
    st->label_sets_dropped = hk_labels_dropped();
    st->ractors_started = S.ractors_started;
    st->ractor_threads = hk_ractors_threads();
    st->object_count = HK_MODE_COUNTS_OBJECTS(S.cfg.mode) ? hk_objects_allocated() : 0;
    st->objects_watched = HK_MODE_COUNTS_OBJECTS(S.cfg.mode) ? hk_objects_watched() : 0;
    st->objects_after_windows = S.cfg.mode == HK_MODE_OBJECT ? hk_watch_after_windows() : 0;
    st->objects_read_late = S.cfg.mode == HK_MODE_OBJECT ? hk_watch_read_late() : 0;
    st->retained_count = S.cfg.mode == HK_MODE_RETAINED ? S.sample_count : 0;
    st->timer_kind = S.cfg.mode == HK_MODE_OBJECT ? "NEWOBJ hook: a sample every interval objects, resolved by a worker thread"
                     : S.cfg.mode == HK_MODE_RETAINED ? "NEWOBJ and FREEOBJ hooks: every interval-th object followed until it is freed"
                     : S.cfg.mode == HK_MODE_WALL ? hk_timer_kind()
                     : S.mn                      ? "cpu-paced thread; M:N threads: each thread's CPU of its stretches on native threads"
                                                 : hk_cpu_clock_kind();
    st->timer_cpu_ns = S.cfg.mode == HK_MODE_CPU        ? hk_cpu_clock_worker_cpu_ns()
                       : S.cfg.mode == HK_MODE_RETAINED ? 0 /* no worker */
                                                        : (uint64_t)hk_timer_cpu_ns();
    if (!HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) st->timer_cpu_ns += hk_ractors_ticker_cpu_ns();
    if (S.cfg.mode == HK_MODE_CPU && S.process_cpu > S.start_process_cpu)
        st->process_cpu_ns = (uint64_t)(S.process_cpu - S.start_process_cpu);
}

/* The stats of the span since start or the last clearing snapshot; totals gets those since start. */
void hk_sampler_stats_since_clear(hk_sampler_stats *st, hk_sampler_stats *totals)
{
    fill_totals(totals);
    *st = *totals;
    const hk_sampler_stats *c = &S.cleared;
    st->start_time_ns += c->duration_ns;
    st->duration_ns -= c->duration_ns;
#define SINCE_CLEAR(name, what) st->name -= c->name;
    HK_SAMPLER_COUNTERS(SINCE_CLEAR)
#undef SINCE_CLEAR
}

void hk_sampler_stats_fill(hk_sampler_stats *st)
{
    hk_sampler_stats totals;
    hk_sampler_stats_since_clear(st, &totals);
}
