/* CURVE key files in czmq's certificate text, so that keys made by kinreg,
 * czmq's zcert or pyzmq's zmq.auth are interchangeable:
 *
 *   BASE.key          public key only, may be given to anyone (mode 0644)
 *   BASE.key_secret   public and secret key, for the owner only (mode 0600)
 *
 * Each holds lines `public-key = "<40 Z85 characters>"` (and `secret-key =
 * ...`), possibly indented; `#` starts a comment; other lines (czmq's
 * `metadata` and `curve` section names) are ignored. docs/SECURITY.md. */
#include "kinreg/transport.h"
#include "core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

/* Allow-lists longer than this are surely a mistake (a wrong file). */
#define ALLOW_MAX 4096
/* Key files are a few hundred bytes; a larger one is not a key file. */
#define KEY_FILE_MAX (1 << 20)

bool kr_curve_available(void)
{
    return zmq_has("curve") != 0;
}

static kr_status need_curve(void)
{
    if (kr_curve_available()) return KR_OK;
    return kr_error(KR_ERR_UNSUPPORTED,
                    "this libzmq has no CURVE support: install a libzmq built with libsodium "
                    "(Debian's libzmq5 has it)");
}

kr_status kr_curve_keypair_new(kr_curve_keypair *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_curve_keypair_new: out is NULL");
    kr_status st = need_curve();
    if (st != KR_OK) return st;
    kr_curve_keypair kp;
    if (zmq_curve_keypair(kp.public_key, kp.secret_key) != 0)
        return kr_error(KR_ERR_TRANSPORT, "cannot make a CURVE key pair: %s", zmq_strerror(errno));
    *out = kp;
    return KR_OK;
}

/* Whether s is a Z85-encoded 32-byte key that decodes. */
static bool z85_key_ok(const char *s)
{
    if (strlen(s) != KR_CURVE_KEY_LEN) return false;
    uint8_t raw[32];
    return zmq_z85_decode(raw, s) != NULL;
}

static kr_status write_file(const char *path, const char *text, mode_t mode)
{
    /* O_EXCL: never replace a key (losing a secret key locks its owner out);
     * the mode is set at creation, so the secret is never readable by others. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return kr_error(KR_ERR_EXISTS,
                            "key file %s already exists: remove it or choose another name", path);
        return kr_error(KR_ERR_IO, "cannot create key file %s: %s", path, strerror(errno));
    }
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int err = errno;
    if (fchmod(fd, mode) != 0 && w == (ssize_t)n) err = errno, w = -1; /* against a umask */
    if (close(fd) != 0 && w == (ssize_t)n) err = errno, w = -1;
    if (w != (ssize_t)n) {
        unlink(path);
        return kr_error(KR_ERR_IO, "cannot write key file %s: %s", path,
                        w < 0 ? strerror(err) : "short write");
    }
    return KR_OK;
}

kr_status kr_curve_keypair_save(const kr_curve_keypair *kp, const char *base)
{
    if (!kp || !base || !*base)
        return kr_error(KR_ERR_INVALID_ARG, "kr_curve_keypair_save: no key pair or name");
    if (!z85_key_ok(kp->public_key) || !z85_key_ok(kp->secret_key))
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_curve_keypair_save: the keys are not Z85 CURVE keys");
    char pub_path[4096], sec_path[4096];
    if (snprintf(pub_path, sizeof pub_path, "%s.key", base) >= (int)sizeof pub_path ||
        snprintf(sec_path, sizeof sec_path, "%s.key_secret", base) >= (int)sizeof sec_path)
        return kr_error(KR_ERR_INVALID_ARG, "key file name %.40s... is too long", base);
    /* Check both first so that a refusal leaves nothing half-written. */
    if (access(pub_path, F_OK) == 0 || access(sec_path, F_OK) == 0)
        return kr_error(KR_ERR_EXISTS,
                        "key file %s already exists: remove it or choose another name",
                        access(pub_path, F_OK) == 0 ? pub_path : sec_path);
    char text[512];
    snprintf(text, sizeof text,
             "#   kinreg CURVE public key (czmq certificate format): give this file to\n"
             "#   the other side. docs/SECURITY.md\n"
             "metadata\n"
             "curve\n"
             "    public-key = \"%s\"\n",
             kp->public_key);
    kr_status st = write_file(pub_path, text, 0644);
    if (st != KR_OK) return st;
    snprintf(text, sizeof text,
             "#   kinreg CURVE **secret** key (czmq certificate format).\n"
             "#   DO NOT give this file to anyone nor make it readable by others.\n"
             "metadata\n"
             "curve\n"
             "    public-key = \"%s\"\n"
             "    secret-key = \"%s\"\n",
             kp->public_key, kp->secret_key);
    st = write_file(sec_path, text, 0600);
    if (st != KR_OK) unlink(pub_path);
    return st;
}

/* Reads a whole small file into a NUL-terminated buffer (free it). */
static kr_status read_small(const char *path, char **out)
{
    /* A named pipe would wait for a writer forever, /dev/zero never end: a
     * key file is a regular file. */
    char why[256];
    errno = 0;
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) {
        bool missing = errno == ENOENT;
        return kr_error(KR_ERR_IO, "cannot read key file %s: %s%s", path, why,
                        missing ? " (make one with kinreg keygen NAME)" : "");
    }
    char *buf = malloc(KEY_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return kr_error(KR_ERR_NOMEM, "cannot read key file %s: out of memory", path);
    }
    size_t n = fread(buf, 1, KEY_FILE_MAX + 1, f);
    bool err = ferror(f);
    fclose(f);
    if (err || n > KEY_FILE_MAX) {
        free(buf);
        return kr_error(err ? KR_ERR_IO : KR_ERR_FORMAT, "cannot read key file %s: %s", path,
                        err ? "read error" : "larger than 1 MiB, not a key file");
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        free(buf);
        return kr_error(KR_ERR_FORMAT,
                        "key file %s is binary, not a key file (make one with kinreg keygen NAME)",
                        path);
    }
    *out = buf;
    return KR_OK;
}

typedef enum { KEY_NONE, KEY_PUBLIC, KEY_SECRET } key_kind;

/* Parses one line: `[spaces] public-key|secret-key = ["]Z85["]`. Returns the
 * kind and copies the value (unchecked) into value; KEY_NONE for other lines. */
static key_kind parse_line(char *line, char value[64])
{
    char *p = line + strspn(line, " \t");
    key_kind kind = KEY_NONE;
    if (!strncmp(p, "public-key", 10))
        kind = KEY_PUBLIC;
    else if (!strncmp(p, "secret-key", 10))
        kind = KEY_SECRET;
    else
        return KEY_NONE;
    p += 10;
    p += strspn(p, " \t");
    if (*p != '=') {
        value[0] = '\0';
        return kind;
    }
    p++;
    p += strspn(p, " \t");
    size_t n = strcspn(p, "\r\n");
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n >= 2 && (p[0] == '"' || p[0] == '\'') && p[n - 1] == p[0]) p++, n -= 2;
    if (n > 63) n = 63;
    memcpy(value, p, n);
    value[n] = '\0';
    return kind;
}

/* Every key line of a file; calls fn for each (kind, value, line number). */
typedef kr_status (*key_fn)(key_kind kind, const char *value, int line, void *user);

static kr_status each_key(const char *path, key_fn fn, void *user)
{
    char *text = NULL;
    kr_status st = read_small(path, &text);
    if (st != KR_OK) return st;
    int line_no = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && st == KR_OK;
         line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        char value[64];
        key_kind kind = parse_line(line, value);
        if (kind == KEY_NONE) continue;
        if (!z85_key_ok(value)) {
            st = kr_error(
                KR_ERR_FORMAT,
                "key file %s line %d: the %s is not a CURVE key (expected 40 Z85 characters "
                "in quotes, as kinreg keygen writes)",
                path, line_no, kind == KEY_PUBLIC ? "public-key" : "secret-key");
            break;
        }
        st = fn(kind, value, line_no, user);
    }
    free(text);
    return st;
}

typedef struct {
    char pub[KR_CURVE_KEY_LEN + 1], sec[KR_CURVE_KEY_LEN + 1];
} one_pair;

static kr_status take_first(key_kind kind, const char *value, int line, void *user)
{
    (void)line;
    one_pair *kp = user;
    char *dst = kind == KEY_PUBLIC ? kp->pub : kp->sec;
    if (!dst[0]) memcpy(dst, value, KR_CURVE_KEY_LEN + 1);
    return KR_OK;
}

kr_status kr_curve_public_load(const char *path, char out[KR_CURVE_KEY_LEN + 1])
{
    if (!path || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_curve_public_load: NULL argument");
    one_pair kp = {{0}, {0}};
    kr_status st = each_key(path, take_first, &kp);
    if (st != KR_OK) return st;
    if (!kp.pub[0])
        return kr_error(
            KR_ERR_FORMAT,
            "key file %s holds no public-key line (expected a file written by kinreg keygen)",
            path);
    memcpy(out, kp.pub, sizeof kp.pub);
    return KR_OK;
}

kr_status kr_curve_keypair_load(const char *path, kr_curve_keypair *out)
{
    if (!path || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_curve_keypair_load: NULL argument");
    kr_status st = need_curve();
    if (st != KR_OK) return st;
    struct stat sb;
    if (stat(path, &sb) == 0 && (sb.st_mode & 077))
        return kr_error(KR_ERR_INVALID_ARG,
                        "secret key file %s is readable by others (mode %04o): chmod 600 %s", path,
                        (unsigned)(sb.st_mode & 07777), path);
    one_pair kp = {{0}, {0}};
    if ((st = each_key(path, take_first, &kp)) != KR_OK) return st;
    if (!kp.sec[0])
        return kr_error(
            KR_ERR_FORMAT,
            "key file %s holds no secret-key: give the NAME.key_secret file, not NAME.key", path);
    /* The public key is what peers know us by: it must be the secret's. */
    char derived[KR_CURVE_KEY_LEN + 1];
    if (zmq_curve_public(derived, kp.sec) != 0)
        return kr_error(KR_ERR_FORMAT, "key file %s: the secret-key is not a CURVE key", path);
    if (kp.pub[0] && strcmp(derived, kp.pub) != 0)
        return kr_error(
            KR_ERR_FORMAT,
            "key file %s: the public-key does not belong to the secret-key (an edited or "
            "mixed-up file: make a new pair with kinreg keygen)",
            path);
    memcpy(out->public_key, derived, sizeof derived);
    memcpy(out->secret_key, kp.sec, sizeof kp.sec);
    return KR_OK;
}

typedef struct {
    char (*keys)[KR_CURVE_KEY_LEN + 1];
    size_t count, cap;
    const char *path;
} key_list;

static kr_status add_public(key_kind kind, const char *value, int line, void *user)
{
    key_list *l = user;
    if (kind == KEY_SECRET)
        return kr_error(KR_ERR_INVALID_ARG,
                        "allow-list %s line %d holds a secret-key: list only public keys (NAME.key "
                        "files), and keep secret keys private",
                        l->path, line);
    for (size_t i = 0; i < l->count; i++)
        if (!strcmp(l->keys[i], value)) return KR_OK;
    if (l->count == ALLOW_MAX)
        return kr_error(KR_ERR_FORMAT, "allow-list %s has more than %d keys", l->path, ALLOW_MAX);
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        void *grown = realloc(l->keys, cap * sizeof *l->keys);
        if (!grown)
            return kr_error(KR_ERR_NOMEM, "cannot read allow-list %s: out of memory", l->path);
        l->keys = grown;
        l->cap = cap;
    }
    memcpy(l->keys[l->count++], value, KR_CURVE_KEY_LEN + 1);
    return KR_OK;
}

kr_status kr_curve_allow_load(const char *path, char (**keys)[KR_CURVE_KEY_LEN + 1], size_t *count)
{
    if (!path || !keys || !count)
        return kr_error(KR_ERR_INVALID_ARG, "kr_curve_allow_load: NULL argument");
    key_list l = {NULL, 0, 0, path};
    kr_status st = each_key(path, add_public, &l);
    if (st == KR_OK && l.count == 0)
        st =
            kr_error(KR_ERR_FORMAT,
                     "allow-list %s holds no public-key line (expected subscribers' NAME.key files "
                     "joined with cat)",
                     path);
    if (st != KR_OK) {
        free(l.keys);
        return st;
    }
    *keys = l.keys;
    *count = l.count;
    return KR_OK;
}
