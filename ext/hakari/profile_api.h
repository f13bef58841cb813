/* profile_api.h — Hakari::Profile (profile_api.c): a profile model with its counters, samples,
 * label tables, encoders and reports, as Ruby sees it. */
#ifndef HK_PROFILE_API_H
#define HK_PROFILE_API_H

#include <ruby.h>

#include "profile.h"
#include "sampler.h"
#include "tracer.h"

/* ctx: GVL. A Profile owning p (freed with it): a sampler's (st), a tracer's (ts), or with
 * neither one read from a file, whose counters are its header's. */
VALUE hk_profile_api_wrap(hk_profile *p, const hk_sampler_stats *st, const hk_tracer_stats *ts);
/* ctx: GVL. The profile a Profile holds; TypeError for anything else. */
const hk_profile *hk_profile_api_get(VALUE profile);
/* ctx: GVL, once at load: defines Hakari::Profile under mHakari */
void hk_profile_api_init(VALUE mHakari);

#endif
