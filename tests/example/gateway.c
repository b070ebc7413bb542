/*
 * A gateway firmware's main loop with kreflect inside: its own poll() over
 * its own descriptor (a UNIX socket that answers with the settings in force)
 * and kreflect's, one ConfigMap mirrored, three typed settings read out of
 * it with kr_object_field and applied when they change.
 *
 *   gateway --kubeconfig PATH --namespace NS --name CONFIGMAP --socket PATH [--host-port N]...
 *           [--files DIR]
 *
 * --host-port: a TCP port the firmware itself connects to (its MQTT broker,
 * say), up to four: the sandbox allows them beside the API server's.
 * --files: the ConfigMap's keys also as files in DIR, for the firmware's
 * other programs (kr_client_dir, in memory of its own).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kreflect.h"

struct settings {
	char log_level[32];            /* debug | info | warn | error */
	long interval_s;               /* 1..3600 */
	int enabled;
	char rv[64];
};

static struct settings now = { "info", 60, 1, "" };
static volatile sig_atomic_t stopping;
static int wake[2] = { -1, -1 };       /* self-pipe: a signal wakes poll() */
static char mem[16u << 20] __attribute__((aligned(16)));
static char files_mem[4u << 20] __attribute__((aligned(16)));

static void on_term(int sig)
{
	int e = errno;

	(void)sig;
	stopping = 1;
	if (write(wake[1], "", 1) < 0)
		stopping = 1;              /* the pipe is full: poll wakes already */
	errno = e;
}

/* Reads the three settings; a bad or missing one keeps the value in force. */
static void apply(const char *obj, size_t len, const char *rv)
{
	struct settings s = now;
	char v[32];
	char *end;

	if (kr_object_field(obj, len, "data.log-level", v, sizeof(v)) > 0 &&
	    (!strcmp(v, "debug") || !strcmp(v, "info") || !strcmp(v, "warn") || !strcmp(v, "error")))
		snprintf(s.log_level, sizeof(s.log_level), "%s", v);
	if (kr_object_field(obj, len, "data.interval", v, sizeof(v)) > 0) {
		long n = strtol(v, &end, 10);

		if (!*end && n >= 1 && n <= 3600)
			s.interval_s = n;
	}
	if (kr_object_field(obj, len, "data.enabled", v, sizeof(v)) > 0 &&
	    (!strcmp(v, "true") || !strcmp(v, "false")))
		s.enabled = !strcmp(v, "true");
	snprintf(s.rv, sizeof(s.rv), "%s", rv);
	if (strcmp(s.log_level, now.log_level) || s.interval_s != now.interval_s || s.enabled != now.enabled)
		printf("applied log-level=%s interval=%ld enabled=%s rv=%s\n", s.log_level, s.interval_s,
		       s.enabled ? "true" : "false", s.rv);
	now = s;
	fflush(stdout);
}

static void on_change(void *arg, const struct kr_event *ev)
{
	(void)arg;
	if ((ev->type == KR_EV_ADDED || ev->type == KR_EV_MODIFIED) && ev->obj)
		apply(ev->obj, ev->objlen, ev->rv);
	else if (ev->type == KR_EV_SYNCED)
		printf("synced %zu rv=%s%s\n", ev->count, ev->rv, ev->partial ? " partial" : "");
	fflush(stdout);
}

static void on_state(void *arg, const struct kr_state_change *st)
{
	(void)arg;
	/* The failure as data: its class, and the HTTP status and Status reason if any. */
	if (st->state == KR_HEALTH_BACKOFF)
		fprintf(stderr, "gateway: %s: %s [%s %d %s], next try in %lld ms\n", st->resource, st->reason,
			kr_failure_name(st->failure), st->http_status, st->status_reason,
			(long long)st->next_attempt_ms);
}

static int listen_unix(const char *path)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	if (fd < 0 || strlen(path) >= sizeof(a.sun_path))
		return -1;
	memcpy(a.sun_path, path, strlen(path));
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 8) != 0)
		return -1;
	return fd;
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *ns = NULL, *name = NULL, *sock = NULL, *files = NULL;
	struct kr_dir_config dc;
	struct kr_dir_stats ds;
	struct kr_client_fd kfd[KR_CLIENT_MAX_FDS];
	struct pollfd pfd[KR_CLIENT_MAX_FDS + 2];
	struct kr_resource_spec spec = { 0 };
	struct kr_sandbox_opts sb;
	struct kr_client *c;
	struct kr_config cfg;
	char err[256], sel[300], sockdir[200];
	int i, n, t, lfd, nports = 0;
	uint16_t ports[4] = { 0 };

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--kubeconfig"))
			kubeconfig = argv[i + 1];
		else if (!strcmp(argv[i], "--namespace"))
			ns = argv[i + 1];
		else if (!strcmp(argv[i], "--name"))
			name = argv[i + 1];
		else if (!strcmp(argv[i], "--socket"))
			sock = argv[i + 1];
		else if (!strcmp(argv[i], "--files"))
			files = argv[i + 1];
		else if (!strcmp(argv[i], "--host-port") && nports < 4 && atoi(argv[i + 1]) > 0 &&
			 atoi(argv[i + 1]) < 65536)
			ports[nports++] = (uint16_t)atoi(argv[i + 1]);
		else {
			fprintf(stderr, "gateway: unknown or bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!kubeconfig || !ns || !name || !sock) {
		fprintf(stderr, "usage: gateway --kubeconfig PATH --namespace NS --name CONFIGMAP --socket PATH "
			"[--host-port N]... [--files DIR]\n");
		return 2;
	}
	if (pipe(wake) != 0 || fcntl(wake[1], F_SETFL, O_NONBLOCK) != 0)
		return 1;
	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	kr_config_init(&cfg);
	cfg.kubeconfig = kubeconfig;
	cfg.max_objects = 16;
	cfg.arena_bytes = 2u << 20;
	snprintf(sel, sizeof(sel), "metadata.name=%s", name);
	spec.name = "configmaps";
	spec.ns = ns;
	spec.field_selector = sel;
	kr_dir_config_init(&dc);
	dc.path = files;
	if (kr_client_memory(&cfg) > sizeof(mem) ||
	    kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) != 0 ||
	    kr_client_add(c, &spec, err, sizeof(err)) < 0 ||
	    (files && kr_dir_memory(&dc) > sizeof(files_mem)) ||
	    (files && kr_client_dir(c, files_mem, sizeof(files_mem), &dc, err, sizeof(err)) != 0) ||
	    kr_client_on_event(c, on_change, NULL) != 0 ||
	    kr_client_on_state(c, on_state, NULL) != 0 || kr_client_start(c, err, sizeof(err)) != 0) {
		fprintf(stderr, "gateway: unable to start kreflect: %s\n", err);
		return 1;
	}
	if ((lfd = listen_unix(sock)) < 0) {
		fprintf(stderr, "gateway: unable to listen on %s: %s\n", sock, strerror(errno));
		return 1;
	}
	/* Ready: from here on only the token, the socket's directory, the API server's port and ours. */
	memset(&sb, 0, sizeof(sb));
	snprintf(sockdir, sizeof(sockdir), "%s", sock);
	if (strrchr(sockdir, '/'))
		*strrchr(sockdir, '/') = '\0';
	else
		snprintf(sockdir, sizeof(sockdir), ".");
	sb.write_dirs[0] = sockdir;    /* the socket is removed at the end */
	sb.write_dirs[1] = files;      /* NULL ends the list */
	memcpy(sb.tcp_ports, ports, sizeof(ports));
	sb.uid = sb.gid = -1;
	if (kr_client_sandbox(c, &sb, err, sizeof(err)) != 0) {
		fprintf(stderr, "gateway: %s\n", err);
		return 1;
	}
	fprintf(stderr, "gateway: %s\n", err);
	while (!stopping) {
		n = kr_client_fds(c, kfd, KR_CLIENT_MAX_FDS, &t);
		if (n < 0)
			return 1;
		for (i = 0; i < n; i++) {
			pfd[i].fd = kfd[i].fd;
			pfd[i].events = (short)((kfd[i].events & KR_POLLIN ? POLLIN : 0) |
						(kfd[i].events & KR_POLLOUT ? POLLOUT : 0));
		}
		pfd[n].fd = lfd;                       /* the firmware's own descriptors */
		pfd[n].events = POLLIN;
		pfd[n + 1].fd = wake[0];
		pfd[n + 1].events = POLLIN;
		if (poll(pfd, (nfds_t)n + 2, t) < 0) {
			if (errno != EINTR)
				return 1;
			continue;                      /* revents are stale: poll again */
		}
		for (i = 0; i < n; i++)
			kfd[i].revents = (short)((pfd[i].revents & POLLIN ? KR_POLLIN : 0) |
						 (pfd[i].revents & POLLOUT ? KR_POLLOUT : 0) |
						 (pfd[i].revents & (POLLERR | POLLHUP) ? KR_POLLERR : 0));
		if (kr_client_process(c, kfd, n) < 0)
			return 1;
		if (pfd[n].revents & POLLIN) {
			int cfd = accept(lfd, NULL, NULL);
			char line[160];
			int len;

			if (cfd >= 0) {
				len = snprintf(line, sizeof(line), "log-level=%s interval=%ld enabled=%s rv=%s\n",
					       now.log_level, now.interval_s, now.enabled ? "true" : "false", now.rv);
				if (write(cfd, line, (size_t)len) < 0)
					fprintf(stderr, "gateway: unable to answer: %s\n", strerror(errno));
				close(cfd);
			}
		}
	}
	kr_client_stop(c);                     /* the last files in place */
	if (files && kr_client_dir_stats(c, &ds) == 0)
		printf("files %zu written %llu removed %llu errors %llu\n", ds.files, ds.written, ds.removed,
		       ds.errors);
	close(lfd);
	unlink(sock);
	return 0;
}
