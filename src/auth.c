#include "auth.h"

#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "port.h"

void kr_auth_init(struct kr_auth *a)
{
	kr_port_zero(a, sizeof(*a));
}

/* Reads path into buf as one token: trailing whitespace trimmed, one line. */
static int read_token(const char *path, char *buf, size_t size)
{
	long n = kr_port_read_file(path, buf, size - 1);

	if (n < 0)
		return (int)n;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (n == 0 || memchr(buf, '\n', (size_t)n) || memchr(buf, '\r', (size_t)n) ||
	    memchr(buf, '\0', (size_t)n))
		return KR_EINVAL;
	return (int)n;
}

int kr_auth_set_file(struct kr_auth *a, const char *path)
{
	char fresh[sizeof(a->token)];
	int n;

	if (strlen(path) >= sizeof(a->path))
		return KR_ETOOBIG;
	n = read_token(path, fresh, sizeof(fresh));
	if (n < 0)
		return n;
	kr_snprintf(a->path, sizeof(a->path), "%s", path);
	memcpy(a->token, fresh, (size_t)n + 1);
	memset(fresh, 0, sizeof(fresh));
	return 0;
}

int kr_auth_refresh(struct kr_auth *a)
{
	char fresh[sizeof(a->token)];
	int n, changed = 0;

	if (!a->path[0])
		return 0;
	n = read_token(a->path, fresh, sizeof(fresh));
	if (n < 0) {
		a->last_error = n;
		return n;
	}
	a->last_error = 0;
	if (strcmp(fresh, a->token) != 0) {
		memcpy(a->token, fresh, (size_t)n + 1);
		a->reloads++;
		changed = 1;
	}
	memset(fresh, 0, sizeof(fresh));
	return changed;
}

const char *kr_auth_token(const struct kr_auth *a)
{
	return a->token[0] ? a->token : NULL;
}
