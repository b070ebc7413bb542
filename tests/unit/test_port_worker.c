/* The posix port's short-lived workers (port/posix/worker.c): the slot bound, the answer, the kill. */
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "posix/worker.h"
#include "test.h"

KR_TEST(port_worker, answers_down_the_pipe_and_a_full_table_says_ebusy)
{
	struct kr_worker slots[1] = { KR_WORKER_FREE };
	struct pollfd pf;
	char buf[8];
	int rfd, wfd = -1, again;

	rfd = kr_worker_start(slots, 1, &wfd);
	if (rfd == -2) {
		/* The child: answers and leaves without returning into the test runner. */
		_exit(write(wfd, "ok", 2) == 2 ? 0 : 1);
	}
	check(rfd >= 0 && slots[0].fd == rfd && slots[0].pid > 0);
	errno = 0;
	again = kr_worker_start(slots, 1, &wfd);
	check(again == -1 && errno == EBUSY);
	check(kr_worker_find(slots, 1, rfd) == &slots[0]);
	check(kr_worker_find(slots, 1, rfd + 1000) == NULL);
	pf.fd = rfd;
	pf.events = POLLIN;
	check(poll(&pf, 1, 10000) == 1);
	check(read(rfd, buf, sizeof(buf)) == 2 && buf[0] == 'o' && buf[1] == 'k');
	kr_worker_end(&slots[0], 0);
	check(slots[0].fd == -1 && slots[0].pid == 0);
	check(kr_worker_find(slots, 1, -1) == NULL);   /* a free slot is never found */
	return 0;
}

KR_TEST(port_worker, a_child_that_never_answers_is_killed_and_reaped)
{
	struct kr_worker slots[2] = { KR_WORKER_FREE, KR_WORKER_FREE };
	int rfd, wfd = -1;

	rfd = kr_worker_start(slots, 2, &wfd);
	if (rfd == -2) {
		for (;;)
			pause();
	}
	check(rfd >= 0);
	kr_worker_end(&slots[0], 1);   /* returns only once the child is reaped */
	check(slots[0].fd == -1);
	/* Its slot is free again. */
	rfd = kr_worker_start(slots, 2, &wfd);
	if (rfd == -2)
		_exit(0);
	check(rfd >= 0 && slots[0].fd == rfd);
	kr_worker_end(&slots[0], 0);
	return 0;
}
