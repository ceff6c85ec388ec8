// lease.go - taking a lock, holding it, giving it back.
//
// Invariants:
//   - A lease's local end (deadline) is only ever set from an answer of
//     the gateway: the moment the request was sent (monotonic clock) plus
//     the ttl_ms it answered. The gateway's expiry is counted from a later
//     moment (when it handled the request), so the local end never comes
//     after the real one.
//   - One schedule renews a lease (a timer, whose function renews and arms
//     it again): a third of the TTL after the last renewal was sent; on failures it asks the next
//     gateway at once, and once every gateway failed in a round it backs
//     off (at most the renewal interval), until the lease's end.
//   - The loss is signalled once, at once: the lease's context is
//     cancelled as soon as a refusal comes, the end passes, or MaxHold
//     is reached; after that the lease fences nothing and is never renewed.
//   - The lease string is sent in bodies and headers only.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// WaitForever as LockOptions.Wait waits until the lock is granted or the
// context ends.
const WaitForever time.Duration = -1

// DefaultTTL is the lease length when LockOptions.TTL is 0.
const DefaultTTL = 30 * time.Second

// DefaultReleaseTimeout bounds a release when LockOptions.ReleaseTimeout
// is 0.
const DefaultReleaseTimeout = 10 * time.Second

const (
	maxWaitChunk       = 300 * time.Second // the gateway's wait_ms bound
	minRenewInterval   = 50 * time.Millisecond
	backoffMin         = 250 * time.Millisecond
	backoffMax         = 5 * time.Second
	earlyAnswerMargin  = 50 * time.Millisecond
	maxS3SessionToken  = 8191 // as fencectl lock --s3 bounds it
	sequencerPrefix    = "fg1."
	sessionTokenJoiner = ","
)

// LockOptions are the choices of an acquire. The zero value (or nil) is
// a try-once exclusive acquire with DefaultTTL.
type LockOptions struct {
	// TTL is the lease length (100ms to 1h). 0: DefaultTTL.
	TTL time.Duration
	// Wait is how long to wait for the lock in its queue: 0 tries once,
	// WaitForever waits until the context ends.
	Wait time.Duration
	// Shared asks for a shared grant (it cannot fence a write).
	Shared bool
	// Owner is free text shown by inspect and ls while the grant holds.
	Owner string
	// Value is the lock's value while this grant holds it (election).
	Value string
	// LockDelay is the grant's lock-delay. 0: the gateway's default.
	LockDelay time.Duration
	// MaxHold, when above 0, ends the hold by itself after this long: the
	// lease is given back and signalled lost with ReasonMaxHold.
	MaxHold time.Duration
	// ReleaseTimeout bounds the release at the end of WithLock (and after
	// MaxHold). 0: DefaultReleaseTimeout.
	ReleaseTimeout time.Duration
	// IgnoreLoss: WithLock and Release do not report a lease that was
	// lost before its release (they return nil for it).
	IgnoreLoss bool
}

func (o *LockOptions) withDefaults() LockOptions {
	var v LockOptions
	if o != nil {
		v = *o
	}
	if v.TTL <= 0 {
		v.TTL = DefaultTTL
	}
	if v.ReleaseTimeout <= 0 {
		v.ReleaseTimeout = DefaultReleaseTimeout
	}
	return v
}

// Lease is a held grant of a lock. Its methods are safe for use by many
// goroutines.
type Lease struct {
	c         *Client
	name      string
	lease     string
	token     uint64
	mode      string
	sequencer string
	opts      LockOptions

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time // the local end, on the monotonic clock
	lastErr  error     // the last failed renewal's
	lost     *LeaseLostError

	renewCtx  context.Context
	stopRenew context.CancelFunc
	stepping  sync.Mutex  // held by the renewer's step while it runs
	timer     *time.Timer // the renewal schedule, under mu
	stopped   bool        // the schedule ended, under mu
	next      time.Time   // the next renewal, under mu
	failures  int         // renewals failed in a row, under mu
	backoff   time.Duration
	noRenew   atomic.Bool  // test hook: the renewer renews no more
	failed    atomic.Int64 // renewals that failed, for the tests' reports

	relOnce sync.Once
	relErr  error
	maxHold *time.Timer // under mu
}

// grant is the acquire's answer.
type grant struct {
	Name      string `json:"name"`
	Lease     string `json:"lease"`
	Token     uint64 `json:"token"`
	Mode      string `json:"mode"`
	TTLms     int64  `json:"ttl_ms"`
	Sequencer string `json:"sequencer"`
	Holds     int    `json:"holds"`
}

func nextBackoff(b time.Duration) time.Duration {
	if b < backoffMin {
		return backoffMin
	}
	if b*2 > backoffMax {
		return backoffMax
	}
	return b * 2
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// acquireJSON is an acquire's body: a struct, as marshalling one costs
// less than a map.
type acquireJSON struct {
	TTLms       int64  `json:"ttl_ms"`
	WaitMs      int64  `json:"wait_ms"`
	Mode        string `json:"mode,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Value       string `json:"value,omitempty"`
	LockDelayMs int64  `json:"lock_delay_ms,omitempty"`
}

func acquireBody(o *LockOptions, wait time.Duration) *acquireJSON {
	b := &acquireJSON{TTLms: ms(o.TTL), WaitMs: ms(wait), Owner: o.Owner, Value: o.Value}
	if o.Shared {
		b.Mode = "shared"
	}
	if o.LockDelay > 0 {
		b.LockDelayMs = ms(o.LockDelay)
	}
	return b
}

// acquire asks for the lock until it is granted, the wait ends, or a
// definite refusal comes. It gives the grant and when its request was
// sent.
func (c *Client) acquire(ctx context.Context, name string, o *LockOptions) (*grant, time.Time, error) {
	forever := o.Wait < 0
	end := time.Now().Add(o.Wait)
	var backoff time.Duration
	for {
		chunk := time.Until(end)
		if chunk < 0 {
			chunk = 0
		}
		if forever || chunk > maxWaitChunk {
			chunk = maxWaitChunk
		}
		chunk = chunk.Truncate(time.Millisecond)
		a, err := c.do(ctx, &call{method: "POST", path: lockPath(name),
			body: acquireBody(o, chunk), wait: chunk})
		if err == nil {
			var g grant
			if json.Unmarshal(a.body, &g) != nil || g.Lease == "" || g.Sequencer == "" || g.TTLms <= 0 {
				c.giveBackMalformed(name, a.body, o.ReleaseTimeout)
				return nil, time.Time{}, fmt.Errorf("fencegate: the answer to acquire lock %q is not a grant", name)
			}
			return &g, a.sent, nil
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		over := o.Wait == 0 || (!forever && !time.Now().Before(end))
		switch {
		case errors.Is(err, ErrTooManyWaiters) || transient(err):
			if over {
				return nil, time.Time{}, err
			}
			backoff = nextBackoff(backoff)
		case errors.Is(err, ErrNotAcquired):
			if over {
				return nil, time.Time{}, err
			}
			// a wait that ended early (lock-delay, a lost queue
			// place): do not spin on it
			if a != nil && time.Since(a.sent)+earlyAnswerMargin < chunk {
				backoff = nextBackoff(backoff)
			} else {
				backoff = 0
			}
		default:
			return nil, time.Time{}, err
		}
		if !forever && time.Now().Add(backoff).After(end) {
			backoff = time.Until(end)
		}
		if !sleep(ctx, backoff) {
			return nil, time.Time{}, ctx.Err()
		}
	}
}

// giveBackMalformed releases what a success answer to an acquire that is
// not a grant holds, when it carries a lease at all: the lock may be
// granted to it, and nobody else could give it back before its TTL. The
// release's own result changes nothing: the acquire failed either way.
func (c *Client) giveBackMalformed(name string, body []byte, timeout time.Duration) {
	var l struct {
		Lease string `json:"lease"`
	}
	if json.Unmarshal(body, &l) != nil || l.Lease == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _ = c.do(ctx, &call{method: "DELETE", path: lockPath(name), lease: l.Lease})
}

// Lock takes lock name, waiting as opts says, and returns the lease, which
// is renewed in the background until it is released or lost. ctx bounds
// the acquire only; the lease's own Context ends with the hold. When the
// lock was not granted within the wait, the error is ErrNotAcquired.
func (c *Client) Lock(ctx context.Context, name string, opts *LockOptions) (*Lease, error) {
	o := opts.withDefaults()
	g, sent, err := c.acquire(ctx, name, &o)
	if err != nil {
		return nil, err
	}
	l := &Lease{c: c, name: name, lease: g.Lease, token: g.Token, mode: g.Mode,
		sequencer: g.Sequencer, opts: o}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.renewCtx, l.stopRenew = context.WithCancel(context.Background())
	l.ttl = time.Duration(g.TTLms) * time.Millisecond
	l.deadline = sent.Add(l.ttl)

	// a grant that waited in the queue was made some time after its
	// request was sent (maybe more than a TTL after): its end is known only
	// from a renewal sent now
	if answered := time.Now(); answered.Sub(sent) > l.ttl/3 {
		if rerr := l.confirm(ctx, answered); rerr != nil {
			l.giveBackNow()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, rerr
		}
	}
	if ctx.Err() != nil {
		l.giveBackNow()
		return nil, ctx.Err()
	}
	if o.MaxHold > 0 {
		l.mu.Lock()
		l.maxHold = time.AfterFunc(o.MaxHold, func() {
			l.lose(ReasonMaxHold, nil)
			l.giveBackNow()
		})
		l.mu.Unlock()
	}
	l.startRenewer()
	return l, nil
}

// confirm renews a grant made an unknown time after its acquire was sent,
// as the renewer would: each gateway in turn, each its share of the time
// left, rounds apart by the back-off, until one answers, a refusal says
// the grant is gone, or the grant cannot hold any more (a TTL after its
// answer came, the latest it may end). A failure is a
// *GrantNotConfirmedError; the caller gives the grant back.
func (l *Lease) confirm(ctx context.Context, answered time.Time) error {
	c := l.c
	n := len(c.gateways)
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	end := answered.Add(ttl)
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var backoff time.Duration
	var err error
	for tries := 1; ; tries++ {
		at := int(c.current.Load())
		var s time.Time
		var newTTL time.Duration
		s, newTTL, err = l.renewAt(cctx, at, nil, c.share(end))
		if err == nil {
			l.extend(s, newTTL)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if definite(err) {
			return &GrantNotConfirmedError{Name: l.name, Cause: err, gone: true}
		}
		if cctx.Err() != nil || !transient(err) {
			break
		}
		c.moveOn(at)
		if tries%n == 0 {
			backoff = nextBackoff(backoff)
			if i := interval(ttl); backoff > i {
				backoff = i
			}
			if !time.Now().Add(backoff).Before(end) || !sleep(cctx, backoff) {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &GrantNotConfirmedError{Name: l.name, Cause: err}
}

// giveBackNow releases with a fresh context bounded by ReleaseTimeout, for
// a lease that is not (or no longer) the caller's to hold.
func (l *Lease) giveBackNow() {
	l.lose(ReasonReleased, nil)
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.ReleaseTimeout)
	defer cancel()
	l.giveBack(ctx, true, false)
}

// WithLock takes lock name as Lock does, runs body with a context that is
// cancelled when ctx is or when the lease is lost, then releases the lock
// (with a fresh context bounded by ReleaseTimeout, so also when ctx was
// cancelled), also when body panics. If the lock was not granted within
// the wait, body does not run and the error is ErrNotAcquired.
//
// The result is the lease's loss (a *LeaseLostError, ErrLeaseLost) if it
// was lost before the release and opts.IgnoreLoss is not set; else body's
// error; else the release's.
func (c *Client) WithLock(ctx context.Context, name string, opts *LockOptions, body func(ctx context.Context, l *Lease) error) (err error) {
	l, err := c.Lock(ctx, name, opts)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-l.Done():
			cancel()
		case <-bctx.Done():
		}
	}()
	var berr error
	defer func() {
		cancel()
		rctx, rcancel := context.WithTimeout(context.Background(), l.opts.ReleaseTimeout)
		rerr := l.Release(rctx)
		rcancel()
		if errors.Is(rerr, ErrLeaseLost) {
			err = rerr
		} else if berr != nil {
			err = berr
		} else {
			err = rerr
		}
	}()
	berr = body(bctx, l)
	return berr
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.name }

// Token is the grant's fencing token.
func (l *Lease) Token() uint64 { return l.token }

// Mode is "exclusive" or "shared".
func (l *Lease) Mode() string { return l.mode }

// Sequencer is what fences a request: the value of its Fencing-Token
// header. Treat it as a secret of the holder's.
func (l *Lease) Sequencer() string { return l.sequencer }

// TTL is the lease's length, as the gateway last answered it.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline is the lease's local end: the last successful renewal's send
// time plus its TTL, on the monotonic clock.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Context is cancelled as soon as the lease stops holding the lock: lost,
// past its end, at MaxHold, or released.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is closed when Context is cancelled.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease holds the lock, and then a *LeaseLostError
// (ErrLeaseLost) that says why it does not. A lease past its local end is
// lost here even if its renewer has not noticed yet (a paused process).
func (l *Lease) Err() error {
	if e := l.check(); e != nil {
		return e
	}
	return nil
}

func (l *Lease) check() *LeaseLostError {
	l.mu.Lock()
	lost, deadline, last := l.lost, l.deadline, l.lastErr
	l.mu.Unlock()
	if lost != nil {
		return lost
	}
	if !time.Now().Before(deadline) {
		return l.lose(ReasonExpired, last)
	}
	return nil
}

// lose marks the lease lost (the first reason stays), signals it, and
// stops the renewer and MaxHold's timer.
func (l *Lease) lose(r LossReason, cause error) *LeaseLostError {
	l.mu.Lock()
	if l.lost == nil {
		l.lost = &LeaseLostError{Name: l.name, Reason: r, Cause: cause}
	}
	e, mh := l.lost, l.maxHold
	l.mu.Unlock()
	l.cancel()
	l.stopRenewer()
	if mh != nil {
		mh.Stop()
	}
	return e
}

func (l *Lease) extend(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ttl = ttl
	l.deadline = sent.Add(ttl)
	l.lastErr = nil
}

func interval(ttl time.Duration) time.Duration {
	if i := ttl / 3; i > minRenewInterval {
		return i
	}
	return minRenewInterval
}

// renewAt sends one renewal to gateway at; value, when not nil, is the
// lock's new value; limit, when above 0, bounds it (a gateway's share of
// the time left). It gives the send time and the TTL answered.
func (l *Lease) renewAt(ctx context.Context, at int, value *string, limit time.Duration) (time.Time, time.Duration, error) {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	body := map[string]any{"lease": l.lease, "ttl_ms": ms(ttl)}
	if value != nil {
		body["value"] = *value
	}
	a, err := l.c.once(ctx, at, &call{method: "PATCH", path: lockPath(l.name), body: body, limit: limit})
	if err != nil {
		return time.Time{}, 0, err
	}
	var r struct {
		TTLms int64 `json:"ttl_ms"`
	}
	if json.Unmarshal(a.body, &r) == nil && r.TTLms > 0 {
		ttl = time.Duration(r.TTLms) * time.Millisecond
	}
	return a.sent, ttl, nil
}

// definite says whether a renewal's failure means the lease is gone: the
// gateway answered, and asking again cannot change the answer.
func definite(err error) bool {
	var a *APIError
	if !errors.As(err, &a) {
		return false
	}
	switch a.Status {
	case 400, 403, 409, 410:
		return true
	}
	return false
}

// startRenewer arms the lease's one renewal schedule: a timer whose
// function (step) renews and arms it again. No goroutine waits between
// renewals, and stopping is only stopping the timer.
func (l *Lease) startRenewer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = l.deadline.Add(-l.ttl).Add(interval(l.ttl))
	l.armLocked()
}

// armLocked sets the timer for the next renewal, or for the lease's end if
// that comes first (l.mu held).
func (l *Lease) armLocked() {
	if l.stopped {
		return
	}
	at := l.next
	if l.noRenew.Load() || l.deadline.Before(at) {
		at = l.deadline
	}
	d := time.Until(at)
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.step)
	} else {
		l.timer.Reset(d)
	}
}

// stopRenewer stops the schedule for good and cuts off a renewal in
// flight.
func (l *Lease) stopRenewer() {
	l.mu.Lock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.stopRenew()
}

// step is the renewer (see the invariants at the top). Only one runs at a
// time: the timer is armed again only at its end.
func (l *Lease) step() {
	l.stepping.Lock()
	defer l.stepping.Unlock()
	c := l.c
	n := len(c.gateways)
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	deadline, ttl, last := l.deadline, l.ttl, l.lastErr
	now := time.Now()
	if !now.Before(deadline) {
		l.mu.Unlock()
		l.lose(ReasonExpired, last)
		return
	}
	if l.noRenew.Load() || now.Before(l.next) {
		l.armLocked()
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()

	at := int(c.current.Load())
	// an answer after the lease's end is of no use; and each gateway gets
	// only its share of the time left, so that one that never answers
	// leaves the others time to renew
	rctx, cancel := context.WithDeadline(l.renewCtx, deadline)
	s, newTTL, err := l.renewAt(rctx, at, nil, c.share(deadline))
	cancel()
	if l.renewCtx.Err() != nil {
		return
	}
	if err != nil && definite(err) {
		l.lose(ReasonRevoked, err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.ttl = newTTL
		l.deadline = s.Add(newTTL)
		l.lastErr = nil
		l.next = s.Add(interval(newTTL))
		l.failures, l.backoff = 0, 0
		l.armLocked()
		return
	}
	l.lastErr = err
	l.failed.Add(1)
	l.failures++
	var wait time.Duration
	if transient(err) && n > 1 {
		c.moveOn(at)
	}
	// the next gateway is asked at once until every one failed in this
	// round; then the back-off
	if !transient(err) || l.failures%n == 0 {
		l.backoff = nextBackoff(l.backoff)
		wait = l.backoff
		if i := interval(ttl); wait > i {
			wait = i
		}
	}
	l.next = time.Now().Add(wait)
	l.armLocked()
}

// freeze stops the lease's renewer as if the whole process stood still
// (tests): nothing of it runs after freeze returns.
func (l *Lease) freeze() {
	l.stopRenewer()
	l.stepping.Lock() // a step in flight ends first
	l.stepping.Unlock()
}

// Release gives the lock back (one hold) and ends the lease: its Context
// is cancelled and its renewals stop. It retries transient failures on
// every gateway until ctx ends or the lease's own end passes (the lock is
// then free anyway). If the lease was lost before (or the gateway says it
// no longer held the lock), the result is that *LeaseLostError, unless
// LockOptions.IgnoreLoss was set. A second Release returns the first's
// result.
func (l *Lease) Release(ctx context.Context) error {
	before := l.check()
	// the renewer stops at this; a renewal in flight is cut off, and one
	// answered after the release changes nothing (the lease is lost)
	l.lose(ReasonReleased, nil)
	err := l.giveBack(ctx, before != nil, before != nil && before.Reason == ReasonRevoked)
	var lost *LeaseLostError
	if before != nil && before.Reason != ReasonReleased {
		err = before
	}
	if errors.As(err, &lost) && (l.opts.IgnoreLoss || lost.Reason == ReasonReleased) {
		return nil
	}
	return err
}

// Resign gives up leadership: it is Release.
func (l *Lease) Resign(ctx context.Context) error { return l.Release(ctx) }

// giveBack sends the release once, whoever asks first; the others get its
// result.
// quiet: the lease is known lost already, so a 410 is no news; gone: the
// gateway said so, and there is nothing to give back.
func (l *Lease) giveBack(ctx context.Context, quiet, gone bool) error {
	l.relOnce.Do(func() {
		if !gone {
			l.relErr = l.sendRelease(ctx, quiet)
		}
	})
	return l.relErr
}

func (l *Lease) sendRelease(ctx context.Context, quiet bool) error {
	var backoff time.Duration
	for {
		// do asks every gateway in turn before it gives up
		_, err := l.c.do(ctx, &call{method: "DELETE", path: lockPath(l.name), lease: l.lease})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("fencegate: releasing lock %q: %w", l.name, ctx.Err())
		}
		if errors.Is(err, ErrLeaseLost) {
			if quiet {
				return nil
			}
			l.mu.Lock()
			l.lost = &LeaseLostError{Name: l.name, Reason: ReasonRevoked, Cause: err}
			e := l.lost
			l.mu.Unlock()
			return e
		}
		if !transient(err) {
			return fmt.Errorf("fencegate: releasing lock %q: %w", l.name, err)
		}
		if !time.Now().Before(l.Deadline()) {
			return nil // the lease ran out: the lock is free
		}
		backoff = nextBackoff(backoff)
		if !sleep(ctx, backoff) {
			return fmt.Errorf("fencegate: releasing lock %q: %w", l.name, err)
		}
	}
}

// Proclaim sets the lock's value (the leader's address, say) with a
// renewal, which also extends the lease.
func (l *Lease) Proclaim(ctx context.Context, value string) error {
	if e := l.check(); e != nil {
		return e
	}
	n := len(l.c.gateways)
	var err error
	for i := 0; i < n; i++ {
		at := int(l.c.current.Load())
		var s time.Time
		var ttl time.Duration
		s, ttl, err = l.renewAt(ctx, at, &value, 0)
		if err == nil {
			l.extend(s, ttl)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if definite(err) {
			return l.lose(ReasonRevoked, err)
		}
		if !transient(err) {
			return err
		}
		l.c.moveOn(at)
	}
	return err
}
