/*
 * Logging: one line per message on the port's log sink (stderr), with a level.
 * Lines read "kreflect: <level>: <text>". Secrets (tokens, keys, Secret data)
 * are never passed to these functions.
 */
#ifndef KR_LOG_H
#define KR_LOG_H

#include "kreflect.h"              /* enum kr_log_level, kr_set_log_handler */

/* Longest log line; longer messages are cut and end in "...". */
#define KR_LOG_LINE_MAX 1024

/* Sets the most verbose level written (default KR_LOG_INFO). */
void kr_log_set_level(int level);

/* Nonzero if messages at level are written: lets callers skip costly formatting. */
int kr_log_enabled(int level);

/* Formats and writes one line at level; never fails, never allocates. */
void kr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats the line kr_log would write into buf (for tests); returns its length. */
int kr_log_format(char *buf, int size, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* KR_LOG_H */
