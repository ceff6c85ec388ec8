/*
 * rt.c - the loop's runtime calls its services make: resuming a
 * connection so that the daemon runs on the loop's next turn, reading a
 * connection again, asking the kernel whether a client left, and ids.
 * On the loop's thread only.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include <event2/event.h>

#include "base/text.h"
#include "rt/rt.h"

void fg_loop_resume(struct fg_loop *loop, struct MHD_Connection *c)
{
	MHD_resume_connection(c);
	event_active(loop->mhd_io, EV_READ, 0);
}

void fg_loop_reread(struct fg_loop *loop, struct MHD_Connection *c)
{
	/* a resumed connection is marked readable and read whatever its
	 * socket said last */
	MHD_suspend_connection(c);
	fg_loop_resume(loop, c);
}

bool fg_loop_client_gone(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	struct pollfd p = { .fd = ci->connect_fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void fg_loop_next_id(struct fg_loop *loop, bool write, char *out, size_t cap)
{
	/* "<loop id>-[w]<seq>", put together without printf(): one per
	 * write and per waiter */
	char buf[FG_GATEWAY_ID_LEN + 24];
	size_t n = fg_copy(buf, FG_GATEWAY_ID_LEN + 1, loop->id);
	buf[n++] = '-';
	if (write)
		buf[n++] = 'w';
	n += fg_digits(buf + n, ++loop->seq);
	buf[n] = '\0';
	fg_copy(out, cap, buf);
}
