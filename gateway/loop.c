/*
 * loop.c - one event loop per thread, each serving requests start to
 * finish: the libmicrohttpd daemon (external epoll), the asynchronous
 * Redis connections, the waiters and the curl multi handle all run on the
 * loop's libevent base. The Redis connections are the loop's: made here,
 * lent to each service when it is created, closed here at stop.
 *
 * Invariants: a loop's objects are touched only on its thread once it
 * runs (the drain and stop requests are the events another thread
 * activates); a draining loop accepts nothing, its waiters are answered
 * 503 shutting_down and what is in flight runs on until it ends or the
 * stop comes; at stop, what still runs is ended as at a lease's end and
 * every suspended connection is resumed (transfers ended, Redis calls
 * answered) before the daemon is stopped, so every request state is
 * freed by its request-completed callback. The event feed's threads
 * reach a loop only through fg_loop_events(), an event they activate.
 */
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/rand.h>

#include "access/access.h"
#include "api/api.h"
#include "api/events.h"
#include "base/clock.h"
#include "http/front.h"
#include "proc/gateway.h"
#include "base/log.h"
#include "loop.h"
#include "proxy/admitq.h"
#include "proxy/flow.h"
#include "rt/evrec.h"
#include "lockwait/waitq.h"

/* How long a stopping loop keeps serving, so that the waiters it answered
 * (503) get their answer before the connections close. */
#define STOP_FLUSH_MS 50
/* How often a draining loop looks whether its last request ended. */
#define DRAIN_CHECK_MS 10

/* ---- the daemon on the loop -------------------------------------------- */

static void arm_http_timer(struct fg_loop *loop)
{
	MHD_UNSIGNED_LONG_LONG ms;
	if (MHD_get_timeout(loop->daemon, &ms) != MHD_YES) {
		evtimer_del(loop->mhd_timer);
		return;
	}
	if (ms > 3600000ull)
		ms = 3600000ull;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	evtimer_add(loop->mhd_timer, &tv);
}

static unsigned connections(struct fg_loop *loop)
{
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(loop->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
	return di ? di->num_connections : 0;
}

static void on_http(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	bool full = connections(loop) >= loop->max_connections;
	MHD_run(loop->daemon);
	/* A daemon at its connection limit stops watching the listening
	 * socket and watches it again only on its next run: when this run
	 * closed connections, run once more, or connections waiting in the
	 * backlog would wait for an event that never comes. */
	if (full && connections(loop) < loop->max_connections)
		MHD_run(loop->daemon);
	arm_http_timer(loop);
}

/* ---- messages from Redis ---------------------------------------------- */

void fg_loop_on_message(const char *chan, const char *msg, size_t len,
			void *arg)
{
	struct fg_loop *loop = arg;
	/* On the loop's channel, "x <write id>": the grant of this write
	 * ended (abort it upstream); "e <write id> <ms>": its grant now ends
	 * in ms (clamp its deadline, then ask for it again). */
	if (msg && len > 2 && len < 2 + FG_WAITER_ID_MAX + 24 &&
	    (msg[0] == 'x' || msg[0] == 'e') && msg[1] == ' ' &&
	    strncmp(chan, "fg:gw:", 6) == 0) {
		char buf[2 + FG_WAITER_ID_MAX + 24], id[FG_WAITER_ID_MAX];
		long long ms = 0;
		memcpy(buf, msg, len);
		buf[len] = '\0';
		if (msg[0] == 'x' && sscanf(buf + 2, "%39s", id) == 1)
			fg_proxy_abort_write(loop->px, id);
		else if (msg[0] == 'e' && sscanf(buf + 2, "%39s %lld", id, &ms) == 2)
			fg_proxy_reask_write(loop->px, id, ms);
		return;
	}
	/* "w <lock>": a write of the lock ended; the writes waiting behind
	 * it ask again */
	if (msg && len > 2 && len < 2 + FG_NAME_MAX + 1 && msg[0] == 'w' &&
	    msg[1] == ' ' && strncmp(chan, "fg:gw:", 6) == 0) {
		char name[FG_NAME_MAX + 1];
		memcpy(name, msg + 2, len - 2);
		name[len - 2] = '\0';
		fg_admitq_wake(loop->aq, name);
		return;
	}
	fg_waitq_message(loop->wq, chan, msg, len);
}

void fg_loop_on_resync(void *arg)
{
	struct fg_loop *loop = arg;
	/* an abort message may have been lost with the connection */
	fg_proxy_recheck_writes(loop->px);
	fg_admitq_resync(loop->aq);
	fg_waitq_resync(loop->wq);
}

/* The topology moved: the loop's connections follow it now, not at its
 * next call, so none stays on a demoted master. */
static void on_follow(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	fg_astore_follow(loop->as);
}

void fg_loop_follow(struct fg_loop *loop)
{
	event_active(loop->follow_ev, EV_READ, 0);
}

/* The feed's threads made this event active: new events in the ring, or
 * history read for a reader of this loop. Activations while it is
 * pending are one. */
static void on_events(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	fg_evapi_wake(loop->evr);
}

void fg_loop_events(struct fg_loop *loop)
{
	event_active(loop->events_ev, EV_READ, 0);
}

/* ---- the daemon's routes ------------------------------------------------ */

static const struct fg_routes routes = {
	.api = fg_api_handle,
	.proxy = fg_proxy_handle,
	.api_finish = fg_api_finish,
	.proxy_finish = fg_proxy_finish,
};

/* ---- heartbeat ---------------------------------------------------------- */

/* Readiness asks whether every loop turned lately (a stuck loop is not
 * ready); this timer is the turn it looks for. Health asks whether every
 * loop's Redis connections can take a call: noted at the same turn. */
static void on_turn(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	fg_gateway_loop_turned(loop->gw, loop->index, fg_clock_ms());
	fg_gateway_loop_redis(loop->gw, loop->index, fg_astore_ready(loop->as));
}

/* At start a loop's Redis connections come up within milliseconds: health
 * learns it then, not at the next heartbeat. Looked at every 10 ms until
 * they are up, for the first 5 s at most; the heartbeat alone after. */
#define READY_POLL_MS 10
#define READY_POLL_FOR_MS 5000

static void on_ready_poll(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	bool ready = fg_astore_ready(loop->as);
	fg_gateway_loop_redis(loop->gw, loop->index, ready);
	if (!ready && fg_clock_ms() - loop->started_ms < READY_POLL_FOR_MS) {
		struct timeval tv = { 0, READY_POLL_MS * 1000 };
		evtimer_add(loop->ready_timer, &tv);
	}
}

/* ---- draining and stopping ---------------------------------------------- */

static void on_exit_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	/* the folds of the second under way go with the loop's last turn */
	fg_evrec_flush(loop->evrec);
	event_base_loopexit(loop->base, NULL);
}

/* Whether the loop has no request left, as main.c sees it: a request
 * that comes on a connection opened before the drain makes it busy
 * again, and the drain waits for that one too. */
static void on_drain_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	bool idle = loop->inflight == 0;
	if (idle == loop->drained)
		return;
	loop->drained = idle;
	fg_gateway_note_drained(loop->gw, idle);
}

/* Stops accepting (the listening socket is main.c's to close once every
 * loop let go of it), answers the parked waiters and admission waits
 * 503 shutting_down, and watches for its last request to end. Calls and
 * transfers in flight go on; so does a request that comes on a
 * connection already open. */
static void drain(struct fg_loop *loop)
{
	if (loop->draining)
		return;
	loop->draining = true;
	MHD_quiesce_daemon(loop->daemon);
	fg_waitq_stop(loop->wq);
	fg_admitq_stop(loop->aq);
	fg_evapi_stop(loop->evr);
	fg_gateway_note_quiesced(loop->gw);
	struct timeval tv = { 0, DRAIN_CHECK_MS * 1000 };
	event_add(loop->drain_timer, &tv);
	on_drain_timer(-1, 0, loop);
}

static void on_drain(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	drain(arg);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	struct fg_loop *loop = arg;
	(void)fd;
	(void)what;
	drain(loop);
	evtimer_del(loop->drain_timer);
	evtimer_del(loop->ready_timer);
	if (loop->inflight > 0)
		fg_gateway_note_ended(loop->gw, loop->inflight);
	/* What still runs ends as at a lease's end: a fenced write sends no
	 * more bytes and is cut off, one sent whole is awaited the margin
	 * more (proxy/writes.c); the teardown ends the rest. */
	unsigned writes = fg_proxy_end_writes(loop->px);
	uint64_t ms = STOP_FLUSH_MS + (writes ? loop->gw->cfg->fence_margin_ms : 0);
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	evtimer_add(loop->exit_timer, &tv);
}

/* Closes the loop's Redis connections, its waiters answered first: the
 * calls still in flight answer FG_EUNAVAIL now and let go of what they
 * hold; the services it lent them to send nothing more. */
static void close_store(struct fg_loop *loop)
{
	if (!loop->as)
		return;
	fg_waitq_stop(loop->wq);
	fg_astore_destroy(loop->as);
	loop->as = NULL;
	fg_waitq_store_closed(loop->wq);
	fg_admitq_store_closed(loop->aq);
	fg_proxy_store_closed(loop->px);
}

/* After the loop returned, on its thread: resume what is suspended, then
 * close every connection. */
static void teardown(struct fg_loop *loop)
{
	fg_proxy_shutdown(loop->px);
	fg_admitq_stop(loop->aq);
	fg_evapi_stop(loop->evr);
	close_store(loop);
	MHD_stop_daemon(loop->daemon);
	loop->daemon = NULL;
}

static void *loop_main(void *arg)
{
	struct fg_loop *loop = arg;
	arm_http_timer(loop);
	on_turn(-1, 0, loop);
	struct timeval tv = { 0, FG_LOOP_TURN_MS * 1000 };
	event_add(loop->turn_timer, &tv);
	loop->started_ms = fg_clock_ms();
	on_ready_poll(-1, 0, loop);
	event_base_dispatch(loop->base);
	teardown(loop);
	return NULL;
}

/* ---- life cycle ---------------------------------------------------------- */

struct fg_loop *fg_loop_create(struct fg_gateway *gw, unsigned index)
{
	struct fg_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return NULL;
	loop->gw = gw;
	loop->index = index;
	uint8_t id[FG_GATEWAY_ID_LEN / 2];
	if (RAND_bytes(id, sizeof(id)) != 1)
		goto error_loop;
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(&loop->id[2 * i], 3, "%02x", id[i]);

	loop->base = event_base_new();
	if (!loop->base)
		goto error_loop;
	loop->stop_ev = event_new(loop->base, -1, 0, on_stop, loop);
	loop->exit_timer = evtimer_new(loop->base, on_exit_timer, loop);
	loop->mhd_timer = evtimer_new(loop->base, on_http, loop);
	loop->follow_ev = event_new(loop->base, -1, 0, on_follow, loop);
	loop->drain_ev = event_new(loop->base, -1, 0, on_drain, loop);
	loop->drain_timer = event_new(loop->base, -1, EV_PERSIST, on_drain_timer,
				      loop);
	loop->turn_timer = event_new(loop->base, -1, EV_PERSIST, on_turn, loop);
	loop->ready_timer = evtimer_new(loop->base, on_ready_poll, loop);
	loop->events_ev = event_new(loop->base, -1, 0, on_events, loop);
	if (!loop->stop_ev || !loop->exit_timer || !loop->mhd_timer ||
	    !loop->follow_ev || !loop->drain_ev || !loop->drain_timer ||
	    !loop->turn_timer || !loop->ready_timer || !loop->events_ev)
		goto error_events;
	/* the loop's Redis connections: commands, and the subscription to
	 * its channel, whose messages fg_loop_on_message() routes */
	char chan[64];
	fg_chan_gateway(loop->id, chan, sizeof(chan));
	loop->as = fg_astore_create(loop->base, &gw->store_opts,
				    fg_loop_on_message, fg_loop_on_resync, loop);
	if (!loop->as || fg_astore_subscribe(loop->as, chan) != FG_OK)
		goto error_store;
	if (gw->cfg->events && !(loop->evrec = fg_evrec_create(loop)))
		goto error_store;
	loop->wq = fg_waitq_create(loop, loop->base, gw, loop->as);
	if (!loop->wq)
		goto error_store;
	loop->aq = fg_admitq_create(loop, loop->as);
	if (!loop->aq)
		goto error_waitq;
	loop->px = fg_proxy_create(loop, loop->base, gw, loop->as, loop->aq);
	if (!loop->px)
		goto error_admitq;
	loop->access = fg_access_create(gw);
	if (!loop->access)
		goto error_proxy;
	loop->evr = fg_evapi_create(loop, gw->evfeed);
	if (!loop->evr)
		goto error_proxy;
	loop->routes = &routes;
	loop->daemon = fg_http_daemon(loop);
	if (!loop->daemon)
		goto error_proxy;
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(loop->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		goto error_daemon;
	loop->mhd_io = event_new(loop->base, di->epoll_fd, EV_READ | EV_PERSIST,
				 on_http, loop);
	if (!loop->mhd_io || event_add(loop->mhd_io, NULL) != 0)
		goto error_daemon;
	return loop;

error_daemon:
	if (loop->mhd_io)
		event_free(loop->mhd_io);
	MHD_quiesce_daemon(loop->daemon);
	MHD_stop_daemon(loop->daemon);
error_proxy:
	fg_evapi_destroy(loop->evr);
	fg_access_destroy(loop->access);
	fg_proxy_shutdown(loop->px);
	fg_proxy_destroy(loop->px);
error_admitq:
	fg_admitq_stop(loop->aq);
error_waitq:
	fg_waitq_stop(loop->wq);
	fg_astore_destroy(loop->as); /* its calls answered */
	fg_waitq_destroy(loop->wq);
	fg_admitq_destroy(loop->aq);
	goto error_events;
error_store:
	fg_astore_destroy(loop->as);
error_events:
	fg_evrec_destroy(loop->evrec);
	if (loop->stop_ev)
		event_free(loop->stop_ev);
	if (loop->follow_ev)
		event_free(loop->follow_ev);
	if (loop->drain_ev)
		event_free(loop->drain_ev);
	if (loop->drain_timer)
		event_free(loop->drain_timer);
	if (loop->turn_timer)
		event_free(loop->turn_timer);
	if (loop->ready_timer)
		event_free(loop->ready_timer);
	if (loop->events_ev)
		event_free(loop->events_ev);
	if (loop->exit_timer)
		event_free(loop->exit_timer);
	if (loop->mhd_timer)
		event_free(loop->mhd_timer);
	event_base_free(loop->base);
	fg_recycle_drain(&loop->req_blocks);
	fg_recycle_drain(&loop->flow_blocks);
error_loop:
	free(loop);
	return NULL;
}

int fg_loop_start(struct fg_loop *loop)
{
	if (pthread_create(&loop->thread, NULL, loop_main, loop) != 0)
		return -1;
	loop->started = true;
	return 0;
}

void fg_loop_drain(struct fg_loop *loop)
{
	if (loop && loop->started)
		event_active(loop->drain_ev, EV_READ, 0);
}

void fg_loop_ask_stop(struct fg_loop *loop)
{
	if (!loop || !loop->started || loop->stop_asked)
		return;
	loop->stop_asked = true;
	event_active(loop->stop_ev, EV_READ, 0);
}

void fg_loop_stop(struct fg_loop *loop)
{
	if (!loop || !loop->started)
		return;
	fg_loop_ask_stop(loop);
	pthread_join(loop->thread, NULL);
	loop->started = false;
}

void fg_loop_destroy(struct fg_loop *loop)
{
	if (!loop)
		return;
	if (loop->daemon) { /* never ran */
		MHD_quiesce_daemon(loop->daemon);
		fg_proxy_shutdown(loop->px);
		fg_admitq_stop(loop->aq);
		close_store(loop);
		MHD_stop_daemon(loop->daemon);
	}
	fg_proxy_destroy(loop->px);
	fg_evapi_destroy(loop->evr);
	fg_access_destroy(loop->access);
	fg_waitq_destroy(loop->wq); /* its Redis calls were answered */
	fg_admitq_destroy(loop->aq);
	fg_evrec_destroy(loop->evrec);
	event_free(loop->mhd_io);
	event_free(loop->stop_ev);
	event_free(loop->follow_ev);
	event_free(loop->drain_ev);
	event_free(loop->drain_timer);
	event_free(loop->turn_timer);
	event_free(loop->ready_timer);
	event_free(loop->events_ev);
	event_free(loop->exit_timer);
	event_free(loop->mhd_timer);
	event_base_free(loop->base);
	fg_recycle_drain(&loop->req_blocks);
	fg_recycle_drain(&loop->flow_blocks);
	free(loop);
}
