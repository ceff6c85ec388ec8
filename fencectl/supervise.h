/*
 * supervise.h - running a command under a lease: the command, the lease's
 * renewals and the signals, in one single-threaded loop.
 *
 * The loop waits in poll() on the signalfd (sigs.h) and the lease's event
 * pipe, with a timeout that is the next thing due (the SIGKILL after
 * --kill-after). Nothing in it blocks: a signal is one read, a child that
 * ends is one waitpid(WNOHANG). Waiting costs nothing.
 *
 * Renewal is the client library's (libfencegate-client, through take.h):
 * its renewer thread renews every third of the lease, tries a renewal
 * that failed for want of an answer (no answer, a timeout, 5xx) again on
 * every gateway in turn, after a back-off of 250 ms doubling to 5 s but
 * never later than a third of the lease, each attempt bounded by what is
 * left of the lease; the lease's end is counted on the monotonic clock
 * from the moment the last successful renewal (or the grant) was sent.
 * The loop here only learns of a loss, through a pipe it polls.
 *
 * The lease is lost when a renewal is answered 409, 410, 400 or 403 (it
 * can never succeed), or when its end comes with no renewal having
 * succeeded. Then the command gets SIGTERM, and SIGKILL --kill-after
 * later if it is still running.
 *
 * The command runs in fencectl's process group (unless own_group), like
 * flock(1) and `consul lock`: it can read the terminal, and Ctrl-C, Ctrl-\
 * and a window resize reach it from the terminal directly. A caught signal
 * that the kernel sent to the whole group is therefore not passed on a
 * second time; every other one (kill(1) to fencectl's pid) is. Signals
 * fencectl sends go to the command's pid; with own_group, the command
 * gets a process group of its own and every signal goes to the whole
 * group, its children included.
 *
 * fencectl is the subreaper of the command's descendants: a process whose
 * parent ends comes to fencectl, not to init. When the lease is lost, such
 * left-behind processes get SIGTERM and SIGKILL on the same schedule as
 * the command, and fencectl returns only once they are gone, so nothing
 * the command started outlives a lost lease by more than --kill-after.
 * When the command ends while the lease holds, they are left alone.
 *
 * Without a command, the loop only renews, until a signal that would end
 * fencectl arrives (from the terminal or from kill(1)) or the lease is
 * lost.
 */
#ifndef FENCECTL_SUPERVISE_H
#define FENCECTL_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "req.h"

struct fg_supervise {
	const char *name;		/* the lock */
	struct fg_grant *grant;		/* its lease, held by grant->hold */
	uint64_t kill_after_ms;
	bool own_group;
	char **argv;			/* the command, NULL-terminated; NULL:
					 * none, hold the lock until a signal
					 * that ends fencectl arrives */
	int sigfd;			/* from fg_sig_open() */
	const sigset_t *child_mask;	/* the mask the command starts with */
};

struct fg_supervised {
	bool lost;		/* the lease was lost while the command ran */
};

/**
 * Runs the command to its end under the lease. Returns the exit status:
 * the command's (128 + n when a signal n ended it), FG_EXIT_LEASE_LOST
 * when the lease was lost, 126 or 127 when it could not be started, or
 * FG_EXIT_OSERR / FG_EXIT_SOFTWARE. Without a command: 128 + n once
 * signal n arrived (n one that fg_sig_ends()), or FG_EXIT_LEASE_LOST. The
 * lease is not released here.
 */
int fg_supervise(const struct fg_supervise *s, struct fg_supervised *out);

#endif
