#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port.h"
#include "test.h"

static int opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len) < 0)
		return -2;
	return v;
}

/* Every socket kreflect opens (kr_port_tcp_connect is the only way) has keepalive as port.h says. */
KR_TEST(keepalive, every_connect_socket_has_the_keepalive_of_port_h)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct kr_addr a;
	int l, fd;

	l = socket(AF_INET, SOCK_STREAM, 0);
	check(l >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	check(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0);
	check(getsockname(l, (struct sockaddr *)&sa, &len) == 0);
	check(kr_port_parse_ip("127.0.0.1", ntohs(sa.sin_port), &a) == 0);
	fd = kr_port_tcp_connect(&a);
	check(fd >= 0);
	check(opt(fd, SOL_SOCKET, SO_KEEPALIVE) == 1);
	check(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE) == KR_PORT_KEEPALIVE_IDLE_S);
	check(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL) == KR_PORT_KEEPALIVE_INTERVAL_S);
	check(opt(fd, IPPROTO_TCP, TCP_KEEPCNT) == KR_PORT_KEEPALIVE_COUNT);
	check(opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == KR_PORT_USER_TIMEOUT_MS);
	/* About a minute: idle + count x interval, and the user timeout no longer. */
	check(KR_PORT_KEEPALIVE_IDLE_S + KR_PORT_KEEPALIVE_COUNT * KR_PORT_KEEPALIVE_INTERVAL_S <= 60);
	close(fd);
	close(l);
	return 0;
}
