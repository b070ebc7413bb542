/*
 * kr_snprintf: the subset of snprintf that kreflect and mbedTLS use, in about
 * 1 KB instead of the C library's 12 KB printf engine (floating point, wide
 * characters, positional arguments) — for the binary's size on the device.
 *
 * Conversions: d i u x X c s p %; flags - 0 and space-free; width and
 * precision as numbers or *; lengths hh h l ll z j t. Anything else is
 * written as it stands (the compiler's format check stops it first).
 * Returns what snprintf returns: the length the whole text needs.
 */
#ifndef KR_FMT_H
#define KR_FMT_H

#include <stdarg.h>
#include <stddef.h>

int kr_snprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int kr_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Formats into a bounded line buffer and writes it to fd; returns the length written or -1. */
int kr_dprintf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* strtoll's syntax and overflow (saturating) for bases 2 to 16, no 0x prefix. */
long long kr_strtoll(const char *s, char **end, int base);

/* String i of a list of strings each ended by a NUL, one after the other ("a\0b\0"):
 * tables of texts without a pointer per row. The caller keeps i within the list. */
const char *kr_str_nth(const char *list, size_t i);

/* A decimal number in [lo, hi] (strtol's syntax, nothing after it); -1 if s is not one. */
long kr_parse_num(const char *s, long lo, long hi);

/*
 * A bounded output cursor: appends while the text fits, then remembers the
 * overflow instead of writing past the end (later appends do nothing), so
 * a writer checks once at the end. No NUL is added.
 */
struct kr_out {
	char *buf;
	size_t size;
	size_t len;
	int overflow;
};

void kr_out_put(struct kr_out *o, const char *s, size_t n);
void kr_out_str(struct kr_out *o, const char *s);

#endif /* KR_FMT_H */
