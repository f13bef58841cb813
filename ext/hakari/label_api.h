/* label_api.h — Hakari.label and Hakari.labels (label_api.c). */
#ifndef HK_LABEL_API_H
#define HK_LABEL_API_H

#include <ruby.h>

/* ctx: GVL, once at load: defines them on mHakari */
void hk_label_api_init(VALUE mHakari);

#endif
