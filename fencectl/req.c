/*
 * req.c - calls to the gateway (see req.h).
 * Invariant: every easy handle made here has a connect and a total
 * timeout, takes its answer into memory of bounded size, opens only
 * close-on-exec sockets, and verifies the peer of every TLS connection;
 * every header line it builds that holds a secret (the bearer key, a
 * lease) is wiped before it is freed. A call passes to the next gateway
 * only when the one tried gave no answer or a 5xx, so that an answer
 * about the lock (409, 410, 401...) is never asked again elsewhere.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exits.h"
#include "keyfile.h"
#include "lockurl.h"
#include "msg.h"
#include "req.h"
#include "sigs.h"

#define RESP_MAX (1024 * 1024)	/* no lock API answer comes near this */

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct fg_req *r = arg;
	size_t len = size * n;

	if (r->resp_len + len > RESP_MAX)
		return 0;	/* curl ends the call with CURLE_WRITE_ERROR */
	char *p = realloc(r->resp, r->resp_len + len + 1);
	if (!p)
		return 0;
	memcpy(p + r->resp_len, data, len);
	r->resp = p;
	r->resp_len += len;
	p[r->resp_len] = '\0';
	return len;
}

/* The command lock runs must not inherit a connection to the gateway. */
static int on_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	(void)arg;
	(void)purpose;
	int flags = fcntl(fd, F_GETFD);
	if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
		return CURL_SOCKOPT_ERROR;
	return CURL_SOCKOPT_OK;
}

static int add_header(struct fg_req *r, const char *h)
{
	struct curl_slist *l = curl_slist_append(r->headers, h);
	if (!l)
		return -1;
	r->headers = l;
	return 0;
}

/* head + secret, added to r's headers; the line built for it is wiped. */
static int add_secret_header(struct fg_req *r, const char *head,
			     const char *secret)
{
	size_t n = strlen(head) + strlen(secret) + 1;
	char *h = malloc(n);
	if (!h)
		return -1;
	snprintf(h, n, "%s%s", head, secret);
	int e = add_header(r, h);
	/* the copy curl made is wiped with the list; wipe ours */
	fg_keyfile_wipe(h, n);
	free(h);
	return e;
}

int fg_req_add_header(struct fg_req *r, const char *line)
{
	if (add_header(r, line) < 0)
		return -1;
	/* the list's head stays the same once it has one entry; set it
	 * again all the same, so that this never depends on that */
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
	return 0;
}

/* The client's TLS settings. Verification is never turned off: a
 * gateway whose certificate does not verify is not talked to. */
static void set_tls(CURL *e, const struct fg_conn *cl)
{
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(e, CURLOPT_SSLVERSION,
			 (long)CURL_SSLVERSION_TLSv1_2);
	if (cl->cacert)
		curl_easy_setopt(e, CURLOPT_CAINFO, cl->cacert);
	if (cl->cert) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, cl->cert);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEY,
				 cl->cert_key ? cl->cert_key : cl->cert);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
		/* an encrypted key is refused instead of OpenSSL asking for
		 * its passphrase on the terminal, which would hang a script */
		curl_easy_setopt(e, CURLOPT_KEYPASSWD, "");
	}
}

const char *fg_conn_base(const struct fg_conn *cl)
{
	return cl->gw->url[cl->gw->current];
}

void fg_conn_next(const struct fg_conn *cl)
{
	cl->gw->current = (cl->gw->current + 1) % cl->gw->n;
}

int fg_req_init(struct fg_req *r, const struct fg_conn *cl,
		const char *method, char *path, json_t *body, const char *lease,
		uint64_t timeout_ms)
{
	memset(r, 0, sizeof(*r));
	r->cl = cl;
	r->method = method;
	r->path = path;
	if (!path)
		return -1;
	r->at = cl->gw->current;
	r->tried = 1;
	r->url = fg_lockurl_join(cl->gw->url[r->at], path);
	if (!r->url)
		return -1;
	r->easy = curl_easy_init();
	if (!r->easy)
		return -1;
	if (!timeout_ms)
		timeout_ms = cl->timeout_ms;
	r->timeout_ms = timeout_ms;
	uint64_t connect_ms = cl->connect_timeout_ms;
	if (connect_ms > timeout_ms)
		connect_ms = timeout_ms;

	if (add_header(r, "Accept: application/json") < 0 ||
	    add_header(r, "Expect:") < 0)
		return -1;
	if (body) {
		r->body = json_dumps(body, JSON_COMPACT);
		if (!r->body || add_header(r, "Content-Type: application/json") < 0)
			return -1;
	}
	if (lease && add_secret_header(r, "Fence-Lease: ", lease) < 0)
		return -1;
	if (cl->key && add_secret_header(r, "Authorization: Bearer ",
					 cl->key) < 0)
		return -1;

	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (r->body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "fencectl/" FG_VERSION);
	/* the lock name is the path: "." and ".." segments are the
	 * gateway's to refuse, not curl's to resolve */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_socket);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	set_tls(e, cl);
	return 0;
}

void fg_req_finish(struct fg_req *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	/* header lines may carry the key or a lease */
	for (struct curl_slist *l = r->headers; l; l = l->next)
		fg_keyfile_wipe(l->data, strlen(l->data));
	curl_slist_free_all(r->headers);
	if (r->body) {
		/* a body may carry a lease */
		fg_keyfile_wipe(r->body, strlen(r->body));
		free(r->body);
	}
	free(r->url);
	free(r->path);
	free(r->resp);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

void fg_req_note(const struct fg_req *r)
{
	char shown[512], why[512];

	if (r->result != CURLE_OK)
		snprintf(why, sizeof(why), "%s", r->errbuf[0] ? r->errbuf :
			 curl_easy_strerror(r->result));
	else
		snprintf(why, sizeof(why), "HTTP %ld", r->status);
	fg_note("%s %s: %s (%" PRIu64 "ms)", r->method,
		fg_gateways_shown(r->url, shown, sizeof(shown)), why,
		r->done_ms - r->sent_ms);
}

/*
 * After an attempt: notes it (--verbose), and when it gave no answer or a
 * 5xx and a gateway is left that this call has not tried, points r at
 * that one (true). An answer makes its gateway the current one.
 */
static bool next_gateway(struct fg_req *r)
{
	struct fg_gateways *gw = r->cl->gw;
	enum fg_outcome o = fg_req_outcome(r);
	char shown[512];

	fg_req_note(r);
	if (o != FG_UNAVAILABLE) {
		gw->current = r->at;
		return false;
	}
	if (r->tried >= gw->n)
		return false;
	size_t at = (r->at + 1) % gw->n;
	char *url = fg_lockurl_join(gw->url[at], r->path);
	if (!url)
		return false;
	fg_note("gateway %s did not answer; trying the next",
		fg_gateways_shown(gw->url[r->at], shown, sizeof(shown)));
	free(r->url);
	r->url = url;
	r->at = at;
	r->tried++;
	free(r->resp);
	r->resp = NULL;
	r->resp_len = 0;
	json_decref(r->json);
	r->json = NULL;
	r->errbuf[0] = '\0';
	curl_easy_setopt(r->easy, CURLOPT_URL, r->url);
	return true;
}

void fg_req_started(struct fg_req *r)
{
	r->sent_ms = fg_now_ms();
}

void fg_req_complete(struct fg_req *r, CURLcode result)
{
	r->done_ms = fg_now_ms();
	r->result = result;
	r->status = 0;
	if (result != CURLE_OK)
		return;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status)
		r->answered = true;
	if (r->resp_len > 0) {
		json_t *j = json_loadb(r->resp, r->resp_len, 0, NULL);
		if (j && json_is_object(j))
			r->json = j;
		else
			json_decref(j);
	}
}

void fg_req_perform(struct fg_req *r)
{
	do {
		fg_req_started(r);
		fg_req_complete(r, curl_easy_perform(r->easy));
	} while (next_gateway(r));
}

/* One attempt, on the gateway r points at (see fg_req_run()). */
static int run_once(struct fg_req *r, int sigfd)
{
	CURLM *m = curl_multi_init();
	CURLcode result = CURLE_OUT_OF_MEMORY;
	int sig = 0;

	if (!m || curl_multi_add_handle(m, r->easy) != CURLM_OK) {
		curl_multi_cleanup(m);
		fg_req_started(r);
		fg_req_complete(r, CURLE_OUT_OF_MEMORY);
		return 0;
	}
	fg_req_started(r);
	for (;;) {
		int running, left;
		CURLMsg *msg;
		bool done = false;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			if (msg->msg == CURLMSG_DONE) {
				result = msg->data.result;
				done = true;
			}
		}
		if (done)
			break;
		struct curl_waitfd w = { .fd = sigfd, .events = CURL_WAIT_POLLIN };
		/* curl shortens this to its own next timeout */
		curl_multi_poll(m, sigfd >= 0 ? &w : NULL, sigfd >= 0 ? 1 : 0,
				1000, NULL);
		if (sigfd >= 0 && (w.revents & CURL_WAIT_POLLIN)) {
			struct signalfd_siginfo si;
			int s;
			while ((s = fg_sig_next(sigfd, &si)) != 0)
				if (fg_sig_ends(s) && !sig)
					sig = s;
			if (sig)
				break;
		}
	}
	curl_multi_remove_handle(m, r->easy);
	curl_multi_cleanup(m);
	if (!sig)
		fg_req_complete(r, result);
	return sig;
}

/* Points r at gateway `at` (tried: how many this call has tried). */
static int point_at(struct fg_req *r, size_t at, size_t tried)
{
	char *url = fg_lockurl_join(r->cl->gw->url[at], r->path);
	if (!url)
		return -1;
	free(r->url);
	r->url = url;
	r->at = at;
	r->tried = tried;
	curl_easy_setopt(r->easy, CURLOPT_URL, r->url);
	return 0;
}

/*
 * A call that may wait beyond the client's timeout (a blocked acquire, a
 * long poll) starts on a gateway that answers: a stopped or wedged one
 * takes the connection, then holds the call for all of its wait without
 * a word. livez, each attempt bounded by the client's timeout, finds the
 * first gateway that answers from r's on, and r starts there. If none
 * answers, r ends as that question did (*none), without waiting.
 */
static int start_on_a_live_gateway(struct fg_req *r, int sigfd, bool *none)
{
	struct fg_req p;
	int sig = 0;

	*none = false;
	if (r->timeout_ms <= r->cl->timeout_ms)
		return 0;
	if (fg_req_init(&p, r->cl, "GET", strdup("/_fence/v1/livez"), NULL,
			NULL, 0) < 0 || (p.at != r->at && point_at(&p, r->at, 1) < 0)) {
		fg_req_finish(&p);
		return 0; /* no memory to ask: the call goes as it is */
	}
	do {
		sig = run_once(&p, sigfd);
	} while (!sig && next_gateway(&p));
	if (!sig && fg_req_outcome(&p) == FG_UNAVAILABLE) {
		*none = true;
		if (point_at(r, p.at, p.tried) == 0) {
			r->result = p.result;
			r->status = p.status;
			memcpy(r->errbuf, p.errbuf, sizeof(r->errbuf));
			r->sent_ms = p.sent_ms;
			r->done_ms = p.done_ms;
		} else {
			*none = false;
		}
	} else if (!sig && p.at != r->at) {
		point_at(r, p.at, p.tried);
	}
	fg_req_finish(&p);
	return sig;
}

int fg_req_run(struct fg_req *r, int sigfd)
{
	bool none;
	int sig = start_on_a_live_gateway(r, sigfd, &none);

	if (sig || none)
		return sig;
	do {
		sig = run_once(r, sigfd);
	} while (!sig && next_gateway(r));
	return sig;
}

static const char *error_code(const struct fg_req *r)
{
	json_t *e = r->json ? json_object_get(r->json, "error") : NULL;
	return json_is_string(e) ? json_string_value(e) : NULL;
}

static const char *message_of(const struct fg_req *r)
{
	json_t *m = r->json ? json_object_get(r->json, "message") : NULL;
	return json_is_string(m) ? json_string_value(m) : NULL;
}

/*
 * A TLS alert from the gateway ("tlsv13 alert certificate required",
 * "sslv3 alert bad certificate") surfaces with TLS 1.3 only when the
 * first answer is read, as a receive error: it is still the handshake
 * failing, which asking again cannot mend, not the gateway going away.
 */
static bool tls_alert(const struct fg_result *x)
{
	return (x->result == CURLE_RECV_ERROR ||
		x->result == CURLE_SEND_ERROR) && x->url &&
	       strncmp(x->url, "https://", 8) == 0 && x->errtext &&
	       strstr(x->errtext, " alert ") != NULL;
}

static void result_of(const struct fg_req *r, struct fg_result *x)
{
	x->result = r->result;
	x->status = r->status;
	x->code = error_code(r);
	x->message = message_of(r);
	x->errtext = r->errbuf[0] ? r->errbuf : NULL;
	x->url = r->url;
	x->tried = r->tried;
	x->retry_after = -1;
}

enum fg_outcome fg_req_outcome(const struct fg_req *r)
{
	struct fg_result x;

	result_of(r, &x);
	return fg_result_outcome(&x);
}

enum fg_outcome fg_result_outcome(const struct fg_result *r)
{
	const char *code = r->code;

	switch ((CURLcode)r->result) {
	case CURLE_OK:
		break;
	case CURLE_OUT_OF_MEMORY:
		return FG_NOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return FG_BAD_URL;
	case CURLE_PEER_FAILED_VERIFICATION:
		return FG_TLS_UNVERIFIED;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CIPHER:
		return FG_TLS_FAILED;
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		return FG_TLS_FILES;
	default:
		return tls_alert(r) ? FG_TLS_FAILED : FG_UNAVAILABLE;
	}
	if (r->status >= 200 && r->status < 300)
		return FG_OK;
	if (r->status >= 500)
		return FG_UNAVAILABLE;
	if (r->status == 409 && code && strcmp(code, "lock_held") == 0)
		return FG_HELD;
	if (r->status == 410)
		return FG_LEASE_GONE;
	if (r->status == 401)
		return FG_UNAUTHENTICATED;
	if (r->status == 403 && code && strcmp(code, "forbidden") == 0)
		return FG_FORBIDDEN;
	if (r->status == 429 && code && strcmp(code, "too_many_failures") == 0)
		return FG_THROTTLED;
	if (r->status == 429)
		return FG_QUEUE_FULL;
	if (r->status == 400 || r->status == 413 || r->status == 431)
		return FG_REFUSED;
	return FG_UNEXPECTED;
}

/* 401 in plain words: what was presented, and what to do about it. */
static void describe_unknown(const struct fg_conn *cl, char *buf, size_t len)
{

	if (cl && cl->key && cl->cert)
		snprintf(buf, len, "the gateway does not accept this key "
			 "(from %s) with this client certificate (--cert "
			 "'%s'): the key must be known, and both must name "
			 "the same principal", cl->key_file, cl->cert);
	else if (cl && cl->key)
		snprintf(buf, len, "the gateway does not accept this key "
			 "(from %s)", cl->key_file);
	else if (cl && cl->cert)
		snprintf(buf, len, "the gateway does not know who you are: "
			 "it knows no principal by this client certificate "
			 "(--cert '%s'); pass --key-file (or "
			 "FENCEGATE_KEY_FILE) or another certificate",
			 cl->cert);
	else
		snprintf(buf, len, "the gateway does not know who you are: "
			 "pass --key-file (or FENCEGATE_KEY_FILE) or a client "
			 "certificate (--cert/--key)");
}

/* The TLS failures, with the setting that mends each. */
static void describe_tls(const struct fg_conn *cl, const struct fg_result *r,
			 enum fg_outcome o, char *buf, size_t len)
{
	const char *why = r->errtext ? r->errtext :
			  curl_easy_strerror((CURLcode)r->result);

	if (o == FG_TLS_UNVERIFIED && cl && cl->cacert)
		snprintf(buf, len, "cannot verify the gateway's certificate "
			 "against --cacert '%s': %s", cl->cacert, why);
	else if (o == FG_TLS_UNVERIFIED)
		snprintf(buf, len, "cannot verify the gateway's certificate: "
			 "%s; pass --cacert", why);
	else if (o == FG_TLS_FILES)
		snprintf(buf, len, "cannot use the TLS files given (--cacert, "
			 "--cert, --key): %s", why);
	else if (strstr(why, "wrong version number"))
		/* what OpenSSL says when the other end answers in plain HTTP */
		snprintf(buf, len, "TLS with the gateway failed: %s (it does "
			 "not seem to speak TLS: is it an http:// gateway?)",
			 why);
	else if (cl && !cl->cert)
		snprintf(buf, len, "TLS with the gateway failed: %s (if it "
			 "asks for a client certificate, pass --cert and "
			 "--key)", why);
	else
		snprintf(buf, len, "TLS with the gateway failed: %s", why);
}

const char *fg_req_describe(const struct fg_req *r, char *buf, size_t len)
{
	struct fg_result x;
	curl_off_t after = -1;

	result_of(r, &x);
	if (fg_result_outcome(&x) == FG_THROTTLED &&
	    curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &after) == CURLE_OK)
		x.retry_after = (long)after;
	return fg_result_describe(r->cl, &x, buf, len);
}

const char *fg_result_describe(const struct fg_conn *cl,
			       const struct fg_result *r, char *buf,
			       size_t len)
{
	enum fg_outcome o = fg_result_outcome(r);
	const char *msg = r->message;
	long after = r->retry_after;
	char shown[512];

	switch (o) {
	case FG_TLS_UNVERIFIED:
	case FG_TLS_FAILED:
	case FG_TLS_FILES:
		describe_tls(cl, r, o, buf, len);
		return buf;
	case FG_UNAUTHENTICATED:
		describe_unknown(cl, buf, len);
		return buf;
	case FG_FORBIDDEN:
		snprintf(buf, len, "the principal lacks the right: %s",
			 msg ? msg : "(the gateway did not say which)");
		return buf;
	case FG_THROTTLED:
		if (after > 0)
			snprintf(buf, len, "the gateway refuses calls from "
				 "this address for %lds, after too many unknown "
				 "keys from it; "
				 "check the key (--key-file) and try again "
				 "later", after);
		else
			snprintf(buf, len, "the gateway refuses calls from "
				 "this address for a while, after too many "
				 "unknown keys from it; check the key "
				 "(--key-file) and try again later");
		return buf;
	default:
		break;
	}
	/* a call that no gateway answered says so: the error shown is the
	 * last one's */
	char *const start = buf;
	int n = 0;
	if (o == FG_UNAVAILABLE && r->tried > 1)
		n = snprintf(buf, len, "all %zu gateways failed; "
			     "the last: ", r->tried);
	if (n < 0 || (size_t)n >= len)
		n = 0;
	buf += n;
	len -= (size_t)n;
	if (r->result != CURLE_OK) {
		snprintf(buf, len, "%s", r->errtext ? r->errtext :
			 curl_easy_strerror((CURLcode)r->result));
		return start;
	}
	const char *code = r->code;
	if (code && msg)
		snprintf(buf, len, "%ld %s: %s", r->status, code, msg);
	else if (code)
		snprintf(buf, len, "%ld %s", r->status, code);
	else if (r->status >= 200 && r->status < 300)
		snprintf(buf, len, "%ld (not the answer expected)", r->status);
	else
		snprintf(buf, len, "HTTP %ld from %s (not a fencegate answer)",
			 r->status, fg_gateways_shown(r->url, shown, sizeof(shown)));
	return start;
}

int fg_outcome_exit(enum fg_outcome o)
{
	switch (o) {
	case FG_OK:
		return FG_EXIT_OK;
	case FG_HELD:
	case FG_QUEUE_FULL:
		return FG_EXIT_NOT_OBTAINED;
	case FG_LEASE_GONE:
		return FG_EXIT_LEASE_LOST;
	case FG_REFUSED:
		return FG_EXIT_REFUSED;
	case FG_UNAVAILABLE:
		return FG_EXIT_UNAVAILABLE;
	case FG_BAD_URL:
	case FG_TLS_FILES:
		return FG_EXIT_USAGE;
	case FG_UNAUTHENTICATED:
	case FG_FORBIDDEN:
	case FG_THROTTLED:
		return FG_EXIT_NOPERM;
	case FG_TLS_UNVERIFIED:
	case FG_TLS_FAILED:
		return FG_EXIT_UNAVAILABLE;
	case FG_NOMEM:
		return FG_EXIT_SOFTWARE;
	case FG_UNEXPECTED:
		break;
	}
	return FG_EXIT_PROTOCOL;
}

int fg_req_uint(const struct fg_req *r, const char *key, uint64_t *out)
{
	json_t *v = r->json ? json_object_get(r->json, key) : NULL;

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)9007199254740991LL)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

const char *fg_req_str(const struct fg_req *r, const char *key)
{
	json_t *v = r->json ? json_object_get(r->json, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}
