/* Untrusted text (a status message from the network) made safe to print on
 * a terminal: no escape sequence, line break or invalid UTF-8 gets through. */
#ifndef KINREG_TOOLS_CLI_TERMINAL_TEXT_H
#define KINREG_TOOLS_CLI_TERMINAL_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), 0 when the bytes
 * there are not one. s[0] must not be NUL. */
size_t kr_utf8_sequence(const unsigned char *s);

/* Copies src into dst (capacity cap > 0, always terminated): printable
 * UTF-8 as is; C0 and C1 control characters and DEL as \n \r \t \e or
 * \xNN (for a C1 character, its bytes); bytes that are not valid UTF-8 as
 * \xNN; a backslash as \\, so that the result reads back unambiguously.
 * Cut short at a character boundary when dst is too small. */
void kr_terminal_text(char *dst, size_t cap, const char *src);

/* Writes src to f as a JSON string literal, quotes included: control
 * characters as \u escapes, each byte that is not part of valid UTF-8 as
 * U+FFFD, so the output is valid JSON and valid UTF-8 whatever src holds (a
 * status text from the network, a file name from a .conf). */
void kr_json_string(FILE *f, const char *src);

#endif
