/*
 * fg_client_bench.c - cycles per second through libfencegate-client, and
 * the same loop on bare libcurl, single-threaded, against one gateway.
 *
 *   fg_client_bench --gateway URL --lock-prefix P --seconds S
 *                   --mode lock|put --impl client|raw
 *
 * lock: acquire + release of lock P/<n> (a new name per cycle); put: one
 * acquire of P/bench.txt, then fenced PUTs of a small body to /P/bench.txt
 * for S seconds. raw is the same loop by hand on one reused easy handle
 * (the JSON read with strstr: what the client adds is what is measured).
 * Prints cycles_per_s=N (and cycles=, seconds=) on stdout; exit 1 on a
 * failed cycle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fencegate/client.h"

struct buf {
	char d[8192];
	size_t n;
};

static size_t on_data(char *p, size_t s, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t len = s * n;
	if (b->n + len >= sizeof(b->d))
		return 0;
	memcpy(b->d + b->n, p, len);
	b->n += len;
	b->d[b->n] = '\0';
	return len;
}

/* "key":"value" of a flat JSON answer, into out. */
static int field(const char *json, const char *key, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *p = strstr(json, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	const char *e = strchr(p, '"');
	if (!e || (size_t)(e - p) >= len)
		return -1;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return 0;
}

static long raw_call(CURL *h, const char *method, const char *url,
		     const char *body, const char *hdr, struct buf *b)
{
	struct curl_slist *l = curl_slist_append(NULL, "Expect:");
	long status = 0;

	if (hdr)
		l = curl_slist_append(l, hdr);
	b->n = 0;
	b->d[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(l);
	return status;
}

static int usage(void)
{
	fprintf(stderr, "usage: fg_client_bench --gateway URL --lock-prefix P "
		"--seconds S --mode lock|put --impl client|raw\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *gw = NULL, *prefix = NULL, *mode = NULL, *impl = NULL;
	double seconds = 0;
	char url[1024], name[512], hdr[1100], lease[128], body[1024];
	struct buf b;
	unsigned long cycles = 0;
	int rc = 1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--gateway") == 0)
			gw = argv[i + 1];
		else if (strcmp(argv[i], "--lock-prefix") == 0)
			prefix = argv[i + 1];
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--mode") == 0)
			mode = argv[i + 1];
		else if (strcmp(argv[i], "--impl") == 0)
			impl = argv[i + 1];
		else
			return usage();
	}
	if (argc % 2 == 0 || !gw || !prefix || seconds <= 0 || !mode || !impl ||
	    (strcmp(mode, "lock") && strcmp(mode, "put")) ||
	    (strcmp(impl, "client") && strcmp(impl, "raw")))
		return usage();
	bool put = strcmp(mode, "put") == 0;
	bool raw = strcmp(impl, "raw") == 0;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct fg_client_opts o = { .gateways = gw };
	struct fg_client *c = NULL;
	CURL *h = curl_easy_init();
	if (!h || (!raw && fg_client_create(&o, &c) != 0)) {
		fprintf(stderr, "cannot make a client\n");
		goto out;
	}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	snprintf(name, sizeof(name), "%s/bench.txt", prefix);
	if (put) {
		/* one grant for the whole run */
		struct fg_client_acquire_opts ao = { .ttl_ms = 600000 };
		if (raw) {
			snprintf(url, sizeof(url), "%s/_fence/v1/locks/%s", gw, name);
			if (raw_call(h, "POST", url, "{\"ttl_ms\":600000}", NULL,
				     &b) != 200 ||
			    field(b.d, "lease", lease, sizeof(lease)) < 0 ||
			    field(b.d, "sequencer", body, sizeof(body)) < 0) {
				fprintf(stderr, "acquire failed: %s\n", b.d);
				goto out;
			}
			snprintf(hdr, sizeof(hdr), "Fencing-Token: %s", body);
		} else if (fg_client_acquire(c, name, &ao) != 0) {
			fprintf(stderr, "acquire failed: %s\n",
				fg_client_last_error(c)->message);
			goto out;
		}
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		double el = (double)(t.tv_sec - t0.tv_sec) +
			    (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		if (el >= seconds) {
			printf("cycles_per_s=%.0f\ncycles=%lu\nseconds=%.3f\n",
			       (double)cycles / el, cycles, el);
			rc = 0;
			break;
		}
		if (put) {
			snprintf(url, sizeof(url), "%s/%s", gw, name);
			long st;
			if (raw) {
				st = raw_call(h, "PUT", url, "bench body", hdr, &b);
			} else {
				struct curl_slist *l = curl_slist_append(NULL,
									 "Expect:");
				if (fg_client_stamp(c, h, &l) != 0) {
					curl_slist_free_all(l);
					fprintf(stderr, "the lease was lost\n");
					break;
				}
				b.n = 0;
				curl_easy_setopt(h, CURLOPT_URL, url);
				curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
				curl_easy_setopt(h, CURLOPT_POSTFIELDS, "bench body");
				curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 10L);
				curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
				curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
				st = 0;
				if (curl_easy_perform(h) == CURLE_OK)
					curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE,
							  &st);
				curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
				curl_slist_free_all(l);
				/* the loop has no thread: its tick renews */
				fg_client_tick(c, fg_client_now_ms());
			}
			if (st / 100 != 2) {
				fprintf(stderr, "PUT answered %ld\n", st);
				break;
			}
		} else {
			snprintf(name, sizeof(name), "%s/%lu", prefix, cycles);
			if (raw) {
				snprintf(url, sizeof(url), "%s/_fence/v1/locks/%s",
					 gw, name);
				if (raw_call(h, "POST", url, "{}", NULL, &b) != 200 ||
				    field(b.d, "lease", lease, sizeof(lease)) < 0) {
					fprintf(stderr, "acquire failed: %s\n", b.d);
					break;
				}
				snprintf(hdr, sizeof(hdr), "Fence-Lease: %s", lease);
				if (raw_call(h, "DELETE", url, NULL, hdr, &b) != 204) {
					fprintf(stderr, "release failed\n");
					break;
				}
			} else if (fg_client_acquire(c, name, NULL) != 0 ||
				   fg_client_release(c, 0) != 0) {
				fprintf(stderr, "cycle failed: %s\n",
					fg_client_last_error(c)->message);
				break;
			}
		}
		cycles++;
	}
	if (put && rc == 0) {
		if (raw) {
			snprintf(url, sizeof(url), "%s/_fence/v1/locks/%s", gw, name);
			snprintf(hdr, sizeof(hdr), "Fence-Lease: %s", lease);
			raw_call(h, "DELETE", url, NULL, hdr, &b);
		} else {
			fg_client_release(c, FG_CLIENT_RELEASE_IGNORE_LOST);
		}
	}
out:
	fg_client_destroy(c);
	if (h)
		curl_easy_cleanup(h);
	curl_global_cleanup();
	return rc;
}
