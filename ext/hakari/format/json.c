/* json.c — see json.h. */
#include "json.h"

#include <stdint.h>

void hk_json_chars(hk_buf *out, const char *s)
{
    for (; *s; s++) {
        uint8_t c = (uint8_t)*s;
        if (c == '"' || c == '\\') hk_buf_printf(out, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == 0x7f) hk_buf_printf(out, "\\u%04x", c);
        else hk_buf_putc(out, c);
    }
}

void hk_json_str(hk_buf *out, const char *s)
{
    hk_buf_putc(out, '"');
    hk_json_chars(out, s);
    hk_buf_putc(out, '"');
}
