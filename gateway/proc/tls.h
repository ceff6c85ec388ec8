/*
 * tls.h - the listener's TLS: its certificate and key, the client CA, and
 * the peer's verified name. Private to the gateway.
 *
 * Invariants: the certificate, key and client CA in force are one
 * reference-counted set, swapped whole under a mutex (a SIGHUP whose
 * files do not all load keeps the old set, and the log says why); every
 * handshake takes the set in force when it begins and the connection
 * holds it until it closes, so a reload never changes what an open
 * connection uses. Key bytes are never logged and are wiped once read.
 */
#ifndef FENCEGATE_TLS_H
#define FENCEGATE_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct fg_config;

/* The longest subject CN that names a principal. */
#define FG_TLS_CN_MAX 64

/** Reads tls-cert, tls-key and tls-client-ca when tls-cert is set
 *  (nothing otherwise). Call once, before any daemon starts. 0, or -1
 *  with err set (the process exits 2). */
int fg_tls_init(const struct fg_config *cfg, char *err, size_t errlen);

/** SIGHUP: reads the listener's files again. New handshakes take the new
 *  set; one that does not load leaves the set in force, and is logged.
 *  Any thread. */
void fg_tls_reload(void);

/** Frees the set in force (after every daemon stopped). */
void fg_tls_finish(void);

/** True when the listener serves HTTPS only. */
bool fg_tls_on(void);

/** The daemon flag (MHD_USE_TLS or 0) and options (HTTPS priorities,
 *  the certificate callback) the listener needs; opts holds at least
 *  FG_TLS_OPTIONS items and ends with MHD_OPTION_END. */
#define FG_TLS_OPTIONS 3
unsigned fg_tls_daemon_flags(void);
void fg_tls_daemon_options(struct MHD_OptionItem *opts);

/** The daemon's connection callback (MHD_OPTION_NOTIFY_CONNECTION) hands
 *  each connection's start and close here: the per-connection state
 *  lives in its socket context, which this module owns. */
void fg_tls_connection(struct MHD_Connection *c, void **socket_context,
		       enum MHD_ConnectionNotificationCode code);

/**
 * The principal name a client certificate gives, when tls-client-ca is
 * set: 1 and its subject CN in cn (NUL-terminated) when the client
 * presented a certificate that verifies against the client CA in force
 * and is within its validity dates; 0 when it presented none (or TLS or
 * the client CA is off); -1 when it presented one that does not verify,
 * or whose CN is missing, repeated, longer than FG_TLS_CN_MAX bytes or
 * holds a byte outside [A-Za-z0-9._@-]. cap is at least FG_TLS_CN_MAX+1.
 * The answer is kept per connection until the client CA is reloaded or a
 * certificate of the chain expires. On the connection's loop thread.
 */
int fg_tls_peer_cn(struct MHD_Connection *c, char *cn, size_t cap);

#endif
