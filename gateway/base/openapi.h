/*
 * openapi.h - the lock API's OpenAPI 3.1 document, built in: the bytes of
 * docs/openapi.json, put in a C array at build time (gateway/embed.py,
 * gateway/meson.build). Private to the gateway; pure data.
 *
 * Invariant: fg_openapi_json holds exactly the file's bytes,
 * fg_openapi_json_len of them (followed by a NUL that is not counted), so
 * that GET /_fence/v1/openapi.json serves the file byte for byte.
 */
#ifndef FENCEGATE_OPENAPI_H
#define FENCEGATE_OPENAPI_H

#include <stddef.h>

extern const unsigned char fg_openapi_json[];
extern const size_t fg_openapi_json_len;

#endif
