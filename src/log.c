#include "fmt.h"
#include "log.h"
#include "port.h"

#include <stdarg.h>
#include <string.h>

static int max_level = KR_LOG_INFO;
static void (*handler)(void *arg, int level, const char *text);
static void *handler_arg;

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

void kr_set_log_level(int level)
{
	max_level = level;
}

int kr_log_enabled(int level)
{
	return level <= max_level;
}

__attribute__((format(printf, 4, 0)))
static int format_line(char *buf, int size, int level, const char *fmt, va_list ap)
{
	int n, m;

	if (level < KR_LOG_ERROR)
		level = KR_LOG_ERROR;
	if (level > KR_LOG_TRACE)
		level = KR_LOG_TRACE;
	n = kr_snprintf(buf, (size_t)size, "kreflect: %s: ", level_names[level]);
	if (n < 0 || n >= size - 1)
		return 0;
	m = kr_vsnprintf(buf + n, (size_t)(size - n), fmt, ap);
	if (m < 0)
		m = 0;
	if (n + m >= size - 1) {
		/* Cut: keep room for "...\n". */
		n = size - 5;
		memcpy(buf + n, "...", 3);
		n += 3;
	} else {
		n += m;
	}
	buf[n++] = '\n';
	buf[n] = '\0';
	return n;
}

int kr_log_format(char *buf, int size, int level, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = format_line(buf, size, level, fmt, ap);
	va_end(ap);
	return n;
}

int kr_set_log_handler(void (*fn)(void *arg, int level, const char *text), void *arg)
{
	handler = fn;
	handler_arg = arg;
	return 0;
}

void kr_log(int level, const char *fmt, ...)
{
	char line[KR_LOG_LINE_MAX];
	va_list ap;
	int n;

	/* A stray level (a host's) counts as the nearest one. */
	level = level < KR_LOG_ERROR ? KR_LOG_ERROR : level > KR_LOG_TRACE ? KR_LOG_TRACE : level;
	if (level > max_level || !fmt)
		return;
	va_start(ap, fmt);
	if (handler) {
		/* The text alone: the host adds its own prefix and line end. */
		if (kr_vsnprintf(line, sizeof(line), fmt, ap) < 0)
			line[0] = '\0';
		va_end(ap);
		handler(handler_arg, level, line);
		return;
	}
	n = format_line(line, sizeof(line), level, fmt, ap);
	va_end(ap);
	if (n > 0)
		kr_port_log_write(line, (size_t)n);
}
