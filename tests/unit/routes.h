/*
 * routes.h - the unit tests' one way to build a config with route rules.
 * Include after <cmocka.h> and "config.h".
 */
#ifndef FENCEGATE_TEST_ROUTES_H
#define FENCEGATE_TEST_ROUTES_H

#include <stdarg.h>

/* A config with the given "PREFIX LOCK" routes (NULL-terminated); the
 * caller finishes it with fg_config_finish(). */
static inline void with_routes(struct fg_config *c, ...)
{
	char err[256];
	va_list ap;

	fg_config_init(c);
	va_start(ap, c);
	for (const char *r = va_arg(ap, const char *); r;
	     r = va_arg(ap, const char *)) {
		if (fg_config_set(c, "route", r, err, sizeof(err)) != 0)
			fail_msg("route \"%s\": %s", r, err);
	}
	va_end(ap);
}

#endif
