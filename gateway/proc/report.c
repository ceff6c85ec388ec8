/*
 * report.c - a completed request's record into the metrics and the
 * access log.
 *
 * Invariant: each request is reported exactly once, after its record was
 * closed; the record holds no secret (base/record.h), so neither output
 * can leak one.
 */
#include "base/errors.h"
#include "proc/accesslog.h"
#include "proc/metrics.h"
#include "proc/report.h"

/* A lock call that changed a grant: the counters of grants, renewals,
 * releases and leases found ended. */
static void count_lock_call(const struct fg_rec *r)
{
	switch (r->endpoint) {
	case FG_EP_ACQUIRE:
		if (r->granted && r->status == 200)
			fg_metrics_grant(r->mode);
		break;
	case FG_EP_RENEW:
		if (r->status == 200)
			fg_metrics_renewal();
		else if (r->error == FG_E_LEASE_EXPIRED)
			fg_metrics_expiry();
		break;
	case FG_EP_RELEASE:
		if (r->status == 204)
			fg_metrics_release();
		else if (r->error == FG_E_LEASE_EXPIRED)
			fg_metrics_expiry();
		break;
	default:
		break;
	}
}

void fg_report(const char *gw_id, const struct fg_rec *r)
{
	if (!r->t0_ns)
		return;
	uint64_t ns = fg_rec_now_ns() - r->t0_ns;
	fg_metrics_request(r->endpoint, r->status, ns, r->bytes_in, r->bytes_out);
	count_lock_call(r);
	if (r->error == FG_E_UNAUTHENTICATED)
		fg_metrics_auth_refused(FG_AUTH_UNAUTHENTICATED);
	else if (r->error == FG_E_FORBIDDEN)
		fg_metrics_auth_refused(FG_AUTH_FORBIDDEN);
	else if (r->error == FG_E_TOO_MANY_FAILURES)
		fg_metrics_auth_refused(FG_AUTH_THROTTLED);
	if (r->fenced && r->decision != FG_DEC_NONE && r->decision != FG_DEC_PASS)
		fg_metrics_fence(r->decision != FG_DEC_REFUSED,
				 r->decision == FG_DEC_ADMITTED, r->refusal,
				 r->admit_ns >= 0 ? (uint64_t)r->admit_ns : 0);
	fg_accesslog_write(gw_id, r);
}
