/* sampler_waits.c — the time a sample's own capture does not hold: a sample's parts in other
 * states than running (after it, under its stack), in wall mode the samples of the threads
 * waiting while another runs, and the tails of threads' time after their latest samples, at
 * their end and at stop. All with the GVL, from the job, the thread hook and stop (sampler.c).
 */
#include "sampler_int.h"

#include <ruby/debug.h>

#include "cpu_events.h"
#include "stack_walk.h"

/* The pairs of a thread's time in states other than running (parts, from
 * hk_states_take) written at `pair`; returns how many. */
static uint32_t part_pairs(const hk_thread *t, const int64_t parts[HK_NSTATES], uint64_t *pair)
{
    uint32_t k = 0;
    for (int s = 1; s < HK_NSTATES; s++)
        if (parts[s] > 0) {
            pair[2 * k] = HK_AGAIN_WORD(t->seq, s);
            pair[2 * k + 1] = (uint64_t)parts[s];
            k++;
        }
    return k;
}

/* The parts of a sample just committed, as a record of pairs after it: under
 * its stack, each with its state's leaf. ctx: GVL. */
void hk_sampler_take_parts(const hk_thread *t, const int64_t parts[HK_NSTATES])
{
    int any = 0;
    for (int s = 1; s < HK_NSTATES; s++) any |= parts[s] > 0;
    if (!any) return;
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + 2 * HK_NSTATES);
    if (!at) {
        S.dropped_count++; /* the parts are lost: their time is in no sample */
        return;
    }
    uint32_t n = part_pairs(t, parts, at + HEAD_WORDS);
    *(sample_head *)at = (sample_head){.seq = n, .state = HK_SAMPLE_AGAIN};
    if (!S.cfg.aggregate) ((sample_head *)at)->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS + 2 * (size_t)n);
}

/* A waiting thread's weight up to now, split by state. Where Ruby tells
 * nothing of the GVL (no thread event hooks), a thread sampled while another
 * holds it is off it: its time counts as blocked, but for what it ran up to
 * the call it waits in, when it has run since its previous sample (ran: its
 * stack moved, or its own sample came since), read on its CPU clock: running
 * time at the stack it is found at, as any sample's time since the thread's
 * previous one goes. Without it, that run went to the block as blocked: a late
 * tick's gap, several milliseconds on a loaded machine, or up to a period (a
 * thread that spun 250 ms at 10 Hz before a join: 200 ms of it running). */
static int64_t waiting_parts(hk_thread *t, int64_t weight, int64_t now, int ran, int64_t parts[HK_NSTATES])
{
    int64_t running = hk_states_take(t, weight, now, HK_SPLIT_WAITING, parts);
    if (!t->gvl && S.cfg.mode == HK_MODE_WALL) {
        /* its GCs' time (3.2) was on its CPU too, and has its own leaves */
        int64_t on = ran && running > 0 ? hk_states_ran_before_waiting(t, running) - parts[HK_STATE_GC_MARK] - parts[HK_STATE_GC_SWEEP] : 0;
        if (on < 0) on = 0;
        parts[HK_STATE_BLOCKED] += running - on;
        running = on;
    }
    return running;
}

/* a waiting thread's weight up to now (weight_until), numbering it at its first sample */
static int64_t wait_weight(hk_thread *t, int64_t now)
{
    if (!t->seq) t->seq = hk_sampler_next_seq();
    return hk_sampler_weight_until(t, now);
}

/* A waiting thread whose stack changed since its previous sample: captured
 * into a sample of its own. 0, 1 when it has no stack to read (its time waits
 * for its next sample), -1 when the ring is full. */
static int sample_waiting_stack(hk_thread *t, int64_t now)
{
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room);
    if (!at) return -1;
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture_thread(t->vm_thread, at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    if (words <= 0) return 1;
    /* read again: the capture left its mark in the leaf */
    t->spot_valid = hk_stack_walk_spot(t->vm_thread, &t->spot) == 0;
    sample_head *h = (sample_head *)at;
    int64_t running = waiting_parts(t, wait_weight(t, now), now, 1, S.parts);
    *h = (sample_head){.state = HK_TICK_RUNNING | (running ? 0 : HK_HEAD_STACK_ONLY), .weight = running};
    h->seq = t->seq;
    h->labels = hk_labels_of(t->thread);
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
    hk_sampler_take_parts(t, S.parts);
    return 0;
}

/* The threads marked again: records of (thread and state, weight) pairs, a
 * few hundred threads at a time (sampler_int.h), each adding to its previous
 * stack, or to that stack with its state's leaf. 0, or -1 when the ring is full. */
static int sample_unchanged_stacks(size_t count, int64_t now)
{
    size_t i = 0;
    while (count) {
        uint32_t n = count < HK_AGAIN_MAX / HK_NSTATES ? (uint32_t)count : HK_AGAIN_MAX / HK_NSTATES;
        uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + 2 * (size_t)n * HK_NSTATES);
        if (!at) return -1;
        uint64_t *pair = at + HEAD_WORDS;
        uint32_t k = 0;
        for (uint32_t done = 0; done < n; i++) {
            hk_thread *t = &S.threads[i];
            if (!t->again) continue;
            t->again = 0;
            done++;
            int64_t running = waiting_parts(t, wait_weight(t, now), now, 0, S.parts);
            if (running > 0) {
                pair[2 * k] = HK_AGAIN_WORD(t->seq, HK_STATE_RUNNING);
                pair[2 * k + 1] = (uint64_t)running;
                k++;
            }
            k += part_pairs(t, S.parts, pair + 2 * k);
        }
        sample_head *h = (sample_head *)at;
        *h = (sample_head){.seq = k, .state = HK_SAMPLE_AGAIN};
        if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
        hk_ring_commit(&S.ring, HEAD_WORDS + 2 * (size_t)k);
        count -= n;
    }
    return 0;
}

/* Wall mode: the threads not running (blocked in a call without the GVL,
 * or waiting for it) spend their time where they wait, in stacks that cannot
 * change while this thread holds the GVL. Each gets its sample here, weighed
 * up to `now` (the tick), at the stack it waits in: without this, a thread's
 * wait would go to wherever its next sample found it, once running again.
 * A thread whose stack has not changed since its previous sample (its spot,
 * stack_walk.h) is not walked again: its sample adds to that stack, and all
 * such samples of a tick share one record (one trip to the ring's shared
 * lines, not one per thread). */
void hk_sampler_sample_waiting_threads(const hk_thread *cur, int64_t now)
{
    size_t again = 0;
    for (size_t i = 0; i < S.nthreads; i++) {
        hk_thread *t = &S.threads[i];
        hk_stack_spot spot;
        if (t == cur || t->own || !t->vm_thread || hk_stack_walk_spot(t->vm_thread, &spot) < 0) continue;
        if (t->spot_valid && spot.mark && spot.cfp == t->spot.cfp && spot.pc == t->spot.pc &&
            spot.mark == t->spot.mark) {
            t->again = 1;
            again++;
        } else if (sample_waiting_stack(t, now) < 0) {
            break; /* the worker is behind: the weights wait for the next tick */
        }
    }
    if (again && sample_unchanged_stacks(again, now) < 0) {
        for (size_t i = 0; i < S.nthreads; i++) S.threads[i].again = 0;
        S.dropped_count++;
    }
}

/* A record with no capture of thread seq's running time after its latest
 * sample (HK_SAMPLE_TAIL), in label set `labels` where it had no sample.
 * 0, or -1 when the ring is full (counted). */
static int record_tail(uint32_t seq, int64_t weight, uint32_t labels)
{
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS);
    if (!at) {
        S.dropped_count++;
        return -1;
    }
    *(sample_head *)at = (sample_head){.seq = seq, .state = HK_SAMPLE_TAIL, .weight = weight, .labels = labels};
    if (!S.cfg.aggregate) ((sample_head *)at)->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS);
    return 0;
}

/* A thread's time since its latest sample, at its end or at stop (now on its
 * clock), split by state: its running part a record with no capture
 * (HK_SAMPLE_TAIL), which the resolver puts under that sample's stack with an
 * [unsampled] leaf, the other states' parts after it, under that stack with
 * their leaves (a thread that read a pipe until it ended was blocked in the
 * read, not running unsampled). Without it, the time a thread used after its
 * last sample would be in no profile: all of it for a thread that lives less
 * than a period. own: the thread itself, at its end; else another thread,
 * waiting at stop. ctx: GVL. */
void hk_sampler_take_thread_tail(hk_thread *t, int64_t now, int own)
{
    if (t->prev_clock < 0 || now < 0 || t->own) return;
    int64_t weight = now - t->prev_clock;
    t->prev_clock = now;
    if (weight <= 0) return;
    if (!t->seq) t->seq = hk_sampler_next_seq();
    int64_t running = own ? hk_states_take(t, weight, now, HK_SPLIT_OWN_END, S.parts) : waiting_parts(t, weight, now, !t->spot_valid, S.parts);
    /* another thread's fiber slots are read only where it waits (it may have ended) */
    if (running > 0 && record_tail(t->seq, running, own ? hk_labels_of(t->thread) : 0) < 0) return;
    hk_sampler_take_parts(t, S.parts);
}

/* cpu mode: the teardowns of threads that ended, measured since the last
 * call (sampler_threads.c), as tails of those threads. ctx: GVL. */
void hk_sampler_take_exits(void)
{
    uint32_t seqs[32];
    int64_t ns[32];
    uint64_t lost = 0;
    for (size_t n; (n = hk_sampler_exits_take(seqs, ns, 32, &lost)) > 0;)
        for (size_t i = 0; i < n; i++) record_tail(seqs[i], ns[i], 0);
    S.dropped_count += lost;
}

/* At stop, the other threads' time since their latest samples: their CPU in
 * cpu mode, their wall time in wall mode where no sample has taken it up to
 * the stop (sample_waiting_threads). ctx: GVL. */
void hk_sampler_take_other_tails(const hk_thread *cur)
{
    for (size_t i = 0; i < S.nthreads; i++) {
        hk_thread *t = &S.threads[i];
        if (t == cur) continue;
        int64_t now = S.cfg.mode == HK_MODE_WALL ? S.stop_mono_ns
                      : S.mn                    ? hk_mn_cpu_now(t->thread)
                      : t->tid > 0              ? hk_clock_ns(hk_thread_cpu_clock(t->tid))
                                                : -1;
        /* a thread never sampled that used next to no CPU (a parked one's way into its wait
         * after start, a wake-up) is left out: under a hundredth of a period is noise */
        if (S.cfg.mode == HK_MODE_CPU && !t->seq && t->prev_clock >= 0 && now - t->prev_clock < S.period_ns / 100)
            continue;
        hk_sampler_take_thread_tail(t, now, 0);
    }
}
