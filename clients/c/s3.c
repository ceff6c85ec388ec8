/*
 * s3.c - the lease's sequencer as an S3 session token, and a caller's
 * libcurl handle made ready for a fenced S3 request (see
 * fencegate/client.h, docs/s3.md).
 *
 * Invariant: the session token is built by the one rule `fencectl lock
 * --s3` uses for AWS_SESSION_TOKEN (fencectl/cmd_run.c), so that a
 * program and a command run by fencectl fence the same way; and a
 * handle is only ever prepared from a lease that is not lost, with
 * exactly one x-amz-security-token line in its list. Token and secret
 * copies are wiped before they are freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "call.h"

#define SEQUENCER_PREFIX "fg1."
#define TOKEN_HEADER "x-amz-security-token"
#define PAYLOAD_HEADER "x-amz-content-sha256"
#define UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SIGV4_PART_MAX 64	/* libcurl's bound on each part of AWS_SIGV4 */

int fg_client_s3_session_token_join(const char *existing,
				    const char *sequencer, char *buf,
				    size_t cap)
{
	int n;

	if (!buf || cap == 0)
		return FG_CLIENT_INVALID;
	buf[0] = '\0';
	if (!sequencer || !*sequencer)
		return FG_CLIENT_INVALID;
	if (existing && strncmp(existing, SEQUENCER_PREFIX,
				strlen(SEQUENCER_PREFIX)) == 0)
		n = snprintf(buf, cap, "%s,%s", existing, sequencer);
	else
		n = snprintf(buf, cap, "%s", sequencer);
	if (n < 0 || (size_t)n >= cap ||
	    (size_t)n >= FG_CLIENT_S3_SESSION_TOKEN_MAX) {
		fg__wipe(buf, cap);
		buf[0] = '\0';
		return FG_CLIENT_INVALID;
	}
	return FG_CLIENT_OK;
}

int fg_client_s3_session_token(struct fg_client *c, char *buf, size_t cap)
{
	char *seq;
	int err;

	if (!buf || cap == 0)
		return FG_CLIENT_INVALID;
	buf[0] = '\0';
	if ((err = fg__lease_sequencer(c, "", &seq)) != 0)
		return err;
	err = fg_client_s3_session_token_join(getenv("AWS_SESSION_TOKEN"),
					      seq, buf, cap);
	fg__wipe(seq, strlen(seq));
	free(seq);
	return err;
}

/* Whether line is a header line of name (any case): the name, then the
 * colon (or the ';' of an empty one), blanks allowed before it. */
static bool is_header(const char *line, const char *name)
{
	size_t n = strlen(name);

	if (strncasecmp(line, name, n) != 0)
		return false;
	line += n;
	while (*line == ' ' || *line == '\t')
		line++;
	return *line == ':' || *line == ';';
}

/* Whether libcurl 7.88 sends line as it signs it: "Name: value". It signs
 * every line of the list as it stands, so a "Name:" that removes one of
 * its own headers (such as "Expect:") or a "Name;" that sends an empty one
 * is signed but not sent that way, and the gateway answers 403
 * SignatureDoesNotMatch: refused here instead, where the caller can tell. */
static bool sent_as_signed(const char *line)
{
	const char *v = strchr(line, ':');

	if (!v || v == line)
		return false;
	for (v++; *v == ' ' || *v == '\t'; v++)
		;
	return *v != '\0';
}

static bool is_hash(const char *s)
{
	if (strcmp(s, UNSIGNED_PAYLOAD) == 0)
		return true;
	if (strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* A region libcurl takes as one part of "aws:amz:REGION:s3". */
static bool is_region(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SIGV4_PART_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

static struct curl_slist *append(struct curl_slist **l, const char *line)
{
	struct curl_slist *q = curl_slist_append(*l, line);

	if (q)
		*l = q;
	return q;
}

/* Wipes and frees every line of l (they may hold the session token). */
static void free_list(struct curl_slist *l)
{
	for (struct curl_slist *p = l; p; p = p->next)
		fg__wipe(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

static void free_secret(char *s, size_t n)
{
	if (s) {
		fg__wipe(s, n);
		free(s);
	}
}

int fg_client_s3_prepare(struct fg_client *c, CURL *h,
			 struct curl_slist **headers,
			 const struct fg_client_s3 *s3)
{
	char token[FG_CLIENT_S3_SESSION_TOKEN_MAX];
	char *line = NULL, *userpwd = NULL, sigv4[SIGV4_PART_MAX + 16];
	char payload[sizeof(PAYLOAD_HEADER) + 80];
	size_t line_n = 0, userpwd_n = 0;
	struct curl_slist *l = NULL;
	bool kept_payload = false;
	int err;

	if (!h || !headers || !s3 || !s3->key_id || !*s3->key_id ||
	    strchr(s3->key_id, ':') || !s3->secret || !*s3->secret ||
	    !s3->region || !is_region(s3->region) ||
	    (s3->payload_sha256 && !is_hash(s3->payload_sha256)))
		return FG_CLIENT_INVALID;
	if ((err = fg_client_s3_session_token(c, token, sizeof(token))) != 0)
		return err;

	err = FG_CLIENT_NOMEM;
	line_n = sizeof(TOKEN_HEADER ": ") + strlen(token);
	if (!(line = malloc(line_n)))
		goto out;
	snprintf(line, line_n, TOKEN_HEADER ": %s", token);
	userpwd_n = strlen(s3->key_id) + 1 + strlen(s3->secret) + 1;
	if (!(userpwd = malloc(userpwd_n)))
		goto out;
	snprintf(userpwd, userpwd_n, "%s:%s", s3->key_id, s3->secret);
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s3->region);

	/* a new list: the caller's lines but an earlier session token (and
	 * an earlier payload hash when one is given), then ours */
	for (struct curl_slist *p = *headers; p; p = p->next) {
		if (is_header(p->data, TOKEN_HEADER))
			continue;
		if (!sent_as_signed(p->data)) {
			err = FG_CLIENT_INVALID;
			goto out;
		}
		if (is_header(p->data, PAYLOAD_HEADER)) {
			if (s3->payload_sha256)
				continue;
			kept_payload = true;
		}
		if (!append(&l, p->data))
			goto out;
	}
	/* libcurl 7.88 signs this header's value as the payload hash but
	 * does not send one of its own; the gateway and the store need it */
	if (!kept_payload) {
		snprintf(payload, sizeof(payload), PAYLOAD_HEADER ": %s",
			 s3->payload_sha256 ? s3->payload_sha256 :
			 UNSIGNED_PAYLOAD);
		if (!append(&l, payload))
			goto out;
	}
	if (!append(&l, line))
		goto out;

	/* libcurl copies both strings */
	if (curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4) != CURLE_OK) {
		err = FG_CLIENT_INVALID;	/* a libcurl without SigV4 */
		goto out;
	}
	if (curl_easy_setopt(h, CURLOPT_USERPWD, userpwd) != CURLE_OK)
		goto out;
	free_list(*headers);
	*headers = l;
	l = NULL;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
	err = FG_CLIENT_OK;
out:
	free_list(l);
	free_secret(line, line_n);
	free_secret(userpwd, userpwd_n);
	fg__wipe(token, sizeof(token));
	return err;
}
