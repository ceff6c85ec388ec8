/*
 * keyfile.c - reading a bearer key file (see keyfile.h).
 * Invariant: the file is read into one stack buffer, which is wiped on
 * every way out; the key is copied out only once it is known to be good.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keyfile.h"

/* room for the longest key, its CR LF, and one byte more to tell a file
 * that is too long from one that is just long enough */
#define BUF_LEN (FG_KEY_MAX + 3)

void fg_keyfile_wipe(void *p, size_t n)
{
	explicit_bzero(p, n);
}

static bool token_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~' || c == '+' || c == '/';
}

bool fg_keyfile_token_ok(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len && token_char((unsigned char)s[i]))
		i++;
	if (i == 0)
		return false;
	while (i < len && s[i] == '=')
		i++;
	return i == len;
}

/* Reads up to BUF_LEN bytes of fd; -1 with errno on a read error. */
static ssize_t read_all(int fd, char *buf)
{
	size_t n = 0;

	while (n < BUF_LEN) {
		ssize_t r = read(fd, buf + n, BUF_LEN - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

enum fg_keyfile_result fg_keyfile_read(const char *path, const char *what,
				       char *key, char *msg, size_t msglen)
{
	char buf[BUF_LEN];
	enum fg_keyfile_result res;
	ssize_t got;

	memset(key, 0, FG_KEY_MAX + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(msg, msglen, "%s '%s': cannot read it: %s", what, path,
			 strerror(errno));
		return FG_KEYFILE_UNREADABLE;
	}
	got = read_all(fd, buf);
	int e = errno;
	close(fd);
	if (got < 0) {
		snprintf(msg, msglen, "%s '%s': cannot read it: %s", what, path,
			 strerror(e));
		res = FG_KEYFILE_UNREADABLE;
		goto out;
	}

	size_t len = (size_t)got;
	if (len >= 2 && buf[len - 2] == '\r' && buf[len - 1] == '\n')
		len -= 2;
	else if (len >= 1 && buf[len - 1] == '\n')
		len -= 1;
	if (len == 0) {
		snprintf(msg, msglen, "%s '%s' is empty: it must hold the "
			 "bearer key", what, path);
		res = FG_KEYFILE_EMPTY;
	} else if (len > FG_KEY_MAX) {
		snprintf(msg, msglen, "%s '%s' holds more than %d bytes: a "
			 "bearer key is at most %d", what, path, FG_KEY_MAX,
			 FG_KEY_MAX);
		res = FG_KEYFILE_TOO_LONG;
	} else if (!fg_keyfile_token_ok(buf, len)) {
		/* which byte, or what it is, would tell something of the key */
		snprintf(msg, msglen, "%s '%s' holds a byte a bearer key cannot "
			 "contain: the key is one line of A-Z a-z 0-9 - . _ ~ + "
			 "/, then any number of '=' (RFC 6750), and nothing "
			 "else but one line end", what, path);
		res = FG_KEYFILE_BAD_BYTE;
	} else {
		memcpy(key, buf, len);
		key[len] = '\0';
		res = FG_KEYFILE_OK;
	}
out:
	fg_keyfile_wipe(buf, sizeof(buf));
	return res;
}
