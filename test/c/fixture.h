/* fixture.h — profiles to test with, and checks on profiles.
 *
 * fixture_profile builds a profile that uses every part of the model: three
 * sample types, functions with system names, odd names (embedded NUL, UTF-8,
 * empty) and extreme start lines, locations with negative lines, samples with
 * empty stacks, deep stacks, string and number labels, extreme values,
 * comments, period, times. Deterministic for a given seed.
 * fixture_valid checks the model's invariants (every id and string index in
 * range), which any decoded profile must satisfy; fixture_equal compares two
 * profiles field by field, strings by content. Both return 0, or -1 with the
 * first difference written to why.
 */
#ifndef HK_FIXTURE_H
#define HK_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "profile.h"

hk_profile *fixture_profile(uint32_t seed, size_t nsamples);
int fixture_valid(const hk_profile *p, char *why, size_t n);
int fixture_equal(const hk_profile *a, const hk_profile *b, char *why, size_t n);
/* the profile encoded (gzip or not) into a fresh buffer; aborts on failure */
hk_buf fixture_encode(const hk_profile *p, int gzip);
/* a small xorshift generator, so runs are repeatable */
uint32_t fixture_rand(uint32_t *state);
/* sample i's locations (leaf first), read into one of a few rotating buffers: a test may
 * hold the last four at once */
const uint32_t *fixture_locs(const hk_profile *p, size_t i);

#endif
