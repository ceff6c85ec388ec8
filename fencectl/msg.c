/*
 * msg.c - messages on stderr (see msg.h). One write(2) per line, so that a
 * line of fencectl's is never cut by a line of the command it runs, which
 * shares the same stderr.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "msg.h"

static bool verbose;

void fg_msg_set_verbose(bool on)
{
	verbose = on;
}

static void say(const char *fmt, va_list ap)
{
	char line[2048];
	int n = snprintf(line, sizeof(line), "fencectl: ");
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);

	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void fg_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

void fg_note(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}
