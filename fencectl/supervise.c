/*
 * supervise.c - the command, its lease and the signals (see supervise.h).
 * Invariant: the lease is renewed by the client library's renewer thread
 * alone (take.h), which tells a loss through a pipe this loop polls; every
 * deadline the loop keeps (the SIGKILL) is in the timeout it sleeps with; the loop returns only once
 * the command has been reaped, and after a lost lease only once nothing
 * the command left behind is still running.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "duration.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "sigs.h"
#include "supervise.h"
#include "take.h"

#define POLL_MAX_MS 60000
#define MAX_SIGNALLED 256

struct sv {
	const struct fg_supervise *s;
	bool hold;		/* no command: hold until a signal ends it */
	int ended_by;		/* hold: the signal that ended it */
	struct fg_grant *g;
	pid_t pid;
	pid_t target;		/* pid, or -pgid with own_group */
	bool exited;
	int status;		/* wait status, once exited */
	bool renewer;		/* the renewer thread runs */
	bool lost;
	uint64_t kill_at;
	bool killed;
	bool children_left;	/* fencectl has children besides the command */
	struct {
		pid_t pid;
		int sig;
	} sent[MAX_SIGNALLED];	/* left-behind processes, and what they got */
	size_t nsent;
};

static const char *target_text(const struct sv *v, char *buf, size_t len)
{
	if (v->s->own_group)
		snprintf(buf, len, "process group %ld", (long)v->pid);
	else
		snprintf(buf, len, "pid %ld", (long)v->pid);
	return buf;
}

/*
 * Reaps every child that ended: the command, and what it left behind
 * (fencectl is their subreaper). Notes whether children remain.
 */
static void reap(struct sv *v)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			if (p == v->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
				v->exited = true;
				v->status = st;
			}
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		v->children_left = p == 0;
		return;
	}
}

/*
 * fencectl's children other than the command: processes the command (or
 * one of its children) started and left behind when it ended. fencectl is
 * their subreaper, so they come to it rather than to init. At most cap.
 */
static size_t left_behind(const struct sv *v, pid_t *out, size_t cap)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t self = getpid();
	size_t n = 0;

	if (!d)
		return 0;
	while (n < cap && (e = readdir(d)) != NULL) {
		char path[64], buf[512];
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == v->pid || pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* pid (comm) state ppid ...; comm may hold anything but
		 * ends at the last ')' */
		char *close = strrchr(buf, ')');
		char state;
		long ppid;
		if (close && sscanf(close + 1, " %c %ld", &state, &ppid) == 2 &&
		    ppid == (long)self && state != 'Z')
			out[n++] = (pid_t)pid;
	}
	closedir(d);
	return n;
}

/* Sends sig to p unless it was sent already; true when sent now. */
static bool send_once(struct sv *v, pid_t p, int sig)
{
	size_t i;

	for (i = 0; i < v->nsent; i++)
		if (v->sent[i].pid == p)
			break;
	if (i < v->nsent && v->sent[i].sig == sig)
		return false;
	if (kill(p, sig) < 0)
		return false;
	if (i == v->nsent && v->nsent < MAX_SIGNALLED)
		v->nsent++;
	if (i < v->nsent) {
		v->sent[i].pid = p;
		v->sent[i].sig = sig;
	}
	return true;
}

/*
 * After a lost lease: SIGTERM, then at --kill-after SIGKILL, to what the
 * command left behind, so that nothing it started outlives the lease by
 * more than --kill-after.
 */
static void stop_left_behind(struct sv *v, int sig)
{
	pid_t p[64];
	size_t n = left_behind(v, p, 64);

	for (size_t i = 0; i < n; i++)
		if (send_once(v, p[i], sig))
			fg_say("sending %s to pid %ld, which the command left "
			       "behind", fg_sig_name(sig), (long)p[i]);
}

/* The lease is gone: the command must stop (SIGTERM now, SIGKILL later). */
static void lose(struct sv *v, const char *why)
{
	char t[64];

	v->lost = true;
	if (v->hold) {
		fg_say("lease on lock '%s' lost (%s)", v->s->name, why);
		v->exited = true;
		return;
	}
	if (v->exited) {
		fg_say("lease on lock '%s' lost (%s)", v->s->name, why);
		v->kill_at = fg_now_ms() + v->s->kill_after_ms;
		stop_left_behind(v, SIGTERM);
		return;
	}
	fg_say("lease on lock '%s' lost (%s); sending SIGTERM to %s",
	       v->s->name, why, target_text(v, t, sizeof(t)));
	kill(v->target, SIGTERM);
	v->kill_at = fg_now_ms() + v->s->kill_after_ms;
	stop_left_behind(v, SIGTERM);
}

static void on_signals(struct sv *v)
{
	struct signalfd_siginfo si;
	int sig;

	while ((sig = fg_sig_next(v->s->sigfd, &si)) != 0) {
		if (sig == SIGCHLD) {
			reap(v);
			continue;
		}
		if (v->exited)
			continue;
		if (v->hold) {
			/* from the terminal or from kill(1), alike */
			if (fg_sig_ends(sig)) {
				v->ended_by = sig;
				v->exited = true;
			}
			continue;
		}
		/* the kernel sent it to the whole process group (Ctrl-C,
		 * a hangup, a resize): the command has it already */
		if (!v->s->own_group && si.ssi_code == SI_KERNEL)
			continue;
		kill(v->target, sig);
	}
}

/* Milliseconds until the next thing due. */
static int next_timeout(const struct sv *v, uint64_t now)
{
	uint64_t due = now + POLL_MAX_MS;

	if (v->lost && !v->killed && v->kill_at < due)
		due = v->kill_at;
	return due > now ? (int)(due - now) : 0;
}

/*
 * Starts the command. Its exec failure comes back through a close-on-exec
 * pipe, so that "not found" is told apart from the command's own 127.
 */
static int start(struct sv *v)
{
	const struct fg_supervise *s = v->s;
	int pfd[2];

	/* what the command leaves behind comes to fencectl, which can then
	 * stop it when the lease is lost; not inherited by the command */
	prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		fg_say("cannot create a pipe: %s", strerror(errno));
		return FG_EXIT_OSERR;
	}
	pid_t pid = fork();
	if (pid < 0) {
		fg_say("cannot fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return FG_EXIT_OSERR;
	}
	if (pid == 0) {
		close(pfd[0]);
		if (s->own_group)
			setpgid(0, 0);
		sigprocmask(SIG_SETMASK, s->child_mask, NULL);
		execvp(s->argv[0], s->argv);
		int e = errno;
		ssize_t w = write(pfd[1], &e, sizeof(e));
		(void)w;
		_exit(e == ENOENT ? FG_EXIT_NOT_FOUND : FG_EXIT_CANNOT_EXEC);
	}
	close(pfd[1]);
	/* also here, so that no signal can reach the group before it exists */
	if (s->own_group)
		setpgid(pid, pid);
	v->pid = pid;
	v->target = s->own_group ? -pid : pid;

	int e = 0;
	ssize_t n;
	while ((n = read(pfd[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (n == (ssize_t)sizeof(e)) {
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		fg_say("cannot run '%s': %s", s->argv[0], strerror(e));
		return e == ENOENT ? FG_EXIT_NOT_FOUND : FG_EXIT_CANNOT_EXEC;
	}
	return 0;
}

static int wait_status_exit(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

static const char *how_it_ended(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
	else
		snprintf(buf, len, "was killed by %s",
			 fg_sig_name(WTERMSIG(st)));
	return buf;
}

int fg_supervise(const struct fg_supervise *s, struct fg_supervised *out)
{
	struct sv v;
	char t[64], d[32], why[700];
	int rc;

	memset(&v, 0, sizeof(v));
	memset(out, 0, sizeof(*out));
	v.s = s;
	v.hold = !s->argv;
	v.g = s->grant;

	/* made after the fork: the command inherits none of its sockets,
	 * and no thread of fencectl's is copied into the fork */
	rc = v.hold ? 0 : start(&v);
	if (rc)
		return rc;
	v.renewer = fg_hold_start(v.g->hold) == 0;
	if (!v.renewer && v.hold) {
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	if (!v.renewer) {
		fg_say("out of memory; stopping %s",
		       target_text(&v, t, sizeof(t)));
		kill(v.target, SIGTERM);
		v.lost = true;
		v.kill_at = fg_now_ms() + s->kill_after_ms;
	}

	for (;;) {
		uint64_t now = fg_now_ms();

		if (!v.lost && !v.exited && v.renewer &&
		    fg_hold_lost(v.g->hold, why, sizeof(why)))
			lose(&v, why);
		if (v.lost && !v.killed && now >= v.kill_at) {
			if (!v.exited) {
				fg_say("%s still running %s after SIGTERM; "
				       "sending SIGKILL",
				       target_text(&v, t, sizeof(t)),
				       fg_duration_format(s->kill_after_ms, d,
							  sizeof(d)));
				kill(v.target, SIGKILL);
			}
			v.killed = true;
		}
		if (v.lost && !v.hold)
			stop_left_behind(&v, v.killed ? SIGKILL : SIGTERM);
		if (v.exited && !(v.lost && v.children_left))
			break;

		struct pollfd p[2] = {
			{ .fd = s->sigfd, .events = POLLIN },
			{ .fd = fg_hold_event_fd(v.g->hold), .events = POLLIN },
		};
		poll(p, v.lost ? 1 : 2, next_timeout(&v, now));
		on_signals(&v);
	}

	if (v.renewer)
		fg_hold_stop(v.g->hold);
	out->lost = v.lost;
	if (v.hold)
		return v.lost ? FG_EXIT_LEASE_LOST : 128 + v.ended_by;
	if (v.lost) {
		fg_say("command (%s) %s after the lease was lost; exiting with "
		       "status %d", target_text(&v, t, sizeof(t)),
		       how_it_ended(v.status, why, sizeof(why)),
		       FG_EXIT_LEASE_LOST);
		return FG_EXIT_LEASE_LOST;
	}
	return wait_status_exit(v.status);
}
