/* The option table: each command's options written once, as rows of a table,
 * from which the getopt_long arrays (long options and the short-option
 * string), the dispatch of each value and the --help text are generated.
 *
 * A table is an X-macro listing its rows, and KR_OPTION_TABLE turns it into a
 * kr_option_table:
 *
 *   typedef struct { kr_pipeline_config cfg; const char *out_dir; bool quiet; } demo_options;
 *   #define DEMO_OPTIONS(OPT, ALIAS, GROUP, TEXT, MORE)                           \
 *       TEXT(KR_HELP("usage: kinreg demo [OPTIONS]\n\n"))                        \
 *       OPT(OUT, ('o', "out", "DIR", KR_TEXT), o->out_dir = arg,                 \
 *           KR_HELP("output directory (default kinreg-demo)"))                   \
 *       GROUP(kr_pipeline_option_table, cfg, KR_SHOW_ALL)                        \
 *       OPT(QUIET, KR_OPT_QUIET, o->quiet = true, KR_HELP("no status line"))     \
 *       OPT(HELP, KR_OPT_HELP, KR_SHOW_HELP, KR_HELP("this text"))
 *   KR_OPTION_TABLE(demo_option_table, DEMO_OPTIONS, demo_options, o, NULL);
 *
 * The rows, in the order of the help text:
 *   OPT(ID, SPEC, STORE, HELP)  an option. ID names it within the table. SPEC
 *       is (SHORT, "long", "METAVAR", VALUE): SHORT a letter or 0, METAVAR NULL
 *       for a flag, VALUE what the value must be (below); or the name of a
 *       spec shared by several commands (common_options.h). STORE is the
 *       statements that take a checked value, with the table's target (VAR),
 *       `arg` (the value's text), `v` (its number, for KR_WHOLE, KR_REAL and
 *       KR_ABOVE), `who` (the message prefix) and `name` ("--long") in scope;
 *       it may return KR_OPTION_REFUSED (KR_REFUSE_UNLESS), KR_OPTION_FAILED
 *       after printing its own line (KR_FAIL_UNLESS) or KR_OPTION_HELP
 *       (KR_SHOW_HELP).
 *   ALIAS(ID, "long")           another long name of option ID; not in the help.
 *   GROUP(TABLE, MEMBER, SHOW)  the rows of another table (options shared by
 *       several commands), filling VAR->MEMBER; its help is printed here in
 *       the help variants SHOW names.
 *   TEXT(HELP)                  text of the help between the options: usage,
 *       headings, notes. HELP is printf's format and arguments.
 *   MORE(SPEC, HELP)            one more help line for an option (another form
 *       of its value); KR_SPEC_WITH_META gives the spec another metavar.
 *
 * VALUE:
 *   KR_FLAG                       no value
 *   KR_TEXT                       any text (a path, an endpoint), taken as given
 *   KR_WHOLE(lo, hi, what, hint)  a whole number from lo to hi, checked before any
 *                                 conversion (number_option.h); `hint` or NULL
 *   KR_REAL(lo, hi, what, hint)   a number from lo to hi
 *   KR_ABOVE(lo, hi, what, hint)  a number greater than lo and at most hi
 *   KR_REAL_OR(word, number, lo, hi, what, hint)  `word`, taken as `number`, or
 *                                 a number from lo to hi
 *   KR_CHOICE("expected a or b")  text STORE checks; a refusal prints
 *                                 "WHO: --long 'VALUE' is not allowed: expected a or b"
 *   KR_REFUSAL(format)            the same with its own line: a printf format of
 *                                 WHO, --long and VALUE, in that order
 *   KR_CUSTOM                     text STORE checks, printing its own refusal
 *
 * HELP: KR_HELP(format, ...) in every help variant, KR_HELP_IF(variants,
 * format, ...) in those only, KR_NO_HELP never. An option's HELP is its
 * description: the "  -s, --long METAVAR" part, the column the description
 * starts in and the indent of its further lines come from the command's
 * layout; one that starts with "\n" begins on the next line.
 *
 * Messages: a value out of range or refused prints one line naming the
 * option, the value and what is allowed, prefixed with the table's prefix
 * ("kinreg" for the shared groups) or, when that is NULL, the command's
 * ("kinreg run"); the exit status is then 2 (KR_EXIT_USAGE). */
#ifndef KINREG_TOOLS_CLI_OPTIONS_H
#define KINREG_TOOLS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h> /* optind: the first operand after kr_command_parse */

#include "number_option.h"

/* Where the help text's columns are. */
typedef struct {
    int column;      /* descriptions start in this column */
    int long_indent; /* spaces before "--long" without a short name (6 lines it up
                        with "  -s, --long", 2 does not) */
    int gap;         /* spaces after an option that reaches the column */
} kr_help_layout;

/* Most commands': descriptions in column 26, "      --long" under "  -s, --long". */
#define KR_HELP_LAYOUT_DEFAULT                                                                     \
    {                                                                                              \
        26, 6, 2                                                                                   \
    }

/* Help variants: a command prints its help in one variant; each row shows in
 * the variants of its mask. Groups define further variants (2u, 4u, ...). */
#define KR_HELP_DEFAULT 1u
#define KR_SHOW_ALL (~0u)
#define KR_SHOW_NEVER 0u

typedef enum {
    KR_VALUE_NONE,   /* a flag */
    KR_VALUE_TEXT,   /* any text */
    KR_VALUE_NUMBER, /* a number in the row's range */
    KR_VALUE_CHECKED /* text the store checks */
} kr_value_kind;

/* What a STORE returns. */
enum {
    KR_OPTION_TAKEN = 0,
    KR_OPTION_REFUSED, /* print the row's refusal, exit status 2 */
    KR_OPTION_FAILED,  /* the store printed why, exit status 2 */
    KR_OPTION_HELP     /* print the command's help, exit status 0 */
};

typedef struct kr_option_table kr_option_table;

typedef enum { KR_ROW_OPTION, KR_ROW_ALIAS, KR_ROW_GROUP } kr_row_kind;

/* One row as the parser sees it (KR_OPTION_TABLE fills these). */
typedef struct {
    kr_row_kind row;
    int id;              /* OPTION, ALIAS: the option */
    char short_name;     /* OPTION: its letter, or 0 */
    const char *name;    /* OPTION, ALIAS: the long name */
    kr_value_kind value; /* OPTION */
    kr_number_rule rule; /* KR_VALUE_NUMBER; its name is "--" + name */
    const char *word;    /* KR_VALUE_NUMBER: a word taken as word_value, or NULL */
    double word_value;
    const char *refusal;          /* KR_VALUE_CHECKED: printf format of who, --name, value */
    const kr_option_table *group; /* GROUP: the table included */
    size_t offset;                /* GROUP: where its target is in this table's */
} kr_option_row;

struct kr_option_table {
    const char *prefix; /* messages' prefix; NULL: the command's ("kinreg run") */
    const kr_option_row *(*rows)(size_t *count);
    /* Takes option `id`'s value into `target`; returns a KR_OPTION_* code. */
    int (*store)(void *target, int id, const char *who, const char *name, const char *arg,
                 double v);
    void (*help)(FILE *out, const kr_help_layout *layout, unsigned variant);
};

/* A short letter a command gave up so that it means one thing in every
 * command (`sub -t` was its topics; -t is --trajectory elsewhere): it still
 * works as the option `name`, with a warning that names the new spelling.
 * Kept for one release, then dropped. */
typedef struct {
    char letter;      /* 't' */
    const char *name; /* "topics": the option it still stands for */
    const char *why;  /* "-t is --trajectory in run and refine" */
} kr_retired_letter;

/* A command: its name, its table and how its help and errors look. */
typedef struct {
    const char *name; /* "run" */
    const kr_option_table *options;
    kr_help_layout layout;
    unsigned variant;                 /* help variant; 0 = KR_HELP_DEFAULT */
    const kr_retired_letter *retired; /* NULL, or ends with {0} */
} kr_command;

/* Parses argv[1..] (argv[0] is the command's name) into `target`, the
 * command table's target. Returns -1 when the command should go on (optind
 * then indexes the first operand), else the exit code to return at once: 0
 * after --help, 2 after a usage error (its line printed). */
int kr_command_parse(const kr_command *c, int argc, char **argv, void *target);
/* The same for one word that must name a flag exactly, no abbreviation
 * (devices and keygen take `-h` or `--help` alone): -1 when it names none. */
int kr_command_parse_word(const kr_command *c, const char *word, void *target);
/* The command's --help text. */
void kr_command_help(const kr_command *c, FILE *out);
/* A usage error in one line on stderr, "kinreg CMD: MESSAGE (see 'kinreg CMD
 * --help')", as for a bad option; returns KR_EXIT_USAGE. */
int kr_command_usage_error(const kr_command *c, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* One option's lines of the help text (used by KR_OPTION_TABLE). */
void kr_option_help(FILE *out, const kr_help_layout *layout, char short_name, const char *name,
                    const char *metavar, const char *format, ...)
    __attribute__((format(printf, 6, 7)));

/* ---- writing a table ---------------------------------------------------- */

#define KR_FLAG .value = KR_VALUE_NONE
#define KR_TEXT .value = KR_VALUE_TEXT
#define KR_WHOLE(lo, hi, what, hint)                                                               \
    .value = KR_VALUE_NUMBER, .rule = {NULL, (lo), (hi), false, true, (what), (hint)}
#define KR_REAL(lo, hi, what, hint)                                                                \
    .value = KR_VALUE_NUMBER, .rule = {NULL, (lo), (hi), false, false, (what), (hint)}
#define KR_ABOVE(lo, hi, what, hint)                                                               \
    .value = KR_VALUE_NUMBER, .rule = {NULL, (lo), (hi), true, false, (what), (hint)}
#define KR_REAL_OR(word_, number, lo, hi, what, hint)                                              \
    KR_REAL(lo, hi, what, hint), .word = (word_), .word_value = (number)
#define KR_CHOICE(expected)                                                                        \
    .value = KR_VALUE_CHECKED, .refusal = "%s: %s '%s' is not allowed: " expected
#define KR_REFUSAL(format) .value = KR_VALUE_CHECKED, .refusal = (format)
#define KR_CUSTOM .value = KR_VALUE_CHECKED

#define KR_HELP(...) (KR_SHOW_ALL, __VA_ARGS__)
#define KR_HELP_IF(show, ...) ((show), __VA_ARGS__)
#define KR_NO_HELP (KR_SHOW_NEVER, "%s", "")

#define KR_REFUSE_UNLESS(ok)                                                                       \
    if (!(ok)) return KR_OPTION_REFUSED
#define KR_FAIL_UNLESS(ok)                                                                         \
    if (!(ok)) return KR_OPTION_FAILED
#define KR_SHOW_HELP return KR_OPTION_HELP

/* For a store: "on" or "off" into *out; false for anything else. */
static inline bool kr_option_on_off(const char *arg, bool *out)
{
    if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) return false;
    *out = strcmp(arg, "on") == 0;
    return true;
}

/* A spec's parts, for a help text that names a shared option. */
#define KR_SPEC_SHORT(spec) KR_SPEC_SHORT_ spec
#define KR_SPEC_NAME(spec) KR_SPEC_NAME_ spec
#define KR_SPEC_META(spec) KR_SPEC_META_ spec
#define KR_SPEC_WITH_META(spec, meta) (KR_SPEC_SHORT(spec), KR_SPEC_NAME(spec), meta, KR_FLAG)
#define KR_SPEC_SHORT_(s, ...) s
#define KR_SPEC_NAME_(s, n, ...) n
#define KR_SPEC_META_(s, n, m, ...) m

/* Defines `const kr_option_table NAME` from the X-macro ROWS, whose stores
 * fill a TYPE through the pointer VAR; PREFIX as in kr_option_table. */
#define KR_OPTION_TABLE(NAME, ROWS, TYPE, VAR, PREFIX)                                             \
    static int NAME##_store_(void *target_, int id_, const char *who, const char *name,            \
                             const char *arg, double v)                                            \
    {                                                                                              \
        enum {                                                                                     \
            ROWS(KR_GEN_ID_, KR_GEN_NOTHING_, KR_GEN_NOTHING_, KR_GEN_NOTHING_, KR_GEN_NOTHING_)   \
                KR_O_END_                                                                          \
        };                                                                                         \
        TYPE *VAR = target_;                                                                       \
        (void)VAR;                                                                                 \
        (void)who;                                                                                 \
        (void)name;                                                                                \
        (void)arg;                                                                                 \
        (void)v;                                                                                   \
        switch (id_) {                                                                             \
            ROWS(KR_GEN_STORE_, KR_GEN_NOTHING_, KR_GEN_NOTHING_, KR_GEN_NOTHING_,                 \
                 KR_GEN_NOTHING_)                                                                  \
        }                                                                                          \
        return KR_OPTION_TAKEN;                                                                    \
    }                                                                                              \
    static void NAME##_help_(FILE *out_, const kr_help_layout *layout_, unsigned variant_)         \
    {                                                                                              \
        (void)layout_;                                                                             \
        ROWS(KR_GEN_HELP_OPT_, KR_GEN_NOTHING_, KR_GEN_HELP_GROUP_, KR_GEN_HELP_TEXT_,             \
             KR_GEN_HELP_MORE_)                                                                    \
    }                                                                                              \
    static const kr_option_row *NAME##_rows_(size_t *count_)                                       \
    {                                                                                              \
        typedef TYPE kr_target_;                                                                   \
        (void)sizeof(kr_target_ *);                                                                \
        enum {                                                                                     \
            ROWS(KR_GEN_ID_, KR_GEN_NOTHING_, KR_GEN_NOTHING_, KR_GEN_NOTHING_, KR_GEN_NOTHING_)   \
                KR_O_END_                                                                          \
        };                                                                                         \
        static const kr_option_row rows_[] = {ROWS(KR_GEN_ROW_OPT_, KR_GEN_ROW_ALIAS_,             \
                                                   KR_GEN_ROW_GROUP_, KR_GEN_NOTHING_,             \
                                                   KR_GEN_NOTHING_)};                              \
        *count_ = sizeof rows_ / sizeof rows_[0];                                                  \
        return rows_;                                                                              \
    }                                                                                              \
    const kr_option_table NAME = {PREFIX, NAME##_rows_, NAME##_store_, NAME##_help_}

/* The generators KR_OPTION_TABLE passes to a table's rows. */
#define KR_GEN_NOTHING_(...)
#define KR_UNPAREN_(...) __VA_ARGS__
#define KR_GEN_ID_(ID, ...) KR_O_##ID,
#define KR_GEN_STORE_(ID, SPEC, STORE, HELP)                                                       \
    case KR_O_##ID: {                                                                              \
        STORE;                                                                                     \
    } break;
#define KR_GEN_ROW_OPT_(ID, SPEC, STORE, HELP) KR_GEN_ROW_1_(KR_O_##ID, KR_UNPAREN_ SPEC)
#define KR_GEN_ROW_1_(...) KR_GEN_ROW_2_(__VA_ARGS__)
#define KR_GEN_ROW_2_(ID, SHORT, NAME, META, ...)                                                  \
    {.row = KR_ROW_OPTION, .id = ID, .short_name = SHORT, .name = NAME, __VA_ARGS__},
#define KR_GEN_ROW_ALIAS_(ID, NAME) {.row = KR_ROW_ALIAS, .id = KR_O_##ID, .name = NAME},
#define KR_GEN_ROW_GROUP_(TABLE, MEMBER, SHOW)                                                     \
    {.row = KR_ROW_GROUP, .group = &(TABLE), .offset = offsetof(kr_target_, MEMBER)},
#define KR_GEN_HELP_OPT_(ID, SPEC, STORE, HELP) KR_GEN_LINE_1_(SPEC, KR_UNPAREN_ HELP)
#define KR_GEN_HELP_MORE_(SPEC, HELP) KR_GEN_LINE_1_(SPEC, KR_UNPAREN_ HELP)
#define KR_GEN_LINE_1_(...) KR_GEN_LINE_2_(__VA_ARGS__)
#define KR_GEN_LINE_2_(SPEC, SHOW, ...)                                                            \
    if (variant_ & (SHOW))                                                                         \
        kr_option_help(out_, layout_, KR_SPEC_SHORT(SPEC), KR_SPEC_NAME(SPEC), KR_SPEC_META(SPEC), \
                       __VA_ARGS__);
#define KR_GEN_HELP_GROUP_(TABLE, MEMBER, SHOW)                                                    \
    if (variant_ & (SHOW)) (TABLE).help(out_, layout_, variant_);
#define KR_GEN_HELP_TEXT_(HELP) KR_GEN_TEXT_1_(KR_UNPAREN_ HELP)
#define KR_GEN_TEXT_1_(...) KR_GEN_TEXT_2_(__VA_ARGS__)
#define KR_GEN_TEXT_2_(SHOW, ...)                                                                  \
    if (variant_ & (SHOW)) fprintf(out_, __VA_ARGS__);

#endif
