/*
 * park.c - a parked connection: suspended, its socket watched for the
 * client's close, one timer, resumed exactly once (park.h).
 */
#include <stdlib.h>

#include <event2/event.h>

#include "rt/rt.h"
#include "rt/park.h"

/*
 * The client's socket is watched edge-triggered: unread bytes (a body
 * waiting to be read, a pipelined request) wake the loop once per
 * arrival, never in a loop. Whether the client is gone is asked of the
 * kernel (fg_loop_client_gone()): a close or reset counts even with
 * bytes left unread.
 */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct fg_park *p = arg;
	(void)fd;
	(void)what;
	if (p->parked && fg_loop_client_gone(p->conn))
		p->on_gone(p->arg);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_park *p = arg;
	(void)fd;
	(void)what;
	if (p->parked)
		p->on_timer(p->arg);
}

static void unwatch(struct fg_park *p)
{
	if (p->timer) {
		event_free(p->timer);
		p->timer = NULL;
	}
	if (p->hangup) {
		event_free(p->hangup);
		p->hangup = NULL;
	}
}

int fg_park_suspend(struct fg_park *p, struct fg_loop *loop,
		    struct MHD_Connection *c, fg_park_cb *on_gone,
		    fg_park_cb *on_timer_cb, void *arg)
{
	*p = (struct fg_park){ .loop = loop, .conn = c, .on_timer = on_timer_cb,
			       .on_gone = on_gone, .arg = arg };
	if (on_timer_cb) {
		p->timer = evtimer_new(loop->base, on_timer, p);
		if (!p->timer)
			goto error_events;
	}
	if (on_gone) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci) {
			short ev = EV_READ | EV_ET | EV_PERSIST;
			if (event_base_get_features(loop->base) & EV_FEATURE_EARLY_CLOSE)
				ev |= EV_CLOSED;
			p->hangup = event_new(loop->base, ci->connect_fd, ev,
					      on_readable, p);
			if (!p->hangup || event_add(p->hangup, NULL) != 0)
				goto error_events;
		}
	}
	MHD_suspend_connection(c);
	p->parked = true;
	return 0;

error_events:
	unwatch(p);
	return -1;
}

void fg_park_arm(struct fg_park *p, int64_t ms)
{
	if (!p->parked || !p->timer)
		return;
	if (ms < 0)
		ms = 0;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	evtimer_add(p->timer, &tv);
}

bool fg_park_resume(struct fg_park *p)
{
	if (!p->parked)
		return false;
	p->parked = false;
	unwatch(p);
	fg_loop_resume(p->loop, p->conn);
	return true;
}
