/* hot.h — HK_HOT marks the functions of the sampling path. It runs once a
 * millisecond or so, by which time its code has left the instruction cache;
 * hot functions are placed together (.text.hot), in a few lines and one page.
 * ctx: any (an attribute). */
#ifndef HK_HOT_H
#define HK_HOT_H

#define HK_HOT __attribute__((hot))

#endif
