/* formats.h — the one list of output formats: each one's name, encoder,
 * default file name and the file names that select it. The bindings encode
 * through it and Ruby reads it (Hakari::FORMATS, Hakari.format_for, the CLI's
 * --format and -o), so a new format is one entry in formats.c.
 * ctx: any (constant data, pure functions). No ruby.h.
 */
#ifndef HK_FORMATS_H
#define HK_FORMATS_H

#include <stddef.h>

#include "buf.h"
#include "profile.h"

/* Writes p in the format onto out; 0, or -1 when out of memory. */
typedef int (*hk_format_encode_fn)(const hk_profile *p, hk_buf *out);

typedef struct hk_format {
    const char *name;         /* as Ruby's Symbol and the CLI's --format spell it */
    hk_format_encode_fn encode;
    const char *default_file; /* the file written when no path is given */
    const char *suffix;       /* a path ending so selects it (the longest match wins), or NULL */
    const char *prefix;       /* or a file name beginning so (callgrind.out.*), or NULL */
    int text;                 /* it writes UTF-8 text; else bytes (gzipped protobuf) */
} hk_format;

/* every format, the default (pprof) first */
extern const hk_format hk_formats[];
extern const size_t hk_nformats;

/* the format named name, or NULL */
const hk_format *hk_format_named(const char *name);
/* the format a path's name selects: a prefix of its file name, else the
 * longest suffix that matches, else the first (pprof) */
const hk_format *hk_format_for_path(const char *path);

#endif
