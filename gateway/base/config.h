/*
 * config.h - the gateway's settings: defaults, config file, flags.
 * Private to the gateway.
 *
 * Invariant: a struct fg_config that fg_config_load() accepted has every
 * number inside its documented range and every address parsed; nothing
 * later re-validates it.
 */
#ifndef FENCEGATE_CONFIG_H
#define FENCEGATE_CONFIG_H

#include "fencegate/topo.h"
#include "base/route.h" /* struct fg_route: a compiled `route` line */
#include <stddef.h>

#define FG_HOST_MAX 256
#define FG_ROUTE_TESTS_MAX 32
#define FG_DEFAULT_WRITE_METHODS "PUT POST PATCH DELETE MKCOL COPY MOVE PROPPATCH"
#define FG_DEFAULT_READ_METHODS "GET HEAD OPTIONS PROPFIND"

/* What readiness follows besides the gateway's own state (readyz-requires). */
#define FG_READYZ_REDIS 1u
#define FG_READYZ_UPSTREAM 2u


/* The upstream URL, read once (fg_upstream_parse()). */
struct fg_upstream {
	char host[FG_HOST_MAX];    /* without brackets */
	char port[8];
	char base[2049];           /* the URL without trailing '/' */
	char base_path[2049];      /* its path: "" or "/..." */
};

struct fg_config {
	char listen_host[FG_HOST_MAX];
	int listen_port;
	char *upstream;            /* URL, or NULL: no upstream configured */
	struct fg_upstream up;     /* the upstream URL's parts, when set */
	struct fg_redis_addr redis; /* one Redis, Sentinels, or cluster seeds */
	char redis_host[FG_HOST_MAX]; /* its first address (for logs) */
	int redis_port;
	unsigned redis_replicas;       /* WAIT for this many before a grant */
	unsigned redis_replicas_timeout_ms;
	char *key_file;            /* NULL: the key is agreed on through Redis */
	unsigned threads;
	unsigned max_connections;
	unsigned max_waiters;      /* queue bound per lock */
	unsigned idle_forget_ms;
	unsigned lock_delay_ms;    /* default lock-delay of an acquire */
	unsigned redis_timeout_ms;
	unsigned waiter_liveness_ms;
	unsigned max_header_bytes;
	unsigned client_timeout_s;
	unsigned drain_delay_ms;       /* stop signal -> stop accepting */
	unsigned drain_timeout_ms;     /* stop accepting -> end what runs */
	unsigned readyz_requires;      /* FG_READYZ_* */
	int log_level;
	char *access_log;              /* a path, "stdout", "stderr", "off" or NULL */
	int access_log_text;           /* 1: key=value text lines, 0: JSON */
	unsigned upstream_connect_timeout_ms;
	unsigned upstream_timeout_ms;  /* request sent -> response head */
	unsigned fence_margin_ms;      /* a write ends this long before its lease */
	unsigned write_max_ms;         /* longest an admitted write may run */
	unsigned forward_token;        /* 1: send Fencing-Token: <n> upstream */
	unsigned events;               /* 1: record the event stream (v1.5) */
	unsigned events_retain;        /* events kept, at most (per stream) */
	unsigned events_retain_ms;     /* and none older than this */
	unsigned proxy_redirect;       /* 1: Location naming the upstream names
					  the gateway (redirect.c) */
	char *write_methods;           /* space-separated; NULL: the defaults */
	char *read_methods;            /* unfenced unless they carry a token;
					  any other method is fenced */
	struct fg_route *routes;       /* in file order (route.h) */
	size_t nroutes;

	/* Who may (docs/security.md). Paths are read at start-up and again
	 * on SIGHUP by the modules that use them. */
	char *auth_file;               /* NULL: open mode */
	unsigned allow_open;           /* 1: open mode off loopback on purpose */
	unsigned proxy_auth;           /* 1: "required" */
	char *tls_cert, *tls_key;      /* both, or neither: HTTPS only */
	char *tls_client_ca;           /* verify client certificates */
	char *upstream_ca;             /* NULL: the system's CAs */
	char *upstream_cert, *upstream_key;
	char *redis_user;              /* NULL: no AUTH, or AUTH <password> */
	char *redis_password_file;
	char *redis_password;          /* read from the file by
					  fg_config_load(); never logged */

	/* S3 mode (docs/s3.md): the gateway verifies the client's SigV4
	 * against s3_credentials and signs again with the upstream's. The
	 * files are read at start-up and again on SIGHUP by the module that
	 * uses them (access/s3auth.c). */
	unsigned upstream_api_s3;      /* 1: upstream-api s3; 0: http */
	char *s3_credentials;          /* FILE: the keys the gateway issues */
	char *upstream_s3_credentials; /* FILE: the gateway's own at the store */
	char *s3_region;               /* NULL: us-east-1 */
	char *s3_domain;               /* S3 mode: `Host: BUCKET.<s3-domain>`
					  names the bucket; NULL: the path's
					  first segment always does */

	unsigned check_only;           /* --check-config: validate, start nothing */
	const char *route_test[FG_ROUTE_TESTS_MAX]; /* --route-test PATH: the
					  paths to show the lock of (into
					  argv, not owned) */
	unsigned nroute_tests;
};

enum fg_config_result {
	FG_CONFIG_OK = 0,
	FG_CONFIG_EXIT = 1,   /* --help or --version was printed: exit 0 */
	FG_CONFIG_ERROR = -1, /* err holds the reason: exit 2 */
};

/** Fills in the defaults. */
void fg_config_init(struct fg_config *cfg);

/**
 * Defaults, then the file named by --config (if any), then the flags, which
 * override the file. A bad setting does not stop the reading: on
 * FG_CONFIG_ERROR err[errlen] holds every reason found, one a line (cut
 * at errlen), and the config holds the settings that were good, so that
 * --check-config can go on to the files they name. No reason quotes a
 * password or a URL's user information. The config owns its strings;
 * free them with fg_config_finish(). --check-config sets check_only
 * (even on FG_CONFIG_ERROR).
 */
enum fg_config_result fg_config_load(struct fg_config *cfg, int argc,
				     char **argv, char *err, size_t errlen);

/** Applies one setting (a flag without "--", or a file line's first word). */
int fg_config_set(struct fg_config *cfg, const char *name, const char *value,
		  char *err, size_t errlen);

/** Reads `name value` lines (# comments). 0, or -1 with every bad line's
 *  reason appended to err (a NUL-terminated string), one a line. */
int fg_config_read_file(struct fg_config *cfg, const char *path, char *err,
			size_t errlen);

/** Splits "host:port" or "[v6]:port". 0, or -1 when malformed. */
int fg_parse_hostport(const char *s, char *host, size_t hostcap, int *port);

/** Splits an http:// or https:// URL into host, port, base and base path
 *  (the one reading of the upstream URL). 0, or -1 when it is not one. */
int fg_upstream_parse(const char *url, struct fg_upstream *out);

/**
 * The settings whose values differ between a and b (the password by its
 * content, never quoted), as flags spell them, comma-separated in out
 * (cut at n); returns how many. A SIGHUP names them: none is applied
 * until a restart.
 */
unsigned fg_config_changed(const struct fg_config *a, const struct fg_config *b,
			   char *out, size_t n);

/** Frees what the config owns. Accepts NULL. */
void fg_config_finish(struct fg_config *cfg);

/** The text of --help. */
extern const char fg_config_usage[];

#endif
