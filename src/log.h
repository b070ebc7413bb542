/*
 * Logging: one line per message on the port's log sink (stderr), with a level.
 * Lines read "kreflect: <level>: <text>". Secrets (tokens, keys, Secret data)
 * are never passed to these functions.
 */
#ifndef KR_LOG_H
#define KR_LOG_H

#include "kreflect.h"              /* enum kr_log_level, kr_set_log_handler, kr_set_log_level, kr_log */

/* Longest log line; longer messages are cut and end in "...". */
#define KR_LOG_LINE_MAX 1024

/* Nonzero if messages at level are written: lets callers skip costly formatting. */
int kr_log_enabled(int level);

/* Formats the line kr_log would write into buf (for tests); returns its length. */
int kr_log_format(char *buf, int size, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* KR_LOG_H */
