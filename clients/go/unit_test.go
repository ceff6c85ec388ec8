// unit_test.go - the renewer's and the release's retry logic against fake
// gateways (httptest), where each answer is chosen by the test.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGateway answers the lock API with what its functions say.
type fakeGateway struct {
	mu      sync.Mutex
	calls   map[string]int // by method
	ttlMs   int64
	delay   time.Duration // before answering an acquire
	renew   func(n int) int
	release func(n int) int
	bodies  []map[string]any
	srv     *httptest.Server
}

func newFake(t *testing.T, ttlMs int64) *fakeGateway {
	f := &fakeGateway{calls: map[string]int{}, ttlMs: ttlMs}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGateway) count(m string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

func (f *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	f.mu.Lock()
	f.calls[r.Method]++
	n := f.calls[r.Method]
	f.bodies = append(f.bodies, body)
	renew, release, delay := f.renew, f.release, f.delay
	f.mu.Unlock()
	// a server clock far off: the client must not care
	w.Header().Set("Date", "Mon, 01 Jan 2035 00:00:00 GMT")
	w.Header().Set("Content-Type", "application/json")
	answer := func(st int, v any) {
		w.WriteHeader(st)
		_ = json.NewEncoder(w).Encode(v)
	}
	status := func(st int) {
		switch {
		case st == 204:
			w.WriteHeader(204)
		case st >= 500:
			answer(st, map[string]string{"error": "lock_store_unavailable", "message": "down"})
		case st == 410:
			answer(st, map[string]string{"error": "lease_expired", "message": "gone"})
		default:
			answer(st, map[string]string{"error": "x", "message": "x"})
		}
	}
	name := strings.TrimPrefix(r.URL.Path, "/_fence/v1/locks/")
	switch r.Method {
	case "POST":
		time.Sleep(delay)
		answer(200, map[string]any{"name": name, "lease": "LLLLLLLLLLLLLLLLLLLLLL", "token": 7,
			"mode": "exclusive", "ttl_ms": f.ttlMs, "sequencer": "fg1.seq", "holds": 1})
	case "PATCH":
		st := 200
		if renew != nil {
			st = renew(n)
		}
		if st == 200 {
			answer(200, map[string]any{"name": name, "token": 7, "ttl_ms": f.ttlMs})
		} else {
			status(st)
		}
	case "DELETE":
		st := 204
		if release != nil {
			st = release(n)
		}
		status(st)
	}
}

func fakeClient(t *testing.T, urls ...string) *Client {
	c, err := New(Config{Gateways: urls, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The lease's end is counted from when the acquire was sent, with the TTL
// answered, however late the answer came and whatever the server's clock.
func TestUnitDeadlineFromSendTime(t *testing.T) {
	f := newFake(t, 3000)
	f.delay = 300 * time.Millisecond
	c := fakeClient(t, f.srv.URL)
	t0 := time.Now()
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	d := l.Deadline()
	if d.Before(t0.Add(3*time.Second)) || d.After(time.Now().Add(3*time.Second)) {
		t.Fatalf("deadline %v after the send, want 3s from it", d.Sub(t0))
	}
	if d.Sub(t0) > 3*time.Second+100*time.Millisecond {
		t.Fatalf("deadline counted from the answer, not the send: %v", d.Sub(t0))
	}
	if l.TTL() != 3*time.Second {
		t.Fatalf("TTL %v, want the answer's", l.TTL())
	}
}

// Renewals that fail (5xx, connection refused) go to the other gateway at
// once; the lease is kept.
func TestUnitRenewalRetriesAcrossGateways(t *testing.T) {
	bad := newFake(t, 600)
	bad.renew = func(int) int { return 503 }
	good := newFake(t, 600)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	c := fakeClient(t, bad.srv.URL, deadURL, good.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		t.Fatalf("lost: %v", l.Err())
	case <-time.After(2 * time.Second): // more than three lease lengths
	}
	if good.count("PATCH") < 3 {
		t.Fatalf("the answering gateway got %d renewals", good.count("PATCH"))
	}
	if bad.count("PATCH") != 1 {
		t.Fatalf("the failing gateway was asked %d times; once, then the next is kept", bad.count("PATCH"))
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if good.count("DELETE") != 1 {
		t.Fatalf("the release went elsewhere")
	}
}

// A 410 to a renewal ends the lease at once and nothing is renewed after.
func TestUnitRenewalStopsAtLoss(t *testing.T) {
	f := newFake(t, 900)
	f.renew = func(n int) int {
		if n >= 2 {
			return 410
		}
		return 200
	}
	c := fakeClient(t, f.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 900 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, 5*time.Second, "410")
	var lost *LeaseLostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonRevoked {
		t.Fatalf("loss: %v", l.Err())
	}
	time.Sleep(time.Second) // more than three renewal intervals
	if n := f.count("PATCH"); n != 2 {
		t.Fatalf("%d renewals, want 2 (none after the 410)", n)
	}
	if err := l.Release(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release after the loss: %v", err)
	}
	if f.count("DELETE") != 0 {
		t.Fatal("a revoked lease was released")
	}
}

// Renewals that never succeed: retried, with back-off, until the lease's
// own end, which is signalled as expired with the last failure.
func TestUnitRenewalsFailUntilTheEnd(t *testing.T) {
	f := newFake(t, 900)
	f.renew = func(int) int { return 503 }
	g := newFake(t, 900)
	g.renew = func(int) int { return 503 }
	c := fakeClient(t, f.srv.URL, g.srv.URL)
	t0 := time.Now()
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 900 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, 5*time.Second, "failing renewals")
	if d := time.Since(t0); d < 900*time.Millisecond {
		t.Fatalf("lost after %v, before the lease's end", d)
	}
	var lost *LeaseLostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonExpired || !errors.Is(lost.Cause, ErrUnavailable) {
		t.Fatalf("loss: %v", l.Err())
	}
	n := f.count("PATCH") + g.count("PATCH")
	if n < 2 || n > 10 {
		t.Fatalf("%d renewals in 600 ms of failures", n)
	}
}

// A release answered 503 goes to the next gateway.
func TestUnitReleaseRetries(t *testing.T) {
	f := newFake(t, 30000)
	f.release = func(int) int { return 503 }
	g := newFake(t, 30000)
	c := fakeClient(t, f.srv.URL, g.srv.URL)
	l, err := c.Lock(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.count("DELETE") != 1 || g.count("DELETE") != 1 {
		t.Fatalf("releases: %d, %d", f.count("DELETE"), g.count("DELETE"))
	}
}

// A grant that came after a long wait in the queue is confirmed by a
// renewal at once, and its end is counted from that renewal.
func TestUnitLateGrantConfirmed(t *testing.T) {
	f := newFake(t, 1500)
	f.delay = 700 * time.Millisecond
	c := fakeClient(t, f.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 1500 * time.Millisecond, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if f.count("PATCH") != 1 {
		t.Fatalf("%d confirmations", f.count("PATCH"))
	}
	if time.Until(l.Deadline()) < 1000*time.Millisecond {
		t.Fatalf("the end was not moved by the confirmation")
	}
}

// A grant answered more than a TTL after its acquire was sent (a long
// wait in the queue) is confirmed, not given up.
func TestUnitGrantAfterMoreThanATTL(t *testing.T) {
	f := newFake(t, 1000)
	f.delay = 1500 * time.Millisecond
	c := fakeClient(t, f.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if l.Err() != nil || f.count("PATCH") != 1 || time.Until(l.Deadline()) < 500*time.Millisecond {
		t.Fatalf("after a late grant: %v, %d confirmations, %v left", l.Err(), f.count("PATCH"), time.Until(l.Deadline()))
	}
}

// The transport refuses once the lease is past its end, even when the
// renewer has not run (a frozen process), and leaves the request alone.
func TestUnitRoundTripperRefusesPastTheEnd(t *testing.T) {
	f := newFake(t, 1000)
	c := fakeClient(t, f.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l.freeze()
	count := &countingTransport{base: http.DefaultTransport}
	hc := &http.Client{Transport: l.RoundTripper(count)}
	if resp, err := hc.Get(f.srv.URL + "/x"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if count.last.Get("Fencing-Token") != "fg1.seq" {
		t.Fatal("no Fencing-Token")
	}
	for time.Now().Before(l.Deadline()) {
		time.Sleep(10 * time.Millisecond)
	}
	_, err = hc.Get(f.srv.URL + "/x")
	if !errors.Is(err, ErrLeaseLost) || count.n != 1 {
		t.Fatalf("past the end: %v, %d sent", err, count.n)
	}
}

func TestUnitS3SessionToken(t *testing.T) {
	cases := []struct{ before, want string }{
		{"", "fg1.b"},
		{"IQoJb3JpZ2luX2VjE", "fg1.b"},
		{"fg1.a", "fg1.a,fg1.b"},
		{"fg1.a,fg1.c", "fg1.a,fg1.c,fg1.b"},
	}
	for _, k := range cases {
		if got, err := S3SessionToken(k.before, "fg1.b"); err != nil || got != k.want {
			t.Fatalf("%q: %q %v", k.before, got, err)
		}
	}
	if _, err := S3SessionToken("fg1."+strings.Repeat("a", 8190), "fg1.b"); err == nil {
		t.Fatal("an over-long token was made")
	}
}

func TestUnitErrors(t *testing.T) {
	e := &APIError{Status: 429, Code: "too_many_waiters"}
	if !errors.Is(e, ErrNotAcquired) || !errors.Is(e, ErrTooManyWaiters) {
		t.Fatal("too_many_waiters")
	}
	if !errors.Is(&APIError{Status: 502}, ErrUnavailable) || errors.Is(&APIError{Status: 409, Code: "stale_token"}, ErrNotAcquired) {
		t.Fatal("by status")
	}
	l := &LeaseLostError{Name: "a", Reason: ReasonExpired, Cause: &UnavailableError{Gateway: "g", Err: io.EOF}}
	if !errors.Is(l, ErrLeaseLost) || !errors.Is(l, ErrUnavailable) || !errors.Is(l, io.EOF) {
		t.Fatal("LeaseLostError")
	}
	if _, err := New(Config{Gateways: []string{"http://user:secret@x:1", "ftp://x"}}); err == nil ||
		strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad URL: %v", err)
	}
}

// A client's key goes with fenced requests as Fence-Authorization (for
// proxy-auth), and with lock calls as Authorization.
func TestUnitKeyHeaders(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			io.WriteString(w, `{"name":"a","lease":"L","token":1,"mode":"exclusive","ttl_ms":30000,"sequencer":"fg1.s","holds":1}`)
			return
		}
		w.WriteHeader(204)
	}))
	defer srv.Close()
	c, err := New(Config{Gateways: []string{srv.URL}, Key: "k3y"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Get("Authorization") != "Bearer k3y" {
		t.Fatal("the lock call carried no Authorization")
	}
	resp, err := (&http.Client{Transport: l.RoundTripper(nil)}).Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen.Get("Fence-Authorization") != "Bearer k3y" || seen.Get("Fencing-Token") != "fg1.s" {
		t.Fatal("the fenced request lacks Fence-Authorization or Fencing-Token")
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen.Get("Fence-Lease") != "L" {
		t.Fatal("the release carried no Fence-Lease")
	}
}
