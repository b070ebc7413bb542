/*
 * The sandbox from the inside: applies kr_port_sandbox as kreflect does once
 * start-up is over (the port's own code, linked in), then tries what a
 * parser bug would try and prints one line per attempt:
 *   ok NAME    the attempt failed as it must (or, for the controls, worked)
 *   FAIL NAME  it did not
 * A control of each kind (a write inside DIR, a TCP socket, a read of the
 * allowed file) shows the probe can tell the two apart.
 *
 *   probe DIR READFILE [on|auto] [PROGRAM]   PROGRAM: may be run, as a hook (run it
 *                                            as PROGRAM --true: it must start and exit 0)
 *   probe --calls       the allow list compiled in, for tests/sandbox/calls.py
 */
#define _GNU_SOURCE
#include "kreflect.h"
#include "port.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;

/* fmt.c's kr_dprintf writes through the port; the probe links no more of it. */
int kr_port_writev_all(int fd, struct kr_iov *iov, int n)
{
	(void)fd;
	(void)iov;
	(void)n;
	return KR_IO_ERR;
}

static void expect(const char *name, int must_work, int worked, int err)
{
	if (must_work == worked) {
		printf("ok %s (%s)\n", name, worked ? "worked" : strerror(err));
		passed++;
		return;
	}
	printf("FAIL %s: %s\n", name, worked ? "worked, must be refused" : strerror(err));
	failed++;
}

int main(int argc, char **argv)
{
	struct kr_sandbox sb;
	char done[512], path[4096];
	int fd, r, status;
	pid_t pid;

	if (argc == 2 && strcmp(argv[1], "--true") == 0)
		return 0;              /* run as the named program: it started inside the sandbox */
	if (argc == 2 && strcmp(argv[1], "--calls") == 0) {
		static char list[8192];

		kr_port_sandbox_calls(list, sizeof(list));
		fputs(list, stdout);
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: probe DIR READFILE [on|auto]\n");
		return 2;
	}
	memset(&sb, 0, sizeof(sb));
	sb.mode = argc > 3 && strcmp(argv[3], "auto") == 0 ? KR_SANDBOX_AUTO : KR_SANDBOX_ON;
	sb.write_dir[0] = argv[1];
	if (argc > 4)
		sb.exec[0] = argv[4];  /* as a hook named by --exec under --sandbox on */
	sb.read[0] = argv[2];
	sb.connect[0] = 443;
	sb.filter = 1;
	sb.uid = sb.gid = -1;
	r = kr_port_sandbox(&sb, done, sizeof(done));
	printf("%s %s\n", r == 0 ? "ok applied:" : "FAIL applying:", done);
	if (r != 0)
		return 1;
	fflush(stdout);

	snprintf(path, sizeof(path), "%s/inside", argv[1]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	expect("write inside --dir", 1, fd >= 0, errno);
	if (fd >= 0)
		close(fd);
	fd = open("/tmp/kreflect-sandbox-escape", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	expect("write outside --dir (/tmp)", 0, fd >= 0, errno);
	snprintf(path, sizeof(path), "%s/../outside", argv[1]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	expect("write outside --dir (DIR/..)", 0, fd >= 0, errno);
	fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	expect("read the allowed file", 1, fd >= 0, errno);
	if (fd >= 0)
		close(fd);
	fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
	expect("read /etc/shadow", 0, fd >= 0, errno);
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	expect("read /etc/passwd", 0, fd >= 0, errno);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	expect("TCP socket", 1, fd >= 0, errno);
	if (fd >= 0) {
		struct sockaddr_in sin;

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(22);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		/* Refused by Landlock (EACCES) before any packet; ECONNREFUSED would mean it went out. */
		expect("TCP connect to a port not in use (22)", 0, r == 0 || errno == ECONNREFUSED, errno);
		close(fd);
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	expect("UDP socket", 0, fd >= 0, errno);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	expect("UNIX socket", 0, fd >= 0, errno);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	expect("packet socket", 0, fd >= 0, errno);
	{
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		expect("mmap read-write", 1, m != MAP_FAILED, errno);
		if (m != MAP_FAILED) {
			r = mprotect(m, 4096, PROT_READ | PROT_EXEC);
			expect("mprotect to executable", 0, r == 0, errno);
		}
		m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		expect("mmap executable", 0, m != MAP_FAILED, errno);
	}
	/* A process not started inside the sandbox (init): Landlock ABI 6 scopes signals. */
	r = kill(1, 0);
	expect("signal a process started outside (pid 1)", 0, r == 0, errno);
	/* execve directly: the filter lists it only when programs are named. */
	{
		char *const sh[] = { "/bin/sh", "-c", "exit 0", NULL };

		r = execve("/bin/sh", sh, NULL);
		expect("exec /bin/sh", 0, 0, errno);
	}
	if (argc > 4) {
		char *const prog[] = { argv[4], "--true", NULL };

		pid = fork();
		if (pid == 0) {
			execve(argv[4], prog, NULL);
			_exit(127);
		}
		status = -1;
		if (pid > 0)
			waitpid(pid, &status, 0);
		expect("the named program runs and exits 0", 1, pid > 0 && WIFEXITED(status) &&
		       WEXITSTATUS(status) == 0, pid > 0 ? 0 : errno);
	}
	/* A fork is allowed (the port's workers); the child is as limited as the parent. */
	pid = fork();
	if (pid == 0) {
		fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
		_exit(fd >= 0 ? 1 : 0);
	}
	expect("fork", 1, pid > 0, errno);
	if (pid > 0) {
		waitpid(pid, &status, 0);
		expect("read /etc/shadow in a forked child", 0, !WIFEXITED(status) || WEXITSTATUS(status) != 0, 0);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
