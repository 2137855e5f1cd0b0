/* Terminal-safe text (terminal_text.h). */
#include "terminal_text.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t kr_utf8_sequence(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0; /* a continuation byte, or an overlong 2-byte lead */
    if (c < 0xE0) return continuation(s[1]) ? 2 : 0;
    if (c < 0xF0) {
        if (!continuation(s[1]) || !continuation(s[2])) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* UTF-16 surrogates */
        return 3;
    }
    if (c < 0xF5) {
        if (!continuation(s[1]) || !continuation(s[2]) || !continuation(s[3])) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* Appends n bytes when they fit (leaving room for the terminator). */
static bool put(char *dst, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n + 1 > cap) return false;
    memcpy(dst + *len, s, n);
    *len += n;
    return true;
}

void kr_terminal_text(char *dst, size_t cap, const char *src)
{
    if (!cap) return;
    size_t len = 0;
    const unsigned char *p = (const unsigned char *)src;
    bool room = true;
    while (*p && room) {
        size_t n = kr_utf8_sequence(p);
        char esc[16];
        if (n == 0) {
            snprintf(esc, sizeof esc, "\\x%02x", *p);
            room = put(dst, cap, &len, esc, strlen(esc));
            p++;
        } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) {
            /* U+0080..U+009F: C1 controls (CSI is U+009B) */
            snprintf(esc, sizeof esc, "\\x%02x\\x%02x", p[0], p[1]);
            room = put(dst, cap, &len, esc, strlen(esc));
            p += 2;
        } else if (n == 1 && (*p < 0x20 || *p == 0x7f || *p == '\\')) {
            const char *named = *p == '\n'   ? "\\n"
                                : *p == '\r' ? "\\r"
                                : *p == '\t' ? "\\t"
                                : *p == 0x1b ? "\\e"
                                : *p == '\\' ? "\\\\"
                                             : NULL;
            if (!named) snprintf(esc, sizeof esc, "\\x%02x", *p);
            room = put(dst, cap, &len, named ? named : esc, strlen(named ? named : esc));
            p++;
        } else {
            room = put(dst, cap, &len, (const char *)p, n);
            p += n;
        }
    }
    dst[len] = '\0';
}

/* A JSON string of untrusted text: control characters as \\u escapes, and
 * each byte that is not part of valid UTF-8 as U+FFFD, so the line is valid
 * JSON and valid UTF-8 whatever the publisher sent. */
void kr_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = kr_utf8_sequence(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            if (*p == '"' || *p == '\\')
                fprintf(f, "\\%c", *p);
            else if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
            p++;
        }
    }
    fputc('"', f);
}
