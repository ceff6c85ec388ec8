/*
 * req.c - calls to the gateway (see req.h).
 * Invariant: every easy handle made here has a connect and a total
 * timeout, takes its answer into memory of bounded size, and opens only
 * close-on-exec sockets.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exits.h"
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

int fg_req_init(struct fg_req *r, const struct fg_client *cl,
		const char *method, char *url, json_t *body, const char *lease,
		uint64_t timeout_ms)
{
	memset(r, 0, sizeof(*r));
	r->url = url;
	if (!url)
		return -1;
	r->easy = curl_easy_init();
	if (!r->easy)
		return -1;
	if (!timeout_ms)
		timeout_ms = cl->timeout_ms;
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
	if (lease) {
		size_t n = strlen("Fence-Lease: ") + strlen(lease) + 1;
		char *h = malloc(n);
		if (!h)
			return -1;
		snprintf(h, n, "Fence-Lease: %s", lease);
		int e = add_header(r, h);
		/* the copy curl made is freed with the list; wipe ours */
		memset(h, 0, n);
		free(h);
		if (e < 0)
			return -1;
	}

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
	return 0;
}

void fg_req_finish(struct fg_req *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->headers);
	if (r->body) {
		/* a body may carry a lease */
		memset(r->body, 0, strlen(r->body));
		free(r->body);
	}
	free(r->url);
	free(r->resp);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
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
	fg_req_started(r);
	fg_req_complete(r, curl_easy_perform(r->easy));
}

int fg_req_run(struct fg_req *r, int sigfd)
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

static const char *error_code(const struct fg_req *r)
{
	json_t *e = r->json ? json_object_get(r->json, "error") : NULL;
	return json_is_string(e) ? json_string_value(e) : NULL;
}

enum fg_outcome fg_req_outcome(const struct fg_req *r)
{
	const char *code = error_code(r);

	switch (r->result) {
	case CURLE_OK:
		break;
	case CURLE_OUT_OF_MEMORY:
		return FG_NOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return FG_BAD_URL;
	default:
		return FG_UNAVAILABLE;
	}
	if (r->status >= 200 && r->status < 300)
		return FG_OK;
	if (r->status >= 500)
		return FG_UNAVAILABLE;
	if (r->status == 409 && code && strcmp(code, "lock_held") == 0)
		return FG_HELD;
	if (r->status == 410)
		return FG_LEASE_GONE;
	if (r->status == 429)
		return FG_QUEUE_FULL;
	if (r->status == 400 || r->status == 413 || r->status == 431)
		return FG_REFUSED;
	return FG_UNEXPECTED;
}

const char *fg_req_describe(const struct fg_req *r, char *buf, size_t len)
{
	if (r->result != CURLE_OK) {
		snprintf(buf, len, "%s", r->errbuf[0] ? r->errbuf :
			 curl_easy_strerror(r->result));
		return buf;
	}
	const char *code = error_code(r);
	json_t *m = r->json ? json_object_get(r->json, "message") : NULL;
	if (code && json_is_string(m))
		snprintf(buf, len, "%ld %s: %s", r->status, code,
			 json_string_value(m));
	else if (code)
		snprintf(buf, len, "%ld %s", r->status, code);
	else if (r->status >= 200 && r->status < 300)
		snprintf(buf, len, "%ld (not the answer expected)", r->status);
	else
		snprintf(buf, len, "HTTP %ld from %s (not a fencegate answer)",
			 r->status, r->url);
	return buf;
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
		return FG_EXIT_USAGE;
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
