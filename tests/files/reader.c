/*
 * A reader that opens and reads files in a tight loop while kreflect
 * rewrites them, and checks every read: a partial, mixed or vanished file
 * is a failure of the directory sink's atomic replace.
 *
 *   files-reader SECONDS STOPFILE FILE...
 *
 * Every content the test writes is self-checking:
 *
 *   "KRT" KIND " " VERSION(10 digits) " " LENGTH(10 digits) "\n" PAYLOAD
 *
 * KIND is 't' (text) or 'b' (binary); PAYLOAD is LENGTH bytes, byte i being
 * pattern(KIND, VERSION, i). A truncated file fails the length, a file mixing
 * two versions fails the pattern. A file that was readable once and then is
 * missing failed the rename. The loop ends after SECONDS or when STOPFILE
 * exists, and prints one line:
 *
 *   reads=N bad=N missing=N changes=N last=V,V,...
 *
 * (changes: how many times a file was seen at another version than the read
 * before; last: the version each file held at the last read), then up to 5
 * lines "bad FILE: why". Exit 0 if nothing was bad or missing, else 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16
#define MAX_BYTES (4u << 20)  /* larger than any content the test writes */
#define HEADER_LEN 27         /* "KRTt 0000000001 0000000010\n" */

static unsigned char buf[MAX_BYTES + 1];
static char why[5][512];
static int nwhy;

static unsigned char pattern(char kind, unsigned long version, unsigned long i)
{
	unsigned long v = version * 7u + i;

	if (kind == 't')
		return (unsigned char)(0x21 + v % 90);  /* printable ASCII */
	return (unsigned char)(v % 251);                /* every byte value but a few */
}

static void bad(const char *file, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (nwhy == 5)
		return;
	n = snprintf(why[nwhy], sizeof(why[nwhy]), "bad %s: ", file);
	va_start(ap, fmt);
	vsnprintf(why[nwhy] + n, sizeof(why[nwhy]) - (size_t)n, fmt, ap);
	va_end(ap);
	nwhy++;
}

/* Parses a 10-digit decimal field; -1 if it is not one. */
static long field(const unsigned char *p)
{
	long v = 0;
	int i;

	for (i = 0; i < 10; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* The version the content holds, or -1 (reported) if it does not check out. */
static long check(const char *file, size_t len)
{
	long version, length;
	char kind;
	size_t i;

	if (len < HEADER_LEN || memcmp(buf, "KRT", 3) != 0 || (buf[3] != 't' && buf[3] != 'b') ||
	    buf[4] != ' ' || buf[15] != ' ' || buf[HEADER_LEN - 1] != '\n') {
		bad(file, "no header in %lu bytes", (unsigned long)len);
		return -1;
	}
	kind = (char)buf[3];
	version = field(buf + 5);
	length = field(buf + 16);
	if (version < 0 || length < 0) {
		bad(file, "a header that is not one (%lu bytes)", (unsigned long)len);
		return -1;
	}
	if (len - HEADER_LEN != (size_t)length) {
		bad(file, "%lu payload bytes, the header says %lu", (unsigned long)(len - HEADER_LEN),
		    (unsigned long)length);
		return -1;
	}
	for (i = 0; i < (size_t)length; i++) {
		if (buf[HEADER_LEN + i] != pattern(kind, (unsigned long)version, i)) {
			bad(file, "byte %lu is not version %lu's", (unsigned long)i, (unsigned long)version);
			return -1;
		}
	}
	return version;
}

/* Reads the whole file into buf: its length, -1 if it is not there, -2 on another error. */
static long slurp(const char *file)
{
	size_t len = 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? -1 : -2;
	for (;;) {
		ssize_t n = read(fd, buf + len, MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return -2;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > MAX_BYTES)
			break;
	}
	close(fd);
	return (long)len;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long last[MAX_FILES];
	unsigned long reads = 0, nbad = 0, missing = 0, changes = 0, loops = 0;
	double end;
	int nfiles, i;

	if (argc < 4 || argc - 3 > MAX_FILES) {
		fprintf(stderr, "usage: %s SECONDS STOPFILE FILE... (at most %d files)\n", argv[0],
			MAX_FILES);
		return 2;
	}
	end = now() + atof(argv[1]);
	nfiles = argc - 3;
	for (i = 0; i < nfiles; i++)
		last[i] = -1;
	for (;;) {
		/* The clock and the stop file every 64 passes: the reads stay tight. */
		if ((loops++ & 63) == 0 && (now() >= end || access(argv[2], F_OK) == 0))
			break;
		for (i = 0; i < nfiles; i++) {
			const char *file = argv[3 + i];
			long len = slurp(file), v;

			if (len == -1) {
				if (last[i] >= 0) {
					missing++;
					bad(file, "missing after it was read at version %ld",
					    last[i]);
				}
				continue;
			}
			if (len == -2) {
				nbad++;
				bad(file, "unreadable: %s", strerror(errno));
				continue;
			}
			if ((size_t)len > MAX_BYTES) {
				nbad++;
				bad(file, "more than %u bytes", MAX_BYTES);
				continue;
			}
			reads++;
			v = check(file, (size_t)len);
			if (v < 0) {
				nbad++;
				continue;
			}
			if (last[i] >= 0 && v != last[i])
				changes++;
			last[i] = v;
		}
	}
	printf("reads=%lu bad=%lu missing=%lu changes=%lu last=", reads, nbad, missing, changes);
	for (i = 0; i < nfiles; i++)
		printf("%s%ld", i ? "," : "", last[i]);
	printf("\n");
	for (i = 0; i < nwhy; i++)
		printf("%s\n", why[i]);
	return nbad || missing ? 1 : 0;
}
