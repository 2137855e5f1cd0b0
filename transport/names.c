/* Names of the wire enums as docs/PROTOCOL.md, `kinreg sub --format json` and
 * the Python example spell them: one table, so the three never disagree. */
#include "kinreg/transport.h"

#include <string.h>

static const char *const topic_names[] = {
    [KR_TOPIC_POSE] = "pose",   [KR_TOPIC_STATUS] = "status", [KR_TOPIC_REFINE] = "refine",
    [KR_TOPIC_MODEL] = "model", [KR_TOPIC_FINAL] = "final",   [KR_TOPIC_DEPTH] = "depth",
    [KR_TOPIC_MESH] = "mesh"};
static const char *const method_names[] = {"newton", "emicp",     "softassign",
                                           "refine", "predicted", "interpolated"};
static const char *const event_names[] = {"started", "progress", "stalled",  "stopped",
                                          "error",   "lost",     "recovered"};
/* kr_track_state: GOOD 0, POOR 1, LOST 2 (kinreg/track.h). */
static const char *const state_names[] = {"good", "poor", "lost"};

#define NAME_OF(table, i)                                                                          \
    ((i) >= 0 && (size_t)(i) < sizeof(table) / sizeof(table)[0] && (table)[i] ? (table)[i]       \
                                                                                : "unknown")

const char *kr_topic_name(kr_topic topic)
{
    return NAME_OF(topic_names, (int)topic);
}

kr_topic kr_topic_from_name(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof topic_names / sizeof topic_names[0]); i++)
        if (topic_names[i] && !strcmp(name, topic_names[i])) return (kr_topic)i;
    return (kr_topic)0;
}

const char *kr_method_name(int method)
{
    return NAME_OF(method_names, method);
}

const char *kr_event_name(int event)
{
    return NAME_OF(event_names, event);
}

const char *kr_wire_state_name(int state)
{
    return NAME_OF(state_names, state);
}
