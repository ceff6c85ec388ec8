/*
 * sigs.c - the caught signals (see sigs.h).
 * Invariant: between fg_sig_open() and exit, every caught signal is
 * blocked in fencectl and reaches it only through the signalfd; the
 * command gets the caller's mask back before it starts (supervise.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "sigs.h"

static const struct {
	int sig;
	const char *name;
} caught[] = {
	{ SIGHUP, "SIGHUP" }, { SIGINT, "SIGINT" }, { SIGQUIT, "SIGQUIT" },
	{ SIGTERM, "SIGTERM" }, { SIGUSR1, "SIGUSR1" }, { SIGUSR2, "SIGUSR2" },
	{ SIGALRM, "SIGALRM" }, { SIGWINCH, "SIGWINCH" }, { SIGCHLD, "SIGCHLD" },
};

#define NCAUGHT (sizeof(caught) / sizeof(caught[0]))

int fg_sig_open(sigset_t *saved)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < NCAUGHT; i++)
		sigaddset(&set, caught[i].sig);
	if (sigprocmask(SIG_BLOCK, &set, saved) < 0)
		return -1;
	int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		sigprocmask(SIG_SETMASK, saved, NULL);
		errno = e;
		return -1;
	}
	return fd;
}

int fg_sig_next(int fd, struct signalfd_siginfo *info)
{
	for (;;) {
		ssize_t n = read(fd, info, sizeof(*info));
		if (n == (ssize_t)sizeof(*info))
			return (int)info->ssi_signo;
		if (n < 0 && errno == EINTR)
			continue;
		return 0;
	}
}

bool fg_sig_ends(int sig)
{
	return sig != SIGCHLD && sig != SIGWINCH;
}

int fg_sig_sleep(int fd, uint64_t ms)
{
	uint64_t end = fg_now_ms() + ms;

	for (;;) {
		uint64_t now = fg_now_ms();
		if (now >= end)
			return 0;
		uint64_t left = end - now;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0,
			     left > 60000 ? 60000 : (int)left);
		if (r > 0 && (p.revents & POLLIN)) {
			struct signalfd_siginfo si;
			int sig;
			while ((sig = fg_sig_next(fd, &si)) != 0)
				if (fg_sig_ends(sig))
					return sig;
		}
	}
}

const char *fg_sig_name(int sig)
{
	static char buf[32];

	for (size_t i = 0; i < NCAUGHT; i++)
		if (caught[i].sig == sig)
			return caught[i].name;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev) {
		snprintf(buf, sizeof(buf), "SIG%s", abbrev);
		return buf;
	}
#endif
	snprintf(buf, sizeof(buf), "signal %d", sig);
	return buf;
}
