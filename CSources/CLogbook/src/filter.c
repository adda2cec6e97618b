/*
 * filter.c — runtime filters: rules "pattern=level" that set the minimum level of every logger
 * whose name they match (logbook.h, "Runtime filters"). Rules change rarely and under the bundle
 * lock; the hot path only ever reads a logger's atomic min_level byte.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct lb_filter_rule_owned {
    char *pattern;       /* as given, '*' included */
    size_t length;       /* of pattern */
    uint8_t level;
} lb_filter_rule_owned;

typedef struct lb_filter_set {
    lb_filter_rule_owned *rules;
    size_t count, capacity;
} lb_filter_set;

static const char *const level_names[] = {
    NULL, "trace", "debug", "info", "notice", "warning", "error", "critical",
};

static int level_parse(const char *text, size_t length, uint8_t *out) {
    char lower[16];
    if (length == 0 || length >= sizeof lower) return -1;
    for (size_t i = 0; i < length; i++) lower[i] = (char)tolower((unsigned char)text[i]);
    lower[length] = 0;
    if (strcmp(lower, "off") == 0) { *out = LB_LEVEL_OFF; return 0; }
    if (strcmp(lower, "warn") == 0) { *out = LB_LEVEL_WARNING; return 0; }
    for (uint8_t l = LB_LEVEL_TRACE; l <= LB_LEVEL_CRITICAL; l++)
        if (strcmp(lower, level_names[l]) == 0) { *out = l; return 0; }
    return -1;
}

static const char *level_name(uint8_t level) {
    return level >= LB_LEVEL_TRACE && level <= LB_LEVEL_CRITICAL ? level_names[level] : "off";
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int fail(lb_filter_error *error, size_t offset, const char *format, const char *a,
                size_t a_length, const char *b, size_t b_length) {
    if (error) {
        error->offset = (uint32_t)offset;
        snprintf(error->message, sizeof error->message, format, (int)a_length, a, (int)b_length,
                 b);
    }
    return -EINVAL;
}

#define LEVELS_HELP "trace, debug, info, notice, warning, error, critical or off"

/* One rule of a spec, as parsed by next_rule. */
typedef struct parsed_rule {
    size_t start;           /* offset of the rule's first byte */
    const char *pattern;    /* "*" for a bare level */
    size_t pattern_length;
    uint32_t pattern_offset, spec_pattern_length;  /* as in lb_filter_rule */
    uint8_t level;
} parsed_rule;

/* Parses the rule starting at or after *pos (skipping empty ones). Returns 1 with *out filled, 0 at
 * the end, or -EINVAL with `error` filled. */
static int next_rule(const char *spec, size_t n, size_t *pos, parsed_rule *out,
                     lb_filter_error *error) {
    while (*pos <= n) {
        size_t end = *pos;
        while (end < n && spec[end] != ',') end++;
        size_t a = *pos, b = end;  /* the rule, trimmed */
        while (a < b && is_space(spec[a])) a++;
        while (b > a && is_space(spec[b - 1])) b--;
        *pos = end + 1;
        if (a == b) continue;  /* empty between commas: nothing to apply */
        const char *rule = spec + a;
        size_t rule_length = b - a;
        size_t eq = a;
        while (eq < b && spec[eq] != '=') eq++;
        size_t pattern_a = a, pattern_b = a, level_a = a, level_b = b;
        if (eq < b) {
            pattern_b = eq;
            while (pattern_b > pattern_a && is_space(spec[pattern_b - 1])) pattern_b--;
            level_a = eq + 1;
            while (level_a < level_b && is_space(spec[level_a])) level_a++;
            if (pattern_a == pattern_b)
                return fail(error, a, "rule '%.*s' has no logger name before '='%.*s", rule,
                            rule_length, "", 0);
            for (size_t i = pattern_a; i < pattern_b; i++) {
                if (is_space(spec[i]) || (spec[i] == '*' && i + 1 != pattern_b))
                    return fail(error, a,
                                "rule '%.*s': a logger name has no spaces, and '*' only at its "
                                "end%.*s",
                                rule, rule_length, "", 0);
            }
            for (size_t i = level_a; i < level_b; i++)
                if (spec[i] == '=')
                    return fail(error, a, "rule '%.*s' has more than one '='%.*s", rule,
                                rule_length, "", 0);
        }
        if (level_parse(spec + level_a, level_b - level_a, &out->level) != 0) {
            if (eq == b)
                return fail(error, a,
                            "'%.*s' is neither a level nor a rule pattern=level (levels: %.*s)",
                            rule, rule_length, LEVELS_HELP, strlen(LEVELS_HELP));
            return fail(error, level_a, "unknown level '%.*s' (levels: %.*s)", spec + level_a,
                        level_b - level_a, LEVELS_HELP, strlen(LEVELS_HELP));
        }
        out->start = a;
        out->pattern_offset = (uint32_t)pattern_a;
        out->spec_pattern_length = (uint32_t)(pattern_b - pattern_a);
        out->pattern = pattern_b > pattern_a ? spec + pattern_a : "*";  /* a bare level: '*' */
        out->pattern_length = pattern_b > pattern_a ? pattern_b - pattern_a : 1;
        return 1;
    }
    return 0;
}

int lb_filter_parse(const char *spec, lb_filter_rule *rules, size_t capacity, size_t *count,
                    lb_filter_error *error) {
    if (!spec || !count) return -EINVAL;
    size_t n = strlen(spec), found = 0, pos = 0;
    if (n > UINT32_MAX / 2) return fail(error, 0, "filter is too long%.*s%.*s", "", 0, "", 0);
    parsed_rule rule;
    int rc;
    while ((rc = next_rule(spec, n, &pos, &rule, error)) == 1) {
        /* Two rules for one pattern are a mistake: say so rather than pick one. */
        size_t before = 0;
        parsed_rule earlier;
        while (next_rule(spec, n, &before, &earlier, NULL) == 1 && earlier.start < rule.start) {
            if (earlier.pattern_length == rule.pattern_length &&
                memcmp(earlier.pattern, rule.pattern, rule.pattern_length) == 0)
                return fail(error, rule.start, "logger '%.*s' has two rules; keep one%.*s",
                            rule.pattern, rule.pattern_length, "", 0);
        }
        if (rules && found < capacity) {
            rules[found].pattern_offset = rule.pattern_offset;
            rules[found].pattern_length = rule.spec_pattern_length;
            rules[found].level = rule.level;
        }
        found++;
    }
    if (rc < 0) return rc;
    *count = found;
    return 0;
}

/* How well a rule matches a logger name: -1 no match, else higher is more specific. */
static long rule_score(const lb_filter_rule_owned *r, const char *name, size_t name_length) {
    if (r->length == 1 && r->pattern[0] == '*') return 0;
    if (r->pattern[r->length - 1] == '*') {
        size_t k = r->length - 1;
        return name_length >= k && memcmp(name, r->pattern, k) == 0 ? (long)(2 * k) : -1;
    }
    if (name_length < r->length || memcmp(name, r->pattern, r->length) != 0) return -1;
    if (name_length > r->length && name[r->length] != '.') return -1;
    return (long)(2 * r->length + 1);
}

uint8_t lb_filter_level_for(const lb_bundle *b, const char *name) {
    const lb_filter_set *f = b->filter;
    if (!f) return LB_LEVEL_TRACE;
    size_t name_length = strlen(name);
    long best = -1;
    uint8_t level = LB_LEVEL_TRACE;
    for (size_t i = 0; i < f->count; i++) {
        long score = rule_score(&f->rules[i], name, name_length);
        if (score > best) {
            best = score;
            level = f->rules[i].level;
        }
    }
    return level;
}

static void apply(lb_bundle *b) {
    for (uint32_t i = 0; i < b->logger_count; i++)
        lb_logger_set_min_level(b->loggers[i], lb_filter_level_for(b, b->loggers[i]->name));
}

/* Sets (level != 0) or removes (level == 0) the rule of one pattern. Caller holds b->lock. */
static int set_rule(lb_bundle *b, const char *pattern, size_t length, uint8_t level) {
    if (!b->filter && !(b->filter = calloc(1, sizeof *b->filter))) return -ENOMEM;
    lb_filter_set *f = b->filter;
    for (size_t i = 0; i < f->count; i++) {
        if (f->rules[i].length == length && memcmp(f->rules[i].pattern, pattern, length) == 0) {
            if (level) {
                f->rules[i].level = level;
            } else {
                free(f->rules[i].pattern);
                memmove(&f->rules[i], &f->rules[i + 1], (f->count - i - 1) * sizeof *f->rules);
                f->count--;
            }
            return 0;
        }
    }
    if (!level) return 0;
    if (f->count == f->capacity) {
        size_t capacity = f->capacity ? f->capacity * 2 : 8;
        lb_filter_rule_owned *rules = realloc(f->rules, capacity * sizeof *rules);
        if (!rules) return -ENOMEM;
        f->rules = rules;
        f->capacity = capacity;
    }
    char *copy = malloc(length + 1);
    if (!copy) return -ENOMEM;
    memcpy(copy, pattern, length);
    copy[length] = 0;
    f->rules[f->count++] = (lb_filter_rule_owned){copy, length, level};
    return 0;
}

static void clear_rules(lb_bundle *b) {
    if (!b->filter) return;
    for (size_t i = 0; i < b->filter->count; i++) free(b->filter->rules[i].pattern);
    b->filter->count = 0;
}

/* Parses `spec` and sets its rules on top of the current ones (replacing them first when
 * `replace`). Nothing changes on a parse error. Caller holds b->lock. */
static int merge_spec(lb_bundle *b, const char *spec, int replace, lb_filter_error *error) {
    size_t count = 0;
    int rc = lb_filter_parse(spec, NULL, 0, &count, error);
    if (rc) return rc;
    lb_filter_rule *rules = calloc(count ? count : 1, sizeof *rules);
    if (!rules) return -ENOMEM;
    rc = lb_filter_parse(spec, rules, count, &count, error);
    if (rc == 0 && replace) clear_rules(b);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const char *pattern = rules[i].pattern_length ? spec + rules[i].pattern_offset : "*";
        rc = set_rule(b, pattern, rules[i].pattern_length ? rules[i].pattern_length : 1,
                      rules[i].level);
    }
    free(rules);
    apply(b);
    return rc;
}

int lb_bundle_set_filter(lb_bundle *b, const char *spec, lb_filter_error *error) {
    if (!b || !spec) return -EINVAL;
    pthread_mutex_lock(&b->lock);
    int rc = merge_spec(b, spec, 1, error);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int lb_bundle_set_filter_rule(lb_bundle *b, const char *pattern, uint8_t level) {
    if (!b || !pattern || !*pattern) return -EINVAL;
    if (level != 0 && level != LB_LEVEL_OFF && (level < LB_LEVEL_TRACE || level > LB_LEVEL_CRITICAL))
        return -EINVAL;
    pthread_mutex_lock(&b->lock);
    int rc = set_rule(b, pattern, strlen(pattern), level);
    apply(b);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int lb_bundle_set_filter_rules(lb_bundle *b, const char *const *patterns, const uint8_t *levels,
                               size_t count) {
    if (!b || (count && (!patterns || !levels))) return -EINVAL;
    for (size_t i = 0; i < count; i++) {
        uint8_t l = levels[i];
        if (!patterns[i] || !*patterns[i] ||
            (l != LB_LEVEL_OFF && (l < LB_LEVEL_TRACE || l > LB_LEVEL_CRITICAL)))
            return -EINVAL;
    }
    pthread_mutex_lock(&b->lock);
    clear_rules(b);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = set_rule(b, patterns[i], strlen(patterns[i]), levels[i]);
    apply(b);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

size_t lb_bundle_filter(lb_bundle *b, char *buffer, size_t size) {
    if (!b) return 0;
    size_t length = 0;
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; b->filter && i < b->filter->count; i++) {
        const lb_filter_rule_owned *r = &b->filter->rules[i];
        int n = snprintf(length < size ? buffer + length : NULL, length < size ? size - length : 0,
                         "%s%s=%s", i ? "," : "", r->pattern, level_name(r->level));
        if (n > 0) length += (size_t)n;
    }
    pthread_mutex_unlock(&b->lock);
    if (size && length >= size) buffer[size - 1] = 0;
    if (size && length == 0) buffer[0] = 0;
    return length;
}

int lb_bundle_filter_rule(lb_bundle *b, size_t index, char *pattern, size_t size,
                          uint8_t *level) {
    if (!b) return -EINVAL;
    pthread_mutex_lock(&b->lock);
    int rc = -ENOENT;
    if (b->filter && index < b->filter->count) {
        const lb_filter_rule_owned *r = &b->filter->rules[index];
        if (size) snprintf(pattern, size, "%s", r->pattern);
        if (level) *level = r->level;
        rc = (int)(r->length > INT32_MAX ? INT32_MAX : r->length);
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

const char *lb_bundle_filter_warning(lb_bundle *b) { return b ? b->filter_warning : NULL; }

int lb_filter_open(lb_bundle *b, const lb_options *options) {
    pthread_mutex_lock(&b->lock);
    int rc = 0;
    if (options->filter) {
        lb_filter_error error;
        rc = merge_spec(b, options->filter, 0, &error);
        if (rc == -EINVAL)
            lb_error_detail_set("filter \"%.120s\": %s (at byte %u)", options->filter, error.message,
                                error.offset);
    }
    const char *env = options->ignore_environment_filter ? NULL : getenv("LOGBOOK_FILTER");
    if (rc == 0 && env) {
        lb_filter_error error;
        if (merge_spec(b, env, 0, &error) == -EINVAL) {
            char line[sizeof error.message + 200];
            snprintf(line, sizeof line, "LOGBOOK_FILTER ignored: %s (at byte %u of \"%.120s\")",
                     error.message, error.offset, env);
            b->filter_warning = strdup(line);
            fprintf(stderr, "logbook: %s\n", line);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void lb_filter_free(lb_bundle *b) {
    clear_rules(b);
    if (b->filter) free(b->filter->rules);
    free(b->filter);
    b->filter = NULL;
    free(b->filter_warning);
    b->filter_warning = NULL;
}
