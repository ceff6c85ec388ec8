/*
 * sigs.h - the signals fencectl catches while it takes a lock and while
 * the command runs.
 *
 * They are blocked and read from a signalfd, so that a signal is an event
 * of the one loop like any other (no handler runs at an arbitrary point):
 * SIGCHLD, and the signals passed on to the command (SIGHUP, SIGINT,
 * SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH). The job-control
 * signals (SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT) keep their usual effect:
 * Ctrl-Z stops fencectl together with the command, as with any job.
 * A signal the caller set to be ignored stays ignored.
 */
#ifndef FENCECTL_SIGS_H
#define FENCECTL_SIGS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>

/**
 * Blocks the signals above and returns a non-blocking, close-on-exec
 * signalfd for them; *saved receives the mask to give back to the command
 * before it runs. -1 (errno set) on failure, with the mask unchanged.
 */
int fg_sig_open(sigset_t *saved);

/** The next pending signal: its number (and *info), or 0 when none. */
int fg_sig_next(int fd, struct signalfd_siginfo *info);

/** True for the caught signals whose default action would end fencectl:
 *  all of them except SIGCHLD and SIGWINCH. */
bool fg_sig_ends(int sig);

/**
 * Waits ms milliseconds, or until a signal that ends fencectl arrives on
 * fd (-1: no fd, only wait). 0 when the time passed; otherwise that
 * signal's number. Other signals are read and dropped.
 */
int fg_sig_sleep(int fd, uint64_t ms);

/** "SIGTERM" and so on; "signal N" for others (in a static buffer). */
const char *fg_sig_name(int sig);

#endif
