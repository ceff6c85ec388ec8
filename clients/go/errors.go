// errors.go - the errors of the library, typed by the contract's error
// codes.
//
// Invariant: every answer of the gateway that is not a success becomes an
// *APIError carrying its status and code, and errors.Is matches it against
// the sentinel its code stands for; no error text holds a lease, a key or
// a sequencer.

package fencegate

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, matched with errors.Is against what the library returns.
var (
	// ErrNotAcquired: the lock was not granted within the wait (409
	// lock_held, or 429 too_many_waiters).
	ErrNotAcquired = errors.New("fencegate: the lock was not granted")
	// ErrLeaseLost: the lease no longer holds the lock (410
	// lease_expired, or a loss the library detected itself).
	ErrLeaseLost = errors.New("fencegate: the lease was lost")
	// ErrStaleToken: a token or sequencer is not the current grant's (409
	// stale_token).
	ErrStaleToken = errors.New("fencegate: stale token")
	// ErrUnauthorized: no known key or client certificate (401
	// unauthenticated).
	ErrUnauthorized = errors.New("fencegate: unauthenticated")
	// ErrForbidden: the principal lacks the right, or the lease is another
	// principal's (403 forbidden).
	ErrForbidden = errors.New("fencegate: forbidden")
	// ErrUnavailable: no gateway answered, or the answer was a 5xx
	// (lock_store_unavailable, shutting_down, ...). Worth retrying.
	ErrUnavailable = errors.New("fencegate: unavailable")
	// ErrBadRequest: the gateway refused the request as malformed (400:
	// bad_request, bad_lock_name, ...; 413).
	ErrBadRequest = errors.New("fencegate: bad request")
	// ErrTooManyWaiters: the lock's queue is full (429 too_many_waiters).
	// It is also ErrNotAcquired.
	ErrTooManyWaiters = errors.New("fencegate: too many waiters")
	// ErrThrottled: too many unknown keys from this address (429
	// too_many_failures).
	ErrThrottled = errors.New("fencegate: throttled")
	// ErrTokenRequired: a fenced request carried no sequencer (428
	// token_required).
	ErrTokenRequired = errors.New("fencegate: token required")
	// ErrForgedToken: a sequencer was not issued by the gateway (403
	// forged_token).
	ErrForgedToken = errors.New("fencegate: forged token")
	// ErrWrongLock: a sequencer names another lock than the path's (403
	// wrong_lock).
	ErrWrongLock = errors.New("fencegate: wrong lock")
)

// codeSentinel maps the contract's error codes to sentinels.
var codeSentinel = map[string]error{
	"lock_held":              ErrNotAcquired,
	"too_many_waiters":       ErrTooManyWaiters,
	"lease_expired":          ErrLeaseLost,
	"stale_token":            ErrStaleToken,
	"unauthenticated":        ErrUnauthorized,
	"forbidden":              ErrForbidden,
	"lock_store_unavailable": ErrUnavailable,
	"shutting_down":          ErrUnavailable,
	"not_ready":              ErrUnavailable,
	"internal":               ErrUnavailable,
	"upstream_unavailable":   ErrUnavailable,
	"upstream_timeout":       ErrUnavailable,
	"bad_request":            ErrBadRequest,
	"bad_lock_name":          ErrBadRequest,
	"bad_path":               ErrBadRequest,
	"bad_destination":        ErrBadRequest,
	"payload_too_large":      ErrBadRequest,
	"malformed_token":        ErrBadRequest,
	"too_many_failures":      ErrThrottled,
	"token_required":         ErrTokenRequired,
	"forged_token":           ErrForgedToken,
	"wrong_lock":             ErrWrongLock,
}

// APIError is an answer of the gateway that is not a success. Code is the
// contract's stable error code ("lock_held", "lease_expired", ...); empty
// when the answer carried none (an HTTP layer's own refusal).
type APIError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the answer's "error" field.
	Code string
	// Message is the answer's "message" field, for people.
	Message string
	// RetryAfter is the answer's retry_after_ms (a refusal by lock-delay
	// alone), 0 when absent.
	RetryAfter time.Duration
	// Token and Current are a stale_token answer's fields, 0 when absent.
	Token, Current uint64
}

// Error gives the status, the code and the gateway's message.
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("fencegate: HTTP %d", e.Status)
	}
	return fmt.Sprintf("fencegate: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches the sentinel of e's code; a status without a known code
// matches by its class (5xx: ErrUnavailable, 401, 403, 400).
func (e *APIError) Is(target error) bool {
	if s, ok := codeSentinel[e.Code]; ok {
		if s == target {
			return true
		}
		return s == ErrTooManyWaiters && target == ErrNotAcquired
	}
	switch {
	case e.Status >= 500:
		return target == ErrUnavailable
	case e.Status == 401:
		return target == ErrUnauthorized
	case e.Status == 403:
		return target == ErrForbidden
	case e.Status == 400 || e.Status == 413 || e.Status == 431:
		return target == ErrBadRequest
	}
	return false
}

// UnavailableError is a call that got no answer from a gateway: a
// connection refused or reset, a timeout. It is ErrUnavailable.
type UnavailableError struct {
	// Gateway is the gateway's base URL, without any userinfo.
	Gateway string
	// Err is what the HTTP client said.
	Err error
}

// Error names the gateway and the cause.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("fencegate: gateway %s did not answer: %v", e.Gateway, e.Err)
}

// Unwrap gives the HTTP client's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is matches ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// GrantNotConfirmedError is a grant that came late (it waited in the
// queue) and whose renewal, which tells when it ends, failed on every
// gateway; the grant was given back. It is ErrNotAcquired when a gateway
// said the grant no longer holds (400, 403, 409, 410), else ErrUnavailable.
type GrantNotConfirmedError struct {
	// Name is the lock's name.
	Name string
	// Cause is the last renewal's error.
	Cause error
	gone  bool
}

// Error names the lock and the cause.
func (e *GrantNotConfirmedError) Error() string {
	return fmt.Sprintf("fencegate: the grant of lock %q could not be confirmed: %v", e.Name, e.Cause)
}

// Is matches ErrNotAcquired (the grant is gone) or ErrUnavailable (no
// gateway answered in time).
func (e *GrantNotConfirmedError) Is(target error) bool {
	if e.gone {
		return target == ErrNotAcquired
	}
	return target == ErrUnavailable
}

// Unwrap gives the cause when no gateway answered; a refusal is not
// unwrapped, as its code (lease_expired) would match ErrLeaseLost for a
// lease never handed out.
func (e *GrantNotConfirmedError) Unwrap() error {
	if e.gone {
		return nil
	}
	return e.Cause
}

// LossReason says why a lease stopped holding its lock.
type LossReason string

// The reasons a lease is lost.
const (
	// ReasonExpired: no renewal succeeded before the lease's end.
	ReasonExpired LossReason = "expired"
	// ReasonRevoked: the gateway said the lease no longer holds the lock
	// (410 lease_expired on a renewal or a release; 409; 403): broken,
	// taken over after an expiry, or lost by the lock store.
	ReasonRevoked LossReason = "revoked"
	// ReasonMaxHold: the hold reached its MaxHold and was given back.
	ReasonMaxHold LossReason = "max_hold"
	// ReasonReleased: the holder released the lease itself.
	ReasonReleased LossReason = "released"
)

// LeaseLostError says that, and why, a lease no longer holds its lock. It
// is ErrLeaseLost.
type LeaseLostError struct {
	// Name is the lock's name.
	Name string
	// Reason is why.
	Reason LossReason
	// Cause is the last error seen (the refusal, or the last failed
	// renewal); nil when none.
	Cause error
}

// Error names the lock, the reason and the cause.
func (e *LeaseLostError) Error() string {
	s := fmt.Sprintf("fencegate: lease on lock %q lost (%s)", e.Name, e.Reason)
	if e.Reason == ReasonReleased {
		s = fmt.Sprintf("fencegate: lease on lock %q was released", e.Name)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is matches ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap gives the cause.
func (e *LeaseLostError) Unwrap() error { return e.Cause }

// transient says whether asking again (another gateway, later) may help.
func transient(err error) bool {
	var u *UnavailableError
	if errors.As(err, &u) {
		return true
	}
	var a *APIError
	if errors.As(err, &a) {
		return a.Status >= 500
	}
	return false
}
