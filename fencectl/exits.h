/*
 * exits.h - every exit status fencectl itself chooses, in one table.
 *
 * Invariant: a status below 64 that is not 0 or 1 is never fencectl's own;
 * together with 126, 127 and 128+n it is the status of the command that
 * `lock` and `elect` ran. The numbers follow sysexits(3) where one fits;
 * 79, past the end of that table, is the lost lease.
 */
#ifndef FENCECTL_EXITS_H
#define FENCECTL_EXITS_H

enum fg_exit {
	FG_EXIT_OK = 0,
	FG_EXIT_INVALID = 1,		/* check: the sequencer is not valid */
	FG_EXIT_NOTHING = 1,		/* break: the lock is free, nothing to
					 * break (as pkill(1) when nothing
					 * matched) */
	FG_EXIT_USAGE = 64,		/* EX_USAGE: fencectl was called wrongly */
	FG_EXIT_REFUSED = 65,		/* EX_DATAERR: the gateway refused the
					 * request as invalid (400, 413) */
	FG_EXIT_UNAVAILABLE = 69,	/* EX_UNAVAILABLE: no answer from the
					 * gateway, or 5xx */
	FG_EXIT_SOFTWARE = 70,		/* EX_SOFTWARE: out of memory */
	FG_EXIT_OSERR = 71,		/* EX_OSERR: fork, signalfd, pipe failed */
	FG_EXIT_NOT_OBTAINED = 75,	/* EX_TEMPFAIL: the lock was not granted
					 * within --wait */
	FG_EXIT_PROTOCOL = 76,		/* EX_PROTOCOL: an answer fencectl does
					 * not understand */
	FG_EXIT_NOPERM = 77,		/* EX_NOPERM: the gateway does not know
					 * the caller (401), the caller lacks
					 * the right (403), or this address is
					 * refused for a while (429
					 * too_many_failures) */
	FG_EXIT_LEASE_LOST = 79,	/* the lease does not hold the lock (any
					 * more) */
	FG_EXIT_STALE = 79,		/* break: the token is not the current
					 * grant's; the same "does not hold" */
	FG_EXIT_CANNOT_EXEC = 126,	/* CMD found but could not be run */
	FG_EXIT_NOT_FOUND = 127,	/* CMD not found */
};

#endif
