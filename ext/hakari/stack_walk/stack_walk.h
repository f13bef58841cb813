/* stack_walk.h — the current thread's frames and executing lines, as
 * rb_profile_frames(0, limit, frames, lines) gives them, read in the way that
 * costs the profiled thread least: captured in the job, resolved later.
 *
 * Between two samples the program (and, in a VM, its neighbours) evicts from
 * the cache everything rb_profile_frames touches: a method entry, its
 * definition, the iseq, its body and its line table for every frame, one
 * dependent miss after another. Where this Ruby's control-frame layout is
 * known (stack_walk_vm.c), the walker reads the control frames itself and
 * resolves a frame only when it differs from the frame at the same depth in
 * the previous sample; line numbers come from a cache keyed by the program
 * counter. Elsewhere, or when its start-up self-check fails, it is
 * rb_profile_frames. HAKARI_STACK_WALK=ruby forces rb_profile_frames;
 * HAKARI_STACK_WALK=verify walks both ways every sample and counts the samples
 * on which they differ, or on which frames reported unchanged were not (tests).
 */
#ifndef HK_STACK_WALK_H
#define HK_STACK_WALK_H

#include <ruby.h>
#include <stdint.h>

/* ctx: GVL, in a NEWOBJ hook (the object mode's and the tracer's). The slot a new object takes
 * in Ruby's heap, in bytes: all that is known of its size there, before its contents are written
 * (a long string's buffer, say, comes after). From 3.2 the heap has slots of several sizes and an
 * object's embedded contents live in its slot; before, every slot is an RVALUE of five words.
 * Reads the slot's page header: no allocation. */
uint32_t hk_heap_slot_bytes(VALUE obj);

/* ctx: GVL, in a NEWOBJ hook. The class a new object is counted under: its real class (not a
 * singleton's), or 0 for the VM's internal objects (imemos, iclasses, nodes), whose class
 * field holds no class of the program's. */
VALUE hk_new_object_class(VALUE obj);

/* Which walker to use: the fastest that passes its self-check, rb_profile_frames
 * alone (HAKARI_STACK_WALK=ruby), or both at every sample (HAKARI_STACK_WALK=verify). */
typedef enum { HK_WALK_AUTO = 0, HK_WALK_RUBY = 1, HK_WALK_VERIFY = 2 } hk_walk_choice;

/* ctx: GVL, at sampler start. Chooses the walker (how, the self-check) and
 * sizes its tables for stacks up to limit frames; 0, or -1 when out of memory. */
int hk_stack_walk_start(int limit, hk_walk_choice how);

/* A sample's stack is read in two steps. The job captures it: it copies what
 * the control frames hold now, and looks nothing up, so the tables that turn
 * them into frames and lines stay out of the program's caches. The sampler
 * resolves its captures later on the timer's worker (or at stop), one thread
 * at a time, in the order they were taken, each exactly once. Resolving reads
 * no Ruby heap object (GC.compact may be moving them meanwhile), only what the
 * capture copied and the malloc'd memory it points to. A capture holds VALUEs
 * that only it may keep alive until it is resolved (hk_stack_walk_mark_capture). */

/* ctx: GVL (the job). Writes the current thread's (or fiber's) stack into
 * out, which has room words: at least hk_stack_walk_capture_room(). Returns
 * the words written; 0 when room is short, -1 when no stack could be read. */
long hk_stack_walk_capture(uint64_t *out, size_t room);
/* the most words one capture can take */
size_t hk_stack_walk_capture_room(void);
/* how many words the capture at cap takes */
size_t hk_stack_walk_capture_words(const uint64_t *cap);
/* its number: never 0, never reused, one more than the capture before it */
uint64_t hk_stack_walk_capture_number(const uint64_t *cap);
/* ctx: GC mark phase. Pins what a capture not yet resolved holds. */
void hk_stack_walk_mark_capture(const uint64_t *cap);
/* ctx: GVL, after hk_stack_walk_capture. The address where the execution
 * context it read keeps its leaf control frame pointer, for the worker to
 * read at a tick; NULL when the capture was not the control-frame walker's. */
const void *hk_stack_walk_leaf_slot(void);
/* ctx: GVL, after hk_stack_walk_capture. The VM's own struct of the thread
 * whose stack it read (what Thread.current wraps), so the caller can tell the
 * thread without another thread-local read; NULL when unknown. */
const void *hk_stack_walk_thread(void);

/* Other threads' stacks, for wall mode: a thread that is not running spends
 * its time where it waits. ctx: GVL, on another thread than the one read: a
 * thread without the GVL cannot change its control frames. */

/* the VM's struct of the Thread object th (what hk_stack_walk_thread gives
 * when it runs), or NULL when this walker cannot read another thread's stack */
const void *hk_stack_walk_thread_of(VALUE th);
/* ctx: any thread. 0 when the VM thread (from hk_stack_walk_thread_of) belongs to another Ractor
 * than the one whose thread started the walker (the main one) */
int hk_stack_walk_main_ractor(const void *vm_thread);
/* ctx: any thread. The VM's struct of the Ractor the VM thread belongs to, or NULL when this
 * walker cannot tell (its pointer only: what it holds is the caller's to check) */
const void *hk_stack_walk_ractor_of(const void *vm_thread);
/* Where a thread's stack stands: its leaf control frame, that frame's pc and
 * the mark the latest capture of it left there (0: frames are not marked).
 * Two equal readings with a mark: the stack has not changed between them
 * (its leaf was not popped, nothing was pushed on it for good, and it has
 * not moved on). 0, or -1 when the thread has no stack (not started, ended). */
typedef struct hk_stack_spot {
    uintptr_t cfp, pc;
    uint64_t mark;
} hk_stack_spot;
int hk_stack_walk_spot(const void *vm_thread, hk_stack_spot *out);
/* hk_stack_walk_capture of the thread's stack; -1 when it has none to read */
long hk_stack_walk_capture_thread(const void *vm_thread, uint64_t *out, size_t room);
/* ctx: any thread, async-signal-safe (the timer's worker). Asks the thread
 * to run the postponed jobs at its next interrupt check, as Ruby's own
 * rb_postponed_job_register does for the context it picks. The thread's
 * Thread object must be kept alive (the sampler marks it). */
void hk_stack_walk_flag_jobs(const void *vm_thread);
/* ctx: GVL, a postponed job. The calling thread no longer has the postponed jobs flagged: a job
 * that just asked Ruby for another run, meant for another thread, does not run it here again.
 * Only where hk_stack_walk_jobs_flaggable() (the threads' layout is known): else it does nothing. */
void hk_stack_walk_unflag_own_jobs(void);
int hk_stack_walk_jobs_flaggable(void);

/* ctx: the sampler's resolve lock (any thread, no GVL needed). The frames of
 * the capture at cap, as rb_profile_frames(0, limit,
 * frames, lines) gave them when it was taken (leaf first), or -1 when they
 * are lost (out of memory). *cut is set when the stack went on below what
 * was captured (deeper than the walker keeps: the result is truncated
 * whatever its length). What the caller already has is not copied again:
 * known is the number (hk_stack_walk_capture_number) of the capture whose
 * frames the caller still holds, at their distances from the root, 0 for
 * none. *same receives a number of frames, counted from the root, equal
 * (frame and line) to that capture's at the same distance from the root (not
 * always all such frames); it is 0 unless known was the capture just before
 * this one, and 0 when the result was cut at limit or *cut. Only frames
 * [0, n - *same) and frame 0 (the leaf) are sure to be written.
 * Consecutive samples share most of their stack, so at any depth a sample
 * costs what changed. */
int hk_stack_walk_resolve(const uint64_t *cap, VALUE *frames, int *lines, int limit, uint64_t known, int *same,
                          int *cut);
/* ctx: the resolve lock, after hk_stack_walk_resolve. HAKARI_STACK_WALK=verify: the frames
 * rb_profile_frames gave at that capture, all written, leaf first, so the
 * caller can check what it kept of the previous sample; -1 when not verifying. */
int hk_stack_walk_checked(const VALUE **frames, const int **lines);
/* ctx: the resolve lock. Counts a sample on which the two ways differed (the first is printed). */
void hk_stack_walk_report_mismatch(const char *what, int n, int m, int same);
/* ctx: GVL. Starts loading what the next capture reads first, so that it
 * arrives together with the caller's own state rather than after it. */
void hk_stack_walk_prefetch(void);

/* Where a sample's time belongs. A tick's period ends on the worker; the job
 * runs at the thread's next safepoint, which may be inside a call made after
 * the tick: typically the blocking call (sleep, read) that ends a stretch of
 * work, whose safepoint on entry would otherwise collect the work before it.
 * The worker reads the thread's leaf control frame pointer at the tick; the
 * sample leaves out the frames pushed since, which were not running at the tick. */

/* ctx: any thread, the worker's signal handler too. The pointer kept at slot,
 * read by a system call so that a slot freed since (a thread or fiber
 * collected) cannot fault; 0 when it cannot be read. */
uintptr_t hk_stack_walk_read_leaf(const void *slot);
/* ctx: the resolve lock, right after hk_stack_walk_resolve(cap). How many of the frames it
 * returned, from the top, sit in control frames pushed since slot held leaf;
 * 0 when slot is not the captured context's or leaf is not in its stack. */
int hk_stack_walk_pushed_since(const uint64_t *cap, const void *slot, uintptr_t leaf);

/* Synthesized frames (synth_frames.c): methods the VM runs through a
 * specialized instruction (Integer#+ as opt_plus, String#=~ as
 * opt_regexpmatch2, Hash#[] as opt_aref, ...) push no frame, so their time
 * would sit in their caller's. At a tick the worker reads which one the
 * leaf Ruby frame is running and the class of its receiver; the sample gets
 * that method's entry as its leaf, above that frame. */

/* ctx: GVL, at start, after hk_stack_walk_start. Learns this Ruby's
 * specialized instructions (once per process); 1 when this profile
 * synthesizes frames (want, and they can be read here), else 0. *how says
 * which, and why not. */
int hk_synth_start(int want, const char **how);
/* ctx: GVL, at stop. */
void hk_synth_stop(void);
/* ctx: any. YJIT is on (it may be enabled while a profile runs) */
int hk_synth_yjit_now(void);
/* ctx: any thread, async-signal-safe (the worker at a tick). The number of
 * the method the specialized instruction the Ruby frame at cfp runs stands
 * for, and that frame's iseq in *iseq; 0 when it runs none (or it cannot be
 * told, or the profile does not synthesize). */
uint32_t hk_synth_read(uintptr_t cfp, uintptr_t *iseq);
/* ctx: the thread running the frame at cfp, with the GVL (object mode's NEWOBJ hook, inside the
 * instruction that allocates): the same, read directly, as nothing can move or be freed meanwhile. */
uint32_t hk_synth_read_here(uintptr_t cfp, uintptr_t *iseq);
/* ctx: any. The method entry of number id (pinned for the process's life), or 0. */
VALUE hk_synth_frame(uint32_t id);
/* ctx: GC mark phase. */
void hk_synth_mark(void);
/* ctx: the resolve lock, right after hk_stack_walk_resolve(cap). Whether the
 * capture read the context at slot, holds its control frame at cfp as a
 * Ruby frame running iseq, and gave a frame for it: a frame read at the tick
 * is still the one the sample's stack holds. cfp and iseq are only compared. */
int hk_stack_walk_ran_at(const uint64_t *cap, const void *slot, uintptr_t cfp, uintptr_t iseq);
/* ctx: any thread, async-signal-safe. Copies bytes at `at` into to, by a
 * system call that cannot fault (the memory may be freed meanwhile); 1 when
 * all were read. */
int hk_stack_walk_read_words(const void *at, void *to, size_t bytes);
/* the same for n pieces, copied one after the other by one system call */
struct iovec;
int hk_stack_walk_read_vec(const struct iovec *local, const struct iovec *remote, int n);

/* ctx: GVL, at stop. Frees the tables; unpins what they held. */
void hk_stack_walk_stop(void);
/* ctx: GVL, at a profile's stop. Empties the tables (unpinning what they held)
 * and keeps them for the next start with the same limit, unless they grew
 * past what start reserved: then frees them (sampler.c keep_tables says why). */
void hk_stack_walk_end(void);
/* ctx: GC mark phase. Pins the iseqs and method entries the caches are keyed on. */
void hk_stack_walk_mark(void);
size_t hk_stack_walk_memsize(void);
/* "vm control frames", "rb_profile_frames", or why the fast walker is not used */
const char *hk_stack_walk_kind(void);
/* HAKARI_STACK_WALK=verify: samples whose two walks differed */
uint64_t hk_stack_walk_mismatches(void);

#endif
