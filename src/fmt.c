#include "fmt.h"
#include <limits.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "port.h"

struct out {
	char *buf;
	size_t size;
	size_t len;                    /* what the whole text needs */
};

static void put(struct out *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void pad(struct out *o, char c, int n)
{
	while (n-- > 0)
		put(o, c);
}

/* Emits s[0..n) within width, padded with spaces (left or right). */
static void field(struct out *o, const char *s, size_t n, int width, int left)
{
	int fill = width > (int)n ? width - (int)n : 0;

	if (!left)
		pad(o, ' ', fill);
	while (n--)
		put(o, *s++);
	if (left)
		pad(o, ' ', fill);
}

static void number(struct out *o, uintmax_t v, int neg, int hex, int upper, int width,
		   int prec, int left, int zero)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	unsigned base = hex ? 16 : 10;
	char tmp[24];
	int n = 0, len, zeros;

	while (v) {
		/* cppcheck-suppress zerodivcond ; base is 10 or 16 */
		tmp[n++] = digits[v % base];
		v /= base;
	}
	if (prec < 0 && n == 0)
		tmp[n++] = '0';                /* a precision of 0 prints nothing for 0 */
	zeros = prec > n ? prec - n : 0;
	len = n + zeros + neg;
	if (zero && !left && prec < 0 && width > len) {
		zeros += width - len;
		len = width;
	}
	if (!left)
		pad(o, ' ', width - len);
	if (neg)
		put(o, '-');
	pad(o, '0', zeros);
	while (n)
		put(o, tmp[--n]);
	if (left)
		pad(o, ' ', width - len);
}

int kr_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct out o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		int left = 0, zero = 0, width = 0, prec = -1, lng = 0;
		const char *start = fmt;

		if (*fmt != '%') {
			put(&o, *fmt);
			continue;
		}
		for (fmt++; *fmt == '-' || *fmt == '0'; fmt++)
			*fmt == '-' ? (left = 1) : (zero = 1);
		if (*fmt == '*') {
			width = va_arg(ap, int);
			if (width < 0) {
				left = 1;
				width = width == INT32_MIN ? 0 : -width;
			}
			fmt++;
		}
		for (; *fmt >= '0' && *fmt <= '9'; fmt++)
			width = width < 100000 ? width * 10 + (*fmt - '0') : width;
		if (*fmt == '.') {
			prec = 0;
			if (*++fmt == '*') {
				prec = va_arg(ap, int);
				fmt++;
			}
			for (; *fmt >= '0' && *fmt <= '9'; fmt++)
				prec = prec < 100000 ? prec * 10 + (*fmt - '0') : prec;
			if (prec < 0)
				prec = -1;             /* a negative * precision: as if none */
		}
		for (;; fmt++) {
			if (*fmt == 'l')
				lng = lng == 1 ? 2 : 1;
			else if (*fmt == 'z' || *fmt == 'j' || *fmt == 't')
				lng = 2;               /* 64-bit or word-sized: read as such below */
			else if (*fmt != 'h')
				break;
		}
		switch (*fmt) {
		case 'd':
		case 'i': {
			intmax_t v;

			if (lng == 2 && (fmt[-1] == 'z' || fmt[-1] == 't'))
				v = (intmax_t)va_arg(ap, long);   /* ssize_t, ptrdiff_t: long here */
			else if (lng == 2 && fmt[-1] == 'j')
				v = va_arg(ap, intmax_t);
			else
				v = lng == 2 ? va_arg(ap, long long) : lng ? va_arg(ap, long) : va_arg(ap, int);
			number(&o, v < 0 ? (uintmax_t)0 - (uintmax_t)v : (uintmax_t)v, v < 0, 0, 0,
			       width, prec, left, zero);
			break;
		}
		case 'u':
		case 'x':
		case 'X': {
			uintmax_t v;

			if (lng == 2 && (fmt[-1] == 'z' || fmt[-1] == 't'))
				v = va_arg(ap, size_t);
			else if (lng == 2 && fmt[-1] == 'j')
				v = va_arg(ap, uintmax_t);
			else
				v = lng == 2 ? va_arg(ap, unsigned long long)
				    : lng ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
			if (!lng && fmt[-1] == 'h')
				v = fmt[-2] == 'h' ? (unsigned char)v : (unsigned short)v;
			number(&o, v, 0, *fmt != 'u', *fmt == 'X', width, prec, left, zero);
			break;
		}
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			number(&o, (uintptr_t)va_arg(ap, void *), 0, 1, 0, width > 2 ? width - 2 : 0,
			       -1, left, 0);
			break;
		case 'c': {
			char c = (char)va_arg(ap, int);

			field(&o, &c, 1, width, left);
			break;
		}
		case 's': {
			const char *s = va_arg(ap, const char *);
			size_t n;

			if (!s)
				s = "(null)";
			if (prec >= 0) {
				const char *end = memchr(s, '\0', (size_t)prec);

				n = end ? (size_t)(end - s) : (size_t)prec;
			} else {
				n = strlen(s);
			}
			field(&o, s, n, width, left);
			break;
		}
		case '%':
			put(&o, '%');
			break;
		default:                       /* unknown: copied as written */
			for (; start <= fmt && *start; start++)
				put(&o, *start);
			if (!*fmt)
				fmt--;
			break;
		}
	}
	if (size)
		buf[o.len < size ? o.len : size - 1] = '\0';
	return o.len > INT32_MAX ? -1 : (int)o.len;
}

int kr_snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = kr_vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

int kr_dprintf(int fd, const char *fmt, ...)
{
	char line[2048];
	struct kr_iov iov;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = kr_vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	iov.base = line;
	iov.len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	return kr_port_writev_all(fd, &iov, 1) == 0 ? (int)iov.len : -1;
}

void kr_out_put(struct kr_out *o, const char *s, size_t n)
{
	if (o->overflow || n > o->size - o->len) {
		o->overflow = 1;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

void kr_out_str(struct kr_out *o, const char *s)
{
	kr_out_put(o, s, strlen(s));
}

/*
 * strtoll for bases 2 to 16 without a 0x prefix (all kreflect parses): musl's
 * strtol family comes with its stdio-based scanner, 2.5 KB of a tiny build.
 */
long long kr_strtoll(const char *s, char **end, int base)
{
	const char *p = s, *digits;
	unsigned long long v = 0, lim;
	int neg = 0, any = 0, over = 0;

	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	lim = neg ? (unsigned long long)LLONG_MAX + 1u : (unsigned long long)LLONG_MAX;
	for (;; p++, any = 1) {
		unsigned d;
		char ch = *p >= 'A' && *p <= 'F' ? (char)(*p + ('a' - 'A')) : *p;

		digits = ch ? strchr("0123456789abcdef", ch) : NULL;
		if (!digits || (d = (unsigned)(digits - "0123456789abcdef")) >= (unsigned)base)
			break;
		if (v > (lim - d) / (unsigned)base)
			over = 1;
		else
			v = v * (unsigned)base + d;
	}
	if (end)
		*end = (char *)(any ? p : s);
	if (over)
		return neg ? LLONG_MIN : LLONG_MAX;
	return neg ? (long long)(0u - v) : (long long)v;
}

const char *kr_str_nth(const char *list, size_t i)
{
	while (i--)
		list += strlen(list) + 1;
	return list;
}

long kr_parse_num(const char *s, long lo, long hi)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	v = kr_strtoll(s, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	return (long)v;
}
