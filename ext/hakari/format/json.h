/* json.h — JSON strings for the encoders that write JSON (html_encode.c,
 * speedscope_encode.c). ctx: core, pure. */
#ifndef HK_JSON_H
#define HK_JSON_H

#include "buf.h"

/* s's characters as the inside of a JSON string: quotes, backslashes and
 * control characters escaped, and "<" too, so that no string can close an
 * HTML page's script element */
void hk_json_chars(hk_buf *out, const char *s);
/* s as a JSON string, quotes included */
void hk_json_str(hk_buf *out, const char *s);

#endif
