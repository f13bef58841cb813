/* pprof_fields.h — the field numbers of github.com/google/pprof's
 * proto/profile.proto, for the pprof encoder and decoder. Tag constants are
 * named after the field.
 */
#ifndef HK_PPROF_FIELDS_H
#define HK_PPROF_FIELDS_H

enum { /* Profile */
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14
};
/* hakari's own field of Profile, not profile.proto's: a trace's fold edges (profile.h), one
 * message each. Readers of profile.proto skip a field they do not know, as go tool pprof does. */
enum { PROFILE_HAKARI_FOLD_EDGE = 1000 };
enum { FOLD_EDGE_CALLER = 1, FOLD_EDGE_CALLEE = 2, FOLD_EDGE_CALLS = 3, FOLD_EDGE_SELF = 4, FOLD_EDGE_WAIT = 5,
       FOLD_EDGE_OUTER_CALLS = 6, FOLD_EDGE_TOTAL = 7, FOLD_EDGE_OUTER_SELF = 8, FOLD_EDGE_OUTER_WAIT = 9,
       FOLD_EDGE_OUTER_WAIT_TOTAL = 10 };
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3, LABEL_NUM_UNIT = 4 };
enum { LOCATION_ID = 1, LOCATION_ADDRESS = 3, LOCATION_LINE = 4 };
enum { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum { FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
       FUNCTION_START_LINE = 5 };

#endif
