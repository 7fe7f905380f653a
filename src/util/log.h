/* log — leveled logging to stderr, prefixed with time, level and function.
 *
 * DESIGN: library code never exits; it logs with __func__ and returns a
 * status.  The level is process-wide (set once by main from --log-level,
 * changeable later by /configure_logging), read without locks: a torn read
 * of an int is impossible on x86-64 and a stale level is harmless. */
#ifndef SGLC_UTIL_LOG_H
#define SGLC_UTIL_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARNING = 2, LOG_ERROR = 3, LOG_CRITICAL = 4 };

extern int log_level_current;

/* Parse "debug|info|warning|error|critical"; returns -1 when unknown. */
int log_level_parse(const char *name);
void log_set_level(int level);
void log_write(int level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(...) do { if (log_level_current <= LOG_DEBUG) log_write(LOG_DEBUG, __func__, __VA_ARGS__); } while (0)
#define log_info(...)  do { if (log_level_current <= LOG_INFO) log_write(LOG_INFO, __func__, __VA_ARGS__); } while (0)
#define log_warn(...)  do { if (log_level_current <= LOG_WARNING) log_write(LOG_WARNING, __func__, __VA_ARGS__); } while (0)
#define log_error(...) log_write(LOG_ERROR, __func__, __VA_ARGS__)

/* Always-on invariant check: a broken invariant is a bug, abort loudly. */
#define SGLC_ASSERT(c) do { if (!(c)) sglc_assert_fail(#c, __FILE__, __LINE__, __func__); } while (0)
void sglc_assert_fail(const char *expr, const char *file, int line, const char *func)
    __attribute__((noreturn));

#endif
