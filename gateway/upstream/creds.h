/*
 * creds.h - the files an https:// upstream is reached with (upstream-ca,
 * upstream-cert, upstream-key), checked once before any transfer reads
 * them. Private to the gateway.
 */
#ifndef FENCEGATE_UPSTREAM_CREDS_H
#define FENCEGATE_UPSTREAM_CREDS_H

#include <stddef.h>

struct fg_config;

/**
 * Reads upstream-ca (at least one PEM certificate), upstream-cert (a PEM
 * certificate) and upstream-key (a PEM private key without a passphrase,
 * the certificate's), those that are set, as curl will. Called at start
 * and by --check-config. 0, or -1 with err set: the path and why, never a
 * byte of a key.
 */
int fg_upstream_creds_check(const struct fg_config *cfg, char *err, size_t n);

#endif
