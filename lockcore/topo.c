/*
 * topo.c - where the lock state lives (fencegate/topo.h).
 *
 * Invariant: the view (cur) changes only in fg_topo_refresh(), under mu,
 * and its generation grows with every change, so a reader that holds a
 * copy of generation g knows its copy is current while fg_topo_gen() is
 * still g. A view never names a server that did not answer as a master
 * when the view was made: a Sentinel's answer is confirmed with ROLE, a
 * cluster's map is the owner column of CLUSTER SLOTS.
 *
 * It also holds the one copy of the Redis credentials (topo-private.h):
 * every connection lockcore makes, this file's own included, sends AUTH
 * before anything else, and the password is wiped when the topology goes.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include "fencegate/error.h"
#include "fencegate/topo.h"
#include "topo-private.h"

struct fg_topo {
	struct fg_redis_addr addr;
	unsigned connect_timeout_ms, command_timeout_ms;
	size_t order[FG_REDIS_SEEDS_MAX]; /* Sentinels, the last to answer first */

	pthread_mutex_t mu;
	struct fg_topo_view cur;          /* under mu */
	atomic_uint_fast64_t gen;
	atomic_int suspected;
	void (*hook)(void *);
	void *hook_arg;

	redisContext *watch;              /* subscribed to +switch-master */

	/* read-only after fg_topo_create(); owned, the password wiped at
	 * fg_topo_destroy() */
	char *user;                       /* NULL: the default user */
	char *password;                   /* NULL: no AUTH */
	size_t password_len;
	void (*refused)(void *, const char *, const struct fg_redis_node *,
			const char *);
	void *refused_arg;
};

/* ---- the setting ------------------------------------------------------ */

static int say(char *err, size_t n, const char *msg, const char *what)
{
	if (err && n)
		snprintf(err, n, msg, what);
	return -1;
}

/* "HOST:PORT" or "[V6]:PORT" of length len into *node. */
static int parse_node(const char *s, size_t len, struct fg_redis_node *node)
{
	const char *colon = NULL, *host = s;
	size_t hlen;
	if (len > 0 && s[0] == '[') {
		const char *end = memchr(s, ']', len);
		if (!end || end + 1 >= s + len || end[1] != ':')
			return -1;
		host = s + 1;
		hlen = (size_t)(end - host);
		colon = end + 1;
	} else {
		for (size_t i = 0; i < len; i++)
			if (s[i] == ':')
				colon = s + i;
		if (!colon)
			return -1;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= FG_REDIS_HOST_MAX)
		return -1;
	size_t plen = len - (size_t)(colon + 1 - s);
	if (plen == 0 || plen > 5)
		return -1;
	long port = 0;
	for (size_t i = 0; i < plen; i++) {
		char c = colon[1 + i];
		if (c < '0' || c > '9')
			return -1;
		port = port * 10 + (c - '0');
	}
	if (port < 1 || port > 65535)
		return -1;
	for (size_t i = 0; i < hlen; i++) {
		unsigned char ch = (unsigned char)host[i];
		if (ch <= ' ' || ch >= 0x7f || strchr("/,@[]", ch) ||
		    (ch == ':' && s[0] != '['))
			return -1;
	}
	memcpy(node->host, host, hlen);
	node->host[hlen] = '\0';
	node->port = (int)port;
	return 0;
}

/* A comma-separated list of nodes, up to the end of `s` or `stop`. */
static int parse_nodes(const char *s, const char *stop,
		       struct fg_redis_addr *out, char *err, size_t n)
{
	out->nseeds = 0;
	while (s < stop) {
		const char *comma = memchr(s, ',', (size_t)(stop - s));
		const char *end = comma ? comma : stop;
		if (out->nseeds == FG_REDIS_SEEDS_MAX)
			return say(err, n, "at most %s addresses", "16");
		if (parse_node(s, (size_t)(end - s), &out->seeds[out->nseeds]))
			return say(err, n, "'%s' is not a list of HOST:PORT", s);
		out->nseeds++;
		s = comma ? comma + 1 : stop;
		if (comma && s == stop)
			return say(err, n, "'%s' ends with a comma", "the list");
	}
	return out->nseeds ? 0 : say(err, n, "no address in '%s'", s);
}

int fg_redis_addr_parse(const char *s, struct fg_redis_addr *out, char *err,
			size_t n)
{
	static const struct { const char *scheme; enum fg_redis_mode mode; } schemes[] = {
		{ "redis://", FG_REDIS_DIRECT },
		{ "redis-sentinel://", FG_REDIS_SENTINEL },
		{ "sentinel://", FG_REDIS_SENTINEL },
		{ "redis-cluster://", FG_REDIS_CLUSTER },
		{ "cluster://", FG_REDIS_CLUSTER },
	};
	memset(out, 0, sizeof(*out));
	out->mode = FG_REDIS_DIRECT;
	const char *rest = s;
	bool schemed = false;
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t l = strlen(schemes[i].scheme);
		if (strncmp(s, schemes[i].scheme, l) == 0) {
			out->mode = schemes[i].mode;
			rest = s + l;
			schemed = true;
			break;
		}
	}
	if (!schemed && strstr(s, "://"))
		return say(err, n, "'%s': the scheme must be redis://, "
			   "redis-sentinel:// or redis-cluster://", s);
	const char *end = rest + strlen(rest);
	if (out->mode == FG_REDIS_SENTINEL) {
		const char *slash = strchr(rest, '/');
		if (!slash || slash[1] == '\0')
			return say(err, n, "'%s' names no master: "
				   "redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER", s);
		size_t ml = strlen(slash + 1);
		if (ml >= FG_REDIS_MASTER_MAX)
			return say(err, n, "'%s': the master name is too long", s);
		for (size_t i = 0; i < ml; i++)
			if ((unsigned char)slash[1 + i] <= ' ' || slash[1 + i] == '/')
				return say(err, n, "'%s': bad master name", s);
		memcpy(out->master, slash + 1, ml + 1);
		end = slash;
	} else if (*end == '/' || (end > rest && end[-1] == '/')) {
		return say(err, n, "'%s': no path is allowed here", s);
	}
	if (parse_nodes(rest, end, out, err, n))
		return -1;
	if (out->mode == FG_REDIS_DIRECT && out->nseeds != 1)
		return say(err, n, "'%s': one HOST:PORT (a list needs "
			   "redis-sentinel:// or redis-cluster://)", s);
	return 0;
}

/* ---- hash slots -------------------------------------------------------- */

/* CRC16-CCITT (XMODEM), the checksum of Redis Cluster's key slots. */
static uint16_t crc16(const char *buf, size_t len)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((unsigned char)buf[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
					     : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned fg_keyslot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(open + 1, '}', len - from);
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) & (FG_SLOTS - 1);
	}
	return crc16(key, len) & (FG_SLOTS - 1);
}

/* ---- views ------------------------------------------------------------- */

void fg_topo_view_finish(struct fg_topo_view *v)
{
	if (!v)
		return;
	free(v->nodes);
	free(v->slots);
	memset(v, 0, sizeof(*v));
}

static int view_copy(struct fg_topo_view *dst, const struct fg_topo_view *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->gen = src->gen;
	if (src->nnodes) {
		dst->nodes = malloc(src->nnodes * sizeof(*dst->nodes));
		if (!dst->nodes)
			return FG_ENOMEM;
		memcpy(dst->nodes, src->nodes, src->nnodes * sizeof(*dst->nodes));
		dst->nnodes = src->nnodes;
	}
	if (src->slots) {
		dst->slots = malloc(FG_SLOTS * sizeof(*dst->slots));
		if (!dst->slots) {
			fg_topo_view_finish(dst);
			return FG_ENOMEM;
		}
		memcpy(dst->slots, src->slots, FG_SLOTS * sizeof(*dst->slots));
	}
	return FG_OK;
}

static int view_same(const struct fg_topo_view *a, const struct fg_topo_view *b)
{
	if (a->nnodes != b->nnodes || !a->slots != !b->slots)
		return 0;
	for (size_t i = 0; i < a->nnodes; i++)
		if (a->nodes[i].port != b->nodes[i].port ||
		    strcmp(a->nodes[i].host, b->nodes[i].host) != 0)
			return 0;
	return !a->slots || memcmp(a->slots, b->slots, FG_SLOTS * sizeof(*a->slots)) == 0;
}

/* Takes *next as the view (its buffers move in); gen grows if it differs. */
static void adopt(fg_topo *t, struct fg_topo_view *next)
{
	pthread_mutex_lock(&t->mu);
	if (view_same(&t->cur, next)) {
		fg_topo_view_finish(next);
	} else {
		uint64_t g = atomic_load(&t->gen) + 1;
		fg_topo_view_finish(&t->cur);
		t->cur = *next;
		t->cur.gen = g;
		memset(next, 0, sizeof(*next));
		atomic_store(&t->gen, g);
	}
	pthread_mutex_unlock(&t->mu);
}

static int one_node(struct fg_topo_view *v, const struct fg_redis_node *n)
{
	memset(v, 0, sizeof(*v));
	v->nodes = malloc(sizeof(*v->nodes));
	if (!v->nodes)
		return FG_ENOMEM;
	v->nodes[0] = *n;
	v->nnodes = 1;
	return FG_OK;
}

/* ---- life ---------------------------------------------------------------- */

fg_topo *fg_topo_create(const struct fg_redis_addr *addr,
			unsigned connect_timeout_ms, unsigned command_timeout_ms,
			const struct fg_redis_auth *auth)
{
	fg_topo *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->addr = *addr;
	t->connect_timeout_ms = connect_timeout_ms ? connect_timeout_ms : 500;
	t->command_timeout_ms = command_timeout_ms ? command_timeout_ms : 2000;
	for (size_t i = 0; i < FG_REDIS_SEEDS_MAX; i++)
		t->order[i] = i;
	pthread_mutex_init(&t->mu, NULL);
	atomic_init(&t->gen, 1);
	atomic_init(&t->suspected, 0);
	if (addr->mode == FG_REDIS_DIRECT && one_node(&t->cur, &addr->seeds[0]))
		goto error;
	t->cur.gen = 1; /* after one_node(), which starts the view afresh */
	if (auth && auth->password) {
		t->password = strdup(auth->password);
		if (!t->password)
			goto error;
		t->password_len = strlen(t->password);
		if (auth->user && !(t->user = strdup(auth->user)))
			goto error;
	}
	if (auth) {
		t->refused = auth->refused;
		t->refused_arg = auth->refused_arg;
	}
	return t;
error:
	fg_topo_destroy(t);
	return NULL;
}

void fg_topo_destroy(fg_topo *t)
{
	if (!t)
		return;
	if (t->watch)
		redisFree(t->watch);
	if (t->password)
		OPENSSL_cleanse(t->password, t->password_len);
	free(t->password);
	free(t->user);
	fg_topo_view_finish(&t->cur);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

enum fg_redis_mode fg_topo_mode(const fg_topo *t)
{
	return t->addr.mode;
}

uint64_t fg_topo_gen(const fg_topo *t)
{
	return atomic_load(&((fg_topo *)t)->gen);
}

void fg_topo_set_hook(fg_topo *t, void (*hook)(void *), void *arg)
{
	t->hook = hook;
	t->hook_arg = arg;
}

void fg_topo_suspect(fg_topo *t)
{
	atomic_store(&t->suspected, 1);
	if (t->hook)
		t->hook(t->hook_arg);
}

int fg_topo_suspected(const fg_topo *t)
{
	return atomic_load(&((fg_topo *)t)->suspected);
}

int fg_topo_view(fg_topo *t, struct fg_topo_view *out)
{
	pthread_mutex_lock(&t->mu);
	int err = view_copy(out, &t->cur);
	pthread_mutex_unlock(&t->mu);
	return err;
}

/* ---- logging in ---------------------------------------------------------- */

int fg__login_argv(const fg_topo *t, const char *argv[FG__LOGIN_ARGC_MAX],
		   size_t argvlen[FG__LOGIN_ARGC_MAX])
{
	int n = 0;
	if (!t->password)
		return 0;
	argv[n] = "AUTH";
	argvlen[n++] = 4;
	if (t->user) {
		argv[n] = t->user;
		argvlen[n++] = strlen(t->user);
	}
	argv[n] = t->password;
	argvlen[n++] = t->password_len;
	return n;
}

/* Tells the hook; Redis never quotes a password in an error, but should
 * one ever do, the text stays out of the logs. */
static void tell_refused(const fg_topo *t, const struct fg_redis_node *node,
			 const char *why)
{
	if (!t->refused)
		return;
	if (t->password && strstr(why, t->password))
		why = "(an error text that quoted the password, left out)";
	t->refused(t->refused_arg, t->user, node, why);
}

int fg__login_refused(const fg_topo *t, const struct fg_redis_node *node,
		      const char *err)
{
	static const char *const kinds[] = { "NOPERM", "NOAUTH", "WRONGPASS" };
	if (!err)
		return 0;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t l = strlen(kinds[i]);
		if (strncmp(err, kinds[i], l) == 0 &&
		    (err[l] == ' ' || err[l] == '\0')) {
			tell_refused(t, node, err);
			return 1;
		}
	}
	return 0;
}

int fg__login_reply(const fg_topo *t, const struct fg_redis_node *node,
		    const redisReply *r)
{
	if (!r)
		return FG_EUNAVAIL;
	if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
		return FG_OK;
	/* any error to AUTH is a refusal, also one without the usual
	 * prefix ("ERR AUTH <password> called without any password
	 * configured") */
	if (r->type == REDIS_REPLY_ERROR && !fg__login_refused(t, node, r->str))
		tell_refused(t, node, r->str);
	return FG_EUNAVAIL;
}

int fg__login(const fg_topo *t, const struct fg_redis_node *node, redisContext *rc)
{
	const char *argv[FG__LOGIN_ARGC_MAX];
	size_t len[FG__LOGIN_ARGC_MAX];
	int argc = fg__login_argv(t, argv, len);
	if (argc == 0)
		return FG_OK;
	redisReply *r = redisCommandArgv(rc, argc, argv, len);
	int err = fg__login_reply(t, node, r);
	if (r)
		freeReplyObject(r);
	return err;
}

/* ---- discovery (maintenance thread) ------------------------------------- */

/* A connection to n, logged in (Sentinels take the same credentials as
 * the servers); NULL when it cannot be had or its login was refused. */
static redisContext *dial(const fg_topo *t, const struct fg_redis_node *n)
{
	struct timeval ct = { t->connect_timeout_ms / 1000,
			      (t->connect_timeout_ms % 1000) * 1000 };
	struct timeval rt = { t->command_timeout_ms / 1000,
			      (t->command_timeout_ms % 1000) * 1000 };
	redisContext *rc = redisConnectWithTimeout(n->host, n->port, ct);
	if (!rc || rc->err || redisSetTimeout(rc, rt) != REDIS_OK ||
	    fg__login(t, n, rc) != FG_OK) {
		if (rc)
			redisFree(rc);
		return NULL;
	}
	return rc;
}

/* A reply that refuses a right is told (the view cannot be had with
 * these credentials, and the operator must hear why). */
static void refused_reply(const fg_topo *t, const struct fg_redis_node *n,
			  const redisReply *r)
{
	if (r && r->type == REDIS_REPLY_ERROR)
		fg__login_refused(t, n, r->str);
}

/* Does the server at n say it is a master? */
static int is_master(const fg_topo *t, const struct fg_redis_node *n)
{
	redisContext *rc = dial(t, n);
	if (!rc)
		return 0;
	redisReply *r = redisCommand(rc, "ROLE");
	refused_reply(t, n, r);
	int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
		  r->element[0]->type == REDIS_REPLY_STRING &&
		  strcmp(r->element[0]->str, "master") == 0;
	if (r)
		freeReplyObject(r);
	redisFree(rc);
	return yes;
}

/* Keeps rc (a Sentinel that just answered) as the +switch-master watch;
 * a refused subscription keeps none (the next refresh tries again). */
static void watch_on(fg_topo *t, const struct fg_redis_node *n,
		     redisContext *rc)
{
	redisReply *r = redisCommand(rc, "SUBSCRIBE +switch-master");
	if (!r || r->type == REDIS_REPLY_ERROR) {
		refused_reply(t, n, r);
		if (r)
			freeReplyObject(r);
		redisFree(rc);
		return;
	}
	freeReplyObject(r);
	t->watch = rc;
}

static int refresh_sentinel(fg_topo *t)
{
	size_t n = t->addr.nseeds;
	for (size_t k = 0; k < n; k++) {
		size_t i = t->order[k];
		redisContext *rc = dial(t, &t->addr.seeds[i]);
		if (!rc)
			continue;
		redisReply *r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s",
					     t->addr.master);
		refused_reply(t, &t->addr.seeds[i], r);
		struct fg_redis_node m = { .port = 0 };
		if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    r->element[1]->type == REDIS_REPLY_STRING &&
		    r->element[0]->len < sizeof(m.host)) {
			memcpy(m.host, r->element[0]->str, r->element[0]->len + 1);
			m.port = atoi(r->element[1]->str);
		}
		if (r)
			freeReplyObject(r);
		if (m.port <= 0 || m.port > 65535 || !is_master(t, &m)) {
			/* this Sentinel does not know, or knows an old master:
			 * ask the next one */
			redisFree(rc);
			continue;
		}
		/* the Sentinel client rule: the one that answered goes first */
		memmove(&t->order[1], &t->order[0], k * sizeof(t->order[0]));
		t->order[0] = i;
		if (!t->watch)
			watch_on(t, &t->addr.seeds[i], rc);
		else
			redisFree(rc);
		struct fg_topo_view v;
		if (one_node(&v, &m))
			return FG_ENOMEM;
		adopt(t, &v);
		return FG_OK;
	}
	return FG_EUNAVAIL;
}

int fg_topo_parse_slots(const redisReply *r, const struct fg_redis_node *from,
			struct fg_topo_view *out)
{
	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return FG_EPROTO;
	out->slots = malloc(FG_SLOTS * sizeof(*out->slots));
	if (!out->slots)
		return FG_ENOMEM;
	for (size_t s = 0; s < FG_SLOTS; s++)
		out->slots[s] = FG_SLOT_NONE;
	size_t cap = 0;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_ARRAY ||
		    e->element[2]->elements < 2 ||
		    e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
			goto bad;
		long long lo = e->element[0]->integer, hi = e->element[1]->integer;
		const redisReply *h = e->element[2]->element[0];
		long long port = e->element[2]->element[1]->integer;
		if (lo < 0 || hi < lo || hi >= FG_SLOTS || port < 1 || port > 65535 ||
		    h->len >= FG_REDIS_HOST_MAX)
			goto bad;
		struct fg_redis_node node = { .port = (int)port };
		/* an empty or "?" host: the node that answered */
		if (h->len == 0 || strcmp(h->str, "?") == 0)
			snprintf(node.host, sizeof(node.host), "%s", from->host);
		else
			memcpy(node.host, h->str, h->len + 1);
		size_t idx = 0;
		while (idx < out->nnodes && (out->nodes[idx].port != node.port ||
					     strcmp(out->nodes[idx].host, node.host)))
			idx++;
		if (idx == out->nnodes) {
			if (out->nnodes == FG_SLOT_NONE)
				goto bad;
			if (out->nnodes == cap) {
				cap = cap ? cap * 2 : 4;
				struct fg_redis_node *nn = realloc(out->nodes, cap * sizeof(*nn));
				if (!nn) {
					fg_topo_view_finish(out);
					return FG_ENOMEM;
				}
				out->nodes = nn;
			}
			out->nodes[out->nnodes++] = node;
		}
		for (long long s = lo; s <= hi; s++)
			out->slots[s] = (uint16_t)idx;
	}
	if (out->nnodes)
		return FG_OK;
bad:
	fg_topo_view_finish(out);
	return FG_EPROTO;
}

static int ask_slots(fg_topo *t, const struct fg_redis_node *n)
{
	redisContext *rc = dial(t, n);
	if (!rc)
		return FG_EUNAVAIL;
	redisReply *r = redisCommand(rc, "CLUSTER SLOTS");
	refused_reply(t, n, r);
	struct fg_topo_view v;
	int err = fg_topo_parse_slots(r, n, &v);
	if (r)
		freeReplyObject(r);
	redisFree(rc);
	if (err)
		return err;
	adopt(t, &v);
	return FG_OK;
}

static int refresh_cluster(fg_topo *t)
{
	/* the masters we know first (they are the ones that moved last),
	 * then the seeds */
	struct fg_topo_view v;
	if (fg_topo_view(t, &v))
		return FG_ENOMEM;
	int err = FG_EUNAVAIL;
	for (size_t i = 0; i < v.nnodes && err; i++)
		err = ask_slots(t, &v.nodes[i]);
	for (size_t i = 0; i < t->addr.nseeds && err; i++)
		err = ask_slots(t, &t->addr.seeds[i]);
	fg_topo_view_finish(&v);
	return err;
}

int fg_topo_refresh(fg_topo *t)
{
	atomic_store(&t->suspected, 0);
	switch (t->addr.mode) {
	case FG_REDIS_SENTINEL:
		return refresh_sentinel(t);
	case FG_REDIS_CLUSTER:
		return refresh_cluster(t);
	case FG_REDIS_DIRECT:
	default:
		return FG_OK;
	}
}

int fg_topo_watch_fd(const fg_topo *t)
{
	return t->watch ? t->watch->fd : -1;
}

int fg_topo_watch_read(fg_topo *t)
{
	if (!t->watch)
		return 0;
	int moved = 0;
	if (redisBufferRead(t->watch) != REDIS_OK) {
		/* the Sentinel went away: a new watch comes with the next
		 * refresh, which is asked for now, since a switch may have
		 * been missed */
		redisFree(t->watch);
		t->watch = NULL;
		return 1;
	}
	for (;;) {
		void *reply = NULL;
		if (redisGetReplyFromReader(t->watch, &reply) != REDIS_OK) {
			redisFree(t->watch);
			t->watch = NULL;
			return 1;
		}
		if (!reply)
			break;
		redisReply *r = reply;
		/* "message" "+switch-master" "<name> <old ip> <old port> <new ip> <new port>" */
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    r->element[2]->type == REDIS_REPLY_STRING) {
			size_t ml = strlen(t->addr.master);
			const char *m = r->element[2]->str;
			if (strncmp(m, t->addr.master, ml) == 0 && m[ml] == ' ')
				moved = 1;
		}
		freeReplyObject(r);
	}
	return moved;
}
