/*
 * evline.h - one event of GET /_fence/v1/events (contract v1.5) as the
 * line `fencectl events` prints for people.
 *
 * The line: the time, the kind, the lock, then key=value fields: token,
 * principal, owner, client (each "-" when absent), and what the kind's
 * detail says (refused: code, method, path, count; granted: mode, ttl_ms,
 * waited; broken: by; given_back: reason; any other field of the detail
 * as key=value too, in the detail's order). Invariant: every byte of a
 * value that is not printable ASCII, and the space and '\', is written as
 * \xHH, so that nothing a client chose (an owner, a path) can move the
 * cursor, clear the screen or fake a field or a line on the operator's
 * terminal; a line ends in one '\n' and holds no other.
 */
#ifndef FENCECTL_EVLINE_H
#define FENCECTL_EVLINE_H

#include <stdio.h>

#include <jansson.h>

/** Writes event ev's line to f. An event without an object shape is
 *  written with "?" for what it lacks. */
void fg_evline_print(FILE *f, json_t *ev);

#endif
