/*
 * access.c - the access step: who a request is (401), whether it may
 * (403), and a bound on guessing keys (429).
 *
 * Invariants: with an auth-file, a request under /_fence/ (but health,
 * livez and readyz) and, with proxy-auth required, a proxied request goes
 * on only with req->principal set to a principal of the table in force
 * that holds every right it needs; the check runs before any Redis call.
 * A key is hashed and compared in auth.c only and is never logged. An
 * address that sent too many unknown keys is refused before its next key
 * is hashed, so guessing costs the gateway a bounded amount of work.
 *
 * The table in force belongs to the gateway (proc/gateway.c, replaced on
 * SIGHUP); each loop keeps a reference to the one it last took and looks
 * at the gateway's generation number, one atomic load, per request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "access/access.h"
#include "access/budget.h"
#include "base/auth.h"
#include "http/framing.h"
#include "http/respond.h"
#include "http/req.h"
#include "proc/gateway.h"
#include "base/jsonio.h"
#include "base/log.h"
#include "rt/rt.h"
#include "proc/tls.h"
#include "base/writeset.h"
#include "base/s3keys.h"
#include "fencegate/name.h"

/* Unknown keys an address (an IPv4 address, an IPv6 /64) may send in a
 * burst, and how fast it may send more after that, are budget.h's (per
 * loop: a client spread over N loops gets N times its bound, which is
 * still a fixed bound). The burst is large enough that a client testing
 * its credentials, or a suite of such tests, meets the contract's 401 and
 * not this; still a few hundred thousand guesses a day at most from one
 * address, and at most 256 times that from any number of them, against
 * keys of 128 bits. */

struct fg_access {
	struct fg_gateway *gw;
	struct fg_authtab *tab;  /* a reference; NULL: open */
	struct fg_s3keys *s3keys; /* S3 mode: a reference, of the same gen */
	struct fg_sigv4_cache *sigs; /* S3 mode: the clients' signing keys */
	unsigned gen;            /* the gateway's auth_gen when taken */
	struct fg_budgets fail;  /* unknown keys per address */
};

/* ---- the table in force ------------------------------------------------ */

struct fg_access *fg_access_create(struct fg_gateway *gw)
{
	struct fg_access *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->gw = gw;
	fg_budgets_init(&a->fail);
	if (gw->cfg->upstream_api_s3 && !(a->sigs = fg_sigv4_cache_create())) {
		free(a);
		return NULL;
	}
	return a;
}

void fg_access_destroy(struct fg_access *a)
{
	if (!a)
		return;
	fg_authtab_unref(a->tab);
	fg_s3keys_unref(a->s3keys);
	fg_sigv4_cache_destroy(a->sigs);
	free(a);
}

/* The table in force, as this loop last took it: taken again only when
 * the gateway's generation moved (one atomic load in proc/, per request). */
static const struct fg_authtab *table(struct fg_access *a)
{
	if (fg_gateway_auth_gen(a->gw) != a->gen) {
		struct fg_authtab *t = fg_gateway_auth_ref(a->gw, &a->gen);
		fg_authtab_unref(a->tab);
		a->tab = t;
		if (a->gw->cfg->upstream_api_s3) {
			fg_s3keys_unref(a->s3keys);
			a->s3keys = fg_gateway_s3keys_ref(a->gw);
		}
	}
	return a->tab;
}

/* ---- unknown keys per address ------------------------------------------ */

static void client_addr(struct MHD_Connection *c,
			unsigned char out[FG_BUDGET_ADDR_LEN])
{
	memset(out, 0, 16);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		out[10] = out[11] = 0xff; /* as a v4-mapped v6 address */
		memcpy(out + 12, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(out, &in6->sin6_addr, 16);
		if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			memset(out + 8, 0, 8); /* one site's /64 is one budget */
	}
}

/* ---- who asks ----------------------------------------------------------- */

static bool refuse(struct MHD_Connection *c, enum fg_error e, const char *msg,
		   enum MHD_Result *ret)
{
	*ret = fg_respond_error(c, e, msg, NULL);
	return false;
}

/*
 * Finds the principal of a request from its bearer key (in header `hname`)
 * and its client certificate. True with *who set, or false with a 401 or
 * 429 queued.
 */
static bool authenticate(struct fg_access *a, const struct fg_authtab *t,
			 struct MHD_Connection *c, const char *hname,
			 const struct fg_principal **who, enum MHD_Result *ret)
{
	const char *bearer;
	if (fg_header_count(c, hname, &bearer) > 1)
		return refuse(c, FG_E_UNAUTHENTICATED, "more than one credential header", ret);
	const char *key = NULL;
	size_t klen = 0;
	enum fg_cred cred = fg_auth_bearer(bearer, &key, &klen);

	char cn[FG_PRINCIPAL_MAX + 1];
	int cert = fg_tls_peer_cn(c, cn, sizeof(cn));
	if (cert < 0)
		return refuse(c, FG_E_UNAUTHENTICATED,
			      "the client certificate does not verify against tls-client-ca", ret);

	const struct fg_principal *by_key = NULL, *by_cert = NULL;
	if (cred != FG_CRED_NONE) {
		unsigned char addr[FG_BUDGET_ADDR_LEN];
		client_addr(c, addr);
		uint64_t now = fg_rec_now_ns();
		struct fg_budget *b = fg_budget_find(&a->fail, addr);
		if (fg_budget_spent(b, now))
			return refuse(c, FG_E_TOO_MANY_FAILURES, NULL, ret);
		if (cred == FG_CRED_BEARER)
			by_key = fg_authtab_by_key(t, key, klen);
		if (!by_key) {
			fg_budget_charge(b, now);
			return refuse(c, FG_E_UNAUTHENTICATED, "the key is not known", ret);
		}
	}
	if (cert > 0) {
		by_cert = fg_authtab_by_cert(t, cn);
		if (!by_cert)
			return refuse(c, FG_E_UNAUTHENTICATED,
				      "the client certificate names no principal", ret);
	}
	if (by_key && by_cert && by_key != by_cert)
		return refuse(c, FG_E_UNAUTHENTICATED,
			      "the key and the client certificate name different principals", ret);
	*who = by_key ? by_key : by_cert;
	if (!*who)
		return refuse(c, FG_E_UNAUTHENTICATED, NULL, ret);
	return true;
}

static void note_principal(struct fg_req *req, const struct fg_principal *p)
{
	snprintf(req->principal, sizeof(req->principal), "%s", fg_principal_name(p));
	fg_principal_id_of(p, &req->pid);
	req->has_pid = true;
}

/* 403 naming the right that is missing and what it is missing on. */
static bool forbid(struct MHD_Connection *c, const struct fg_principal *p,
		   enum fg_right r, const char *what, bool prefix,
		   enum MHD_Result *ret)
{
	char msg[FG_PRINCIPAL_MAX + FG_PATH_MAX + 96];
	if (r == FG_RIGHT_METRICS)
		snprintf(msg, sizeof(msg), "principal %s lacks the right metrics",
			 fg_principal_name(p));
	else if (prefix)
		snprintf(msg, sizeof(msg), "principal %s lacks %s: on every lock "
			 "whose name starts with '%s'", fg_principal_name(p),
			 fg_right_name(r), what);
	else
		snprintf(msg, sizeof(msg), "principal %s lacks %s: on lock %s",
			 fg_principal_name(p), fg_right_name(r), what);
	return refuse(c, FG_E_FORBIDDEN, msg, ret);
}

static bool require(struct MHD_Connection *c, const struct fg_principal *p,
		    enum fg_right r, const char *name, enum MHD_Result *ret)
{
	if (fg_principal_may(p, r, name))
		return true;
	return forbid(c, p, r, name, false, ret);
}

/* ---- the lock API --------------------------------------------------------- */

/* The lock a check's sequencer names, when it is one this gateway signed;
 * false for anything else (the check itself answers that). */
static bool check_names(struct fg_req *req, char name[FG_NAME_MAX + 1])
{
	char msg[128];
	bool ok = false;
	json_t *o = fg_json_body(req->body, req->body_len, false, msg, sizeof(msg));
	const char *s;
	size_t len;
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	struct fg_seq seq;
	if (o && fg_json_string(o, "sequencer", 65536, &s, &len, msg, sizeof(msg)) == 0 &&
	    s && fg_gateway_key(req->gw, key, &keylen) == FG_OK &&
	    fg_seq_decode(key, keylen, s, len, &seq) == FG_SEQ_VALID) {
		memcpy(name, seq.name, seq.name_len);
		name[seq.name_len] = '\0';
		ok = true;
	}
	json_decref(o);
	return ok;
}

bool fg_access_api(struct fg_req *req, struct MHD_Connection *c,
		   enum MHD_Result *ret)
{
	const struct fg_authtab *t = table(req->loop->access);
	if (!t)
		return true; /* open */
	const struct fg_apiroute *route = &req->route;
	if (route->need == FG_APINEED_NOTHING)
		return true;
	const struct fg_principal *p;
	if (!authenticate(req->loop->access, t, c, MHD_HTTP_HEADER_AUTHORIZATION,
			  &p, ret))
		return false;
	note_principal(req, p);
	switch (route->need) {
	case FG_APINEED_RIGHT: {
		enum fg_right r = route->right;
		if (route->op == FG_APIOP_DELETE &&
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Fence-Break"))
			r = FG_RIGHT_ADMIN;
		return require(c, p, r, route->name[0] ? route->name : NULL, ret);
	}
	case FG_APINEED_PREFIX: {
		/* the listing: on every lock the prefix can name */
		const char *pfx = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
							      "prefix");
		if (!pfx)
			pfx = "";
		if (strlen(pfx) > FG_NAME_MAX)
			return true; /* the listing answers 400 */
		return fg_principal_may_prefix(p, route->right, pfx) ||
		       forbid(c, p, route->right, pfx, true, ret);
	}
	case FG_APINEED_SEQUENCER: {
		char name[FG_NAME_MAX + 1];
		if (!check_names(req, name))
			return true;
		return require(c, p, route->right, name, ret);
	}
	case FG_APINEED_PRINCIPAL:
	case FG_APINEED_NOTHING:
	default:
		return true;
	}
}

/* ---- the proxy -------------------------------------------------------------- */

/* Does an unfenced-looking read list or walk a collection? Then it
 * touches every object under it, each guarded by its own lock unless a
 * route guards them all. (A repeated Depth never gets here: proxy/flow.c
 * refuses it, so the value read is the value forwarded.) */
static bool reads_collection(struct MHD_Connection *c, const char *method,
			     const struct fg_writeset *ws)
{
	if (ws->path_len > 0 && ws->path[ws->path_len - 1] == '/')
		return true;
	if (strcasecmp(method, "PROPFIND") != 0)
		return false;
	const char *depth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Depth");
	return !depth || strcmp(depth, "0") != 0;
}

/* read: on what a read of the request path touches: the lock guarding it;
 * for a collection, the collection and everything under it: the route
 * lock guarding it, or with none every lock whose name starts with the
 * collection's path ("docs/" for GET /docs/), and then the lock of every
 * route that starts inside it (a route /docs/secret/ to lock sec gives
 * that part of the tree to sec). */
static bool require_read(struct MHD_Connection *c, const struct fg_config *cfg,
			 const struct fg_principal *p,
			 const struct fg_writeset *ws, bool collection,
			 enum MHD_Result *ret)
{
	char lock[FG_NAME_MAX + 1];
	bool route = false;
	bool has_lock = fg_lock_for_path(cfg, ws->path, ws->path_len, lock, &route) == 0;
	if (!collection) {
		if (has_lock)
			return require(c, p, FG_RIGHT_READ, lock, ret);
		return forbid(c, p, FG_RIGHT_READ, "", true, ret);
	}
	char dir[FG_PATH_MAX + 1];
	size_t n = ws->path_len;
	memcpy(dir, ws->path, n);
	if (n == 0 || dir[n - 1] != '/')
		dir[n++] = '/';
	dir[n] = '\0';
	route = false;
	has_lock = fg_lock_for_path(cfg, dir, n, lock, &route) == 0;
	if (has_lock && route) {
		if (!require(c, p, FG_RIGHT_READ, lock, ret))
			return false;
	} else if (!fg_principal_may_prefix(p, FG_RIGHT_READ, dir + 1)) {
		return forbid(c, p, FG_RIGHT_READ, dir + 1, true, ret);
	}
	for (size_t i = 0; i < cfg->nroutes; i++) {
		/* a template's lock inside: the one it gives there, or every
		 * lock its names start with when captures inside decide */
		char inner[FG_NAME_MAX + 1];
		bool exact;
		if (!fg_route_inside(&cfg->routes[i], dir, n, inner, &exact))
			continue;
		if (exact ? !require(c, p, FG_RIGHT_READ, inner, ret)
			  : !fg_principal_may_prefix(p, FG_RIGHT_READ, inner))
			return exact ? false : forbid(c, p, FG_RIGHT_READ, inner, true, ret);
	}
	return true;
}

bool fg_access_still(struct fg_req *req, struct MHD_Connection *c,
		     enum fg_right r, const char *name, enum MHD_Result *ret)
{
	if (!req->has_pid)
		return true; /* nobody was asked for (open mode) */
	const struct fg_principal *p = fg_authtab_by_id(table(req->loop->access),
							&req->pid);
	if (!p)
		return refuse(c, FG_E_UNAUTHENTICATED,
			      "the credential was withdrawn while the request waited", ret);
	return require(c, p, r, name, ret);
}

bool fg_access_now(struct fg_req *req, const struct fg_principal **p)
{
	*p = NULL;
	if (!req->has_pid)
		return true; /* nobody was asked for (open mode) */
	*p = fg_authtab_by_id(table(req->loop->access), &req->pid);
	return *p != NULL;
}

bool fg_access_proxy(struct fg_req *req, struct MHD_Connection *c,
		     const char *method, const struct fg_writeset *ws,
		     enum MHD_Result *ret)
{
	const struct fg_config *cfg = req->gw->cfg;
	if (!cfg->proxy_auth)
		return true;
	const struct fg_authtab *t = table(req->loop->access);
	if (!t) /* proxy-auth required needs auth-file (config.c) */
		return refuse(c, FG_E_INTERNAL, "no auth table", ret);
	const struct fg_principal *p;
	if (!authenticate(req->loop->access, t, c, "Fence-Authorization", &p, ret))
		return false;
	note_principal(req, p);
	if (!ws)
		return true; /* a request refused for its write set: who only */
	/* every lock whose sequencer the request carries, as it is used */
	for (int i = 0; i < ws->n; i++)
		if (!require(c, p, ws->m[i].write ? FG_RIGHT_LOCK : FG_RIGHT_READ,
			     ws->m[i].lock, ret))
			return false;
	/* and what it reads, whether or not a sequencer came with it: a read
	 * (a fenced read of a collection reaches past its one lock), and a
	 * COPY's source (a copy reads it; a slashless one is forwarded with
	 * "Depth: 0" unless a route guards its subtree, writeset.h) */
	if (!ws->write)
		return require_read(c, cfg, p, ws, reads_collection(c, method, ws), ret);
	if (strcmp(method, "COPY") == 0)
		return require_read(c, cfg, p, ws, ws->path_len > 0 &&
				    ws->path[ws->path_len - 1] == '/', ret);
	return true;
}

/* ---- S3 mode ------------------------------------------------------------ */

/* The headers of a request as sigv4.c reads them, in the order they came. */
struct s3_headers {
	struct fg_sigv4_header h[FG_S3_HEADERS_MAX];
	size_t n;
	bool over;
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind,
				      const char *key, const char *value)
{
	struct s3_headers *hs = cls;
	(void)kind;
	if (hs->n == FG_S3_HEADERS_MAX) {
		hs->over = true;
		return MHD_NO;
	}
	hs->h[hs->n++] = (struct fg_sigv4_header){ key, strlen(key),
		value ? value : "", value ? strlen(value) : 0 };
	return MHD_YES;
}

static bool s3_refuse(struct MHD_Connection *c, enum fg_s3_native n,
		      const char *msg, enum MHD_Result *ret)
{
	*ret = fg_respond_s3(c, n, msg, false);
	return false;
}

static const enum fg_s3_native sigv4_answer[FG_SIGV4_RESULT_COUNT] = {
	[FG_SIGV4_NO_SIGNATURE] = FG_S3N_ACCESS_DENIED,
	[FG_SIGV4_SIGV2] = FG_S3N_INVALID_REQUEST,
	[FG_SIGV4_MALFORMED] = FG_S3N_AUTH_HEADER_MALFORMED,
	[FG_SIGV4_QUERY_MALFORMED] = FG_S3N_AUTH_QUERY_PARAMETERS_ERROR,
	[FG_SIGV4_BAD_REQUEST] = FG_S3N_INVALID_REQUEST,
	[FG_SIGV4_UNSIGNED_HEADER] = FG_S3N_ACCESS_DENIED,
	[FG_SIGV4_UNKNOWN_KEY] = FG_S3N_INVALID_ACCESS_KEY_ID,
	[FG_SIGV4_BAD_SIGNATURE] = FG_S3N_SIGNATURE_DOES_NOT_MATCH,
	[FG_SIGV4_SKEWED] = FG_S3N_REQUEST_TIME_TOO_SKEWED,
	[FG_SIGV4_EXPIRES_TOO_LONG] = FG_S3N_AUTH_QUERY_PARAMETERS_ERROR,
	[FG_SIGV4_EXPIRED] = FG_S3N_ACCESS_DENIED,
	[FG_SIGV4_NOT_YET_VALID] = FG_S3N_ACCESS_DENIED,
};

static bool copy_creds(struct fg_s3_store_creds *up, const struct fg_s3upstream *u)
{
	if (!u)
		return false;
	snprintf(up->key_id, sizeof(up->key_id), "%s", u->key_id);
	memcpy(up->secret, u->secret, u->secret_len);
	up->secret[u->secret_len] = '\0';
	up->has_token = u->has_token;
	if (u->has_token) {
		memcpy(up->token, u->token, u->token_len);
		up->token[u->token_len] = '\0';
	}
	return true;
}

bool fg_access_s3(struct fg_req *req, struct MHD_Connection *c,
		  struct fg_sigv4_auth *auth, struct fg_s3_store_creds *up,
		  enum MHD_Result *ret)
{
	struct fg_access *a = req->loop->access;
	const struct fg_config *cfg = req->gw->cfg;
	const struct fg_authtab *t = table(a);
	if (!a->s3keys)
		return s3_refuse(c, FG_S3N_ACCESS_DENIED, "no s3-credentials are loaded", ret);
	struct s3_headers *hs = malloc(sizeof(*hs));
	if (!hs) {
		*ret = fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		return false;
	}
	hs->n = 0;
	hs->over = false;
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, hs);
	bool ok = false;
	if (hs->over) {
		s3_refuse(c, FG_S3N_INVALID_REQUEST, "too many headers", ret);
		goto out;
	}
	const char *uri = req->uri;
	const char *q = strchr(uri, '?');
	struct fg_sigv4_request rq = {
		.method = req->rec.method,
		.path = uri,
		.path_len = q ? (size_t)(q - uri) : strlen(uri),
		.query = q ? q + 1 : "",
		.query_len = q ? strlen(q + 1) : 0,
		.headers = hs->h,
		.nheaders = hs->n,
	};
	/* an address that sent too many unknown keys or bad signatures is
	 * refused before its next one costs an HMAC */
	unsigned char addr[FG_BUDGET_ADDR_LEN];
	client_addr(c, addr);
	uint64_t now_ns = fg_rec_now_ns();
	struct fg_budget *b = fg_budget_find(&a->fail, addr);
	if (fg_budget_spent(b, now_ns)) {
		*ret = fg_respond_error(c, FG_E_TOO_MANY_FAILURES, NULL, NULL);
		goto out;
	}
	enum fg_sigv4_result r = fg_sigv4_verify(&rq, (int64_t)time(NULL),
		cfg->s3_region ? cfg->s3_region : "us-east-1",
		fg_s3keys_lookup, a->s3keys, a->sigs, auth);
	if (r != FG_SIGV4_OK) {
		if (r == FG_SIGV4_UNKNOWN_KEY || r == FG_SIGV4_BAD_SIGNATURE)
			fg_budget_charge(b, now_ns);
		int status;
		const char *code;
		const char *msg = fg_sigv4_result_s3(r, &status, &code);
		fg_log_info("refused %s: %s (key %s)", req->rec.method, code,
			    auth->key_id[0] ? auth->key_id : "-");
		s3_refuse(c, r < FG_SIGV4_RESULT_COUNT ? sigv4_answer[r]
						       : FG_S3N_SIGNATURE_DOES_NOT_MATCH,
			  msg, ret);
		goto out;
	}
	const struct fg_s3key *k = auth->key;
	const char *pname = fg_s3key_principal(k);
	if (t) {
		const struct fg_principal *p = NULL;
		for (size_t i = 0; i < fg_authtab_count(t) && !p; i++)
			if (strcmp(fg_principal_name(fg_authtab_at(t, i)), pname) == 0)
				p = fg_authtab_at(t, i);
		if (!p) {
			char msg[FG_PRINCIPAL_MAX + 64];
			snprintf(msg, sizeof(msg), "principal %s is not in the auth-file",
				 pname);
			s3_refuse(c, FG_S3N_ACCESS_DENIED, msg, ret);
			goto out;
		}
		note_principal(req, p);
	} else {
		snprintf(req->principal, sizeof(req->principal), "%s", pname);
	}
	if (strcmp(auth->payload_hash, FG_S3_STREAMING_PAYLOAD) == 0) {
		size_t sl;
		const char *secret = fg_s3key_secret(k, &sl);
		if (fg_sigv4_signing_key(a->sigs, auth->key_id, secret, sl, auth->date,
					 auth->region, auth->service,
					 up->client_key) != 0) {
			s3_refuse(c, FG_S3N_AUTH_HEADER_MALFORMED, NULL, ret);
			goto out;
		}
		up->has_client_key = true;
	}
	const struct fg_s3upstream *u = fg_s3key_upstream(k);
	if (!copy_creds(up, u ? u : req->gw->s3up)) {
		*ret = fg_respond_error(c, FG_E_INTERNAL,
					"no upstream-s3-credentials are loaded", NULL);
		goto out;
	}
	ok = true;
out:
	free(hs);
	return ok;
}

/* 403 AccessDenied naming the right that is missing. */
static bool s3_require(struct MHD_Connection *c, const struct fg_principal *p,
		       enum fg_right r, const char *name, bool prefix,
		       enum MHD_Result *ret)
{
	if (prefix ? fg_principal_may_prefix(p, r, name) : fg_principal_may(p, r, name))
		return true;
	char msg[FG_PRINCIPAL_MAX + FG_NAME_MAX + 96];
	snprintf(msg, sizeof(msg), prefix
		 ? "principal %s lacks %s: on every lock whose name starts with '%s'"
		 : "principal %s lacks %s: on lock %s", fg_principal_name(p),
		 fg_right_name(r), name);
	return s3_refuse(c, FG_S3N_ACCESS_DENIED, msg, ret);
}

bool fg_access_s3_may(struct fg_req *req, struct MHD_Connection *c,
		      const struct fg_s3_req *r, const struct fg_s3_locks *locks,
		      enum MHD_Result *ret)
{
	if (!req->has_pid)
		return true; /* open mode: a verified key may read and write */
	const struct fg_principal *p = fg_authtab_by_id(table(req->loop->access),
							&req->pid);
	if (!p)
		return s3_refuse(c, FG_S3N_ACCESS_DENIED, "the principal was removed", ret);
	for (int i = 0; i < locks->n; i++)
		if (!s3_require(c, p, locks->m[i].write ? FG_RIGHT_LOCK : FG_RIGHT_READ,
				locks->m[i].name, false, ret))
			return false;
	if (!r->read || locks->n > 0)
		return true;
	/* a read of a bucket (a listing) reads all of it; of no bucket (the
	 * bucket list), nothing of any */
	if (!r->bucket[0])
		return true;
	char lock[FG_NAME_MAX + 1];
	if (fg_s3_bucket_lock(req->gw->cfg, r->bucket, r->bucket_len, lock) == FG_S3_OK)
		return s3_require(c, p, FG_RIGHT_READ, lock, false, ret);
	char prefix[FG_S3_BUCKET_MAX + 2];
	snprintf(prefix, sizeof(prefix), "%s/", r->bucket);
	return s3_require(c, p, FG_RIGHT_READ, prefix, true, ret);
}
