/*
 * tls.c - the listener's TLS (GnuTLS under libmicrohttpd): the set of
 * certificate chain, private key and client CA in force, its reload on
 * SIGHUP, and the client certificate's verified CN.
 *
 * Invariants (tls.h): the set in force is swapped whole under `mu`; a
 * handshake's certificate callback takes a reference to it, which the
 * connection's state (its socket context) keeps until the connection is
 * closed, since GnuTLS uses what the callback returned for as long as the
 * session lives and never frees it. A set is freed by its last reference.
 * Client certificates are asked for (GNUTLS_CERT_REQUEST, never REQUIRE:
 * a client without one may still use a bearer key) and verified here
 * against the client CA of the set in force at the time of the question,
 * not by libmicrohttpd, whose trust store is fixed when the daemon starts
 * and so could not follow a reload.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "base/config.h"
#include "base/log.h"
#include "proc/tls.h"

/* TLS 1.2 and 1.3 only, GnuTLS' default ciphers and groups otherwise. */
#define PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define CHAIN_MAX 16              /* certificates in a chain, either side */
#define FILE_MAX (1024 * 1024)    /* a PEM file larger than this is refused */

/* One loaded set. Read-only once made; freed by its last reference. */
struct creds {
	atomic_uint refs;
	unsigned gen;                     /* 1, 2, ...: which load made it */
	gnutls_pcert_st chain[CHAIN_MAX];
	unsigned nchain;
	gnutls_privkey_t key;
	gnutls_x509_trust_list_t ca;      /* NULL: no client CA */
	time_t ca_until;                  /* the earliest end of a CA's
					     validity (wall-clock seconds) */
};

/* One connection's state: its socket context, on its loop thread only. */
struct conn {
	struct creds *held;               /* what its handshake returned; a
					     reference, or NULL before */
	unsigned gen;                     /* the set the answer was found
					     under; 0: not asked yet */
	int answer;                       /* fg_tls_peer_cn()'s */
	char cn[FG_TLS_CN_MAX + 1];
	time_t until;                     /* the answer holds before this */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct creds *current;             /* under mu */
static unsigned last_gen;                 /* under mu */
static char *cert_path, *key_path, *ca_path;
static bool tls_on;

/* ---- the set ------------------------------------------------------------ */

static void creds_free(struct creds *cr)
{
	if (!cr)
		return;
	for (unsigned i = 0; i < cr->nchain; i++)
		gnutls_pcert_deinit(&cr->chain[i]);
	if (cr->key)
		gnutls_privkey_deinit(cr->key);
	if (cr->ca)
		gnutls_x509_trust_list_deinit(cr->ca, 1);
	free(cr);
}

static void creds_put(struct creds *cr)
{
	if (cr && atomic_fetch_sub(&cr->refs, 1) == 1)
		creds_free(cr);
}

/* The set in force, with a reference the caller puts; NULL when off. */
static struct creds *creds_get(void)
{
	pthread_mutex_lock(&mu);
	struct creds *cr = current;
	if (cr)
		atomic_fetch_add(&cr->refs, 1);
	pthread_mutex_unlock(&mu);
	return cr;
}

/* Reads a whole file (at most FILE_MAX bytes) into d, allocated with
 * gnutls_malloc(); the caller wipes and frees it. 0, or -1 with err set. */
static int read_file(const char *what, const char *path, gnutls_datum_t *d,
		     char *err, size_t n)
{
	d->data = NULL;
	d->size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, n, "%s '%s': %s", what, path, strerror(errno));
		goto error_fd;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > FILE_MAX) {
		snprintf(err, n, "%s '%s': %s", what, path,
			 !S_ISREG(st.st_mode) ? "not a regular file"
			 : st.st_size <= 0 ? "is empty" : "is larger than 1 MiB");
		goto error_fd;
	}
	d->data = gnutls_malloc((size_t)st.st_size + 1);
	if (!d->data) {
		snprintf(err, n, "out of memory");
		goto error_fd;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, d->data + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, n, "%s '%s': %s", what, path,
				 r < 0 ? strerror(errno) : "shrank while read");
			goto error_read;
		}
		got += (size_t)r;
	}
	d->data[got] = '\0';
	d->size = (unsigned)got;
	close(fd);
	return 0;

error_read:
	gnutls_memset(d->data, 0, (size_t)st.st_size + 1);
	gnutls_free(d->data);
	d->data = NULL;
error_fd:
	if (fd >= 0)
		close(fd);
	return -1;
}

static void wipe(gnutls_datum_t *d)
{
	if (d->data) {
		gnutls_memset(d->data, 0, d->size);
		gnutls_free(d->data);
	}
	d->data = NULL;
	d->size = 0;
}

/* Does the key belong to the chain's first certificate? Their public keys
 * are compared (public, so a plain compare). */
static bool key_matches(gnutls_privkey_t key, gnutls_pubkey_t cert_pub)
{
	gnutls_pubkey_t pub = NULL;
	gnutls_datum_t a = { NULL, 0 }, b = { NULL, 0 };
	bool same = false;
	if (gnutls_pubkey_init(&pub) < 0)
		return false;
	if (gnutls_pubkey_import_privkey(pub, key, 0, 0) >= 0 &&
	    gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) >= 0 &&
	    gnutls_pubkey_export2(cert_pub, GNUTLS_X509_FMT_DER, &b) >= 0)
		same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
	gnutls_free(a.data);
	gnutls_free(b.data);
	gnutls_pubkey_deinit(pub);
	return same;
}

/* The client CA file into a trust list; the earliest end of validity of
 * its certificates into *until. 0, or -1 with err set. */
static int load_ca(struct creds *cr, char *err, size_t n)
{
	gnutls_datum_t d;
	gnutls_x509_crt_t *crts = NULL;
	unsigned ncrts = 0;
	if (read_file("tls-client-ca", ca_path, &d, err, n))
		return -1;
	int r = gnutls_x509_crt_list_import2(&crts, &ncrts, &d, GNUTLS_X509_FMT_PEM, 0);
	wipe(&d);
	if (r < 0 || ncrts == 0) {
		snprintf(err, n, "tls-client-ca '%s': %s", ca_path,
			 r < 0 ? gnutls_strerror(r) : "holds no certificate");
		goto error_crts;
	}
	cr->ca_until = (time_t)-1;
	for (unsigned i = 0; i < ncrts; i++) {
		time_t t = gnutls_x509_crt_get_expiration_time(crts[i]);
		if (t != (time_t)-1 && (cr->ca_until == (time_t)-1 || t < cr->ca_until))
			cr->ca_until = t;
	}
	if (gnutls_x509_trust_list_init(&cr->ca, 0) < 0) {
		snprintf(err, n, "out of memory");
		goto error_crts;
	}
	/* the list takes the certificates over, even on failure */
	r = gnutls_x509_trust_list_add_cas(cr->ca, crts, ncrts, 0);
	gnutls_free(crts);
	if (r < 0 || (unsigned)r != ncrts) {
		snprintf(err, n, "tls-client-ca '%s': %s", ca_path,
			 r < 0 ? gnutls_strerror(r) : "a CA certificate is repeated");
		return -1;
	}
	return 0;

error_crts:
	for (unsigned i = 0; i < ncrts; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	return -1;
}

/* Loads the files into a new set (one reference). NULL with err set. */
static struct creds *creds_load(char *err, size_t n)
{
	gnutls_datum_t d = { NULL, 0 };
	struct creds *cr = calloc(1, sizeof(*cr));
	if (!cr) {
		snprintf(err, n, "out of memory");
		return NULL;
	}
	atomic_init(&cr->refs, 1);
	cr->ca_until = (time_t)-1;

	if (read_file("tls-cert", cert_path, &d, err, n))
		goto error;
	cr->nchain = CHAIN_MAX;
	int r = gnutls_pcert_list_import_x509_raw(cr->chain, &cr->nchain, &d,
						  GNUTLS_X509_FMT_PEM,
						  GNUTLS_X509_CRT_LIST_IMPORT_FAIL_IF_EXCEED);
	wipe(&d);
	if (r < 0 || cr->nchain == 0) {
		cr->nchain = r < 0 ? 0 : cr->nchain;
		snprintf(err, n, "tls-cert '%s': %s", cert_path,
			 r < 0 ? gnutls_strerror(r) : "holds no certificate");
		goto error;
	}

	if (read_file("tls-key", key_path, &d, err, n))
		goto error;
	r = gnutls_privkey_init(&cr->key);
	if (r >= 0)
		r = gnutls_privkey_import_x509_raw(cr->key, &d, GNUTLS_X509_FMT_PEM,
						   NULL, 0);
	wipe(&d);
	if (r < 0) {
		/* the reason is GnuTLS' text, never the file's bytes */
		snprintf(err, n, "tls-key '%s': %s", key_path, gnutls_strerror(r));
		goto error;
	}
	if (!key_matches(cr->key, cr->chain[0].pubkey)) {
		snprintf(err, n, "tls-key '%s' is not the key of the first "
			 "certificate in tls-cert '%s'", key_path, cert_path);
		goto error;
	}
	if (ca_path && load_ca(cr, err, n))
		goto error;
	return cr;

error:
	creds_free(cr);
	return NULL;
}

/* ---- life cycle ----------------------------------------------------------- */

int fg_tls_init(const struct fg_config *cfg, char *err, size_t n)
{
	if (!cfg->tls_cert)
		return 0;
	cert_path = strdup(cfg->tls_cert);
	key_path = strdup(cfg->tls_key);
	ca_path = cfg->tls_client_ca ? strdup(cfg->tls_client_ca) : NULL;
	if (!cert_path || !key_path || (cfg->tls_client_ca && !ca_path)) {
		snprintf(err, n, "out of memory");
		goto error;
	}
	/* the priority string is fixed, but fail here rather than when the
	 * first daemon starts */
	gnutls_priority_t prio;
	const char *at = NULL;
	int r = gnutls_priority_init(&prio, PRIORITIES, &at);
	if (r < 0) {
		snprintf(err, n, "TLS priorities '%s' at '%s': %s", PRIORITIES,
			 at ? at : "", gnutls_strerror(r));
		goto error;
	}
	gnutls_priority_deinit(prio);
	struct creds *cr = creds_load(err, n);
	if (!cr)
		goto error;
	pthread_mutex_lock(&mu);
	cr->gen = ++last_gen;
	current = cr;
	pthread_mutex_unlock(&mu);
	tls_on = true;
	return 0;

error:
	fg_tls_finish();
	return -1;
}

void fg_tls_reload(void)
{
	char err[512];
	if (!tls_on)
		return;
	struct creds *cr = creds_load(err, sizeof(err));
	if (!cr) {
		fg_log_error("tls: %s; the certificate, key and client CA in "
			     "force stay", err);
		return;
	}
	pthread_mutex_lock(&mu);
	struct creds *old = current;
	cr->gen = ++last_gen;
	current = cr;
	pthread_mutex_unlock(&mu);
	creds_put(old);
	fg_log_info("tls: reloaded %s%s%s (new handshakes use it)", cert_path,
		    ca_path ? " and the client CA " : "", ca_path ? ca_path : "");
}

void fg_tls_finish(void)
{
	pthread_mutex_lock(&mu);
	struct creds *cr = current;
	current = NULL;
	pthread_mutex_unlock(&mu);
	creds_put(cr);
	free(cert_path);
	free(key_path);
	free(ca_path);
	cert_path = key_path = ca_path = NULL;
	tls_on = false;
}

bool fg_tls_on(void)
{
	return tls_on;
}

/* ---- the daemon's side ---------------------------------------------------- */

/* gnutls_certificate_retrieve_function2: on the connection's loop thread,
 * during its handshake. The connection keeps the set it returns. */
static int on_cert(gnutls_session_t s, const gnutls_datum_t *req_ca_rdn,
		   int nreqs, const gnutls_pk_algorithm_t *pk_algos,
		   int pk_algos_length, gnutls_pcert_st **pcert,
		   unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
	(void)req_ca_rdn;
	(void)nreqs;
	(void)pk_algos;
	(void)pk_algos_length;
	struct MHD_Connection *c = gnutls_session_get_ptr(s);
	const union MHD_ConnectionInfo *ci =
		c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT)
		  : NULL;
	struct conn *cs = ci ? ci->socket_context : NULL;
	if (!cs)
		return -1;
	/* a second handshake on the connection (renegotiation) keeps the set
	 * of the first, which GnuTLS may still point into */
	if (!cs->held)
		cs->held = creds_get();
	if (!cs->held)
		return -1;
	*pcert = cs->held->chain;
	*pcert_length = cs->held->nchain;
	*privkey = cs->held->key;
	return 0;
}

unsigned fg_tls_daemon_flags(void)
{
	return tls_on ? MHD_USE_TLS : 0;
}

void fg_tls_daemon_options(struct MHD_OptionItem *opts)
{
	unsigned i = 0;
	if (tls_on) {
		opts[i++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
						     (void *)PRIORITIES };
		opts[i++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
						     (void *)on_cert };
	}
	opts[i] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
}

void fg_tls_connection(struct MHD_Connection *c, void **socket_context,
		       enum MHD_ConnectionNotificationCode code)
{
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		if (!tls_on)
			return;
		/* freed when the connection closes (below); NULL fails the
		 * handshake (on_cert) */
		*socket_context = calloc(1, sizeof(struct conn));
		if (ca_path) {
			const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
				c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
			if (ci && ci->tls_session)
				gnutls_certificate_server_set_request(
					ci->tls_session, GNUTLS_CERT_REQUEST);
		}
		return;
	}
	struct conn *cs = *socket_context;
	if (!cs)
		return;
	creds_put(cs->held);
	free(cs);
	*socket_context = NULL;
}

/* ---- the client's certificate --------------------------------------------- */

static bool cn_usable(const char *cn, size_t len)
{
	if (len == 0 || len > FG_TLS_CN_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = cn[i];
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		      ch == '@' || ch == '-'))
			return false;
	}
	return true;
}

/* The leaf's one CN into out; false when it has none, several, or one
 * that cannot name a principal. */
static bool leaf_cn(gnutls_x509_crt_t leaf, char *out, size_t cap)
{
	char buf[256], more[8];
	size_t len = sizeof(buf), len2 = sizeof(more);
	if (gnutls_x509_crt_get_dn_by_oid(leaf, GNUTLS_OID_X520_COMMON_NAME, 0,
					  0, buf, &len) < 0)
		return false;
	int r = gnutls_x509_crt_get_dn_by_oid(leaf, GNUTLS_OID_X520_COMMON_NAME, 1,
					      0, more, &len2);
	if (r != GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
		return false; /* a second CN: which one names it is unclear */
	if (len >= sizeof(buf) || strlen(buf) != len || !cn_usable(buf, len) ||
	    len + 1 > cap)
		return false;
	memcpy(out, buf, len + 1);
	return true;
}

/* Verifies the peer's chain against the set's client CA; fills cs. */
static void verify_peer(gnutls_session_t s, const struct creds *cr,
			struct conn *cs)
{
	unsigned n = 0;
	const gnutls_datum_t *peers = gnutls_certificate_get_peers(s, &n);
	gnutls_x509_crt_t crts[CHAIN_MAX] = { NULL };
	unsigned ncrts = 0;

	cs->gen = cr->gen;
	cs->until = (time_t)-1;
	cs->cn[0] = '\0';
	if (!peers || n == 0 || gnutls_certificate_type_get(s) != GNUTLS_CRT_X509) {
		cs->answer = 0;
		return;
	}
	cs->answer = -1;
	if (n > CHAIN_MAX) {
		fg_log_info("tls: client certificate chain of %u certificates "
			    "refused (at most %d)", n, CHAIN_MAX);
		return;
	}
	for (; ncrts < n; ncrts++)
		if (gnutls_x509_crt_init(&crts[ncrts]) < 0 ||
		    gnutls_x509_crt_import(crts[ncrts], &peers[ncrts],
					   GNUTLS_X509_FMT_DER) < 0) {
			fg_log_info("tls: client certificate refused: it does "
				    "not parse");
			goto out;
		}

	gnutls_typed_vdata_st purpose = {
		.type = GNUTLS_DT_KEY_PURPOSE_OID,
		.data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
	};
	unsigned status = 0;
	int r = gnutls_x509_trust_list_verify_crt2(cr->ca, crts, ncrts, &purpose,
						   1, 0, &status, NULL);
	if (r < 0 || status != 0) {
		gnutls_datum_t why = { NULL, 0 };
		if (r < 0 || gnutls_certificate_verification_status_print(
				     status, GNUTLS_CRT_X509, &why, 0) < 0)
			fg_log_info("tls: client certificate not verified: %s",
				    r < 0 ? gnutls_strerror(r) : "(no reason given)");
		else
			fg_log_info("tls: client certificate not verified: %s",
				    (const char *)why.data);
		gnutls_free(why.data);
		goto out;
	}
	if (!leaf_cn(crts[0], cs->cn, sizeof(cs->cn))) {
		cs->cn[0] = '\0';
		fg_log_info("tls: client certificate verified, but its subject "
			    "CN cannot name a principal (one CN of 1-%d bytes of "
			    "[A-Za-z0-9._@-])", FG_TLS_CN_MAX);
		goto out;
	}
	/* The answer holds while every certificate of the chain, and every
	 * CA it may lead to, is still within its dates. */
	cs->until = cr->ca_until;
	for (unsigned i = 0; i < ncrts; i++) {
		time_t t = gnutls_x509_crt_get_expiration_time(crts[i]);
		if (t != (time_t)-1 && (cs->until == (time_t)-1 || t < cs->until))
			cs->until = t;
	}
	cs->answer = 1;
	fg_log_debug("tls: client certificate CN=%s verified", cs->cn);

out:
	for (unsigned i = 0; i < n && i < CHAIN_MAX; i++)
		if (crts[i])
			gnutls_x509_crt_deinit(crts[i]);
}

int fg_tls_peer_cn(struct MHD_Connection *c, char *cn, size_t cap)
{
	if (!tls_on || !ca_path || cap < FG_TLS_CN_MAX + 1)
		return 0;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *cs = ci ? ci->socket_context : NULL;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t s = ci ? ci->tls_session : NULL;
	if (!cs || !s)
		return 0;
	struct creds *cr = creds_get();
	if (!cr)
		return 0;
	time_t now = time(NULL);
	if (cs->gen != cr->gen ||
	    (cs->until != (time_t)-1 && now >= cs->until))
		verify_peer(s, cr, cs);
	creds_put(cr);
	if (cs->answer == 1)
		memcpy(cn, cs->cn, strlen(cs->cn) + 1);
	return cs->answer;
}
