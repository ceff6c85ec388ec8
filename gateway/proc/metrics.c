/*
 * metrics.c - counters, histograms and gauges, and their rendering in
 * Prometheus' text exposition format (version 0.0.4).
 *
 * Invariants: the metrics are process-wide and live for the whole process;
 * every update is one or two relaxed atomic adds (no lock, no allocation),
 * so a loop never waits on another to count; a scrape reads each value
 * once and may see one request's counters half updated, never a torn
 * number. Label values come from fixed tables only.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/errors.h"
#include "base/procstat.h"
#include "proc/gateway.h"
#include "proc/metrics.h"

/* Histogram bounds, seconds: 100 µs to 30 s covers a Redis script on a
 * quiet box and a large upload alike. */
#define NB 17
static const double bounds[NB] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

struct hist {
	_Atomic uint64_t b[NB + 1];   /* per bucket, not cumulative; [NB]: +Inf */
	_Atomic uint64_t sum_ns;
};

/* A long poll (a blocking acquire, an observe) lasts up to the API's
 * 300 s bound on wait_ms: its buckets reach it. */
#define NWB 14
static const double wait_bounds[NWB] = {
	0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 240, 300,
};

struct whist {
	_Atomic uint64_t b[NWB + 1];
	_Atomic uint64_t sum_ns;
};

#define STATUS_MIN 100
#define STATUS_N 500                   /* 100..599 */
#define UP_CLASSES 6                   /* 1xx..5xx, and 0: no answer */

static struct {
	double start_time;
	_Atomic uint64_t requests[FG_EP_COUNT][STATUS_N + 1]; /* [STATUS_N]: none */
	struct hist request_seconds[FG_EP_COUNT];
	_Atomic uint64_t bytes_in, bytes_out;
	_Atomic uint64_t grants[2];        /* exclusive, shared */
	_Atomic uint64_t renewals, releases, expiries, expired;
	_Atomic uint64_t events_dropped;
	_Atomic uint64_t given_back[FG_GIVEBACK_COUNT];
	_Atomic uint64_t auth_refused[FG_AUTH_REFUSAL_COUNT];
	_Atomic uint64_t admitted[2];      /* read, write */
	_Atomic uint64_t refused[FG_E_COUNT];
	struct hist admission_seconds;
	_Atomic uint64_t upstream[UP_CLASSES];
	struct hist upstream_seconds;
	struct hist script_seconds[FG_SCRIPT_COUNT];
	_Atomic uint64_t script_errors[FG_SCRIPT_COUNT];
	_Atomic int64_t gauges[FG_GAUGE_COUNT];
	struct whist wait_seconds[2];      /* acquire, observe */
	_Atomic uint64_t event_readers_cut;
} m;

#define ADD(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)
#define GET(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void observe_in(const double *bs, int nb, _Atomic uint64_t *b,
		       _Atomic uint64_t *sum_ns, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;
	while (i < nb && s > bs[i])
		i++;
	ADD(b[i], 1);
	ADD(*sum_ns, ns);
}

static void observe(struct hist *h, uint64_t ns)
{
	observe_in(bounds, NB, h->b, &h->sum_ns, ns);
}

void fg_metrics_wait_done(bool observe_call, uint64_t ns)
{
	struct whist *h = &m.wait_seconds[observe_call];
	observe_in(wait_bounds, NWB, h->b, &h->sum_ns, ns);
}

void fg_metrics_init(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	m.start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void fg_metrics_request(enum fg_endpoint r, unsigned status, uint64_t ns,
			uint64_t bytes_in, uint64_t bytes_out)
{
	if ((unsigned)r >= FG_EP_COUNT)
		r = FG_EP_OTHER;
	unsigned i = status >= STATUS_MIN && status < STATUS_MIN + STATUS_N
			     ? status - STATUS_MIN : STATUS_N;
	ADD(m.requests[r][i], 1);
	observe(&m.request_seconds[r], ns);
	if (r == FG_EP_PROXY_READ || r == FG_EP_PROXY_WRITE) {
		ADD(m.bytes_in, bytes_in);
		ADD(m.bytes_out, bytes_out);
	}
}

void fg_metrics_grant(enum fg_mode mode)
{
	ADD(m.grants[mode == FG_MODE_SHARED], 1);
}

void fg_metrics_renewal(void) { ADD(m.renewals, 1); }
void fg_metrics_release(void) { ADD(m.releases, 1); }
void fg_metrics_expiry(void) { ADD(m.expiries, 1); }
void fg_metrics_lock_expired(unsigned n) { ADD(m.expired, n); }
void fg_metrics_events_dropped(uint64_t n) { ADD(m.events_dropped, n); }

void fg_metrics_fence(bool admitted, bool write, int refusal, uint64_t ns)
{
	if (admitted)
		ADD(m.admitted[write], 1);
	else if (refusal >= 0 && refusal < FG_E_COUNT)
		ADD(m.refused[refusal], 1);
	observe(&m.admission_seconds, ns);
}

void fg_metrics_upstream(int status, uint64_t ns)
{
	int c = status >= 100 && status < 600 ? status / 100 : 0;
	ADD(m.upstream[c], 1);
	observe(&m.upstream_seconds, ns);
}

void fg_metrics_script(void *arg, unsigned script, int err, uint64_t ns)
{
	(void)arg;
	if (script >= FG_SCRIPT_COUNT)
		return;
	if (err)
		ADD(m.script_errors[script], 1);
	else
		observe(&m.script_seconds[script], ns);
}

void fg_metrics_given_back(void *arg, unsigned reason, bool undone)
{
	(void)arg;
	(void)undone; /* a call met by its give-back first is made good too */
	if (reason < FG_GIVEBACK_COUNT)
		ADD(m.given_back[reason], 1);
}

void fg_metrics_auth_refused(enum fg_auth_refusal why)
{
	if ((unsigned)why < FG_AUTH_REFUSAL_COUNT)
		ADD(m.auth_refused[why], 1);
}

void fg_metrics_gauge_add(enum fg_gauge g, int delta)
{
	ADD(m.gauges[g], delta);
}

void fg_metrics_event_reader_cut(void)
{
	ADD(m.event_readers_cut, 1);
}

/* ---- rendering --------------------------------------------------------- */

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram series; `labels` is "" or `k="v"` pairs without braces. */
static void series_of(FILE *f, const char *name, const char *labels,
		      const double *bs, int nb, _Atomic uint64_t *b,
		      _Atomic uint64_t *sum_ns)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;
	for (int i = 0; i <= nb; i++) {
		cum += GET(b[i]);
		if (i < nb)
			fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
				bs[i], (unsigned long long)cum);
		else
			fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
				sep, (unsigned long long)cum);
	}
	const char *lb = labels[0] ? "{" : "", *rb = labels[0] ? "}" : "";
	fprintf(f, "%s_sum%s%s%s %.9f\n", name, lb, labels, rb,
		(double)GET(*sum_ns) / 1e9);
	fprintf(f, "%s_count%s%s%s %llu\n", name, lb, labels, rb,
		(unsigned long long)cum);
}

static void hist_series(FILE *f, const char *name, const char *labels,
			struct hist *h)
{
	series_of(f, name, labels, bounds, NB, h->b, &h->sum_ns);
}

static void counter(FILE *f, const char *name, const char *labels, uint64_t v)
{
	if (labels && labels[0])
		fprintf(f, "%s{%s} %llu\n", name, labels, (unsigned long long)v);
	else
		fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

static void render_requests(FILE *f)
{
	char lb[96];
	head(f, "fencegate_http_requests_total", "counter",
	     "Requests completed, by endpoint and status code (code 0: no answer was sent).");
	for (int r = 0; r < FG_EP_COUNT; r++)
		for (int i = 0; i <= STATUS_N; i++) {
			uint64_t v = GET(m.requests[r][i]);
			if (!v)
				continue;
			snprintf(lb, sizeof(lb), "endpoint=\"%s\",code=\"%d\"",
				 fg_endpoint_name((enum fg_endpoint)r),
				 i == STATUS_N ? 0 : i + STATUS_MIN);
			counter(f, "fencegate_http_requests_total", lb, v);
		}
	head(f, "fencegate_http_request_duration_seconds", "histogram",
	     "From the request line to the request's completion, by endpoint.");
	for (int r = 0; r < FG_EP_COUNT; r++) {
		snprintf(lb, sizeof(lb), "endpoint=\"%s\"", fg_endpoint_name((enum fg_endpoint)r));
		hist_series(f, "fencegate_http_request_duration_seconds", lb,
			    &m.request_seconds[r]);
	}
	head(f, "fencegate_proxy_received_bytes_total", "counter",
	     "Request body bytes read from clients of the proxy.");
	counter(f, "fencegate_proxy_received_bytes_total", NULL, GET(m.bytes_in));
	head(f, "fencegate_proxy_sent_bytes_total", "counter",
	     "Response body bytes the proxy sent or queued to clients.");
	counter(f, "fencegate_proxy_sent_bytes_total", NULL, GET(m.bytes_out));
}

static void render_locks(FILE *f)
{
	head(f, "fencegate_lock_grants_total", "counter",
	     "Lock grants answered by this gateway (new grants, joins and re-entries), by mode.");
	counter(f, "fencegate_lock_grants_total", "mode=\"exclusive\"", GET(m.grants[0]));
	counter(f, "fencegate_lock_grants_total", "mode=\"shared\"", GET(m.grants[1]));
	head(f, "fencegate_lock_renewals_total", "counter", "Leases renewed.");
	counter(f, "fencegate_lock_renewals_total", NULL, GET(m.renewals));
	head(f, "fencegate_lock_releases_total", "counter", "Holds released.");
	counter(f, "fencegate_lock_releases_total", NULL, GET(m.releases));
	head(f, "fencegate_lock_expiries_total", "counter",
	     "Renewals and releases answered lease_expired: the lease had run out.");
	counter(f, "fencegate_lock_expiries_total", NULL, GET(m.expiries));
	head(f, "fencegate_lock_lease_expired_total", "counter",
	     "Holders granted through this gateway whose lease ran out, counted "
	     "when the gateway asked Redis at the lease's end, whether or not "
	     "the client came back.");
	counter(f, "fencegate_lock_lease_expired_total", NULL, GET(m.expired));
	head(f, "fencegate_events_dropped_total", "counter",
	     "Events this gateway saw (expired, lease_lost, refused) that were "
	     "not recorded: a loop turn's buffer or a second's refusal folds "
	     "were full, or Redis did not take the append.");
	counter(f, "fencegate_events_dropped_total", NULL, GET(m.events_dropped));
	head(f, "fencegate_locks_held", "gauge",
	     "Holders granted through this gateway that it has not seen end "
	     "(released, broken, given back, or found expired at the lease's end).");
	fprintf(f, "fencegate_locks_held %lld\n", (long long)GET(m.gauges[FG_GAUGE_HELD]));
	char lb[64];
	head(f, "fencegate_lock_given_back_total", "counter",
	     "Give-backs Redis carried out for lock calls whose client never "
	     "received the grant: the answer was lost (timeout, connection, "
	     "replicas, error), the grant was for a waiter no longer known, or "
	     "its client left.");
	for (unsigned r = 0; r < FG_GIVEBACK_COUNT; r++) {
		snprintf(lb, sizeof(lb), "reason=\"%s\"", fg_giveback_reason_name(r));
		counter(f, "fencegate_lock_given_back_total", lb, GET(m.given_back[r]));
	}
}

static void render_auth(FILE *f)
{
	static const char *const why[FG_AUTH_REFUSAL_COUNT] = {
		[FG_AUTH_UNAUTHENTICATED] = "unauthenticated",
		[FG_AUTH_FORBIDDEN] = "forbidden",
		[FG_AUTH_THROTTLED] = "throttled",
	};
	char lb[64];
	head(f, "fencegate_auth_refused_total", "counter",
	     "Requests refused by the access step: no known key or "
	     "certificate (401), a right missing or another principal's "
	     "lease (403), or too many unknown keys from one address (429).");
	for (unsigned r = 0; r < FG_AUTH_REFUSAL_COUNT; r++) {
		snprintf(lb, sizeof(lb), "reason=\"%s\"", why[r]);
		counter(f, "fencegate_auth_refused_total", lb, GET(m.auth_refused[r]));
	}
}

static void render_fence(FILE *f)
{
	char lb[64];
	head(f, "fencegate_fence_admitted_total", "counter",
	     "Fenced requests whose sequencers checked and that went upstream, by kind.");
	counter(f, "fencegate_fence_admitted_total", "kind=\"write\"", GET(m.admitted[1]));
	counter(f, "fencegate_fence_admitted_total", "kind=\"read\"", GET(m.admitted[0]));
	head(f, "fencegate_fence_refused_total", "counter",
	     "Fenced requests refused before the upstream, by the refusal's error code.");
	static const enum fg_error reasons[] = {
		FG_E_TOKEN_REQUIRED, FG_E_MALFORMED_TOKEN, FG_E_FORGED_TOKEN,
		FG_E_WRONG_LOCK, FG_E_WRONG_MODE, FG_E_STALE_TOKEN,
	};
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		snprintf(lb, sizeof(lb), "reason=\"%s\"", fg_errors[reasons[i]].code);
		counter(f, "fencegate_fence_refused_total", lb, GET(m.refused[reasons[i]]));
	}
	head(f, "fencegate_fence_admission_duration_seconds", "histogram",
	     "From the first check of a fenced request to its admission or refusal, "
	     "waiting for older writes included.");
	hist_series(f, "fencegate_fence_admission_duration_seconds", "",
		    &m.admission_seconds);
}

static void render_upstream(FILE *f, struct fg_gateway *gw)
{
	static const char *const classes[UP_CLASSES] = {
		"none", "1xx", "2xx", "3xx", "4xx", "5xx",
	};
	char lb[64];
	head(f, "fencegate_upstream_responses_total", "counter",
	     "Upstream transfers that ended, by the upstream's status class "
	     "(none: it never answered).");
	for (int i = 0; i < UP_CLASSES; i++) {
		snprintf(lb, sizeof(lb), "class=\"%s\"", classes[i]);
		counter(f, "fencegate_upstream_responses_total", lb, GET(m.upstream[i]));
	}
	head(f, "fencegate_upstream_duration_seconds", "histogram",
	     "From handing a request to the upstream to the transfer's end.");
	hist_series(f, "fencegate_upstream_duration_seconds", "", &m.upstream_seconds);
	head(f, "fencegate_upstream_up", "gauge",
	     "1 when the last probe of the upstream answered (also 1 with no upstream).");
	fprintf(f, "fencegate_upstream_up %d\n",
		!gw->cfg->upstream || atomic_load(&gw->upstream_up) ? 1 : 0);
}

static void render_redis(FILE *f, struct fg_gateway *gw)
{
	char lb[64];
	head(f, "fencegate_redis_script_duration_seconds", "histogram",
	     "Lock script calls that Redis answered, from send to answer, by script.");
	for (unsigned s = 0; s < FG_SCRIPT_COUNT; s++) {
		snprintf(lb, sizeof(lb), "script=\"%s\"", fg_script_name(s));
		hist_series(f, "fencegate_redis_script_duration_seconds", lb,
			    &m.script_seconds[s]);
	}
	head(f, "fencegate_redis_script_errors_total", "counter",
	     "Lock script calls that failed (Redis unreachable, timed out, refused), by script.");
	for (unsigned s = 0; s < FG_SCRIPT_COUNT; s++) {
		snprintf(lb, sizeof(lb), "script=\"%s\"", fg_script_name(s));
		counter(f, "fencegate_redis_script_errors_total", lb, GET(m.script_errors[s]));
	}
	head(f, "fencegate_redis_up", "gauge",
	     "1 when the last probe of Redis answered and the signing key is known.");
	fprintf(f, "fencegate_redis_up %d\n", atomic_load(&gw->redis_up) ? 1 : 0);
}

static void render_gauges(FILE *f)
{
	head(f, "fencegate_waiters", "gauge",
	     "Requests parked in a wait, by kind (acquire, observe, admit: a write "
	     "waiting for older writes).");
	fprintf(f, "fencegate_waiters{kind=\"acquire\"} %lld\n",
		(long long)GET(m.gauges[FG_GAUGE_WAIT_ACQUIRE]));
	fprintf(f, "fencegate_waiters{kind=\"observe\"} %lld\n",
		(long long)GET(m.gauges[FG_GAUGE_WAIT_OBSERVE]));
	fprintf(f, "fencegate_waiters{kind=\"admit\"} %lld\n",
		(long long)GET(m.gauges[FG_GAUGE_WAIT_ADMIT]));
	head(f, "fencegate_lock_wait_duration_seconds", "histogram",
	     "Long polls of the lock API, from the start of the wait to its end "
	     "(granted, changed, timed out or the client gone), by kind.");
	static const char *const kinds[2] = { "acquire", "observe" };
	for (int k = 0; k < 2; k++) {
		char lb[32];
		snprintf(lb, sizeof(lb), "kind=\"%s\"", kinds[k]);
		series_of(f, "fencegate_lock_wait_duration_seconds", lb, wait_bounds,
			  NWB, m.wait_seconds[k].b, &m.wait_seconds[k].sum_ns);
	}
	head(f, "fencegate_upstream_transfers", "gauge",
	     "Upstream transfers in flight.");
	fprintf(f, "fencegate_upstream_transfers %lld\n",
		(long long)GET(m.gauges[FG_GAUGE_TRANSFERS]));
	head(f, "fencegate_event_readers", "gauge",
	     "Readers of /_fence/v1/events now: streams, and long polls being "
	     "answered or waiting.");
	fprintf(f, "fencegate_event_readers %lld\n",
		(long long)GET(m.gauges[FG_GAUGE_EVENT_READERS]));
	head(f, "fencegate_event_readers_cut_total", "counter",
	     "Event streams cut off because their unsent bytes passed 256 KiB "
	     "(a client that does not read).");
	fprintf(f, "fencegate_event_readers_cut_total %llu\n",
		(unsigned long long)GET(m.event_readers_cut));
}

/* The standard process collector's families, as client_golang names
 * them on Linux; a figure /proc did not give is left out. */
static void render_process(FILE *f)
{
	struct fg_procstat ps = { .open_fds = -1, .max_fds = -1 };
	if (fg_procstat_read(&ps))
		return;
	head(f, "process_cpu_seconds_total", "counter",
	     "Total user and system CPU time spent in seconds.");
	fprintf(f, "process_cpu_seconds_total %.2f\n", ps.cpu_seconds);
	if (ps.open_fds >= 0) {
		head(f, "process_open_fds", "gauge", "Number of open file descriptors.");
		fprintf(f, "process_open_fds %lld\n", (long long)ps.open_fds);
	}
	if (ps.max_fds >= 0) {
		head(f, "process_max_fds", "gauge",
		     "Maximum number of open file descriptors.");
		fprintf(f, "process_max_fds %lld\n", (long long)ps.max_fds);
	}
	head(f, "process_virtual_memory_bytes", "gauge",
	     "Virtual memory size in bytes.");
	fprintf(f, "process_virtual_memory_bytes %llu\n",
		(unsigned long long)ps.virtual_bytes);
	head(f, "process_resident_memory_bytes", "gauge",
	     "Resident memory size in bytes.");
	fprintf(f, "process_resident_memory_bytes %llu\n",
		(unsigned long long)ps.resident_bytes);
	if (ps.start_time > 0) {
		head(f, "process_start_time_seconds", "gauge",
		     "Start time of the process since unix epoch in seconds.");
		fprintf(f, "process_start_time_seconds %.2f\n", ps.start_time);
	}
}

char *fg_metrics_render(struct fg_gateway *gw, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	head(f, "fencegate_build_info", "gauge", "The running version (always 1).");
	fprintf(f, "fencegate_build_info{version=\"%s\"} 1\n", FG_VERSION);
	head(f, "fencegate_start_time_seconds", "gauge",
	     "When the process started, seconds since the Unix epoch.");
	fprintf(f, "fencegate_start_time_seconds %.3f\n", m.start_time);
	head(f, "fencegate_event_loops", "gauge", "Event loops serving requests.");
	fprintf(f, "fencegate_event_loops %u\n", gw->nloops);
	render_requests(f);
	render_locks(f);
	render_auth(f);
	render_fence(f);
	render_upstream(f, gw);
	render_redis(f, gw);
	render_gauges(f);
	render_process(f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}
