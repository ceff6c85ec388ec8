/*
 * fencegate/name.h - lock names.
 *
 * A valid name is 1..FG_NAME_MAX bytes of [A-Za-z0-9._~/-] whose
 * '/'-separated segments are none of "", "." or "..". Such a name never
 * contains '{' or '}', so it can be used as a Redis Cluster hash tag as is.
 */
#ifndef FENCEGATE_NAME_H
#define FENCEGATE_NAME_H

#include <stdbool.h>
#include <stddef.h>

#define FG_NAME_MAX 255

/** True when name[0..len) is a valid lock name (see above). */
bool fg_name_valid(const char *name, size_t len);

#endif
