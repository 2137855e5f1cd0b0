/* kinreg sub — subscribe to a kinreg pose stream and print TUM or JSON lines,
 * reporting sequence gaps. Output formats are documented in docs/PROTOCOL.md;
 * tools/python/kinreg_sub.py prints the same lines from Python. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/commands.h"
#include "tools/cli/common_options.h"
#include "sub_final.h"
#include "tools/cli/stdout_check.h"
#include "tools/cli/terminal_text.h"
#include "kinreg/transport.h"

/* Receive in slices so a signal that lands just before a wait is noticed
 * within this long, whatever the --timeout. */
#define SLICE_MS 200

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

typedef struct {
    bool json, follow;
    unsigned topics;
    uint64_t count;   /* 0 = unlimited */
    double timeout_s; /* <= 0 = wait forever */
    const char *endpoint;
    const char *curve_server, *curve_secret; /* key files, or NULL */
    sub_final *final; /* --final: poses held, printed at the end; NULL = off */
} sub_options;

typedef struct {
    uint64_t received[KR_TOPIC_SLOTS]; /* per kr_topic */
    uint64_t gaps, missed, malformed;
    uint64_t nonfinite; /* poses not printed as TUM lines: a value was NaN or infinite */
    uint64_t not_unit;  /* ... or the quaternion was not of unit length */
    bool out_failed;    /* a write to stdout failed: the program stopped there */
} sub_totals;

/* --topics LIST into a mask; one line on stderr when it is not a list of
 * topics. */
static int parse_topics(const char *list, unsigned *mask)
{
    char buf[128];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) {
        fprintf(stderr, "kinreg sub: --topics is too long (%zu bytes): name each topic once\n",
                strlen(list));
        return -1;
    }
    *mask = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        kr_topic t = kr_topic_from_name(tok);
        if (!t) {
            fprintf(stderr,
                    "kinreg sub: unknown topic '%s' (expected pose, refine, status, model, "
                    "final, depth, mesh)\n",
                    tok);
            return -1;
        }
        *mask |= 1u << t;
    }
    if (!*mask) fprintf(stderr, "kinreg sub: --topics '%s' names no topic\n", list);
    return *mask ? 0 : -1;
}

/* --count N: digits only, at least 1. */
static bool count_option(const char *arg, uint64_t *count)
{
    char *end = NULL;
    errno = 0;
    *count = strtoull(arg, &end, 10);
    return !errno && *arg && !*end && *count != 0 && arg[0] != '-';
}

/* --timeout SEC: more than 0, at most 1e6. */
static bool timeout_option(const char *arg, double *seconds)
{
    char *end = NULL;
    *seconds = strtod(arg, &end);
    return *arg && !*end && *seconds > 0 && *seconds <= 1e6;
}

typedef struct {
    sub_options o;
    const char *topics; /* --topics, checked once the format is known */
    bool final;
} sub_args;

#define SUB_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                                                 \
    TEXT(KR_HELP("usage: kinreg sub [OPTIONS] ENDPOINT\n"                                          \
                 "\n"                                                                              \
                 "Subscribe to a kinreg pose stream (e.g. tcp://127.0.0.1:5555) and print one "    \
                 "line per\n"                                                                      \
                 "message. Sequence gaps (lost messages) and a summary go to stderr.\n"            \
                 "\n"))                                                                            \
    OPT(FORMAT, ('f', "format", "tum|json", KR_REFUSAL("%s: %s must be tum or json, not '%s'")),   \
        if (!strcmp(arg, "json")) a->o.json = true;                                                \
        else KR_REFUSE_UNLESS(!strcmp(arg, "tum")),                                                \
        KR_HELP("tum (default): \"timestamp tx ty tz qx qy qz qw\" per pose,\n"                    \
                "refine or final message on stdout, status messages on\n"                          \
                "stderr; json: one JSON object per message with every field"))                     \
    OPT(TOPICS, (0, "topics", "LIST", KR_TEXT), a->topics = arg,                                   \
        KR_HELP("comma-separated pose,refine,status,model,final,depth,mesh\n"                      \
                "(model: one line per chunk of a model snapshot, its header\n"                     \
                "fields only; depth: one line per depth thumbnail, likewise;\n"                    \
                "mesh: one line per chunk of the surface, likewise;\n"                             \
                "final: the poses the run's final trajectory changed, sent\n"                      \
                "at its end) (default: pose,status for tum; for json\n"                            \
                "pose,refine,status,final)"))                                                      \
    OPT(COUNT, (0, "count", "N", KR_REFUSAL("%s: %s needs a positive integer, not '%s'")),         \
        KR_REFUSE_UNLESS(count_option(arg, &a->o.count)),                                          \
        KR_HELP("exit after N pose/refine/final messages"))                                        \
    OPT(FINAL, (0, "final", NULL, KR_FLAG), a->final = true,                                       \
        KR_HELP("tum: hold the poses and print, once the stream has ended\n"                       \
                "(or at --count, --timeout or Ctrl-C), one line per frame\n"                       \
                "in frame order, a 'final' message's pose in place of its\n"                       \
                "frame's: the final trajectory (kinreg run --fill on)"))                           \
    OPT(TIMEOUT, ('T', "timeout", "SEC", KR_REFUSAL("%s: %s needs seconds > 0, not '%s'")),        \
        KR_REFUSE_UNLESS(timeout_option(arg, &a->o.timeout_s)),                                    \
        KR_HELP("exit when no message arrives for SEC seconds"))                                   \
    OPT(FOLLOW, (0, "follow", NULL, KR_FLAG), a->o.follow = true,                                  \
        KR_HELP("keep going after a status \"stopped\" or \"error\" message\n"                     \
                "(default: exit when the publisher says it has ended)"))                           \
    OPT(CURVE_SERVER, (0, "curve-server", "FILE", KR_TEXT), a->o.curve_server = arg,               \
        KR_HELP("the publisher's public key (its NAME.key): encrypted,\n"                          \
                "authenticated stream (docs/SECURITY.md); needs --curve-secret"))                  \
    OPT(CURVE_SECRET, (0, "curve-secret", "FILE", KR_TEXT), a->o.curve_secret = arg,               \
        KR_HELP("this subscriber's key pair (NAME.key_secret from kinreg\n"                        \
                "keygen), whose public key the publisher must allow"))                             \
    OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))                                     \
    TEXT(KR_HELP("\n"                                                                              \
                 "Exit status: 0 done (count reached, stream stopped, idle timeout or Ctrl-C),\n"  \
                 "1 nothing arrived before the timeout, the publisher ended with an error, or a\n" \
                 "transport error; 2 usage error; 4 standard output could not be written (the\n"   \
                 "program stops at the first line that fails).\n"                                  \
                 "Wire format and JSON fields: docs/PROTOCOL.md.\n"))
KR_OPTION_TABLE(sub_option_table, SUB_OPTIONS, sub_args, a, NULL);

/* sub's -t and -n were its topics and count; every other command has -t
 * for --trajectory and -n for --frames. */
static const kr_retired_letter sub_retired[] = {{'t', "topics", "-t is --trajectory in run"},
                                                {'n', "count", "-n is --frames in run"},
                                                {0, NULL, NULL}};
static const kr_command sub_command = {"sub", &sub_option_table, {25, 6, 2}, 0, sub_retired};

/* Returns -1 to exit with `*code`, 0 to run. */
static int parse_options(int argc, char **argv, sub_options *o, int *code)
{
    sub_args a;
    memset(&a, 0, sizeof a);
    int rc = kr_command_parse(&sub_command, argc, argv, &a);
    *o = a.o;
    const char *topics = a.topics;
    bool final = a.final;
    if (rc >= 0) {
        *code = rc;
        return -1;
    }
    *code = KR_EXIT_USAGE;
    if (optind != argc - 1) {
        kr_command_usage_error(&sub_command, "expected one ENDPOINT, e.g. tcp://127.0.0.1:5555");
        return -1;
    }
    o->endpoint = argv[optind];
    if (!o->curve_server != !o->curve_secret) {
        fprintf(stderr,
                "kinreg sub: CURVE needs both --curve-server (the publisher's NAME.key) and "
                "--curve-secret (this subscriber's NAME.key_secret)\n");
        return -1;
    }
    if (final && (o->json || topics)) {
        fprintf(stderr, "kinreg sub: --final prints TUM lines of the topics pose and final: it "
                        "takes neither --format json nor --topics\n");
        return -1;
    }
    if (final) {
        static sub_final held;
        o->final = &held;
        o->topics = (1u << KR_TOPIC_POSE) | (1u << KR_TOPIC_FINAL) | (1u << KR_TOPIC_STATUS);
    } else if (topics) {
        if (parse_topics(topics, &o->topics) != 0) return -1;
    } else {
        o->topics = (1u << KR_TOPIC_POSE) | (1u << KR_TOPIC_STATUS);
        if (o->json) o->topics |= (1u << KR_TOPIC_REFINE) | (1u << KR_TOPIC_FINAL);
    }
    return 0;
}

/* JSON has no NaN or infinity: print null for them. %.17g round-trips a
 * double exactly, %.9g a float. */
static void json_number(FILE *f, double v, int digits)
{
    if (isfinite(v))
        fprintf(f, "%.*g", digits, v);
    else
        fputs("null", f);
}

static void json_float(FILE *f, const char *key, double v, int digits)
{
    fprintf(f, ",\"%s\":", key);
    json_number(f, v, digits);
}

static void json_array(FILE *f, const char *key, const double *v, int n)
{
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        json_number(f, v[i], 17);
    }
    fputc(']', f);
}

static void print_pose_json(const kr_pose_msg *p, uint64_t gap)
{
    printf("{\"topic\":\"%s\",\"seq\":%" PRIu64 ",\"frame\":%" PRIu64, kr_topic_name(p->topic),
           p->seq, p->frame_index);
    json_float(stdout, "timestamp", p->timestamp, 17);
    json_array(stdout, "t", p->t, 3);
    json_array(stdout, "q", p->q, 4);
    printf(",\"state\":\"%s\",\"method\":\"%s\",\"iterations\":%u", kr_wire_state_name(p->state),
           kr_method_name(p->method), (unsigned)p->iterations);
    json_float(stdout, "inlier_fraction", p->inlier_fraction, 9);
    json_float(stdout, "rms", p->rms, 9);
    json_float(stdout, "condition", p->condition, 9);
    json_float(stdout, "latency_ms", p->latency_ms, 9);
    /* The covariance whole or null (unknown: a LOST frame, a refine or
     * interpolated pose, a version 1-4 sender). */
    bool known = true;
    for (int i = 0; i < 21; i++)
        known = known && isfinite(p->covariance[i]);
    if (known) {
        fputs(",\"covariance\":[", stdout);
        for (int i = 0; i < 21; i++)
            printf(i ? ",%.9g" : "%.9g", p->covariance[i]);
        fputc(']', stdout);
    } else {
        fputs(",\"covariance\":null", stdout);
    }
    printf(",\"gap\":%" PRIu64 "}\n", gap);
}

static void print_status_json(const kr_status_msg *s, uint64_t gap)
{
    printf("{\"topic\":\"status\",\"seq\":%" PRIu64 ",\"event\":\"%s\",\"state\":\"%s\"", s->seq,
           kr_event_name(s->event), kr_wire_state_name(s->state));
    printf(",\"frames_in\":%" PRIu64 ",\"frames_out\":%" PRIu64 ",\"frames_dropped\":%" PRIu64
           ",\"frames_lost\":%" PRIu64,
           s->frames_in, s->frames_out, s->frames_dropped, s->frames_lost);
    json_float(stdout, "fps", s->fps, 9);
    printf(",\"model_points\":%" PRIu64 ",\"messages_dropped\":%" PRIu64
           ",\"frames_total\":%" PRIu64 ",\"text\":",
           s->model_points, s->messages_dropped, s->frames_total);
    kr_json_string(stdout, s->text);
    printf(",\"gap\":%" PRIu64 "}\n", gap);
}

/* A model chunk's header: what a viewer needs to check it got a snapshot
 * whole (the packed points are for programs, not lines). */
static void print_model_json(const kr_model_msg *m, uint64_t gap)
{
    printf("{\"topic\":\"model\",\"seq\":%" PRIu64 ",\"snapshot\":%" PRIu64 ",\"frame\":%" PRIu64
           ",\"total_points\":%u,\"first_point\":%u,\"count\":%u,\"chunk\":%u,\"chunks\":%u",
           m->seq, m->snapshot, m->frame, m->total_points, m->first_point, m->count, m->chunk,
           m->chunks);
    json_float(stdout, "scale", m->scale, 9);
    printf(",\"gap\":%" PRIu64 "}\n", gap);
}

/* A mesh chunk's header (the triangles are for programs, not lines). */
static void print_mesh_json(const kr_mesh_msg *m, uint64_t gap)
{
    printf("{\"topic\":\"mesh\",\"seq\":%" PRIu64 ",\"snapshot\":%" PRIu64 ",\"frame\":%" PRIu64
           ",\"total_faces\":%u,\"first_face\":%u,\"vertices\":%u,\"faces\":%u,\"chunk\":%u,"
           "\"chunks\":%u",
           m->seq, m->snapshot, m->frame, m->total_faces, m->first_face, m->vertices, m->faces,
           m->chunk, m->chunks);
    json_float(stdout, "scale", m->scale, 9);
    printf(",\"gap\":%" PRIu64 "}\n", gap);
}

/* A depth thumbnail's header and how much of it has depth (the samples are
 * for programs, not lines). */
static void print_depth_json(const kr_depth_msg *m, uint64_t gap)
{
    size_t n = (size_t)m->width * m->height, valid = 0;
    for (size_t i = 0; i < n; i++)
        valid += kr_wire_depth_sample(m, i) != 0;
    printf("{\"topic\":\"depth\",\"seq\":%" PRIu64 ",\"frame\":%" PRIu64, m->seq, m->frame);
    json_float(stdout, "timestamp", m->timestamp, 17);
    printf(",\"width\":%u,\"height\":%u,\"step\":%u,\"valid\":%zu,\"gap\":%" PRIu64 "}\n",
           m->width, m->height, m->step, valid, gap);
}

/* A TUM line, or nothing when a value is NaN or infinite or the quaternion
 * is not a rotation: kinreg's own trajectory reader (and most others) reject
 * such lines, so one bad pose would spoil the whole file. Counted and said on
 * stderr instead. */
static void print_pose_tum(const kr_pose_msg *p, sub_totals *tot)
{
    double v[8] = {p->timestamp, p->t[0], p->t[1], p->t[2], p->q[0], p->q[1], p->q[2], p->q[3]};
    for (int i = 0; i < 8; i++)
        if (!isfinite(v[i])) {
            tot->nonfinite++;
            fprintf(stderr, "kinreg sub: %s seq %" PRIu64 " not written: a value is not finite\n",
                    kr_topic_name(p->topic), p->seq);
            return;
        }
    /* The reader's own tolerance (core/trajectory.c): rounded quaternions
     * pass, a zero or scaled one does not. */
    double qn = sqrt(v[4] * v[4] + v[5] * v[5] + v[6] * v[6] + v[7] * v[7]);
    if (!(fabs(qn - 1.0) <= 1e-2)) {
        tot->not_unit++;
        fprintf(stderr,
                "kinreg sub: %s seq %" PRIu64
                " not written: its quaternion has norm %g, not 1, so it is no rotation\n",
                kr_topic_name(p->topic), p->seq, qn);
        return;
    }
    printf("%.6f %.9f %.9f %.9f %.9f %.9f %.9f %.9f\n", v[0], v[1], v[2], v[3], v[4], v[5], v[6],
           v[7]);
}

static void print_status_text(const kr_status_msg *s)
{
    /* The text comes from the network: no escape sequence or line break
     * of it reaches the terminal as such. */
    char text[4 * sizeof s->text];
    kr_terminal_text(text, sizeof text, s->text);
    fprintf(stderr,
            "status: %s, tracking %s, frames in %" PRIu64 " out %" PRIu64 " dropped %" PRIu64
            " LOST %" PRIu64 ", %.1f fps, model %" PRIu64 " points",
            kr_event_name(s->event), kr_wire_state_name(s->state), s->frames_in, s->frames_out,
            s->frames_dropped, s->frames_lost, s->fps, s->model_points);
    if (s->messages_dropped) fprintf(stderr, ", publisher dropped %" PRIu64, s->messages_dropped);
    fprintf(stderr, "%s%s\n", text[0] ? ": " : "", text);
}

/* a + b, held at UINT64_MAX: a publisher can claim any sequence jump. */
static uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Prints one message; returns true when the stream says it has ended: a
 * "stopped" status, or "error" (a failed run sends no "stopped" after it).
 * Status messages arrive whatever the topics asked for, to see that end;
 * they are printed and counted only when asked for. */
static bool print_message(const sub_options *o, const kr_message *m, sub_totals *tot)
{
    bool ended = m->topic == KR_TOPIC_STATUS &&
                 (m->status.event == KR_EVENT_STOPPED || m->status.event == KR_EVENT_ERROR);
    if (!(o->topics & (1u << m->topic))) return ended;
    tot->received[m->topic]++;
    if (m->gap) {
        tot->gaps++;
        tot->missed = add_saturating(tot->missed, m->gap);
        uint64_t seq = m->topic == KR_TOPIC_STATUS  ? m->status.seq
                       : m->topic == KR_TOPIC_MODEL ? m->model.seq
                       : m->topic == KR_TOPIC_DEPTH ? m->depth.seq
                       : m->topic == KR_TOPIC_MESH  ? m->mesh.seq
                                                    : m->pose.seq;
        fprintf(stderr, "gap: %" PRIu64 " %s message%s missed before seq %" PRIu64 "\n", m->gap,
                kr_topic_name(m->topic), m->gap == 1 ? "" : "s", seq);
    }
    if (m->topic == KR_TOPIC_STATUS) {
        if (o->json)
            print_status_json(&m->status, m->gap);
        else
            print_status_text(&m->status);
    } else if (m->topic == KR_TOPIC_MODEL) {
        if (o->json)
            print_model_json(&m->model, m->gap);
        else
            fprintf(stderr,
                    "model: snapshot %" PRIu64 " of frame %" PRIu64
                    ", chunk %u/%u, %u of %u points\n",
                    m->model.snapshot, m->model.frame, m->model.chunk + 1, m->model.chunks,
                    m->model.count, m->model.total_points);
    } else if (m->topic == KR_TOPIC_DEPTH) {
        if (o->json)
            print_depth_json(&m->depth, m->gap);
        else
            fprintf(stderr, "depth: frame %" PRIu64 ", %ux%u samples (every %u pixels)\n",
                    m->depth.frame, m->depth.width, m->depth.height, m->depth.step);
    } else if (m->topic == KR_TOPIC_MESH) {
        if (o->json)
            print_mesh_json(&m->mesh, m->gap);
        else
            fprintf(stderr,
                    "mesh: snapshot %" PRIu64 " after %" PRIu64
                    " frames, chunk %u/%u, %u of %u triangles\n",
                    m->mesh.snapshot, m->mesh.frame, m->mesh.chunk + 1, m->mesh.chunks,
                    m->mesh.faces, m->mesh.total_faces);
    } else if (o->final) {
        sub_final_hold(o->final, &m->pose); /* out of memory: said at the end */
    } else if (o->json) {
        print_pose_json(&m->pose, m->gap);
    } else {
        print_pose_tum(&m->pose, tot);
    }
    return ended;
}

static void print_summary(const sub_totals *t)
{
    uint64_t all = t->received[KR_TOPIC_POSE] + t->received[KR_TOPIC_REFINE] +
                   t->received[KR_TOPIC_STATUS] + t->received[KR_TOPIC_FINAL];
    fprintf(stderr,
            "kinreg sub: received %" PRIu64 " messages (%" PRIu64 " pose, %" PRIu64
            " refine, %" PRIu64 " status, %" PRIu64 " final), %" PRIu64 " gap%s, %s%" PRIu64
            " missed, %" PRIu64 " malformed",
            all, t->received[KR_TOPIC_POSE], t->received[KR_TOPIC_REFINE],
            t->received[KR_TOPIC_STATUS], t->received[KR_TOPIC_FINAL], t->gaps,
            t->gaps == 1 ? "" : "s", t->missed == UINT64_MAX ? "at least " : "", t->missed,
            t->malformed);
    if (t->nonfinite) fprintf(stderr, ", %" PRIu64 " not finite", t->nonfinite);
    if (t->not_unit) fprintf(stderr, ", %" PRIu64 " not a rotation", t->not_unit);
    if (t->out_failed) fprintf(stderr, "; stopped at the first failed write to standard output");
    fputc('\n', stderr);
}

/* --final: the held trajectory, after the stream; returns the exit code. */
static int print_final(sub_final *f, sub_totals *tot, int code)
{
    for (size_t i = 0; i < f->count && !tot->out_failed; i++) {
        print_pose_tum(&f->poses[i], tot);
        /* Stop at the first failed line, as the live lines do. */
        if (ferror(stdout) && !kr_stdout_flush("kinreg sub")) tot->out_failed = true;
    }
    if (!tot->out_failed && !kr_stdout_flush("kinreg sub")) tot->out_failed = true;
    if (tot->out_failed) {
        sub_final_free(f);
        return KR_EXIT_OUTPUT;
    }
    fprintf(stderr,
            "kinreg sub: final trajectory of %zu frames, %" PRIu64 " of them from final messages\n",
            f->count, f->replaced);
    if (f->failed) {
        fprintf(stderr, "kinreg sub: out of memory holding the poses: later messages were not "
                        "held, the trajectory printed is incomplete\n");
        code = KR_EXIT_FAILURE;
    }
    sub_final_free(f);
    return code;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The receive loop; returns the exit code. */
static int run(const sub_options *o, kr_subscriber *sub, sub_totals *tot)
{
    uint64_t poses = 0;
    bool any = false;
    double idle_since = now_s();
    while (!interrupted) {
        kr_message m;
        kr_status st = kr_subscriber_receive(sub, SLICE_MS, &m);
        if (st == KR_END || st == KR_ERR_INTERRUPTED) {
            if (o->timeout_s > 0 && now_s() - idle_since >= o->timeout_s) {
                if (any) return KR_EXIT_OK;
                fprintf(
                    stderr,
                    "kinreg sub: no message from %s within %g s (is a publisher running there?)\n",
                    o->endpoint, o->timeout_s);
                return KR_EXIT_FAILURE;
            }
            continue;
        }
        idle_since = now_s();
        if (st == KR_ERR_FORMAT) {
            /* One bad message (another program on the endpoint, a newer wire
             * version) must not end the stream. */
            tot->malformed++;
            fprintf(stderr, "kinreg sub: skipped a malformed message: %s\n", kr_last_error());
            continue;
        }
        if (st != KR_OK) {
            fprintf(stderr, "kinreg sub: %s: %s\n", kr_strerror(st), kr_last_error());
            return KR_EXIT_FAILURE;
        }
        any = true;
        bool stopped = print_message(o, &m, tot);
        /* Flush per line: the reader is usually another program waiting on
         * it. A line that cannot be written ends the subscription there. */
        if (!kr_stdout_flush("kinreg sub")) {
            tot->out_failed = true;
            return KR_EXIT_OUTPUT;
        }
        bool pose =
            m.topic == KR_TOPIC_POSE || m.topic == KR_TOPIC_REFINE || m.topic == KR_TOPIC_FINAL;
        if (pose && o->count && ++poses >= o->count) return KR_EXIT_OK;
        if (stopped && !o->follow) {
            if (m.status.event != KR_EVENT_ERROR) return KR_EXIT_OK;
            char text[4 * sizeof m.status.text];
            kr_terminal_text(text, sizeof text, m.status.text);
            fprintf(stderr, "kinreg sub: the publisher stopped with an error: %s\n", text);
            return KR_EXIT_FAILURE;
        }
    }
    return KR_EXIT_OK; /* Ctrl-C is the normal way to end a live subscription */
}

int kr_cmd_sub(int argc, char **argv)
{
    sub_options o;
    int code;
    if (parse_options(argc, argv, &o, &code) != 0) return code;

    kr_subscriber_config cfg;
    kr_subscriber_config_default(&cfg);
    cfg.endpoint = o.endpoint;
    cfg.topics = o.topics | (1u << KR_TOPIC_STATUS); /* the end of the stream (print_message) */
    kr_curve_keypair pair;
    char server_key[KR_CURVE_KEY_LEN + 1];
    if (o.curve_server) {
        if (kr_curve_public_load(o.curve_server, server_key) != KR_OK ||
            kr_curve_keypair_load(o.curve_secret, &pair) != KR_OK) {
            fprintf(stderr, "kinreg sub: %s\n", kr_last_error());
            return KR_EXIT_USAGE;
        }
        cfg.curve_server_key = server_key;
        cfg.curve_public_key = pair.public_key;
        cfg.curve_secret_key = pair.secret_key;
    }
    kr_subscriber *sub = NULL;
    kr_status st = kr_subscriber_open(&sub, &cfg);
    if (st != KR_OK) {
        fprintf(stderr, "kinreg sub: %s\n", kr_last_error());
        return st == KR_ERR_INVALID_ARG ? KR_EXIT_USAGE : KR_EXIT_FAILURE;
    }
    /* No SA_RESTART: the signal interrupts the wait in zmq_poll at once. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    sub_totals tot;
    memset(&tot, 0, sizeof tot);
    code = run(&o, sub, &tot);
    if (o.final) code = print_final(o.final, &tot, code);
    print_summary(&tot);
    kr_subscriber_destroy(&sub);
    return code;
}
