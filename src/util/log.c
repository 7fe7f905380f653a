/* log — see log.h. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int log_level_current = LOG_INFO;

static const char *level_names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};

int log_level_parse(const char *name)
{
    static const char *lower[] = {"debug", "info", "warning", "error", "critical"};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, lower[i]) == 0) return i;
    return -1;
}

void log_set_level(int level) { log_level_current = level; }

void log_write(int level, const char *func, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    if (level < 0) level = 0;
    if (level > 4) level = 4;
    /* One fprintf per line so concurrent threads do not interleave. */
    fprintf(stderr, "[%04d-%02d-%02d %02d:%02d:%02d] %s %s: %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, level_names[level],
            func, msg);
}

void sglc_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    fprintf(stderr, "sglc: assertion failed: %s (%s:%d, %s)\n", expr, file, line, func);
    abort();
}
