/*
 * client_test.c - libfencegate-client against real gateways (the
 * environment of tests/clients/env.py: two open gateways on one Redis in
 * front of nginx WebDAV, a TLS gateway with an auth-file, an S3-mode
 * gateway on radosgw, a control endpoint that stalls or restarts Redis
 * and stops or starts a gateway).
 *
 * Prints `ok NAME` or `FAIL NAME: reason` per test and exits non-zero when
 * one failed; an unset FG_TEST_* variable fails the run (no test is ever
 * skipped; FG_TEST_ONLY, a list of names, runs only those). Waits are
 * bounded waits on a condition, with bounds generous enough for a loaded
 * machine.
 */
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "fencegate/client.h"

static const char *gateways, *gw0, *gw1, *store, *dead, *auth_gw, *ca, *key,
	*other_key, *client_cert, *client_key, *control;
static const char *s3_gw, *s3_key_id, *s3_secret, *s3_region, *s3_bucket,
	*s3_store, *s3_store_key_id, *s3_store_secret, *fencectl;
static char gw0_buf[256], gw1_buf[256];
static char reason[1024];
static unsigned counter;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		snprintf(reason, sizeof(reason), __VA_ARGS__); \
		goto fail; \
	} \
} while (0)

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0)
		;
}

/* A lock (and store path) no other test or run uses. */
static void unique(char *buf, size_t len, const char *dir)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, "%s/c-%ld-%u-%lx.txt", dir, (long)getpid(),
		 ++counter, (unsigned long)ts.tv_nsec);
}

/* ---- plain HTTP, for the store and the control ---------------------- */

struct buf {
	char *p;
	size_t n;
};

static size_t on_data(char *d, size_t s, size_t n, void *arg)
{
	struct buf *b = arg;
	char *p = realloc(b->p, b->n + s * n + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, d, s * n);
	b->p = p;
	b->n += s * n;
	p[b->n] = '\0';
	return s * n;
}

/* One request; the status (0: none) and the body into *out (freed by the
 * caller; may be NULL). hdr: one header line or NULL. */
static long http(const char *method, const char *url, const char *body,
		 const char *hdr, char **out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *l = NULL;
	struct buf b = { 0 };
	long status = 0;

	if (hdr)
		l = curl_slist_append(l, hdr);
	l = curl_slist_append(l, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	if (out)
		*out = b.p ? b.p : strdup("");
	else
		free(b.p);
	return status;
}

static long control_post(const char *what)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", control, what);
	return http("POST", url, "", NULL, NULL);
}

/* What the store holds at /name (NULL when not 200). */
static char *stored(const char *name)
{
	char url[512], *body;
	snprintf(url, sizeof(url), "%s/%s", store, name);
	if (http("GET", url, NULL, NULL, &body) != 200) {
		free(body);
		return NULL;
	}
	return body;
}

/* A PUT of body to gateway/name, stamped by c (or with `seq` as the
 * Fencing-Token when c is NULL). The status, or a negative client error
 * when the stamp was refused. */
static long fenced_put(struct fg_client *c, const char *gw, const char *name,
		       const char *body, const char *seq)
{
	CURL *h = curl_easy_init();
	struct curl_slist *l = curl_slist_append(NULL, "Expect:");
	char url[512], line[600];
	struct buf b = { 0 };
	long status = 0;

	snprintf(url, sizeof(url), "%s/%s", gw, name);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (c) {
		int e = fg_client_stamp(c, h, &l);
		if (e) {
			status = e;
			goto out;
		}
	} else {
		snprintf(line, sizeof(line), "Fencing-Token: %s", seq);
		l = curl_slist_append(l, line);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	}
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
out:
	free(b.p);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	return status;
}

static struct fg_client *client_of(const char *gws)
{
	struct fg_client_opts o = { .gateways = gws, .timeout_ms = 10000 };
	struct fg_client *c = NULL;

	if (fg_client_create(&o, &c) != 0)
		return NULL;
	return c;
}

/* Waits (at most ms) for the client's loss flag. */
static bool wait_lost(struct fg_client *c, uint64_t ms)
{
	uint64_t end = fg_client_now_ms() + ms;
	while (!fg_client_lease_lost(c) && fg_client_now_ms() < end)
		sleep_ms(10);
	return fg_client_lease_lost(c);
}

struct lost_rec {
	pthread_mutex_t mu;
	int calls;
	enum fg_client_loss why;
	bool flag_at_call;	/* the flag was set when the callback ran */
};

static void on_lost(struct fg_client *c, enum fg_client_loss why, void *arg)
{
	struct lost_rec *r = arg;
	pthread_mutex_lock(&r->mu);
	r->calls++;
	r->why = why;
	r->flag_at_call = fg_client_lease_lost(c);
	pthread_mutex_unlock(&r->mu);
}

/* ---- a fake gateway, for answers the real ones never give ---------- */

/*
 * A loopback listener on its own thread. close_at_once: every connection
 * is closed as soon as it is accepted (a handshake cut short). Else each
 * request is read whole and answered, then the connection closed: `post`
 * for a POST, `del` for a DELETE, 200 {} for anything else. It records
 * whether a DELETE came carrying `want_lease` as its Fence-Lease.
 */
struct fake {
	int fd;
	int port;
	pthread_t thr;
	bool close_at_once;
	const char *post, *del;
	const char *want_lease;
	pthread_mutex_t mu;
	int requests;
	bool deleted_with_lease;
};

/* One request's head and body (bounded); its length, or -1. */
static int read_request(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	char *end = NULL;

	while (n + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 10000) <= 0)
			return -1;
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = '\0';
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");
			size_t want = (size_t)(end + 4 - buf) +
				      (cl && cl < end ?
				       strtoul(cl + 17, NULL, 10) : 0);
			if (want >= cap)
				return -1;
			if (n >= want)
				return (int)n;
			end = buf + want - 4;	/* now: where it ends */
			continue;
		}
		if (end && n >= (size_t)(end + 4 - buf))
			return (int)n;
	}
	return -1;
}

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	char buf[16384], line[256], out[2048];

	for (;;) {
		int fd = accept(f->fd, NULL, NULL);
		if (fd < 0)
			return NULL;
		if (f->close_at_once || read_request(fd, buf, sizeof(buf)) < 0) {
			close(fd);
			continue;
		}
		const char *body = "{}", *status = "200 OK";
		const char *canned = strncmp(buf, "POST ", 5) == 0 ? f->post :
				     strncmp(buf, "DELETE ", 7) == 0 ? f->del :
				     NULL;
		if (canned) {
			/* "STATUS\nBODY" */
			const char *nl = strchr(canned, '\n');
			snprintf(line, sizeof(line), "%.*s",
				 (int)(nl - canned), canned);
			status = line;
			body = nl + 1;
		}
		pthread_mutex_lock(&f->mu);
		f->requests++;
		if (strncmp(buf, "DELETE ", 7) == 0 && f->want_lease) {
			char want[256];
			snprintf(want, sizeof(want), "\r\nFence-Lease: %s\r\n",
				 f->want_lease);
			if (strcasestr(buf, want))
				f->deleted_with_lease = true;
		}
		pthread_mutex_unlock(&f->mu);
		int n = snprintf(out, sizeof(out),
				 "HTTP/1.1 %s\r\nContent-Type: application/json"
				 "\r\nContent-Length: %zu\r\nConnection: close"
				 "\r\n\r\n%s", status, strlen(body), body);
		if (write(fd, out, (size_t)n) < 0) {
			/* the client went: nothing to do */
		}
		close(fd);
	}
}

static int fake_start(struct fake *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	pthread_mutex_init(&f->mu, NULL);
	if ((f->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	if (bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(f->fd, 16) < 0 ||
	    getsockname(f->fd, (struct sockaddr *)&sa, &len) < 0 ||
	    pthread_create(&f->thr, NULL, fake_run, f) != 0) {
		close(f->fd);
		f->fd = -1;
		return -1;
	}
	f->port = ntohs(sa.sin_port);
	return 0;
}

static void fake_stop(struct fake *f)
{
	if (f->fd < 0)
		return;
	shutdown(f->fd, SHUT_RDWR);	/* wakes accept() */
	pthread_join(f->thr, NULL);
	close(f->fd);
	f->fd = -1;
	pthread_mutex_destroy(&f->mu);
}

/* Waits (at most ms) for on_lost to have run: lease_lost() may turn true
 * (a passed end) before the thread that finds the loss has run it. */
static void wait_told(struct lost_rec *r, uint64_t ms)
{
	uint64_t end = fg_client_now_ms() + ms;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		int calls = r->calls;
		pthread_mutex_unlock(&r->mu);
		if (calls || fg_client_now_ms() >= end)
			return;
		sleep_ms(10);
	}
}

/* ---- the tests ----------------------------------------------------- */

static int test_paused_holder_is_fenced(void)
{
	struct fg_client *a = client_of(gateways), *b = client_of(gateways);
	struct lost_rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fg_client_acquire_opts oa = { .ttl_ms = 1000, .on_lost = on_lost,
					     .on_lost_arg = &rec };
	struct fg_client_acquire_opts ob = { .ttl_ms = 5000, .wait_ms = 10000 };
	char name[128], seq[512];
	char *got = NULL;
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(a && b, "no client");
	CHECK(fg_client_acquire(a, name, &oa) == 0, "acquire: %s",
	      fg_client_last_error(a)->message);
	snprintf(seq, sizeof(seq), "%s", fg_client_sequencer(a));
	CHECK(fenced_put(a, gw0, name, "from a", NULL) / 100 == 2,
	      "a's first write was not stored");
	/* a's process pauses (no tick runs) past its lease; b takes over */
	sleep_ms(1300);
	CHECK(fg_client_acquire(b, name, &ob) == 0, "b's acquire: %s",
	      fg_client_last_error(b)->message);
	CHECK(fenced_put(b, gw1, name, "from b", NULL) / 100 == 2,
	      "b's write was not stored");
	/* a resumes: its loop ticks first, and learns of the loss */
	CHECK(fg_client_tick(a, fg_client_now_ms()) == -1, "tick after loss");
	CHECK(fg_client_lease_lost(a), "a's loss flag is not set");
	CHECK(rec.calls == 1 && rec.why == FG_CLIENT_LOSS_EXPIRED &&
	      rec.flag_at_call, "callback: %d calls, why %d", rec.calls,
	      rec.why);
	long st = fenced_put(a, gw0, name, "late a", NULL);
	CHECK(st == FG_CLIENT_LEASE_LOST, "a's stamp was not refused (%ld)", st);
	/* a write sent anyway with a's old sequencer is refused */
	st = fenced_put(NULL, gw0, name, "late a", seq);
	CHECK(st == 409, "a's stale write got %ld, not 409", st);
	got = stored(name);
	CHECK(got && strcmp(got, "from b") == 0, "the store holds '%s'",
	      got ? got : "(nothing)");
	CHECK(fg_client_release(a, 0) == FG_CLIENT_LEASE_LOST,
	      "a's release did not report the loss");
	CHECK(fg_client_release(b, 0) == 0, "b's release");
	rc = 0;
fail:
	free(got);
	fg_client_destroy(a);
	fg_client_destroy(b);
	return rc;
}

static int test_acquire_timeout_is_not_acquired(void)
{
	struct fg_client *a = client_of(gateways), *b = client_of(gateways);
	struct fg_client_acquire_opts ob = { .wait_ms = 700 };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(a && b, "no client");
	CHECK(fg_client_acquire(a, name, NULL) == 0, "acquire");
	uint64_t t0 = fg_client_now_ms();
	int e = fg_client_acquire(b, name, &ob);
	uint64_t took = fg_client_now_ms() - t0;
	CHECK(e == FG_CLIENT_NOT_ACQUIRED, "b's acquire: %d (%s)", e,
	      fg_client_code(e));
	CHECK(took >= 600, "gave up after %llu ms", (unsigned long long)took);
	CHECK(!fg_client_holding(b) && fg_client_sequencer(b) == NULL,
	      "b holds something");
	CHECK(fg_client_acquire(b, name, NULL) == FG_CLIENT_NOT_ACQUIRED,
	      "a try-once acquire of a held lock");
	CHECK(fg_client_release(a, 0) == 0, "release");
	rc = 0;
fail:
	fg_client_destroy(a);
	fg_client_destroy(b);
	return rc;
}

static int test_renewal_fails_over(void)
{
	struct fg_client *c = client_of(gateways), *peek = client_of(gw1);
	struct fg_client_acquire_opts o = { .ttl_ms = 3000 };
	struct fg_client_state s = { 0 };
	char name[128];
	bool stopped = false;
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c && peek, "no client");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire: %s",
	      fg_client_last_error(c)->message);
	CHECK(fg_client_start_renewer(c) == 0, "renewer");
	CHECK(control_post("/gateway/0/stop") == 200, "stopping gateway 0");
	stopped = true;
	/* more than two leases, every renewal through the second gateway */
	sleep_ms(7000);
	CHECK(!fg_client_lease_lost(c), "the lease was lost");
	CHECK(fg_client_inspect(peek, name, &s) == 0, "inspect");
	CHECK(s.held && s.token == fg_client_token(c), "not held under our token");
	CHECK(fg_client_release(c, 0) == 0, "release: %s",
	      fg_client_last_error(c)->message);
	rc = 0;
fail:
	if (stopped && control_post("/gateway/0/start") != 200 && rc == 0) {
		snprintf(reason, sizeof(reason), "gateway 0 did not start");
		rc = -1;
	}
	fg_client_state_finish(&s);
	fg_client_destroy(c);
	fg_client_destroy(peek);
	return rc;
}

static int test_redis_stall_shorter_than_the_lease(void)
{
	struct fg_client *c = client_of(gateways);
	struct lost_rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fg_client_acquire_opts o = { .ttl_ms = 8000, .on_lost = on_lost,
					    .on_lost_arg = &rec };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c, "no client");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	CHECK(fg_client_start_renewer(c) == 0, "renewer");
	sleep_ms(2000);
	CHECK(control_post("/redis/stall?ms=3000") == 200, "stall");
	/* past the stall and a whole lease after the last renewal before it */
	sleep_ms(9000);
	CHECK(!fg_client_lease_lost(c) && rec.calls == 0, "the lease was lost");
	CHECK(fenced_put(c, gw0, name, "after the stall", NULL) / 100 == 2,
	      "a write after the stall was not stored");
	CHECK(fg_client_release(c, 0) == 0, "release: %s",
	      fg_client_last_error(c)->message);
	rc = 0;
fail:
	fg_client_destroy(c);
	return rc;
}

static int test_release_after_loss_reports_it(void)
{
	struct fg_client *c = client_of(gateways);
	struct fg_client_acquire_opts o = { .ttl_ms = 300 };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c, "no client");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	sleep_ms(700);	/* no tick: the lease runs out */
	int e = fg_client_release(c, 0);
	CHECK(e == FG_CLIENT_LEASE_LOST, "release: %d", e);
	CHECK(strcmp(fg_client_last_error(c)->code, "lease_lost") == 0,
	      "code %s", fg_client_last_error(c)->code);
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire again");
	CHECK(!fg_client_lease_lost(c), "the new lease starts lost");
	sleep_ms(700);
	CHECK(fg_client_release(c, FG_CLIENT_RELEASE_IGNORE_LOST) == 0,
	      "release asked not to report the loss");
	rc = 0;
fail:
	fg_client_destroy(c);
	return rc;
}

static int test_max_hold_ends_the_hold(void)
{
	struct fg_client *c = client_of(gateways), *peek = client_of(gateways);
	struct lost_rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fg_client_acquire_opts o = { .ttl_ms = 10000, .max_hold_ms = 800,
					    .on_lost = on_lost,
					    .on_lost_arg = &rec };
	struct fg_client_state s = { 0 };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c && peek, "no client");
	uint64_t t0 = fg_client_now_ms();
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	CHECK(fg_client_start_renewer(c) == 0, "renewer");
	CHECK(wait_lost(c, 8000), "the hold did not end");
	uint64_t took = fg_client_now_ms() - t0;
	wait_told(&rec, 5000);
	CHECK(took >= 750, "ended after %llu ms", (unsigned long long)took);
	pthread_mutex_lock(&rec.mu);
	int calls = rec.calls;
	enum fg_client_loss why = rec.why;
	pthread_mutex_unlock(&rec.mu);
	CHECK(calls == 1 && why == FG_CLIENT_LOSS_MAX_HOLD, "callback %d/%d",
	      calls, why);
	CHECK(fenced_put(c, gw0, name, "x", NULL) == FG_CLIENT_LEASE_LOST,
	      "stamped after the hold ended");
	/* given back: free long before its 10 s TTL */
	uint64_t end = fg_client_now_ms() + 5000;
	do {
		fg_client_state_finish(&s);
		CHECK(fg_client_inspect(peek, name, &s) == 0, "inspect");
	} while (s.held && fg_client_now_ms() < end && (sleep_ms(20), 1));
	CHECK(!s.held, "the lock is still held");
	CHECK(fg_client_release(c, 0) == FG_CLIENT_LEASE_LOST, "release");
	rc = 0;
fail:
	fg_client_state_finish(&s);
	fg_client_destroy(c);
	fg_client_destroy(peek);
	return rc;
}

/* The max_hold counts from the grant: a wait in the queue takes none of
 * it. */
static int test_max_hold_counts_from_the_grant(void)
{
	struct fg_client *a = client_of(gateways), *b = client_of(gateways);
	struct fg_client_acquire_opts oa = { .ttl_ms = 2000 };
	struct fg_client_acquire_opts ob = { .ttl_ms = 10000, .wait_ms = 15000,
					     .max_hold_ms = 1500 };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(a && b, "no client");
	/* a holds for 2 s (its lease runs out untouched), b waits for it */
	CHECK(fg_client_acquire(a, name, &oa) == 0, "a's acquire");
	uint64_t t0 = fg_client_now_ms();
	CHECK(fg_client_acquire(b, name, &ob) == 0, "b's acquire: %s",
	      fg_client_last_error(b)->message);
	uint64_t granted = fg_client_now_ms();
	CHECK(granted - t0 >= 1500, "b was granted after %llu ms, a's lease "
	      "still ran", (unsigned long long)(granted - t0));
	CHECK(!fg_client_lease_lost(b), "b's hold ended at its grant");
	CHECK(fg_client_start_renewer(b) == 0, "renewer");
	CHECK(wait_lost(b, 10000), "b's hold did not end");
	uint64_t held = fg_client_now_ms() - granted;
	CHECK(held >= 1300, "b's hold lasted %llu ms, not about 1500",
	      (unsigned long long)held);
	CHECK(fg_client_release(b, FG_CLIENT_RELEASE_IGNORE_LOST) == 0,
	      "b's release");
	rc = 0;
fail:
	fg_client_destroy(a);
	fg_client_destroy(b);
	return rc;
}

static int test_stamped_put_is_stored(void)
{
	struct fg_client *c = client_of(gateways);
	char name[128], url[512];
	CURL *h = curl_easy_init();
	struct curl_slist *l = NULL;
	char *got = NULL;
	long status = 0;
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c && h, "no client");
	CHECK(fg_client_stamp(c, h, &l) == FG_CLIENT_INVALID,
	      "stamped with no lease");
	CHECK(fg_client_acquire(c, name, NULL) == 0, "acquire");
	/* an old token in the list is replaced, other lines are kept */
	l = curl_slist_append(l, "fencing-token: fg1.old");
	l = curl_slist_append(l, "Content-Type: text/plain");
	l = curl_slist_append(l, "Expect:");
	CHECK(fg_client_stamp(c, h, &l) == 0, "stamp");
	int n = 0, ours = 0;
	for (struct curl_slist *p = l; p; p = p->next, n++)
		if (strncmp(p->data, "Fencing-Token: fg1.", 19) == 0 &&
		    strcmp(p->data + 15, fg_client_sequencer(c)) == 0)
			ours++;
	CHECK(n == 3 && ours == 1, "the list has %d lines, %d of ours", n, ours);
	CHECK(fg_client_stamp(c, h, &l) == 0, "stamp again");
	snprintf(url, sizeof(url), "%s/%s", gw0, name);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, "stamped body");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	CHECK(curl_easy_perform(h) == CURLE_OK, "PUT failed");
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	CHECK(status == 201 || status == 204, "PUT answered %ld", status);
	got = stored(name);
	CHECK(got && strcmp(got, "stamped body") == 0, "the store holds '%s'",
	      got ? got : "(nothing)");
	CHECK(fg_client_release(c, 0) == 0, "release");
	rc = 0;
fail:
	free(got);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	fg_client_destroy(c);
	return rc;
}

struct observer {
	struct fg_client *c;
	const char *name;
	uint64_t after;
	struct fg_client_state s;
	int err;
};

static void *observe(void *arg)
{
	struct observer *o = arg;
	o->err = fg_client_observe(o->c, o->name, o->after, 20000, &o->s);
	return NULL;
}

static int test_election(void)
{
	struct fg_client *a = client_of(gateways), *b = client_of(gateways);
	struct fg_client_state s = { 0 };
	struct observer ob = { 0 };
	char name[128];
	pthread_t t;
	bool started = false;
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(a && b, "no client");
	CHECK(fg_client_campaign(a, name, "http://a", NULL) == 0, "campaign");
	CHECK(fg_client_inspect(b, name, &s) == 0 && s.held && s.value &&
	      strcmp(s.value, "http://a") == 0, "the leader's value");
	fg_client_state_finish(&s);
	CHECK(fg_client_proclaim(a, "http://a2") == 0, "proclaim");
	CHECK(fg_client_inspect(b, name, &s) == 0 && s.value &&
	      strcmp(s.value, "http://a2") == 0, "the proclaimed value");
	fg_client_state_finish(&s);
	ob = (struct observer){ .c = b, .name = name,
				.after = fg_client_token(a) };
	CHECK(pthread_create(&t, NULL, observe, &ob) == 0, "thread");
	started = true;
	sleep_ms(300);
	CHECK(fg_client_resign(a) == 0, "resign");
	pthread_join(t, NULL);
	started = false;
	CHECK(ob.err == 0 && !ob.s.held, "the observer saw %d, held %d", ob.err,
	      ob.s.held);
	struct fg_client_acquire_opts wait = { .wait_ms = 5000 };
	CHECK(fg_client_campaign(b, name, "http://b", &wait) == 0,
	      "b's campaign");
	CHECK(fg_client_inspect(a, name, &s) == 0 && s.value &&
	      strcmp(s.value, "http://b") == 0, "b's value");
	CHECK(fg_client_resign(b) == 0, "b resigns");
	rc = 0;
fail:
	if (started)
		pthread_join(t, NULL);
	fg_client_state_finish(&ob.s);
	fg_client_state_finish(&s);
	fg_client_destroy(a);
	fg_client_destroy(b);
	return rc;
}

static int test_tls_key_and_client_cert(void)
{
	struct fg_client_opts ok = { .gateways = auth_gw, .key = key, .cacert = ca };
	struct fg_client_opts cert = { .gateways = auth_gw, .cacert = ca,
				       .cert = client_cert,
				       .cert_key = client_key };
	struct fg_client_opts other = { .gateways = auth_gw, .key = other_key,
					.cacert = ca };
	struct fg_client_opts noca = { .gateways = auth_gw, .key = key };
	struct fg_client_opts nokey = { .gateways = auth_gw, .cacert = ca };
	struct fg_client *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL, *c5 = NULL;
	char name[128];
	int rc = -1, e;

	unique(name, sizeof(name), "app");
	CHECK(fg_client_create(&ok, &c1) == 0 && fg_client_create(&cert, &c2) == 0 &&
	      fg_client_create(&other, &c3) == 0 &&
	      fg_client_create(&noca, &c4) == 0 &&
	      fg_client_create(&nokey, &c5) == 0, "no client");
	CHECK((e = fg_client_acquire(c1, name, NULL)) == 0, "key: %s",
	      fg_client_last_error(c1)->message);
	CHECK(fg_client_release(c1, 0) == 0, "key release");
	CHECK((e = fg_client_acquire(c2, name, NULL)) == 0, "cert: %s",
	      fg_client_last_error(c2)->message);
	CHECK(fg_client_release(c2, 0) == 0, "cert release");
	e = fg_client_acquire(c3, name, NULL);
	CHECK(e == FG_CLIENT_FORBIDDEN &&
	      fg_client_last_error(c3)->status == 403 &&
	      strcmp(fg_client_last_error(c3)->code, "forbidden") == 0,
	      "another principal's key: %d %s", e, fg_client_code(e));
	e = fg_client_acquire(c4, name, NULL);
	CHECK(e == FG_CLIENT_TLS, "no CA: %d %s", e, fg_client_code(e));
	e = fg_client_acquire(c5, name, NULL);
	CHECK(e == FG_CLIENT_UNAUTHENTICATED, "no key: %d %s", e,
	      fg_client_code(e));
	rc = 0;
fail:
	fg_client_destroy(c1);
	fg_client_destroy(c2);
	fg_client_destroy(c3);
	fg_client_destroy(c4);
	fg_client_destroy(c5);
	return rc;
}

/* A handshake cut short on one gateway is that gateway's failure: the next
 * one is asked; TLS is the call's error only when every gateway failed it. */
static int test_tls_failure_on_one_gateway_fails_over(void)
{
	struct fake f1 = { .fd = -1, .close_at_once = true };
	struct fake f2 = { .fd = -1, .close_at_once = true };
	struct fg_client *c = NULL, *d = NULL;
	char gws[512], both[256], name[128];
	int rc = -1, e;

	unique(name, sizeof(name), "app");
	CHECK(fake_start(&f1) == 0 && fake_start(&f2) == 0, "fake gateway");
	snprintf(gws, sizeof(gws), "https://127.0.0.1:%d,%s", f1.port, auth_gw);
	snprintf(both, sizeof(both), "https://127.0.0.1:%d,https://127.0.0.1:%d",
		 f1.port, f2.port);
	struct fg_client_opts o = { .gateways = gws, .key = key, .cacert = ca,
				    .timeout_ms = 10000 };
	struct fg_client_opts od = { .gateways = both, .key = key, .cacert = ca,
				     .timeout_ms = 10000 };
	CHECK(fg_client_create(&o, &c) == 0 && fg_client_create(&od, &d) == 0,
	      "no client");
	e = fg_client_acquire(c, name, NULL);
	CHECK(e == 0, "acquire past a failed handshake: %d %s (%s)", e,
	      fg_client_code(e), fg_client_last_error(c)->message);
	CHECK(fg_client_gateway_index(c) == 1, "granted by gateway %zu",
	      fg_client_gateway_index(c));
	CHECK(fg_client_release(c, 0) == 0, "release: %s",
	      fg_client_last_error(c)->message);
	e = fg_client_acquire(d, name, NULL);
	CHECK(e == FG_CLIENT_TLS && fg_client_last_error(d)->tried == 2,
	      "every handshake failed: %d %s, %zu tried", e, fg_client_code(e),
	      fg_client_last_error(d)->tried);
	rc = 0;
fail:
	fg_client_destroy(c);
	fg_client_destroy(d);
	fake_stop(&f1);
	fake_stop(&f2);
	return rc;
}

/* A 200 that holds a lease but is no grant: the lease is given back. */
static int test_a_bad_grant_is_given_back(void)
{
	struct fake f = { .fd = -1,
			  .post = "200 OK\n{\"lease\":\"fake-lease-1\","
				  "\"token\":7,\"ttl_ms\":5000}",
			  .del = "200 OK\n{}",
			  .want_lease = "fake-lease-1" };
	struct fg_client *c = NULL;
	char gw[64];
	int rc = -1, e;

	CHECK(fake_start(&f) == 0, "fake gateway");
	snprintf(gw, sizeof(gw), "http://127.0.0.1:%d", f.port);
	CHECK((c = client_of(gw)), "no client");
	e = fg_client_acquire(c, "app/x.txt", NULL);
	CHECK(e == FG_CLIENT_PROTOCOL, "a grant without a sequencer: %d %s", e,
	      fg_client_code(e));
	CHECK(!fg_client_holding(c), "the client holds it");
	pthread_mutex_lock(&f.mu);
	bool given = f.deleted_with_lease;
	pthread_mutex_unlock(&f.mu);
	CHECK(given, "the lease of the bad grant was not given back");
	rc = 0;
fail:
	fg_client_destroy(c);
	fake_stop(&f);
	return rc;
}

/* A full queue ends a wait as a lock not acquired, its code kept. */
static int test_a_full_queue_is_not_acquired(void)
{
	struct fake f = { .fd = -1,
			  .post = "429 Too Many Requests\n{\"error\":"
				  "\"too_many_waiters\",\"message\":\"full\"}" };
	struct fg_client_acquire_opts o = { .wait_ms = 600 };
	struct fg_client *c = NULL;
	char gw[64];
	int rc = -1, e;

	CHECK(fake_start(&f) == 0, "fake gateway");
	snprintf(gw, sizeof(gw), "http://127.0.0.1:%d", f.port);
	CHECK((c = client_of(gw)), "no client");
	e = fg_client_acquire(c, "app/x.txt", &o);
	CHECK(e == FG_CLIENT_NOT_ACQUIRED &&
	      strcmp(fg_client_last_error(c)->code, "too_many_waiters") == 0 &&
	      fg_client_last_error(c)->status == 429,
	      "a wait on a full queue: %d %s, code %s", e, fg_client_code(e),
	      fg_client_last_error(c)->code);
	CHECK(!fg_client_holding(c), "the client holds it");
	rc = 0;
fail:
	fg_client_destroy(c);
	fake_stop(&f);
	return rc;
}

static int test_typed_errors(void)
{
	struct fg_client *c = client_of(gateways), *d = client_of(dead);
	struct fg_client_list l = { 0 };
	char name[128];
	int rc = -1, e;

	unique(name, sizeof(name), "app");
	CHECK(c && d, "no client");
	e = fg_client_acquire(c, "a//b", NULL);
	CHECK(e == FG_CLIENT_BAD_LOCK_NAME &&
	      fg_client_last_error(c)->status == 400 &&
	      strcmp(fg_client_last_error(c)->code, "bad_lock_name") == 0 &&
	      fg_client_last_error(c)->message[0], "bad name: %d", e);
	CHECK(fg_client_release(c, 0) == FG_CLIENT_INVALID, "release of nothing");
	CHECK(fg_client_acquire(c, name, NULL) == 0, "acquire");
	CHECK(fg_client_acquire(c, name, NULL) == FG_CLIENT_INVALID,
	      "a second acquire on one client");
	e = fg_client_break(c, name, fg_client_token(c) - 1);
	CHECK(e == FG_CLIENT_STALE_TOKEN, "break with an old token: %d", e);
	CHECK(fg_client_ls(c, "app/", NULL, 1000, &l) == 0, "ls: %s",
	      fg_client_last_error(c)->message);
	bool listed = false;
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.locks[i].name, name) == 0 && l.locks[i].held &&
		    l.locks[i].token == fg_client_token(c))
			listed = true;
	CHECK(listed || l.cursor, "ls does not list the lock");
	CHECK(fg_client_break(c, name, fg_client_token(c)) == 0, "break");
	e = fg_client_release(c, 0);
	CHECK(e == FG_CLIENT_LEASE_LOST, "release after a break: %d", e);
	e = fg_client_acquire(d, name, NULL);
	CHECK(e == FG_CLIENT_UNAVAILABLE &&
	      fg_client_last_error(d)->status == 0, "no gateway: %d", e);
	CHECK(fg_client_err_of_code("stale_token") == FG_CLIENT_STALE_TOKEN &&
	      fg_client_err_of_code("token_required") ==
	      FG_CLIENT_TOKEN_REQUIRED &&
	      fg_client_err_of_code("nonsense") == FG_CLIENT_PROTOCOL &&
	      strcmp(fg_client_code(FG_CLIENT_WRONG_LOCK), "wrong_lock") == 0,
	      "the code table");
	/* an unfenced write, typed from its answer */
	char url[512], *body = NULL;
	snprintf(url, sizeof(url), "%s/%s", gw0, name);
	long st = http("PUT", url, "x", NULL, &body);
	bool typed = body && strstr(body, "\"token_required\"");
	free(body);
	CHECK(st == 428 && typed, "an unfenced write: %ld", st);
	rc = 0;
fail:
	fg_client_list_finish(&l);
	fg_client_destroy(c);
	fg_client_destroy(d);
	return rc;
}

static int test_tick_driven_without_a_thread(void)
{
	struct fg_client *c = client_of(gateways);
	struct fg_client_acquire_opts o = { .ttl_ms = 1200 };
	char name[128];
	int rc = -1, ticks = 0;

	unique(name, sizeof(name), "app");
	CHECK(c, "no client");
	CHECK(fg_client_tick(c, fg_client_now_ms()) == -1, "tick with nothing held");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	uint64_t end = fg_client_now_ms() + 4000;
	while (fg_client_now_ms() < end) {
		int64_t ms = fg_client_tick(c, fg_client_now_ms());
		CHECK(ms >= 0 && ms <= 1200, "tick said %lld ms", (long long)ms);
		ticks++;
		sleep_ms((uint64_t)ms);
	}
	/* three leases long, every renewal made by the ticks alone */
	CHECK(!fg_client_lease_lost(c), "the lease was lost");
	CHECK(ticks >= 5, "%d ticks", ticks);
	CHECK(fenced_put(c, gw1, name, "ticked", NULL) / 100 == 2,
	      "a write under the ticked lease");
	CHECK(fg_client_release(c, 0) == 0, "release: %s",
	      fg_client_last_error(c)->message);
	rc = 0;
fail:
	fg_client_destroy(c);
	return rc;
}

/* A loop that stalls past its lease's end, no tick running, is told by
 * fg_client_lease_lost() and refused by fg_client_check(). */
static int test_a_stalled_loop_sees_its_lease_lost(void)
{
	struct fg_client *c = client_of(gateways);
	struct fg_client_acquire_opts o = { .ttl_ms = 1000 };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c, "no client");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	uint64_t t0 = fg_client_now_ms();
	CHECK(!fg_client_lease_lost(c) && fg_client_check(c) == 0,
	      "lost at once");
	/* no tick from here on */
	CHECK(wait_lost(c, 5000), "lease_lost() is still false past the TTL");
	CHECK(fg_client_now_ms() - t0 >= 900, "lost after %llu ms of a 1 s "
	      "lease", (unsigned long long)(fg_client_now_ms() - t0));
	CHECK(fg_client_check(c) == FG_CLIENT_LEASE_LOST, "check");
	CHECK(fenced_put(c, gw0, name, "late", NULL) == FG_CLIENT_LEASE_LOST,
	      "stamped past the lease's end");
	CHECK(fg_client_release(c, 0) == FG_CLIENT_LEASE_LOST, "release");
	CHECK(!fg_client_holding(c) && fg_client_check(c) == FG_CLIENT_INVALID,
	      "held after the release");
	rc = 0;
fail:
	fg_client_destroy(c);
	return rc;
}

struct releaser {
	struct fg_client *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int deletes;		/* DELETE attempts made */
	bool unsure;		/* one got a 5xx or no answer */
	bool done;
	int result;
};

static void on_delete(void *arg, const struct fg_client_attempt *a)
{
	struct releaser *r = arg;
	if (strcmp(a->method, "DELETE") != 0)
		return;
	pthread_mutex_lock(&r->mu);
	r->deletes++;
	if (a->status == 0 || a->status >= 500)
		r->unsure = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void *release_thread(void *arg)
{
	struct releaser *r = arg;
	int e = fg_client_release(r->c, 0);
	pthread_mutex_lock(&r->mu);
	r->result = e;
	r->done = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/*
 * A release during a Redis stall longer than both gateways' Redis timeout
 * (2 s each) is asked again until the stall ends: the lock is free after it,
 * not held to its TTL. Meanwhile the client's other calls do not wait for
 * the release's network calls.
 */
static int test_release_outlasts_a_redis_stall(void)
{
	struct releaser r = { .mu = PTHREAD_MUTEX_INITIALIZER,
			      .cv = PTHREAD_COND_INITIALIZER };
	struct fg_client_opts co = { .gateways = gateways, .timeout_ms = 10000,
				     .on_attempt = on_delete,
				     .on_attempt_arg = &r };
	struct fg_client_acquire_opts o = { .ttl_ms = 20000 };
	struct fg_client *c = NULL, *peek = client_of(gateways);
	struct fg_client_state s = { 0 };
	bool started = false;
	pthread_t thr;
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(fg_client_create(&co, &c) == 0 && peek, "no client");
	r.c = c;
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	CHECK(control_post("/redis/stall?ms=6000") == 200, "stall");
	uint64_t t0 = fg_client_now_ms();
	CHECK(pthread_create(&thr, NULL, release_thread, &r) == 0, "thread");
	started = true;
	/* once an attempt failed, the release is between attempts or in one */
	pthread_mutex_lock(&r.mu);
	while (r.deletes == 0 && !r.done && fg_client_now_ms() - t0 < 20000) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&r.cv, &r.mu, &ts);
	}
	bool in_flight = r.deletes > 0 && !r.done;
	pthread_mutex_unlock(&r.mu);
	CHECK(in_flight, "the release ended with its first attempt (%d)",
	      r.result);
	bool held = fg_client_holding(c);
	uint64_t tok = fg_client_token(c);
	pthread_mutex_lock(&r.mu);
	in_flight = !r.done;
	pthread_mutex_unlock(&r.mu);
	CHECK(held && tok && in_flight, "holding() waited for the release");
	/* the release ends after the stall */
	pthread_mutex_lock(&r.mu);
	while (!r.done && fg_client_now_ms() - t0 < 30000) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&r.cv, &r.mu, &ts);
	}
	bool done = r.done, unsure = r.unsure;
	int result = r.result;
	pthread_mutex_unlock(&r.mu);
	CHECK(done, "the release did not end");
	/* an attempt answered 503 may have run once Redis woke (the gateway
	 * does not put a release back): the next one is then told 410, the
	 * lease is gone, which is reported as a loss */
	CHECK(result == 0 || (result == FG_CLIENT_LEASE_LOST && unsure),
	      "release: %d %s (%s)", result, fg_client_code(result),
	      fg_client_last_error(c)->message);
	CHECK(fg_client_inspect(peek, name, &s) == 0, "inspect: %s",
	      fg_client_last_error(peek)->message);
	CHECK(!s.held, "the lock is held after the release");
	rc = 0;
fail:
	if (started)
		pthread_join(thr, NULL);	/* the release is bounded */
	fg_client_state_finish(&s);
	fg_client_destroy(c);
	fg_client_destroy(peek);
	return rc;
}

struct told {
	int n;
	char why[256];
};

static void on_unreachable(struct fg_client *c, const char *why, void *arg)
{
	struct told *t = arg;
	(void)c;
	t->n++;
	snprintf(t->why, sizeof(t->why), "%s", why);
}

static int test_unreachable_gateways_bound_a_wait(void)
{
	char both[600];
	struct fg_client *d = client_of(dead), *f = NULL;
	struct told t = { 0 };
	struct fg_client_acquire_opts o = { .wait_ms = 60000,
					    .unreachable_ms = 1000,
					    .on_unreachable = on_unreachable,
					    .on_unreachable_arg = &t };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(d, "no client");
	uint64_t t0 = fg_client_now_ms();
	int e = fg_client_acquire(d, name, &o);
	uint64_t took = fg_client_now_ms() - t0;
	CHECK(e == FG_CLIENT_UNAVAILABLE, "acquire: %d", e);
	CHECK(took >= 900 && took < 6000, "gave up after %llu ms",
	      (unsigned long long)took);
	CHECK(t.n == 1 && t.why[0], "told %d times", t.n);
	/* a dead gateway first: the next is used, and remembered */
	snprintf(both, sizeof(both), "%s,%s", dead, gw0);
	CHECK((f = client_of(both)), "no client");
	CHECK(fg_client_acquire(f, name, NULL) == 0, "failover acquire: %s",
	      fg_client_last_error(f)->message);
	CHECK(fg_client_release(f, 0) == 0, "release");
	rc = 0;
fail:
	fg_client_destroy(d);
	fg_client_destroy(f);
	return rc;
}

static bool always(void *arg)
{
	(void)arg;
	return true;
}

static void *poke(void *arg)
{
	int *fd = arg;
	sleep_ms(300);
	ssize_t w = write(*fd, "x", 1);
	(void)w;
	return NULL;
}

static int test_reentry_and_a_cancelled_wait(void)
{
	struct fg_client *a = client_of(gateways), *b = client_of(gateways),
		*w = client_of(gateways);
	struct fg_client_state s = { 0 };
	char name[128];
	int p[2] = { -1, -1 }, rc = -1;
	pthread_t t;
	bool poking = false;

	unique(name, sizeof(name), "app");
	CHECK(a && b && w && pipe(p) == 0, "no client");
	CHECK(fg_client_acquire(a, name, NULL) == 0, "acquire");
	struct fg_client_acquire_opts re = { .lease = fg_client_lease(a) };
	CHECK(fg_client_acquire(b, name, &re) == 0, "re-entry: %s",
	      fg_client_last_error(b)->message);
	CHECK(fg_client_token(b) == fg_client_token(a), "re-entry's token");
	CHECK(fg_client_release(b, 0) == 0, "one hold given back");
	CHECK(fg_client_inspect(w, name, &s) == 0 && s.held, "not held");
	fg_client_state_finish(&s);
	/* a wait cut short by its cancel fd */
	struct fg_client_acquire_opts co = { .wait_ms = 20000, .cancel_fd = p[0],
					     .cancel = always };
	CHECK(pthread_create(&t, NULL, poke, &p[1]) == 0, "thread");
	poking = true;
	uint64_t t0 = fg_client_now_ms();
	int e = fg_client_acquire(w, name, &co);
	uint64_t took = fg_client_now_ms() - t0;
	pthread_join(t, NULL);
	poking = false;
	CHECK(e == FG_CLIENT_CANCELLED, "cancelled wait: %d", e);
	CHECK(took >= 250 && took < 5000, "cut after %llu ms",
	      (unsigned long long)took);
	/* its place in the queue goes with its connection */
	uint64_t end = fg_client_now_ms() + 5000;
	do {
		fg_client_state_finish(&s);
		CHECK(fg_client_inspect(b, name, &s) == 0, "inspect");
	} while (s.waiters && fg_client_now_ms() < end && (sleep_ms(20), 1));
	CHECK(s.waiters == 0, "the cancelled waiter is still queued");
	CHECK(fg_client_release(a, 0) == 0, "release");
	rc = 0;
fail:
	if (poking)
		pthread_join(t, NULL);
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	fg_client_state_finish(&s);
	fg_client_destroy(a);
	fg_client_destroy(b);
	fg_client_destroy(w);
	return rc;
}

/* ---- S3 mode ------------------------------------------------------- */

#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* A key of the S3 bucket no other test or run uses; its lock is
 * BUCKET/KEY. */
static void unique_key(char *key_out, size_t klen, char *lock, size_t llen)
{
	char k[128];
	unique(k, sizeof(k), "s3");
	snprintf(key_out, klen, "%s", k);
	snprintf(lock, llen, "%s/%s", s3_bucket, k);
}

/* An S3 request to base/BUCKET/key signed by libcurl's SigV4 with
 * key_id/secret, the session token `token` (NULL: none) and the payload
 * hash `hash` (NULL: UNSIGNED-PAYLOAD), without the client library (the
 * store's own reads, a stale token sent anyway). The status (0: none);
 * the body into *out when out is not NULL (caller frees). */
static long s3_raw(const char *method, const char *base, const char *k,
		   const char *body, const char *key_id, const char *secret,
		   const char *token, const char *hash, char **out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *l = NULL;
	char url[512], sig[128], up[256], line[9000];
	struct buf b = { 0 };
	long status = 0;

	snprintf(url, sizeof(url), "%s/%s/%s", base, s3_bucket, k);
	snprintf(sig, sizeof(sig), "aws:amz:%s:s3", s3_region);
	snprintf(up, sizeof(up), "%s:%s", key_id, secret);
	snprintf(line, sizeof(line), "x-amz-content-sha256: %s",
		 hash ? hash : "UNSIGNED-PAYLOAD");
	l = curl_slist_append(l, line);
	if (token) {
		snprintf(line, sizeof(line), "x-amz-security-token: %s", token);
		l = curl_slist_append(l, line);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sig);
	curl_easy_setopt(h, CURLOPT_USERPWD, up);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	if (out)
		*out = b.p ? b.p : strdup("");
	else
		free(b.p);
	return status;
}

/* What the store itself holds at BUCKET/k (NULL when not 200), read
 * with the store's own credentials. */
static char *s3_stored(const char *k)
{
	char *body = NULL;
	if (s3_raw("GET", s3_store, k, NULL, s3_store_key_id,
		   s3_store_secret, NULL, EMPTY_SHA256, &body) != 200) {
		free(body);
		return NULL;
	}
	return body;
}

/* A PutObject of body to BUCKET/k through the S3 gateway, prepared by
 * c (fg_client_s3_prepare(), payload hash `hash` or NULL) on a list
 * that starts as *extra (NULL: empty; the list ends there, for the
 * caller to look at and free). The status, or a negative client error
 * when the prepare refused; the answer's body into *out (may be NULL). */
static long s3_fenced_put(struct fg_client *c, const char *k,
			  const char *body, const char *hash,
			  struct curl_slist **extra, char **out)
{
	struct fg_client_s3 s3 = { .key_id = s3_key_id, .secret = s3_secret,
				   .region = s3_region,
				   .payload_sha256 = hash };
	CURL *h = curl_easy_init();
	struct curl_slist *own = NULL, **l = extra ? extra : &own;
	char url[512];
	struct buf b = { 0 };
	long status = 0;

	snprintf(url, sizeof(url), "%s/%s/%s", s3_gw, s3_bucket, k);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	int e = fg_client_s3_prepare(c, h, l, &s3);
	if (e) {
		status = e;
		goto out;
	}
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
out:
	if (out)
		*out = b.p ? b.p : strdup("");
	else
		free(b.p);
	curl_slist_free_all(own);
	curl_easy_cleanup(h);
	return status;
}

static int count_lines(const struct curl_slist *l, const char *prefix,
		       int *total)
{
	int n = 0;
	*total = 0;
	for (; l; l = l->next, (*total)++)
		if (strncmp(l->data, prefix, strlen(prefix)) == 0)
			n++;
	return n;
}

static int test_s3_put_with_the_session_token_is_stored(void)
{
	static const char body2[] =
		"put under the lock, through S3 mode, its hash signed";
	static const char hash2[] =
		"0fc54d04dea71828deba71dd85426c025207c5264dd8bd16ce49eef13f9bdaab";
	struct fg_client *c = client_of(s3_gw);
	struct curl_slist *l = NULL;
	char k[128], lock[256], token[FG_CLIENT_S3_SESSION_TOKEN_MAX];
	char line[FG_CLIENT_S3_SESSION_TOKEN_MAX + 64];
	char *got = NULL, *answer = NULL;
	int rc = -1, total;
	long st;

	unique_key(k, sizeof(k), lock, sizeof(lock));
	unsetenv("AWS_SESSION_TOKEN");
	CHECK(c, "no client");
	CHECK(fg_client_s3_session_token(c, token, sizeof(token)) ==
	      FG_CLIENT_INVALID && token[0] == '\0', "a token with no lease");
	CHECK(fg_client_acquire(c, lock, NULL) == 0, "acquire: %s",
	      fg_client_last_error(c)->message);
	CHECK(fg_client_s3_session_token(c, token, sizeof(token)) == 0 &&
	      strcmp(token, fg_client_sequencer(c)) == 0,
	      "the session token is not the sequencer");
	/* an earlier token is replaced, the caller's other lines are kept */
	l = curl_slist_append(l, "X-Amz-Security-Token: fg1.old");
	l = curl_slist_append(l, "Content-Type: text/plain");
	st = s3_fenced_put(c, k, "put under the lock, through S3 mode", NULL,
			   &l, &answer);
	CHECK(st == 200, "PutObject with the session token: %ld %s", st,
	      answer);
	snprintf(line, sizeof(line), "x-amz-security-token: %s", token);
	CHECK(count_lines(l, "x-amz-security-token: ", &total) == 1 &&
	      count_lines(l, line, &total) == 1 &&
	      count_lines(l, "X-Amz-Security-Token", &total) == 0 &&
	      count_lines(l, "Content-Type: text/plain", &total) == 1 &&
	      count_lines(l, "x-amz-content-sha256: UNSIGNED-PAYLOAD",
			  &total) == 1 && total == 3,
	      "the prepared list has %d lines", total);
	got = s3_stored(k);
	CHECK(got && strcmp(got, "put under the lock, through S3 mode") == 0,
	      "the store holds '%s'", got ? got : "(nothing)");
	free(got);
	got = NULL;
	/* the body's own hash, signed: the store checks it */
	free(answer);
	st = s3_fenced_put(c, k, body2, hash2, NULL, &answer);
	CHECK(st == 200, "PutObject with the payload hash: %ld %s", st, answer);
	got = s3_stored(k);
	CHECK(got && strcmp(got, body2) == 0, "the store holds '%s'",
	      got ? got : "(nothing)");
	/* the caller's own payload hash line is kept */
	free(answer);
	curl_slist_free_all(l);
	l = curl_slist_append(NULL, "X-Amz-Content-Sha256: "
			      "0fc54d04dea71828deba71dd85426c025207c5264dd8bd16ce49eef13f9bdaab");
	st = s3_fenced_put(c, k, body2, NULL, &l, &answer);
	CHECK(st == 200 && count_lines(l, "X-Amz-Content-Sha256: 0fc5",
				       &total) == 1 &&
	      count_lines(l, "x-amz-content-sha256", &total) == 0 && total == 2,
	      "PutObject with the caller's payload hash: %ld %s", st, answer);
	/* lines libcurl would sign but not send so are refused, untouched */
	free(answer);
	curl_slist_free_all(l);
	l = curl_slist_append(NULL, "Content-Type: text/plain");
	l = curl_slist_append(l, "Expect:");
	st = s3_fenced_put(c, k, "not sent", NULL, &l, &answer);
	CHECK(st == FG_CLIENT_INVALID &&
	      count_lines(l, "Expect:", &total) == 1 && total == 2,
	      "a list with Expect: was prepared: %ld", st);
	free(answer);
	curl_slist_free_all(l);
	l = curl_slist_append(NULL, "X-Empty;");
	st = s3_fenced_put(c, k, "not sent", NULL, &l, &answer);
	CHECK(st == FG_CLIENT_INVALID, "a list with X-Empty; was prepared: %ld",
	      st);
	/* a hash that is not the body's is refused by the store */
	free(answer);
	st = s3_fenced_put(c, k, "other bytes", hash2, NULL, &answer);
	CHECK(st / 100 == 4, "a wrong payload hash: %ld", st);
	/* the same PUT with no session token is not fenced: refused */
	free(answer);
	st = s3_raw("PUT", s3_gw, k, "no token", s3_key_id, s3_secret, NULL,
		    NULL, &answer);
	CHECK(st == 428 && strstr(answer, "<Code>FenceTokenRequired</Code>"),
	      "PutObject without a session token: %ld", st);
	free(got);
	got = s3_stored(k);
	CHECK(got && strcmp(got, body2) == 0, "the store holds '%s'",
	      got ? got : "(nothing)");
	CHECK(fg_client_release(c, 0) == 0, "release");
	rc = 0;
fail:
	free(got);
	free(answer);
	curl_slist_free_all(l);
	fg_client_destroy(c);
	return rc;
}

static int test_s3_stale_session_token_is_refused(void)
{
	struct fg_client *a = client_of(s3_gw), *b = client_of(s3_gw),
		*d = client_of(s3_gw);
	struct fg_client_acquire_opts wait = { .wait_ms = 10000 };
	struct fg_client_acquire_opts brief = { .ttl_ms = 300 };
	struct fg_client_s3 s3 = { .key_id = s3_key_id, .secret = s3_secret,
				   .region = s3_region };
	struct curl_slist *l = NULL;
	CURL *h = curl_easy_init();
	char k[128], lock[256], k2[128], lock2[256];
	char old[FG_CLIENT_S3_SESSION_TOKEN_MAX], t[FG_CLIENT_S3_SESSION_TOKEN_MAX];
	char *got = NULL, *answer = NULL;
	int rc = -1, e, total;
	long st;

	unique_key(k, sizeof(k), lock, sizeof(lock));
	unique_key(k2, sizeof(k2), lock2, sizeof(lock2));
	unsetenv("AWS_SESSION_TOKEN");
	CHECK(a && b && d && h, "no client");
	CHECK(fg_client_acquire(a, lock, NULL) == 0, "a's acquire: %s",
	      fg_client_last_error(a)->message);
	CHECK(fg_client_s3_session_token(a, old, sizeof(old)) == 0, "token");
	st = s3_fenced_put(a, k, "from a", NULL, NULL, &answer);
	CHECK(st == 200, "a's PutObject: %ld %s", st, answer);
	CHECK(fg_client_release(a, 0) == 0, "a's release");
	/* released: nothing to prepare from */
	e = fg_client_s3_prepare(a, h, &l, &s3);
	CHECK(e == FG_CLIENT_INVALID && l == NULL,
	      "prepared after the release: %d", e);
	CHECK(fg_client_acquire(b, lock, &wait) == 0, "b's acquire: %s",
	      fg_client_last_error(b)->message);
	free(answer);
	st = s3_fenced_put(b, k, "from b", NULL, NULL, &answer);
	CHECK(st == 200, "b's PutObject: %ld %s", st, answer);
	/* a's token sent anyway, signed as a real client would */
	free(answer);
	st = s3_raw("PUT", s3_gw, k, "late a", s3_key_id, s3_secret, old,
		    NULL, &answer);
	CHECK(st == 409 && strstr(answer, "<Code>FenceStaleToken</Code>"),
	      "a's stale PutObject: %ld %s", st, answer);
	got = s3_stored(k);
	CHECK(got && strcmp(got, "from b") == 0, "the store holds '%s'",
	      got ? got : "(nothing)");
	CHECK(fg_client_release(b, 0) == 0, "b's release");
	/* a lease whose end has passed (no tick ran) is lost: refused */
	CHECK(fg_client_acquire(d, lock2, &brief) == 0, "d's acquire");
	sleep_ms(700);
	l = curl_slist_append(NULL, "Content-Type: text/plain");
	e = fg_client_s3_prepare(d, h, &l, &s3);
	CHECK(e == FG_CLIENT_LEASE_LOST && fg_client_lease_lost(d),
	      "prepared from a lease past its end: %d", e);
	CHECK(count_lines(l, "Content-Type", &total) == 1 && total == 1,
	      "the list was changed");
	CHECK(fg_client_s3_session_token(d, t, sizeof(t)) ==
	      FG_CLIENT_LEASE_LOST && t[0] == '\0', "a token of a lost lease");
	st = s3_fenced_put(d, k2, "late d", NULL, NULL, NULL);
	CHECK(st == FG_CLIENT_LEASE_LOST, "d's PutObject: %ld", st);
	CHECK(fg_client_release(d, 0) == FG_CLIENT_LEASE_LOST, "d's release");
	rc = 0;
fail:
	free(got);
	free(answer);
	curl_slist_free_all(l);
	curl_easy_cleanup(h);
	fg_client_destroy(a);
	fg_client_destroy(b);
	fg_client_destroy(d);
	return rc;
}

/* Runs `fencectl lock LOCK --s3` on the S3 gateway with AWS_SESSION_TOKEN
 * `before` (NULL: unset) around a command that prints FENCE_SEQUENCER and
 * AWS_SESSION_TOKEN; 0 with both in seq/tok. */
static int fencectl_s3(const char *lock, const char *before, char *seq,
		       size_t seq_cap, char *tok, size_t tok_cap)
{
	char cmd[1024], out[2 * FG_CLIENT_S3_SESSION_TOKEN_MAX];
	size_t n = 0;
	FILE *p;

	if (before)
		setenv("AWS_SESSION_TOKEN", before, 1);
	else
		unsetenv("AWS_SESSION_TOKEN");
	snprintf(cmd, sizeof(cmd),
		 "'%s' lock '%s' --s3 --gateway '%s' -- sh -c "
		 "'printf \"%%s\\n%%s\" \"$FENCE_SEQUENCER\" "
		 "\"$AWS_SESSION_TOKEN\"'", fencectl, lock, s3_gw);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (n < sizeof(out) - 1) {
		size_t r = fread(out + n, 1, sizeof(out) - 1 - n, p);
		if (r == 0)
			break;
		n += r;
	}
	out[n] = '\0';
	if (pclose(p) != 0)
		return -1;
	char *nl = strchr(out, '\n');
	if (!nl)
		return -1;
	*nl = '\0';
	size_t ns = strlen(out), nt = strlen(nl + 1);
	if (ns >= seq_cap || nt >= tok_cap)
		return -1;
	memcpy(seq, out, ns + 1);
	memcpy(tok, nl + 1, nt + 1);
	return 0;
}

static int test_s3_session_token_matches_fencectl(void)
{
	static const char *befores[] = { NULL, "", "an-aws-session-token",
					 "fg1.YQ.x.1.bWFj",
					 "fg1.YQ.x.1.bWFj,fg1.Yg.y.2.bWFj" };
	static char seq[FG_CLIENT_S3_SESSION_TOKEN_MAX],
		tok[FG_CLIENT_S3_SESSION_TOKEN_MAX],
		mine[FG_CLIENT_S3_SESSION_TOKEN_MAX],
		want[2 * FG_CLIENT_S3_SESSION_TOKEN_MAX];
	struct fg_client *c = client_of(s3_gw);
	char k[128], lock[256], *big = NULL;
	int rc = -1;

	CHECK(c, "no client");
	for (size_t i = 0; i < sizeof(befores) / sizeof(befores[0]); i++) {
		const char *before = befores[i];
		unique_key(k, sizeof(k), lock, sizeof(lock));
		CHECK(fencectl_s3(lock, before, seq, sizeof(seq), tok,
				  sizeof(tok)) == 0 &&
		      strncmp(seq, "fg1.", 4) == 0,
		      "fencectl lock --s3 (before '%s') failed",
		      before ? before : "(unset)");
		CHECK(fg_client_s3_session_token_join(before, seq, mine,
						      sizeof(mine)) == 0 &&
		      strcmp(mine, tok) == 0,
		      "before '%s': the join differs from fencectl's",
		      before ? before : "(unset)");
		/* the library's own lease, in the same environment */
		unique_key(k, sizeof(k), lock, sizeof(lock));
		CHECK(fg_client_acquire(c, lock, NULL) == 0, "acquire");
		CHECK(fg_client_s3_session_token(c, mine, sizeof(mine)) == 0,
		      "token");
		if (before && strncmp(before, "fg1.", 4) == 0)
			snprintf(want, sizeof(want), "%s,%s", before,
				 fg_client_sequencer(c));
		else
			snprintf(want, sizeof(want), "%s",
				 fg_client_sequencer(c));
		CHECK(strcmp(mine, want) == 0,
		      "before '%s': the lease's token is not fencectl's rule",
		      before ? before : "(unset)");
		CHECK(fg_client_release(c, 0) == 0, "release");
	}
	unsetenv("AWS_SESSION_TOKEN");
	/* as fencectl bounds it: at most 8191 bytes, and never cut */
	CHECK((big = malloc(FG_CLIENT_S3_SESSION_TOKEN_MAX + 1)), "no memory");
	memset(big, 'a', FG_CLIENT_S3_SESSION_TOKEN_MAX);
	memcpy(big, "fg1.", 4);
	big[FG_CLIENT_S3_SESSION_TOKEN_MAX - 7] = '\0';	/* 8185 bytes */
	CHECK(fg_client_s3_session_token_join(big, "fg1.b", mine,
					      sizeof(mine)) == 0 &&
	      strlen(mine) == FG_CLIENT_S3_SESSION_TOKEN_MAX - 1,
	      "an 8191-byte token was refused");
	big[FG_CLIENT_S3_SESSION_TOKEN_MAX - 7] = 'a';	/* 8186 bytes */
	big[FG_CLIENT_S3_SESSION_TOKEN_MAX - 6] = '\0';
	CHECK(fg_client_s3_session_token_join(big, "fg1.b", mine,
					      sizeof(mine)) ==
	      FG_CLIENT_INVALID && mine[0] == '\0',
	      "an 8192-byte token was made");
	CHECK(fg_client_s3_session_token_join(NULL, "fg1.b", mine, 5) ==
	      FG_CLIENT_INVALID, "a token longer than its buffer was made");
	rc = 0;
fail:
	unsetenv("AWS_SESSION_TOKEN");
	free(big);
	fg_client_destroy(c);
	return rc;
}

/* Last: an empty Redis loses every lock. */
static int test_redis_restarted_empty_is_a_loss(void)
{
	struct fg_client *c = client_of(gateways);
	struct lost_rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct fg_client_acquire_opts o = { .ttl_ms = 3000, .on_lost = on_lost,
					    .on_lost_arg = &rec };
	char name[128];
	int rc = -1;

	unique(name, sizeof(name), "app");
	CHECK(c, "no client");
	CHECK(fg_client_acquire(c, name, &o) == 0, "acquire");
	CHECK(fg_client_start_renewer(c) == 0, "renewer");
	CHECK(control_post("/redis/restart") == 200, "restart");
	CHECK(wait_lost(c, 15000), "no loss");
	wait_told(&rec, 5000);
	pthread_mutex_lock(&rec.mu);
	int calls = rec.calls;
	bool flag = rec.flag_at_call;
	pthread_mutex_unlock(&rec.mu);
	CHECK(calls == 1 && flag, "callback: %d calls", calls);
	CHECK(fenced_put(c, gw0, name, "x", NULL) == FG_CLIENT_LEASE_LOST,
	      "stamped after the loss");
	CHECK(fg_client_release(c, 0) == FG_CLIENT_LEASE_LOST, "release");
	rc = 0;
fail:
	fg_client_destroy(c);
	return rc;
}

static const char *need(const char *var, int *missing)
{
	const char *v = getenv(var);
	if (!v || !*v) {
		printf("FAIL environment: %s is not set\n", var);
		(*missing)++;
	}
	return v;
}

int main(void)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} tests[] = {
		{ "paused_holder_is_fenced", test_paused_holder_is_fenced },
		{ "acquire_timeout_is_not_acquired",
		  test_acquire_timeout_is_not_acquired },
		{ "renewal_fails_over", test_renewal_fails_over },
		{ "redis_stall_shorter_than_the_lease",
		  test_redis_stall_shorter_than_the_lease },
		{ "release_after_loss_reports_it",
		  test_release_after_loss_reports_it },
		{ "max_hold_ends_the_hold", test_max_hold_ends_the_hold },
		{ "max_hold_counts_from_the_grant",
		  test_max_hold_counts_from_the_grant },
		{ "stamped_put_is_stored", test_stamped_put_is_stored },
		{ "election", test_election },
		{ "tls_key_and_client_cert", test_tls_key_and_client_cert },
		{ "tls_failure_on_one_gateway_fails_over",
		  test_tls_failure_on_one_gateway_fails_over },
		{ "a_bad_grant_is_given_back", test_a_bad_grant_is_given_back },
		{ "a_full_queue_is_not_acquired",
		  test_a_full_queue_is_not_acquired },
		{ "typed_errors", test_typed_errors },
		{ "tick_driven_without_a_thread",
		  test_tick_driven_without_a_thread },
		{ "a_stalled_loop_sees_its_lease_lost",
		  test_a_stalled_loop_sees_its_lease_lost },
		{ "release_outlasts_a_redis_stall",
		  test_release_outlasts_a_redis_stall },
		{ "unreachable_gateways_bound_a_wait",
		  test_unreachable_gateways_bound_a_wait },
		{ "reentry_and_a_cancelled_wait",
		  test_reentry_and_a_cancelled_wait },
		{ "s3_put_with_the_session_token_is_stored",
		  test_s3_put_with_the_session_token_is_stored },
		{ "s3_stale_session_token_is_refused",
		  test_s3_stale_session_token_is_refused },
		{ "s3_session_token_matches_fencectl",
		  test_s3_session_token_matches_fencectl },
		{ "redis_restarted_empty_is_a_loss",
		  test_redis_restarted_empty_is_a_loss },
	};
	const char *only = getenv("FG_TEST_ONLY");
	int missing = 0, failed = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	gateways = need("FG_TEST_GATEWAYS", &missing);
	store = need("FG_TEST_STORE", &missing);
	dead = need("FG_TEST_DEAD", &missing);
	auth_gw = need("FG_TEST_AUTH_GATEWAY", &missing);
	ca = need("FG_TEST_CA", &missing);
	key = need("FG_TEST_KEY", &missing);
	other_key = need("FG_TEST_OTHER_KEY", &missing);
	client_cert = need("FG_TEST_CLIENT_CERT", &missing);
	client_key = need("FG_TEST_CLIENT_KEY", &missing);
	control = need("FG_TEST_CONTROL", &missing);
	s3_gw = need("FG_TEST_S3_GATEWAY", &missing);
	s3_key_id = need("FG_TEST_S3_KEY_ID", &missing);
	s3_secret = need("FG_TEST_S3_SECRET", &missing);
	s3_region = need("FG_TEST_S3_REGION", &missing);
	s3_bucket = need("FG_TEST_S3_BUCKET", &missing);
	s3_store = need("FG_TEST_S3_STORE", &missing);
	s3_store_key_id = need("FG_TEST_S3_STORE_KEY_ID", &missing);
	s3_store_secret = need("FG_TEST_S3_STORE_SECRET", &missing);
	fencectl = need("FG_TEST_FENCECTL", &missing);
	if (missing)
		return 1;
	size_t n0 = strcspn(gateways, ",");
	if (!gateways[n0] || n0 >= sizeof(gw0_buf)) {
		printf("FAIL environment: FG_TEST_GATEWAYS names one gateway\n");
		return 1;
	}
	snprintf(gw0_buf, sizeof(gw0_buf), "%.*s", (int)n0, gateways);
	snprintf(gw1_buf, sizeof(gw1_buf), "%.*s",
		 (int)strcspn(gateways + n0 + 1, ","), gateways + n0 + 1);
	gw0 = gw0_buf;
	gw1 = gw1_buf;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (only && !strstr(only, tests[i].name))
			continue;
		reason[0] = '\0';
		ran++;
		if (tests[i].fn() == 0) {
			printf("ok %s\n", tests[i].name);
		} else {
			printf("FAIL %s: %s\n", tests[i].name, reason);
			failed++;
		}
	}
	curl_global_cleanup();
	if (!ran) {
		printf("FAIL selection: FG_TEST_ONLY names no test\n");
		return 1;
	}
	return failed ? 1 : 0;
}
