/* sampler_state.c — the sampler's one state (sampler_int.h). Defined in a file
 * of its own so that each of the sampler's files depends on it and it on none:
 * the files call each other one way (sampler.c above sampler_resolve.c, both
 * above sampler_threads.c), never round a circle (script/check_layers). */
#include "sampler_int.h"

hk_sampler hk_the_sampler;
hk_ractor_samples hk_the_ractor_samples;
