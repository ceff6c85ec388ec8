/*
 * msg.c - messages on stderr (see msg.h). One write(2) per line, so that a
 * line of fencectl's is never cut by a line of the command it runs, which
 * shares the same stderr.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "msg.h"

void fg_say(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n = snprintf(line, sizeof(line), "fencectl: ");

	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
