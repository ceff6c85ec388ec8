/*
 * call.c - lock API calls and error codes (see call.h).
 * Invariant: every attempt has a connect and a total timeout, takes its
 * answer into bounded memory, verifies the peer of every TLS connection,
 * and every header line built here that holds a secret (the key, a lease)
 * is wiped before it is freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call.h"

#define RESP_MAX (1024 * 1024)	/* no lock API answer comes near this */

/* One table: enum, code string. The contract's codes, then the client's. */
static const struct {
	int err;
	const char *code;
} codes[] = {
	{ FG_CLIENT_OK, "ok" },
	{ FG_CLIENT_NOT_ACQUIRED, "not_acquired" },
	{ FG_CLIENT_LEASE_LOST, "lease_lost" },
	{ FG_CLIENT_UNAVAILABLE, "unavailable" },
	{ FG_CLIENT_NOMEM, "out_of_memory" },
	{ FG_CLIENT_INVALID, "invalid" },
	{ FG_CLIENT_PROTOCOL, "protocol" },
	{ FG_CLIENT_TLS, "tls" },
	{ FG_CLIENT_CANCELLED, "cancelled" },
	{ FG_CLIENT_BAD_LOCK_NAME, "bad_lock_name" },
	{ FG_CLIENT_BAD_REQUEST, "bad_request" },
	{ FG_CLIENT_BAD_PATH, "bad_path" },
	{ FG_CLIENT_BAD_DESTINATION, "bad_destination" },
	{ FG_CLIENT_SUBTREE_UNGUARDED, "subtree_unguarded" },
	{ FG_CLIENT_PAYLOAD_TOO_LARGE, "payload_too_large" },
	{ FG_CLIENT_NOT_FOUND, "not_found" },
	{ FG_CLIENT_METHOD_NOT_ALLOWED, "method_not_allowed" },
	{ FG_CLIENT_LOCK_HELD, "lock_held" },
	{ FG_CLIENT_LEASE_EXPIRED, "lease_expired" },
	{ FG_CLIENT_TOO_MANY_WAITERS, "too_many_waiters" },
	{ FG_CLIENT_TOKEN_REQUIRED, "token_required" },
	{ FG_CLIENT_MALFORMED_TOKEN, "malformed_token" },
	{ FG_CLIENT_FORGED_TOKEN, "forged_token" },
	{ FG_CLIENT_WRONG_LOCK, "wrong_lock" },
	{ FG_CLIENT_WRONG_MODE, "wrong_mode" },
	{ FG_CLIENT_STALE_TOKEN, "stale_token" },
	{ FG_CLIENT_LOCK_STORE_UNAVAILABLE, "lock_store_unavailable" },
	{ FG_CLIENT_UPSTREAM_UNAVAILABLE, "upstream_unavailable" },
	{ FG_CLIENT_UPSTREAM_TIMEOUT, "upstream_timeout" },
	{ FG_CLIENT_INTERNAL, "internal" },
	{ FG_CLIENT_UNAUTHENTICATED, "unauthenticated" },
	{ FG_CLIENT_FORBIDDEN, "forbidden" },
	{ FG_CLIENT_TOO_MANY_FAILURES, "too_many_failures" },
	{ FG_CLIENT_SHUTTING_DOWN, "shutting_down" },
	{ FG_CLIENT_NOT_READY, "not_ready" },
};

const char *fg_client_code(int err)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].err == err)
			return codes[i].code;
	return "unknown";
}

int fg_client_err_of_code(const char *code)
{
	if (!code)
		return FG_CLIENT_PROTOCOL;
	/* from the contract's part of the table only */
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].err <= FG_CLIENT_BAD_LOCK_NAME &&
		    strcmp(codes[i].code, code) == 0)
			return codes[i].err;
	return FG_CLIENT_PROTOCOL;
}

void fg__wipe(void *p, size_t n)
{
	volatile unsigned char *q = p;

	while (n--)
		*q++ = 0;
}

uint64_t fg__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~' || c == '/';
}

char *fg__lock_path(const char *name, const char *query)
{
	static const char hex[] = "0123456789ABCDEF";
	static const char prefix[] = "/_fence/v1/locks/";
	size_t cap = sizeof(prefix) + 3 * strlen(name) +
		     (query ? strlen(query) + 1 : 0) + 1;
	char *p = malloc(cap);
	size_t n = sizeof(prefix) - 1;

	if (!p)
		return NULL;
	memcpy(p, prefix, n);
	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		if (unreserved(*s)) {
			p[n++] = (char)*s;
		} else {
			p[n++] = '%';
			p[n++] = hex[*s >> 4];
			p[n++] = hex[*s & 15];
		}
	}
	p[n] = '\0';
	if (query)
		snprintf(p + n, cap - n, "?%s", query);
	return p;
}

int fg__json_uint(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)9007199254740991LL)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

const char *fg__json_str(json_t *o, const char *key)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct fg__answer *a = arg;
	size_t len = size * n;

	if (a->len + len > RESP_MAX)
		return 0;
	char *p = realloc(a->resp, a->len + len + 1);
	if (!p)
		return 0;
	memcpy(p + a->len, data, len);
	a->resp = p;
	a->len += len;
	p[a->len] = '\0';
	return len;
}

void fg__answer_finish(struct fg__answer *a)
{
	free(a->resp);
	json_decref(a->json);
	memset(a, 0, sizeof(*a));
}

/* Wiped before freeing: lines may hold the key or a lease. */
static void free_headers(struct curl_slist *l)
{
	for (struct curl_slist *p = l; p; p = p->next)
		fg__wipe(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

static int append(struct curl_slist **l, const char *line)
{
	struct curl_slist *n = curl_slist_append(*l, line);

	if (!n)
		return -1;
	*l = n;
	return 0;
}

static int append_secret(struct curl_slist **l, const char *head,
			 const char *secret)
{
	size_t n = strlen(head) + strlen(secret) + 1;
	char *line = malloc(n);
	int e;

	if (!line)
		return -1;
	snprintf(line, n, "%s%s", head, secret);
	e = append(l, line);
	fg__wipe(line, n);
	free(line);
	return e;
}

/* A program the client runs (fencectl's command) must not inherit a
 * connection to the gateway. */
static int on_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	(void)arg;
	(void)purpose;
	int flags = fcntl(fd, F_GETFD);
	if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
		return CURL_SOCKOPT_ERROR;
	return CURL_SOCKOPT_OK;
}

static bool tls_failure(const struct fg__answer *a, const char *url)
{
	CURLcode r = a->result;

	if (r == CURLE_PEER_FAILED_VERIFICATION ||
	    r == CURLE_SSL_CONNECT_ERROR || r == CURLE_SSL_CERTPROBLEM ||
	    r == CURLE_SSL_CACERT_BADFILE || r == CURLE_SSL_CIPHER)
		return true;
	/* a TLS alert ("certificate required") surfaces with TLS 1.3 only
	 * at the first read: still the handshake failing, which asking
	 * again cannot mend */
	return (r == CURLE_RECV_ERROR || r == CURLE_SEND_ERROR) && url &&
	       strncmp(url, "https://", 8) == 0 &&
	       strstr(a->errbuf, " alert ") != NULL;
}

/* A TLS failure that is this machine's own (the client's cert, key or CA
 * file): every gateway would fail the same way, so none is tried after it.
 * A handshake that fails on one gateway (its cert, a reset) is that
 * gateway's: the next one is tried. */
static bool tls_local(CURLcode r)
{
	return r == CURLE_SSL_CERTPROBLEM || r == CURLE_SSL_CACERT_BADFILE ||
	       r == CURLE_SSL_CRL_BADFILE || r == CURLE_SSL_ENGINE_NOTFOUND ||
	       r == CURLE_SSL_ENGINE_SETFAILED || r == CURLE_SSL_ENGINE_INITFAILED;
}

/* The error of one attempt's answer. */
static int error_of(const struct fg__answer *a, const char *url)
{
	if (a->result == CURLE_OUT_OF_MEMORY)
		return FG_CLIENT_NOMEM;
	if (tls_failure(a, url))
		return FG_CLIENT_TLS;
	if (a->result != CURLE_OK)
		return FG_CLIENT_UNAVAILABLE;
	if (a->status >= 200 && a->status < 300)
		return FG_CLIENT_OK;
	int e = fg_client_err_of_code(fg__json_str(a->json, "error"));
	if (e == FG_CLIENT_PROTOCOL && a->status >= 500)
		return FG_CLIENT_UNAVAILABLE;
	return e;
}

static void setup(struct fg__net *net, CURL *h, const char *method,
		  const char *url, const char *body, struct curl_slist *hdr,
		  uint64_t timeout_ms, struct fg__answer *a)
{
	uint64_t connect = net->connect_ms < timeout_ms ? net->connect_ms :
			   timeout_ms;

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_USERAGENT, net->user_agent ?
			 net->user_agent : "libfencegate-client");
	curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, on_socket);
	/* lock names are paths: dot segments are the gateway's to refuse */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)connect);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->errbuf);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	if (net->cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, net->cacert);
	if (net->cert) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, net->cert);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY,
				 net->cert_key ? net->cert_key : net->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
		/* an encrypted key is refused, never asked for on a tty */
		curl_easy_setopt(h, CURLOPT_KEYPASSWD, "");
	}
}

/* One transfer; cut short when cancel says so (then true). */
static bool perform(CURL *h, const struct fg__cancel *cancel, CURLcode *res)
{
	if (!cancel || !cancel->fn) {
		*res = curl_easy_perform(h);
		return false;
	}
	CURLM *m = curl_multi_init();
	bool cut = false;

	*res = CURLE_OUT_OF_MEMORY;
	if (!m || curl_multi_add_handle(m, h) != CURLM_OK) {
		curl_multi_cleanup(m);
		return false;
	}
	for (;;) {
		int running, left;
		CURLMsg *msg;
		bool done = false;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE) {
				*res = msg->data.result;
				done = true;
			}
		if (done)
			break;
		struct curl_waitfd w = { .fd = cancel->fd,
					 .events = CURL_WAIT_POLLIN };
		curl_multi_poll(m, &w, 1, 1000, NULL);
		if ((w.revents & CURL_WAIT_POLLIN) && cancel->fn(cancel->arg)) {
			cut = true;
			break;
		}
	}
	curl_multi_remove_handle(m, h);
	curl_multi_cleanup(m);
	return cut;
}

int fg__sleep(uint64_t ms, const struct fg__cancel *cancel)
{
	uint64_t end = fg__now_ms() + ms;

	for (;;) {
		uint64_t now = fg__now_ms();
		if (now >= end)
			return 0;
		uint64_t left = end - now;
		if (!cancel || !cancel->fn) {
			struct timespec ts = { (time_t)(left / 1000),
					       (long)(left % 1000) * 1000000L };
			nanosleep(&ts, NULL);
			continue;
		}
		struct pollfd p = { .fd = cancel->fd, .events = POLLIN };
		int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0 && cancel->fn(cancel->arg))
			return FG_CLIENT_CANCELLED;
	}
}

int fg__call(struct fg__net *net, CURL *h, const char *method,
	     const char *path, const char *body, const char *lease,
	     const char *extra, uint64_t timeout_ms, struct fg__answer *a)
{
	return fg__call_c(net, h, method, path, body, lease, extra, timeout_ms,
			  NULL, a);
}

int fg__call_c(struct fg__net *net, CURL *h, const char *method,
	       const char *path, const char *body, const char *lease,
	       const char *extra, uint64_t timeout_ms,
	       const struct fg__cancel *cancel, struct fg__answer *a)
{
	struct curl_slist *hdr = NULL;
	size_t first = atomic_load(&net->current) % net->n;
	int err = FG_CLIENT_NOMEM;
	bool answered = false;
	bool all_tls = true;	/* every attempt so far failed TLS */
	size_t tried = 0;

	memset(a, 0, sizeof(*a));
	if (!timeout_ms)
		timeout_ms = net->timeout_ms;
	if (append(&hdr, "Accept: application/json") < 0 ||
	    append(&hdr, "Expect:") < 0 ||
	    (body && append(&hdr, "Content-Type: application/json") < 0) ||
	    (lease && append_secret(&hdr, "Fence-Lease: ", lease) < 0) ||
	    (net->auth_header && append(&hdr, net->auth_header) < 0) ||
	    (extra && append(&hdr, extra) < 0))
		goto out;
	for (size_t i = 0; i < net->n; i++) {
		size_t at = (first + i) % net->n;
		size_t ulen = strlen(net->gw[at]) + strlen(path) + 1;
		char *url = malloc(ulen);

		if (!url) {
			err = FG_CLIENT_NOMEM;
			goto out;
		}
		snprintf(url, ulen, "%s%s", net->gw[at], path);
		fg__answer_finish(a);
		setup(net, h, method, url, body, hdr, timeout_ms, a);
		tried++;
		a->sent_ms = fg__now_ms();
		if (perform(h, cancel, &a->result)) {
			free(url);
			err = FG_CLIENT_CANCELLED;
			goto out;
		}
		a->done_ms = fg__now_ms();
		if (a->result == CURLE_OK) {
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
			if (a->len) {
				json_t *j = json_loadb(a->resp, a->len, 0, NULL);
				if (json_is_object(j))
					a->json = j;
				else
					json_decref(j);
			}
		}
		err = error_of(a, url);
		if (a->result == CURLE_OK)
			answered = true;
		if (err != FG_CLIENT_TLS)
			all_tls = false;
		bool final = (a->result == CURLE_OK && a->status < 500) ||
			     err == FG_CLIENT_NOMEM ||
			     (err == FG_CLIENT_TLS && tls_local(a->result)) ||
			     i + 1 == net->n;
		/* TLS is the call's error only when no gateway got past it */
		if (err == FG_CLIENT_TLS && i + 1 == net->n && !all_tls &&
		    !tls_local(a->result))
			err = FG_CLIENT_UNAVAILABLE;
		if (net->on_attempt) {
			struct fg_client_attempt at_ = {
				.method = method, .url = url,
				.status = a->status,
				.error = a->result == CURLE_OK ? NULL :
					 a->errbuf[0] ? a->errbuf :
					 curl_easy_strerror(a->result),
				.ms = a->done_ms - a->sent_ms,
				.next = !final,
			};
			net->on_attempt(net->on_attempt_arg, &at_);
		}
		free(url);
		if (a->result == CURLE_OK && a->status < 500) {
			atomic_store(&net->current, at);
			break;
		}
		if (final)
			break;
	}
out:
	a->answered = answered;
	a->tried = tried;
	free_headers(hdr);
	/* the handle keeps pointers to the list and the buffer: drop them */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return err;
}

int fg__probe(struct fg__net *net, CURL *h, const struct fg__cancel *cancel,
	      struct fg__answer *a)
{
	int err = fg__call_c(net, h, "GET", "/_fence/v1/livez", NULL, NULL,
			     NULL, 0, cancel, a);

	if (err == FG_CLIENT_CANCELLED || !(err == FG_CLIENT_UNAVAILABLE &&
					    !a->answered))
		return err == FG_CLIENT_CANCELLED ? err : 0;
	return err;
}

void fg__error_set(struct fg_client_error *e, int err,
		   const struct fg__answer *a, const char *what)
{
	const char *code = a ? fg__json_str(a->json, "error") : NULL;
	const char *msg = a ? fg__json_str(a->json, "message") : NULL;
	uint64_t ra = 0;

	e->coded = code != NULL;
	e->transport = a ? (int)a->result : 0;
	e->tried = a ? a->tried : 0;
	e->answered = a && a->answered;
	e->has_retry_after = a && fg__json_uint(a->json, "retry_after_ms",
						&ra) == 0;
	e->retry_after_ms = ra;
	e->err = err;
	e->status = a ? a->status : 0;
	snprintf(e->code, sizeof(e->code), "%s", code ? code :
		 fg_client_code(err));
	if (msg)
		snprintf(e->message, sizeof(e->message), "%s", msg);
	else if (a && a->result != CURLE_OK)
		snprintf(e->message, sizeof(e->message), "%s", a->errbuf[0] ?
			 a->errbuf : curl_easy_strerror(a->result));
	else if (a && a->status)
		snprintf(e->message, sizeof(e->message), "HTTP %ld%s%s",
			 a->status, what ? " to " : "", what ? what : "");
	else
		snprintf(e->message, sizeof(e->message), "%s",
			 what ? what : fg_client_code(err));
}
