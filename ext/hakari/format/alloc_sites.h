/* alloc_sites.h — a trace's allocations (`allocations: true`) by method,
 * class and source line, summed from its profile: the samples that carry a
 * "class" label and the alloc_objects / alloc_space values (tracer_allocs.c
 * makes one per site and call-tree node; a decoded pprof file has them too).
 * One method's sites add up over every call path it was called on.
 * ctx: core, pure.
 */
#ifndef HK_ALLOC_SITES_H
#define HK_ALLOC_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "profile.h"

typedef struct hk_alloc_site {
    uint32_t func;        /* the method (function id); 0: outside every method */
    uint32_t klass, file; /* string ids: the class's name, the source file */
    int64_t line;         /* 0 when no Ruby frame was running */
    int64_t objects, bytes;
} hk_alloc_site;

typedef struct hk_alloc_sites {
    hk_alloc_site *sites; /* most objects first (then method, class, file, line) */
    size_t n;
    int64_t objects, bytes; /* the whole profile's */
} hk_alloc_sites;

/* 1 when the profile holds allocations by site (even none), 0 when it was not asked to */
int hk_alloc_sites_present(const hk_profile *p);
/* 0, or -1 when out of memory (out is then empty) */
int hk_alloc_sites_collect(const hk_profile *p, hk_alloc_sites *out);
void hk_alloc_sites_free(hk_alloc_sites *s);

/* the sites the flat and graph reports show when they show every method */
#define HK_ALLOC_SITES_TOP 30

/* The reports' allocation section: its heading, then the top_n sites (0: all) as
 *   objects  bytes  %objects  class  method  file:line
 * Nothing when the profile holds no allocations by site. 0, or -1 when out of memory. */
int hk_alloc_sites_report(const hk_profile *p, size_t top_n, hk_buf *out);

#endif
