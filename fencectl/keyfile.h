/*
 * keyfile.h - the bearer key fencectl presents to the gateway, read from a
 * file (--key-file, FENCEGATE_KEY_FILE).
 *
 * A key file holds the key and at most one line end after it (a newline,
 * or CR LF), which is not part of the key. The key is 1 to FG_KEY_MAX
 * bytes of RFC 6750's b64token: A-Z a-z 0-9 - . _ ~ + / followed by any
 * number of '='. Anything else is refused, so that what is sent as
 * `Authorization: Bearer <key>` is exactly the file's key and nothing a
 * header could be cut or joined at.
 *
 * Invariant: the key's bytes never reach a message. Every message names
 * the file (its path is not a secret), never what it holds; and every
 * copy of the key this module makes is wiped before it is let go.
 */
#ifndef FENCECTL_KEYFILE_H
#define FENCECTL_KEYFILE_H

#include <stdbool.h>
#include <stddef.h>

#define FG_KEY_MAX 1024

enum fg_keyfile_result {
	FG_KEYFILE_OK = 0,
	FG_KEYFILE_UNREADABLE,	/* cannot be opened or read */
	FG_KEYFILE_EMPTY,	/* nothing before the line end */
	FG_KEYFILE_TOO_LONG,	/* more than FG_KEY_MAX bytes of key */
	FG_KEYFILE_BAD_BYTE,	/* a byte outside the b64token grammar */
};

/**
 * Reads the key in file path into key[FG_KEY_MAX + 1], NUL-terminated.
 * what names where path came from, for messages ("--key-file"). On any
 * result but FG_KEYFILE_OK, msg[msglen] says why and key holds only zero
 * bytes.
 */
enum fg_keyfile_result fg_keyfile_read(const char *path, const char *what,
				       char *key, char *msg, size_t msglen);

/** True when s[0..len) is an RFC 6750 b64token (len >= 1). */
bool fg_keyfile_token_ok(const char *s, size_t len);

/** Zeroes p[0..n) in a way the compiler does not drop. */
void fg_keyfile_wipe(void *p, size_t n);

#endif
