/*
 * creds.c - the upstream's TLS files, read once at start so that a
 * missing or bad one is a start-up error and not a 502 on every https://
 * transfer. curl (OpenSSL) reads them again for each new upstream
 * connection (xfer.c); this module keeps nothing of them.
 *
 * Invariant: a key's bytes live only inside OpenSSL, which wipes them on
 * free, and no reason quotes the file's contents (OpenSSL's reason text
 * only).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "base/config.h"
#include "upstream/creds.h"

/* Never ask a terminal for a passphrase: curl is given none either. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* OpenSSL's reason for the last failure, or what. */
static const char *reason(const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	return r ? r : what;
}

static BIO *open_file(const char *setting, const char *path, char *err,
		      size_t n)
{
	BIO *b = BIO_new_file(path, "r");
	if (!b)
		snprintf(err, n, "%s: cannot read '%s': %s", setting, path,
			 errno ? strerror(errno) : reason("cannot open"));
	return b;
}

static int check_ca(const char *path, char *err, size_t n)
{
	BIO *b = open_file("upstream-ca", path, err, n);
	if (!b)
		return -1;
	STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, no_passphrase, NULL);
	BIO_free(b);
	int certs = 0;
	for (int i = 0; infos && i < sk_X509_INFO_num(infos); i++)
		certs += sk_X509_INFO_value(infos, i)->x509 != NULL;
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	if (!certs) {
		snprintf(err, n, "upstream-ca: '%s' holds no PEM certificate%s%s",
			 path, infos ? "" : ": ", infos ? "" : reason("unreadable"));
		return -1;
	}
	return 0;
}

static int check_pair(const char *cert_path, const char *key_path, char *err,
		      size_t n)
{
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	int rc = -1;
	BIO *b = open_file("upstream-cert", cert_path, err, n);
	if (!b)
		return -1;
	cert = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);
	BIO_free(b);
	if (!cert) {
		snprintf(err, n, "upstream-cert: '%s' holds no PEM certificate: %s",
			 cert_path, reason("unreadable"));
		goto out;
	}
	b = open_file("upstream-key", key_path, err, n);
	if (!b)
		goto out;
	key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
	BIO_free(b);
	if (!key) {
		snprintf(err, n, "upstream-key: '%s' holds no PEM private key "
			 "without a passphrase: %s", key_path, reason("unreadable"));
		goto out;
	}
	if (X509_check_private_key(cert, key) != 1) {
		snprintf(err, n, "upstream-key '%s' is not the key of "
			 "upstream-cert '%s'", key_path, cert_path);
		goto out;
	}
	rc = 0;
out:
	EVP_PKEY_free(key);
	X509_free(cert);
	return rc;
}

int fg_upstream_creds_check(const struct fg_config *cfg, char *err, size_t n)
{
	int rc = 0;
	ERR_clear_error();
	errno = 0;
	if (cfg->upstream_ca && check_ca(cfg->upstream_ca, err, n))
		rc = -1;
	ERR_clear_error();
	errno = 0;
	if (rc == 0 && cfg->upstream_cert && cfg->upstream_key &&
	    check_pair(cfg->upstream_cert, cfg->upstream_key, err, n))
		rc = -1;
	ERR_clear_error();
	return rc;
}
