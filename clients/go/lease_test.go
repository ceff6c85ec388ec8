// lease_test.go - holding, losing and giving back leases against the real
// gateways, Redis and WebDAV store of the environment.

package fencegate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A holder whose renewals stop (a paused holder) is told of the loss by
// its context at the lease's end, before its next write; that write is
// not sent; the same write sent past the library is refused 409 by the
// gateway; and the store keeps what the new holder wrote.
func TestPausedHolderLosesBeforeNextWrite(t *testing.T) {
	gw := gateways(t)
	a := newClient(t, Config{})
	b := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	path := "/" + name
	ctx := testCtx(t, 120*time.Second)

	la, err := a.Lock(ctx, name, &LockOptions{TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(context.Background())
	count := &countingTransport{base: http.DefaultTransport}
	hcA := &http.Client{Transport: la.RoundTripper(count)}
	resp, err := put(ctx, hcA, gw[0], path, "from A, while it held the lock")
	if err != nil || ResponseError(resp) != nil {
		t.Fatalf("A's first write: %v %v", err, ResponseError(resp))
	}
	resp.Body.Close()

	la.noRenew.Store(true) // A is paused: it renews no more
	waitDone(t, la, bounded(1500*time.Millisecond), "paused holder")
	var lost *LeaseLostError
	if !errors.As(la.Err(), &lost) || lost.Reason != ReasonExpired {
		t.Fatalf("A's loss: %v, want reason %s", la.Err(), ReasonExpired)
	}

	lb, err := b.Lock(ctx, name, &LockOptions{TTL: 30 * time.Second, Wait: 30 * time.Second})
	if err != nil {
		t.Fatalf("B's acquire after A's lease ended: %v", err)
	}
	defer lb.Release(context.Background())
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %d is not above A's %d", lb.Token(), la.Token())
	}
	hcB := &http.Client{Transport: lb.RoundTripper(nil)}
	resp, err = put(ctx, hcB, gw[1], path, "from B")
	if err != nil || ResponseError(resp) != nil {
		t.Fatalf("B's write: %v %v", err, ResponseError(resp))
	}
	resp.Body.Close()

	// A wakes up and writes: refused before anything is sent
	sent := count.n
	_, err = put(ctx, hcA, gw[0], path, "from A, after its lease")
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("A's write after the loss: %v, want ErrLeaseLost", err)
	}
	if count.n != sent {
		t.Fatalf("A's write after the loss reached the transport")
	}
	// the same write past the library: the fence refuses it
	st, err := rawPut(t, gw[0], path, la.Sequencer(), "from A, after its lease")
	if st != 409 || !errors.Is(err, ErrStaleToken) {
		t.Fatalf("A's stale write through the gateway: %d %v, want 409 stale_token", st, err)
	}
	if code, body := storeGet(t, path); code != 200 || body != "from B" {
		t.Fatalf("the store holds %d %q, want B's data", code, body)
	}
	if err := la.Release(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("A's release: %v, want the loss reported", err)
	}
}

// A holder frozen whole (no goroutine of it runs, as under SIGSTOP or a
// long GC pause) past its lease is refused its next write by the lease's
// own check, which also signals the loss then.
func TestFrozenHolderRefusedAtNextWrite(t *testing.T) {
	gw := gateways(t)
	a := newClient(t, Config{})
	b := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 120*time.Second)

	la, err := a.Lock(ctx, name, &LockOptions{TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	la.freeze() // frozen: not even the renewer's deadline runs
	// B gets the lock once A's lease ended at the gateway
	lb, err := b.Lock(ctx, name, &LockOptions{Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(context.Background())
	select {
	case <-la.Done():
		t.Fatal("a frozen holder was signalled (nothing of it ran)")
	default:
	}
	hcA := &http.Client{Transport: la.RoundTripper(nil)}
	if _, err := put(ctx, hcA, gw[0], "/"+name, "late"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the frozen holder's write: %v, want ErrLeaseLost", err)
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("the refused write did not signal the loss")
	}
	if code, _ := storeGet(t, "/"+name); code != 404 {
		t.Fatalf("the store has the object (%d)", code)
	}
}

// A lock not granted within the wait: ErrNotAcquired, and the body never
// runs; try-once alike.
func TestTimedOutAcquireNeverRunsBody(t *testing.T) {
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", "")
	ctx := testCtx(t, 60*time.Second)
	l, err := c.Lock(ctx, name, &LockOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	for _, wait := range []time.Duration{0, 700 * time.Millisecond} {
		ran := false
		t0 := time.Now()
		err := c.WithLock(ctx, name, &LockOptions{Wait: wait}, func(context.Context, *Lease) error {
			ran = true
			return nil
		})
		if !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("wait %v: %v, want ErrNotAcquired", wait, err)
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "lock_held" {
			t.Fatalf("wait %v: %#v, want 409 lock_held", wait, err)
		}
		if ran {
			t.Fatalf("wait %v: the body ran", wait)
		}
		if time.Since(t0) < wait {
			t.Fatalf("wait %v: gave up after %v", wait, time.Since(t0))
		}
	}
	st, err := c.Inspect(ctx, name)
	if err != nil || !st.Held || st.Token != l.Token() || st.Waiters != 0 {
		t.Fatalf("after the refused acquires: %+v %v", st, err)
	}
}

// The first gateway stops mid-hold: renewals go on through the second,
// which the client then keeps using, and the lease is never lost.
func TestRenewalFailsOverToSecondGateway(t *testing.T) {
	gw := gateways(t)
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 120*time.Second)
	const ttl = 2 * time.Second
	l, err := c.Lock(ctx, name, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if c.Gateways()[0] != gw[0] {
		t.Fatalf("the client started on %s", c.Gateways()[0])
	}
	t.Cleanup(func() { control(t, "/gateway/0/start") })
	control(t, "/gateway/0/stop")

	// three lease lengths without the first gateway
	select {
	case <-l.Done():
		t.Fatalf("lost with the first gateway down: %v", l.Err())
	case <-time.After(3 * ttl):
	}
	if got := c.Gateways()[0]; got != gw[1] {
		t.Fatalf("the client uses %s, want the second gateway %s", got, gw[1])
	}
	if time.Until(l.Deadline()) < ttl/3 {
		t.Fatalf("the lease was not renewed lately: %v left", time.Until(l.Deadline()))
	}
	st, err := c.Inspect(ctx, name)
	if err != nil || !st.Held || st.Token != l.Token() {
		t.Fatalf("inspect: %+v %v", st, err)
	}
	hc := &http.Client{Transport: l.RoundTripper(nil)}
	resp, err := put(ctx, hc, gw[1], "/"+name, "after the failover")
	if err != nil || ResponseError(resp) != nil {
		t.Fatalf("write after the failover: %v %v", err, ResponseError(resp))
	}
	resp.Body.Close()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	inspectFree(t, c, name)
}

// A Redis stalled for less than the lease: renewals fail for a while, the
// lease is kept, and writes go on after.
func TestRedisStallShorterThanLease(t *testing.T) {
	gw := gateways(t)
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 120*time.Second)
	const ttl = 9 * time.Second
	l, err := c.Lock(ctx, name, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	// the stall begins just before the next renewal is due, and outlasts
	// the gateways' redis-timeout (2 s): that renewal fails, a later one
	// succeeds before the lease's end
	due := l.Deadline().Add(-ttl).Add(ttl / 3)
	time.Sleep(time.Until(due) - 100*time.Millisecond)
	control(t, "/redis/stall?ms=2600")
	select {
	case <-l.Done():
		t.Fatalf("lost over a 2.6 s stall of a 9 s lease: %v", l.Err())
	case <-time.After(2600*time.Millisecond + ttl):
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if n := l.failed.Load(); n < 1 {
		t.Fatalf("no renewal failed: the stall missed the renewals")
	} else {
		t.Logf("%d renewal(s) failed during the stall", n)
	}
	hc := &http.Client{Transport: l.RoundTripper(nil)}
	resp, err := put(ctx, hc, gw[0], "/"+name, "after the stall")
	if err != nil || ResponseError(resp) != nil {
		t.Fatalf("write after the stall: %v %v", err, ResponseError(resp))
	}
	resp.Body.Close()
	if code, body := storeGet(t, "/"+name); code != 200 || body != "after the stall" {
		t.Fatalf("the store holds %d %q", code, body)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Redis restarted empty mid-hold loses every lock: the next renewal is
// refused, the loss is signalled, the next write is not sent, and the
// gateway refuses the old sequencer too.
func TestRedisRestartedEmptyLosesLease(t *testing.T) {
	gw := gateways(t)
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 120*time.Second)
	const ttl = 3 * time.Second
	l, err := c.Lock(ctx, name, &LockOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	control(t, "/redis/restart")
	waitDone(t, l, bounded(ttl), "Redis restarted empty")
	var lost *LeaseLostError
	if !errors.As(l.Err(), &lost) {
		t.Fatalf("loss: %v", l.Err())
	}
	hc := &http.Client{Transport: l.RoundTripper(nil)}
	if _, err := put(ctx, hc, gw[0], "/"+name, "after the restart"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("write after the loss: %v, want ErrLeaseLost", err)
	}
	// the old sequencer past the library: refused by the fence (409, or
	// 503 until the gateways know the sequencer key again)
	deadline := time.Now().Add(bounded(5 * time.Second))
	for {
		st, err := rawPut(t, gw[0], "/"+name, l.Sequencer(), "after the restart")
		if st == 503 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t.Logf("loss: %v; the old sequencer's write: %d %v", l.Err(), st, err)
		if st != 409 && st != 403 {
			t.Fatalf("the old sequencer after the restart: %d %v, want a refusal", st, err)
		}
		break
	}
	if code, _ := storeGet(t, "/"+name); code != 404 {
		t.Fatalf("the store has the object (%d)", code)
	}
}

// A body whose context is cancelled ends the scope, and the lock is
// released all the same (with a context of its own).
func TestCancelledContextStillReleases(t *testing.T) {
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lease *Lease
	err := c.WithLock(ctx, name, &LockOptions{TTL: 30 * time.Second}, func(ctx context.Context, l *Lease) error {
		lease = l
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WithLock: %v, want context.Canceled", err)
	}
	inspectFree(t, c, name)
	var lost *LeaseLostError
	if !errors.As(lease.Err(), &lost) || lost.Reason != ReasonReleased {
		t.Fatalf("after the scope: %v, want released", lease.Err())
	}

	// Lock's own context cancelled after the grant: Release with a fresh
	// one still gives it back
	ctx2, cancel2 := context.WithCancel(context.Background())
	l, err := c.Lock(ctx2, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	if l.Err() != nil {
		t.Fatalf("the acquire's context ended the lease: %v", l.Err())
	}
	if err := l.Release(testCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	inspectFree(t, c, name)
}

// MaxHold ends the hold by itself: the body's context is cancelled, the
// lock is given back, and the scope reports the loss with its reason.
func TestMaxHold(t *testing.T) {
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", "")
	ctx := testCtx(t, 60*time.Second)
	t0 := time.Now()
	err := c.WithLock(ctx, name, &LockOptions{TTL: 30 * time.Second, MaxHold: time.Second},
		func(ctx context.Context, l *Lease) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return errors.New("MaxHold did not end the hold")
			}
		})
	var lost *LeaseLostError
	if !errors.As(err, &lost) || lost.Reason != ReasonMaxHold || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("WithLock: %v, want a loss with reason %s", err, ReasonMaxHold)
	}
	if d := time.Since(t0); d < time.Second {
		t.Fatalf("the hold ended after %v", d)
	}
	inspectFree(t, c, name)

	// IgnoreLoss: the same end is not reported
	err = c.WithLock(ctx, name, &LockOptions{MaxHold: 300 * time.Millisecond, IgnoreLoss: true},
		func(ctx context.Context, l *Lease) error {
			<-ctx.Done()
			return nil
		})
	if err != nil {
		t.Fatalf("WithLock with IgnoreLoss: %v", err)
	}
	inspectFree(t, c, name)
}

// The lease's transport stamps Fencing-Token with the sequencer (and
// leaves the caller's request alone); the fenced PUT is stored.
func TestRoundTripperStampsFencingToken(t *testing.T) {
	gw := gateways(t)
	c := newClient(t, Config{})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 60*time.Second)
	err := c.WithLock(ctx, name, nil, func(ctx context.Context, l *Lease) error {
		count := &countingTransport{base: http.DefaultTransport}
		hc := &http.Client{Transport: l.RoundTripper(count)}
		req, _ := http.NewRequestWithContext(ctx, "PUT", gw[0]+"/"+name,
			strings.NewReader("fenced through the lease"))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 201 && resp.StatusCode != 204 {
			t.Errorf("fenced PUT: %d", resp.StatusCode)
		}
		if got := count.last.Get("Fencing-Token"); got != l.Sequencer() {
			t.Errorf("Fencing-Token sent was not the sequencer")
		}
		if req.Header.Get("Fencing-Token") != "" {
			t.Errorf("the caller's request was changed")
		}
		// without the transport: 428
		st, err := rawPut(t, gw[0], "/"+name, "", "unfenced")
		if st != 400 && st != 428 {
			t.Errorf("unfenced PUT: %d %v", st, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := storeGet(t, "/"+name); code != 200 || body != "fenced through the lease" {
		t.Fatalf("the store holds %d %q", code, body)
	}
}

// A dead first gateway: calls go on to the next, which is kept.
func TestDeadGatewaySkipped(t *testing.T) {
	gw := gateways(t)
	dead := envVar(t, "FG_TEST_DEAD")
	c := newClient(t, Config{Gateways: []string{dead, gw[0]}})
	name := uniqueName(t, "app/", "")
	ctx := testCtx(t, 60*time.Second)
	l, err := c.Lock(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateways()[0] != gw[0] {
		t.Fatalf("the client kept %s", c.Gateways()[0])
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	only := newClient(t, Config{Gateways: []string{dead}})
	_, err = only.Lock(ctx, name, nil)
	var ue *UnavailableError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) {
		t.Fatalf("with no gateway up: %v, want ErrUnavailable", err)
	}
}

// A gateway in use that stops answering (it accepts connections, never
// answers) does not cost the lease while the real gateway answers: each
// renewal attempt gets only its share of the time left.
func TestHungGatewayDoesNotLoseLease(t *testing.T) {
	gw := gateways(t)
	c := newClient(t, Config{Gateways: []string{hungGateway(t), gw[0]}})
	name := uniqueName(t, "app/", ".txt")
	ctx := testCtx(t, 60*time.Second)
	c.current.Store(1) // the grant from the real gateway
	l, err := c.Lock(ctx, name, &LockOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	c.current.Store(0) // then the hung one is the gateway in use
	select {
	case <-l.Done():
		t.Fatalf("lost while the real gateway answered: %v", l.Err())
	case <-time.After(6 * time.Second): // two lease lengths
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	inspectFree(t, c, name)
}
