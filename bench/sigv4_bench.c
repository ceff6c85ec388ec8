/*
 * sigv4_bench - the gateway's CPU per S3 request for SigV4: one
 * fg_sigv4_verify() of a client's PutObject head plus one fg_sigv4_sign()
 * of the request the upstream gets, with a warm signing-key cache (the
 * steady state: a key's four HMACs run once a day). Prints microseconds
 * per verify+sign; the target is at most 10.
 *
 * Built with the unit tests (meson builds build/tests/unit/sigv4_bench):
 *   ninja -C build && build/tests/unit/sigv4_bench [ITERATIONS]
 * or alone, from the top of the tree:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Igateway -Iinclude bench/sigv4_bench.c \
 *      gateway/base/sigv4.c -lcrypto -o sigv4_bench
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sigv4.h"

#define CLIENT_ID "FGAKIDEXAMPLE0000001"
#define CLIENT_SECRET "r8Kq0mZ3v/8Xw2Lr1bq7cYt9sPz+4NfA6hJdEeUo"
#define BODY_SHA "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
#define TOKEN "fg1.eyJsIjoiYnVja2V0L3NvbWUvZGlyL29iamVjdC1rZXkuYmluIiwidCI6NDIsImciOiJndzEifQ.q0mZ3v8Xw2Lr1bq7cYt9sPz4NfA6hJdEeUoZ9"
#define NOW 1764640000 /* any time; the request is signed for it */

#define H(n, v) { n, sizeof(n) - 1, v, sizeof(v) - 1 }

static const void *lookup(void *arg, const char *key_id, const char **secret,
			  size_t *secret_len)
{
	(void)arg;
	if (strcmp(key_id, CLIENT_ID) != 0)
		return NULL;
	*secret = CLIENT_SECRET;
	*secret_len = sizeof(CLIENT_SECRET) - 1;
	return CLIENT_ID;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000;
	struct fg_sigv4_cache *cache = fg_sigv4_cache_create();
	struct fg_sigv4_auth *auth = malloc(sizeof(*auth));
	if (!cache || !auth || iters <= 0)
		return 1;
	char amz[17];
	fg_sigv4_amz_date(NOW, amz);

	/* The client's request, signed as an SDK would sign it. */
	static const char path[] = "/bucket/some/dir/object-key.bin";
	struct fg_sigv4_header ch[12] = {
		H("Host", "gateway.example:8080"),
		H("User-Agent", "aws-cli/2.9.19 Python/3.11.2 Linux/6.1.0 source/x86_64.debian.12"),
		H("Content-Length", "1048576"),
		H("Content-Type", "application/octet-stream"),
		H("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="),
		H("Expect", "100-continue"),
		H("x-amz-content-sha256", BODY_SHA),
		{ "X-Amz-Date", 10, amz, 16 },
		H("X-Amz-Security-Token", TOKEN),
	};
	size_t nch = 9;
	struct fg_sigv4_header to_sign[8];
	size_t ns = 0;
	for (size_t i = 0; i < nch; i++)
		if (i != 1 && i != 5) /* botocore signs neither */
			to_sign[ns++] = ch[i];
	struct fg_sigv4_creds client = { CLIENT_ID, CLIENT_SECRET, "us-east-1", "s3" };
	char client_auth[FG_SIGV4_AUTH_VALUE_MAX];
	if (fg_sigv4_sign("PUT", path, sizeof(path) - 1, "", 0, to_sign, ns, BODY_SHA, amz,
			  &client, cache, client_auth, sizeof(client_auth), NULL))
		return 1;
	ch[nch++] = (struct fg_sigv4_header){ "Authorization", 13, client_auth,
					      strlen(client_auth) };
	struct fg_sigv4_request req = {
		.method = "PUT", .path = path, .path_len = sizeof(path) - 1,
		.query = "", .query_len = 0, .headers = ch, .nheaders = nch,
	};

	/* What the upstream gets: the signed headers less the token, its Host. */
	struct fg_sigv4_header uh[] = {
		H("Host", "127.0.0.1:7480"),
		H("Content-Length", "1048576"),
		H("Content-Type", "application/octet-stream"),
		H("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="),
		H("x-amz-content-sha256", BODY_SHA),
		{ "x-amz-date", 10, amz, 16 },
	};
	struct fg_sigv4_creds upstream = { "RGWUPSTREAMKEY000001",
					   "Q9wE8rT7yU6iO5pA4sD3fG2hJ1kL0zXcVbNm+/Aa",
					   "us-east-1", "s3" };
	char up_auth[FG_SIGV4_AUTH_VALUE_MAX], seed[65], canon[FG_SIGV4_PATH_MAX * 3 + 1];

	double best = 1e30;
	for (int round = 0; round < 5; round++) {
		double t0 = now_us();
		for (long i = 0; i < iters; i++) {
			if (fg_sigv4_verify(&req, NOW, "us-east-1", lookup, NULL, cache, auth) !=
			    FG_SIGV4_OK)
				return 2;
			long cl = fg_sigv4_canonical_path(req.path, req.path_len, canon, sizeof(canon));
			if (cl < 0 || fg_sigv4_sign("PUT", canon, (size_t)cl, "", 0, uh,
						    sizeof(uh) / sizeof(uh[0]), auth->payload_hash,
						    auth->amz_date, &upstream, cache, up_auth,
						    sizeof(up_auth), seed))
				return 3;
		}
		double us = (now_us() - t0) / (double)iters;
		if (us < best)
			best = us;
	}
	printf("sigv4 verify+sign, PutObject head, warm key cache: %.2f us per request "
	       "(best of 5 x %ld)\n", best, iters);
	fg_sigv4_cache_destroy(cache);
	free(auth);
	return 0;
}
