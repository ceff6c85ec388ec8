/*
 * msg.h - fencectl's messages on stderr.
 *
 * Invariant: a lease never goes through here. Leases are secrets; only
 * `acquire` prints one, on stdout, because the user asked for it.
 */
#ifndef FENCECTL_MSG_H
#define FENCECTL_MSG_H

#include <stdbool.h>

/** "fencectl: <message>\n" on stderr, in one write. */
void fg_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** --verbose: fg_note() prints from now on. */
void fg_msg_set_verbose(bool on);

/** Like fg_say(), with --verbose only: what fencectl does, step by step. */
void fg_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
