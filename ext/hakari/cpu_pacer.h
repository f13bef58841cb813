/* cpu_pacer.h — cpu mode's default clock: a timer worker that paces itself on
 * the CPU time of the thread that ran the last sample (and of the process's
 * other threads), so that ticks fall at even steps of CPU time and never in a
 * sleep. Its state is hk_the_sampler.pacer; it reads tick_target and period_ns
 * and ticks through hk_sampler_trigger.
 */
#ifndef HK_CPU_PACER_H
#define HK_CPU_PACER_H

#include <stddef.h>

/* ctx: GVL. Starts the paced worker for the running session; 0, or -1 with a message in err. */
int hk_cpu_pacer_start(char *err, size_t errlen);

#endif
