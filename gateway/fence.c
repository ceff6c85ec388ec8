/*
 * fence.c - the fencing checks of the proxy (the contract's table).
 *
 * Invariant: nothing is forwarded unless fg_fence_check_or_respond()
 * returned PASS or ADMITTED (or a WAIT that was later admitted); every
 * refusal is decided before the request body is read, so a refused write
 * leaves nothing upstream.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fencegate/sequencer.h"
#include "errors.h"
#include "fence.h"
#include "gateway.h"
#include "jsonio.h"
#include "log.h"

/*
 * One path, one lock: the storage resolves a path before it acts on it, so
 * the guard lock must be chosen from the path as the storage will see it.
 * Repeated slashes merge (nginx's merge_slashes) and "." and ".." segments
 * go (RFC 3986 5.2.4), so "//orders/42" and "/orders/x/../42" meet the same
 * route and lock as "/orders/42". A ".." above the root is refused.
 */
static int normalize(char *path, size_t *len)
{
	size_t n = *len, w = 0, r = 0;
	if (n == 0)
		return -1;
	if (path[0] != '/') { /* resolve as if rooted (room: the caller's buffer
				 is one larger than any path it accepts) */
		memmove(path + 1, path, n + 1);
		path[0] = '/';
		n++;
	}
	while (r < n) {
		/* path[r] == '/': take one segment */
		size_t s = r + 1;
		while (s < n && path[s] == '/')
			s++;
		size_t e = s;
		while (e < n && path[e] != '/')
			e++;
		size_t seg = e - s;
		bool last = e >= n;
		if (seg == 1 && path[s] == '.') {
			if (last)
				path[w++] = '/';
		} else if (seg == 2 && path[s] == '.' && path[s + 1] == '.') {
			if (w == 0)
				return -1;
			while (w > 0 && path[w - 1] != '/')
				w--;
			if (w > 0)
				w--; /* drop the '/' too */
			if (last)
				path[w++] = '/';
		} else {
			path[w++] = '/';
			memmove(path + w, path + s, seg);
			w += seg;
		}
		r = e;
	}
	if (w == 0)
		path[w++] = '/';
	path[w] = '\0';
	*len = w;
	return 0;
}

int fg_fence_lock_for(const struct fg_config *cfg, const char *raw_path,
		      size_t len, char out[FG_NAME_MAX + 1])
{
	char path[4096];
	size_t plen;
	if (fg_pct_decode(raw_path, len, path, sizeof(path) - 1, &plen))
		return -1;
	if (normalize(path, &plen))
		return -1;
	const struct fg_route *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < cfg->nroutes; i++) {
		const char *pre = cfg->routes[i].prefix;
		size_t n = strlen(pre);
		/* "/orders/42/" covers "/orders/42/x" and "/orders/42" itself */
		bool match = (plen >= n && memcmp(path, pre, n) == 0) ||
			     (n > 1 && pre[n - 1] == '/' && plen == n - 1 &&
			      memcmp(path, pre, plen) == 0);
		if (match && n > best_len) {
			best = &cfg->routes[i];
			best_len = n;
		}
	}
	const char *name = path;
	size_t nlen = plen;
	if (best) {
		name = best->lock;
		nlen = strlen(name);
	} else {
		while (nlen > 0 && name[0] == '/') {
			name++;
			nlen--;
		}
		while (nlen > 0 && name[nlen - 1] == '/')
			nlen--;
	}
	if (nlen > FG_NAME_MAX || !fg_name_valid(name, nlen))
		return -1;
	memcpy(out, name, nlen);
	out[nlen] = '\0';
	return 0;
}

static bool listed(const char *list, const char *method)
{
	size_t m = strlen(method);
	for (const char *p = list; *p;) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (n == m && n > 0 && memcmp(p, method, n) == 0)
			return true;
		p += n;
	}
	return false;
}

/* Fail safe: a method that is neither a configured write nor a configured
 * read (LOCK, a lowercase "put", anything new) is fenced like a write. */
bool fg_fence_is_write(const struct fg_config *cfg, const char *method)
{
	if (listed(cfg->write_methods ? cfg->write_methods : FG_DEFAULT_WRITE_METHODS,
		   method))
		return true;
	return !listed(cfg->read_methods ? cfg->read_methods : FG_DEFAULT_READ_METHODS,
		       method);
}

struct count {
	unsigned n;
	const char *value;
};

static enum MHD_Result count_token(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *value)
{
	struct count *ct = cls;
	(void)kind;
	if (strcasecmp(key, "Fencing-Token") == 0) {
		ct->n++;
		ct->value = value;
	}
	return MHD_YES;
}

static json_t *tokens(uint64_t token, bool has_current, uint64_t current)
{
	return json_pack("{s:I, s:o}", "token", (json_int_t)token, "current",
			 has_current ? json_integer((json_int_t)current) : json_null());
}

static enum MHD_Result refuse(struct MHD_Connection *c, enum fg_error e,
			      const char *method, const char *path,
			      const char *lock, uint64_t token, bool has_current,
			      uint64_t current, const char *message)
{
	char cur[24] = "none";
	if (has_current)
		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)current);
	fg_log_info("refused %s %s: %s (lock %s, token %llu, current %s)",
		    method, path, fg_errors[e].code, lock[0] ? lock : "-",
		    (unsigned long long)token, cur);
	json_t *extra = token ? tokens(token, has_current, current) : NULL;
	return fg_respond_error(c, e, message, extra);
}

/* A well-signed sequencer that fails a local check may still carry a token
 * beyond any issued for its lock, which the table ranks first. */
static bool forged_token(struct fg_req *req, const struct fg_seq *seq,
			 struct fg_check *chk)
{
	fg_store *st = fg_gateway_store(req->gw);
	return st && fg_lock_check(st, seq->name, seq->token, chk) == FG_OK &&
	       chk->status == FG_CHECK_FORGED;
}

enum fg_fence_verdict fg_fence_check_or_respond(struct fg_req *req,
						struct MHD_Connection *c,
						const char *method,
						struct fg_fence *out)
{
	struct fg_gateway *gw = req->gw;
	const struct fg_config *cfg = gw->cfg;
	const char *uri = req->uri;
	size_t plen = strcspn(uri, "?");
	char path[128];
	snprintf(path, sizeof(path), "%.*s", (int)(plen > 100 ? 100 : plen), uri);

	memset(out, 0, sizeof(*out));
	out->write = fg_fence_is_write(cfg, method);
	struct count ct = { 0, NULL };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_token, &ct);
	if (ct.n == 0) {
		if (!out->write)
			return FG_FENCE_PASS;
		refuse(c, FG_E_TOKEN_REQUIRED, method, path, "", 0, false, 0, NULL);
		return FG_FENCE_ANSWERED;
	}
	if (ct.n > 1) {
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, "", 0, false, 0,
		       "more than one Fencing-Token header");
		return FG_FENCE_ANSWERED;
	}
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	if (fg_gateway_key(gw, key, &keylen) != FG_OK) {
		fg_respond_store_error(c, FG_ENOKEY);
		return FG_FENCE_ANSWERED;
	}
	struct fg_seq seq;
	switch (fg_seq_decode(key, keylen, ct.value, strlen(ct.value), &seq)) {
	case FG_SEQ_MALFORMED:
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, "", 0, false, 0, NULL);
		return FG_FENCE_ANSWERED;
	case FG_SEQ_FORGED:
		refuse(c, FG_E_FORGED_TOKEN, method, path, "", 0, false, 0, NULL);
		return FG_FENCE_ANSWERED;
	case FG_SEQ_VALID:
		break;
	}
	out->token = seq.token;
	if (fg_fence_lock_for(cfg, uri, plen, out->lock)) {
		refuse(c, FG_E_BAD_LOCK_NAME, method, path, "", seq.token, false, 0,
		       "this path maps to no valid lock name; add a route rule");
		return FG_FENCE_ANSWERED;
	}
	struct fg_check chk;
	bool wrong_lock = strcmp(seq.name, out->lock) != 0;
	bool wrong_mode = out->write && seq.mode == FG_MODE_SHARED;
	if (wrong_lock || wrong_mode) {
		if (forged_token(req, &seq, &chk)) {
			refuse(c, FG_E_FORGED_TOKEN, method, path, seq.name, seq.token,
			       chk.has_current, chk.current, NULL);
		} else {
			refuse(c, wrong_lock ? FG_E_WRONG_LOCK : FG_E_WRONG_MODE,
			       method, path, out->lock, seq.token, false, 0, NULL);
		}
		return FG_FENCE_ANSWERED;
	}

	fg_store *st = fg_gateway_store(gw);
	if (!st) {
		fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		return FG_FENCE_ANSWERED;
	}
	if (!out->write) {
		int err = fg_lock_check(st, out->lock, seq.token, &chk);
		if (err) {
			fg_respond_store_error(c, err);
			return FG_FENCE_ANSWERED;
		}
		if (chk.status == FG_CHECK_VALID)
			return FG_FENCE_PASS;
		refuse(c, chk.status == FG_CHECK_FORGED ? FG_E_FORGED_TOKEN : FG_E_STALE_TOKEN,
		       method, path, out->lock, seq.token, chk.has_current,
		       chk.current, NULL);
		return FG_FENCE_ANSWERED;
	}

	unsigned long long seqno = atomic_fetch_add(&gw->waiter_seq, 1) + 1;
	snprintf(out->write_id, sizeof(out->write_id), "%s-w%llu", gw->id, seqno);
	struct fg_admit a;
	uint64_t asked = fg_fence_now_ms();
	int err = fg_lock_admit(st, out->lock, seq.token, out->write_id,
				cfg->fence_margin_ms, cfg->write_max_ms, &a);
	if (err) {
		fg_respond_store_error(c, err);
		return FG_FENCE_ANSWERED;
	}
	out->ms = a.ms;
	if (a.status == FG_ADMITTED) {
		out->deadline_at = asked + (uint64_t)a.ms;
		return FG_FENCE_ADMITTED;
	}
	if (a.status == FG_ADMIT_WAIT)
		return FG_FENCE_WAIT;
	fg_fence_refused(c, method, path, out, &a);
	return FG_FENCE_ANSWERED;
}

uint64_t fg_fence_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

enum MHD_Result fg_fence_refused(struct MHD_Connection *c, const char *method,
				 const char *path, const struct fg_fence *f,
				 const struct fg_admit *a)
{
	if (a->status == FG_ADMIT_FORGED)
		return refuse(c, FG_E_FORGED_TOKEN, method, path, f->lock, f->token,
			      a->has_current, a->current, NULL);
	return refuse(c, FG_E_STALE_TOKEN, method, path, f->lock, f->token,
		      a->has_current, a->current,
		      a->status == FG_ADMIT_EXPIRING
			      ? "the lease ends before a write could finish"
			      : NULL);
}
