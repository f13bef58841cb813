/* bindings.h — what the Ruby bindings hakari.c and profile_api.c share: a Hash
 * setter and the Integer argument check every error message relies on. */
#ifndef HK_BINDINGS_H
#define HK_BINDINGS_H

#include <ruby.h>

#define SET(h, k, v) rb_hash_aset(h, ID2SYM(rb_intern(k)), v)

/* 1 and *out = v when v is an Integer in [lo, hi], else 0 (a Bignum is out of every range here) */
static inline int hk_int_in(VALUE v, long lo, long hi, long *out)
{
    if (!RB_INTEGER_TYPE_P(v) || !FIXNUM_P(v)) return 0;
    long x = FIX2LONG(v);
    if (x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

#endif
