/* The option table's parser and help lines (options.h). */
#include "options.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "option_error.h"
#include "tools/cli/exit_codes.h"

/* A command's options, its groups' included, as getopt_long is given them. */
enum { MAX_OPTIONS = 128 };

typedef struct {
    const kr_option_table *table;
    const kr_option_row *row; /* the option */
    void *target;             /* the target of its table */
    int val;                  /* what getopt_long returns for it */
} entry;

typedef struct {
    entry options[MAX_OPTIONS];
    size_t n_options;
    struct option longopts[MAX_OPTIONS + 1];
    size_t n_long;
    char shortopts[2 * MAX_OPTIONS + 2];
    size_t n_short;
    const kr_retired_letter *retired[8]; /* each with the entry it stands for */
    const entry *retired_entry[8];
    size_t n_retired;
} option_set;

/* Whether `name` or the letter `short_name` is taken already. */
static bool taken(const option_set *s, const char *name, char short_name)
{
    for (size_t i = 0; i < s->n_long; i++)
        if (!strcmp(s->longopts[i].name, name)) return true;
    return short_name && memchr(s->shortopts, short_name, s->n_short) != NULL;
}

/* Pass 0 adds the options, pass 1 their aliases: longopts then begins with
 * the options in the order of options[]. NULL, or what is wrong with the
 * tables (a programming error). */
static const char *collect(option_set *s, const kr_option_table *t, char *target, int pass)
{
    size_t count;
    const kr_option_row *rows = t->rows(&count);
    for (size_t i = 0; i < count; i++) {
        const kr_option_row *r = &rows[i];
        if (r->row == KR_ROW_GROUP) {
            const char *wrong = collect(s, r->group, target ? target + r->offset : NULL, pass);
            if (wrong) return wrong;
            continue;
        }
        if (pass != (r->row == KR_ROW_ALIAS)) continue;
        if (s->n_long == MAX_OPTIONS) return "too many options";
        if (taken(s, r->name, r->row == KR_ROW_OPTION ? r->short_name : 0))
            return "an option name or letter twice";
        if (r->row == KR_ROW_ALIAS) {
            /* The same val and argument as its option: getopt_long then
             * takes an abbreviation both names share for that option. */
            size_t k = 0;
            while (k < s->n_options &&
                   !(s->options[k].table == t && s->options[k].row->id == r->id))
                k++;
            if (k == s->n_options) return "an alias of no option";
            s->longopts[s->n_long] = s->longopts[k];
            s->longopts[s->n_long++].name = r->name;
            continue;
        }
        bool takes_value = r->value != KR_VALUE_NONE;
        int val = r->short_name ? (unsigned char)r->short_name : 256 + (int)s->n_options;
        s->options[s->n_options++] = (entry){t, r, target, val};
        s->longopts[s->n_long++] =
            (struct option){r->name, takes_value ? required_argument : no_argument, NULL, val};
        if (r->short_name) {
            s->shortopts[s->n_short++] = r->short_name;
            if (takes_value) s->shortopts[s->n_short++] = ':';
        }
    }
    return NULL;
}

/* A retired letter: getopt returns the letter itself, a value no option
 * has (its letter is no option's). */
static const char *retire(option_set *s, const kr_retired_letter *r)
{
    if (s->n_retired == sizeof s->retired / sizeof s->retired[0]) return "too many retired letters";
    if (taken(s, "", r->letter)) return "a retired letter that an option has";
    size_t k = 0;
    while (k < s->n_options && strcmp(s->options[k].row->name, r->name) != 0)
        k++;
    if (k == s->n_options) return "a retired letter of no option";
    s->retired[s->n_retired] = r;
    s->retired_entry[s->n_retired++] = &s->options[k];
    s->shortopts[s->n_short++] = r->letter;
    if (s->options[k].row->value != KR_VALUE_NONE) s->shortopts[s->n_short++] = ':';
    return NULL;
}

static bool build(option_set *s, const kr_command *c, void *target)
{
    memset(s, 0, sizeof *s);
    s->shortopts[s->n_short++] = ':'; /* ':' for a missing value */
    const char *wrong = collect(s, c->options, target, 0);
    if (!wrong) wrong = collect(s, c->options, target, 1);
    for (const kr_retired_letter *r = c->retired; !wrong && r && r->letter; r++)
        wrong = retire(s, r);
    if (wrong) {
        fprintf(stderr, "kinreg %s: the option table has %s (tools/cli/options.h)\n", c->name,
                wrong);
        return false;
    }
    return true;
}

static const entry *find(const option_set *s, int val)
{
    for (size_t i = 0; i < s->n_options; i++)
        if (s->options[i].val == val) return &s->options[i];
    return NULL;
}

/* The entry a retired letter stands for, after its warning; NULL if `val`
 * is no retired letter. */
static const entry *find_retired(const option_set *s, const kr_command *c, int val)
{
    for (size_t i = 0; i < s->n_retired; i++) {
        if (s->retired[i]->letter != val) continue;
        fprintf(stderr, "kinreg %s: warning: -%c is retired here, write --%s (%s)\n", c->name,
                s->retired[i]->letter, s->retired[i]->name, s->retired[i]->why);
        return s->retired_entry[i];
    }
    return NULL;
}

static int take(const kr_command *c, const entry *e, const char *arg)
{
    char who[64], name[64];
    if (e->table->prefix)
        snprintf(who, sizeof who, "%s", e->table->prefix);
    else
        snprintf(who, sizeof who, "kinreg %s", c->name);
    snprintf(name, sizeof name, "--%s", e->row->name);
    double v = 0;
    if (e->row->value == KR_VALUE_NUMBER && e->row->word && !strcmp(arg, e->row->word)) {
        v = e->row->word_value;
    } else if (e->row->value == KR_VALUE_NUMBER) {
        kr_number_rule rule = e->row->rule;
        rule.name = name;
        if (!kr_number_option(who, &rule, arg, &v)) return KR_EXIT_USAGE;
    }
    switch (e->table->store(e->target, e->row->id, who, name, arg, v)) {
    case KR_OPTION_TAKEN:
        return -1;
    case KR_OPTION_HELP:
        kr_command_help(c, stdout);
        return KR_EXIT_OK;
    case KR_OPTION_REFUSED:
        if (e->row->refusal)
            fprintf(stderr, e->row->refusal, who, name, arg);
        else
            fprintf(stderr, "%s: %s '%s' is not allowed", who, name, arg);
        fputc('\n', stderr);
        return KR_EXIT_USAGE;
    default:
        return KR_EXIT_USAGE;
    }
}

int kr_command_parse(const kr_command *c, int argc, char **argv, void *target)
{
    static option_set s; /* large; a command parses once */
    if (!build(&s, c, target)) return KR_EXIT_USAGE;
    optind = 1;
    /* An unknown option or a missing value: one line (kr_option_error). */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, s.shortopts, s.longopts, NULL)) != -1) {
        const entry *e = opt == '?' || opt == ':' ? NULL : find(&s, opt);
        if (!e && opt != '?' && opt != ':') e = find_retired(&s, c, opt);
        if (!e) return kr_option_error(c->name, argc, argv, opt);
        int rc = take(c, e, optarg);
        if (rc >= 0) return rc;
    }
    return -1;
}

int kr_command_parse_word(const kr_command *c, const char *word, void *target)
{
    static option_set s;
    if (!build(&s, c, target)) return KR_EXIT_USAGE;
    for (size_t i = 0; i < s.n_long; i++) {
        const struct option *o = &s.longopts[i];
        if (o->has_arg != no_argument) continue;
        bool named = (word[0] == '-' && word[1] == '-' && !strcmp(word + 2, o->name)) ||
                     (o->val < 256 && word[0] == '-' && word[1] == o->val && !word[2]);
        if (named) return take(c, find(&s, o->val), NULL);
    }
    return -1;
}

void kr_command_help(const kr_command *c, FILE *out)
{
    c->options->help(out, &c->layout, c->variant ? c->variant : KR_HELP_DEFAULT);
}

int kr_command_usage_error(const kr_command *c, const char *format, ...)
{
    fprintf(stderr, "kinreg %s: ", c->name);
    va_list ap;
    va_start(ap, format);
    vfprintf(stderr, format, ap);
    va_end(ap);
    fprintf(stderr, " (see 'kinreg %s --help')\n", c->name);
    return KR_EXIT_USAGE;
}

void kr_option_help(FILE *out, const kr_help_layout *layout, char short_name, const char *name,
                    const char *metavar, const char *format, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, format);
    int len = vasprintf(&text, format, ap);
    va_end(ap);
    if (len < 0) return;
    int n;
    if (short_name)
        n = fprintf(out, "  -%c, --%s", short_name, name);
    else
        n = fprintf(out, "%*s--%s", layout->long_indent, "", name);
    if (metavar) n += fprintf(out, " %s", metavar);
    const char *p = text;
    if (*p == '\n') {
        /* A long option line: the description starts on the next. */
        p++;
        fprintf(out, "\n%*s", layout->column, "");
    } else {
        fprintf(out, "%*s", n < layout->column ? layout->column - n : layout->gap, "");
    }
    for (const char *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1)
        fprintf(out, "%.*s\n%*s", (int)(nl - p), p, layout->column, "");
    fprintf(out, "%s\n", p);
    free(text);
}
