/* strtab.h — interned string table: bytes -> dense index, index 0 is always "".
 *
 * Layout: the bytes of every distinct string, NUL-terminated, back to back in
 * `bytes`; `offs[i]`/`lens[i]` locate string i; `index` is open addressing over
 * (i + 1). Strings may contain any byte, including NUL (lengths are explicit).
 * ctx: core; one owner at a time.
 */
#ifndef HK_STRTAB_H
#define HK_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct hk_strtab {
    char *bytes;
    size_t bytes_len, bytes_cap;
    uint32_t *offs, *lens;
    uint64_t *hashes;
    size_t count, cap;
    uint32_t *index;
    size_t index_cap;
} hk_strtab;

/* 0, or -1 when out of memory; the table then holds "" at index 0 */
int hk_strtab_init(hk_strtab *t);
void hk_strtab_free(hk_strtab *t);
/* index of the string (existing or new), or -1 when out of memory */
int64_t hk_strtab_intern(hk_strtab *t, const char *s, size_t len);
/* NUL-terminated view of string i (i < count); *len receives the byte length if non-NULL */
const char *hk_strtab_get(const hk_strtab *t, uint32_t i, size_t *len);
size_t hk_strtab_memsize(const hk_strtab *t);

#endif
