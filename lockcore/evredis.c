/*
 * evredis.c - hiredis async contexts on a libevent base, without an
 * epoll_ctl per call.
 *
 * hiredis' own libevent adapter (adapters/libevent.h) registers one-shot
 * read and write events: each reply costs the kernel two epoll_ctl calls
 * (the read event dropped when it fires, added again), and each command
 * two more (the write event added, dropped when it fires), plus a loop
 * turn before the command is written at all. Here the read event is
 * persistent, added once for the life of the connection, and a command of
 * a connected context is written at the end of the current loop turn by
 * an event made active without the kernel (several commands of one turn
 * go in one write); only a write the socket refused (EAGAIN) or a connect
 * still under way waits on a real write event.
 *
 * Invariants: everything runs on the base's thread; nothing of a context
 * is touched after its cleanup, even when hiredis frees it from inside
 * the flush itself (a failed write): the adapter's memory then outlives
 * the flush by exactly that call.
 */
#include <stdbool.h>
#include <stdlib.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "lockcore-private.h"

struct evredis {
	redisAsyncContext *ac;
	struct event *rev;    /* persistent: the replies */
	struct event *wev;    /* one-shot: a write the socket refused */
	struct event *flush;  /* no fd: made active to write this turn */
	bool flushing;        /* inside the flush's redisAsyncHandleWrite */
	bool dead;            /* cleaned up during the flush: free after it */
};

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct evredis *e = arg;
	(void)fd;
	(void)what;
	redisAsyncHandleRead(e->ac);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	struct evredis *e = arg;
	(void)fd;
	(void)what;
	redisAsyncHandleWrite(e->ac);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct evredis *e = arg;
	(void)fd;
	(void)what;
	e->flushing = true;
	redisAsyncHandleWrite(e->ac);
	/* the write failed and hiredis freed the context: cleanup() left
	 * this memory to us */
	if (e->dead) {
		free(e);
		return;
	}
	e->flushing = false;
}

static void add_read(void *privdata)
{
	struct evredis *e = privdata;
	event_add(e->rev, NULL); /* no-op while added */
}

static void del_read(void *privdata)
{
	struct evredis *e = privdata;
	event_del(e->rev);
}

static void add_write(void *privdata)
{
	struct evredis *e = privdata;
	/* before the connect completed hiredis learns of it from the write
	 * event; a flush that left bytes unwritten waits for room */
	if (e->flushing || !(e->ac->c.flags & REDIS_CONNECTED))
		event_add(e->wev, NULL);
	else
		event_active(e->flush, EV_WRITE, 0);
}

static void del_write(void *privdata)
{
	struct evredis *e = privdata;
	event_del(e->wev);
}

static void cleanup(void *privdata)
{
	struct evredis *e = privdata;
	event_free(e->rev);
	event_free(e->wev);
	event_free(e->flush);
	if (e->flushing)
		e->dead = true; /* on_flush frees it on return */
	else
		free(e);
}

int fg__redis_attach(redisAsyncContext *ac, struct event_base *base)
{
	if (ac->ev.data)
		return REDIS_ERR;
	/* owned by the context from here: freed by its cleanup */
	struct evredis *e = calloc(1, sizeof(*e));
	if (!e)
		return REDIS_ERR;
	e->ac = ac;
	e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, on_read, e);
	e->wev = event_new(base, ac->c.fd, EV_WRITE, on_write, e);
	e->flush = event_new(base, -1, 0, on_flush, e);
	if (!e->rev || !e->wev || !e->flush)
		goto error_events;
	ac->ev.addRead = add_read;
	ac->ev.delRead = del_read;
	ac->ev.addWrite = add_write;
	ac->ev.delWrite = del_write;
	ac->ev.cleanup = cleanup;
	ac->ev.data = e;
	event_add(e->rev, NULL);
	event_add(e->wev, NULL); /* the connect's completion */
	return REDIS_OK;

error_events:
	if (e->rev)
		event_free(e->rev);
	if (e->wev)
		event_free(e->wev);
	if (e->flush)
		event_free(e->flush);
	free(e);
	return REDIS_ERR;
}
