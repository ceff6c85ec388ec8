// fault_unit_test.go - fault shapes the real environment cannot make (a
// gateway that accepts and never answers, answers that race a cancel,
// malformed grants), against fake gateways.

package fencegate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// hungGateway accepts connections and never answers on them.
func hungGateway(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// A gateway in use that stops answering (it still accepts) costs the
// renewal only its share of the time left: the other, healthy gateway is
// asked in time and the lease is kept.
func TestUnitHungGatewayKeepsLease(t *testing.T) {
	good := newFake(t, 3000)
	c, err := New(Config{Gateways: []string{hungGateway(t), good.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout < 3*time.Second {
		t.Fatalf("the default timeout %v is not longer than the TTL: the test would prove nothing", c.timeout)
	}
	c.current.Store(1) // the grant from the healthy one
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	// the hung gateway becomes the one in use, as if it had stopped
	// answering after the grant
	c.current.Store(0)
	select {
	case <-l.Done():
		t.Fatalf("lost while a gateway was healthy: %v", l.Err())
	case <-time.After(6 * time.Second): // two lease lengths
	}
	if l.Err() != nil {
		t.Fatalf("lost: %v", l.Err())
	}
	if good.count("PATCH") < 2 {
		t.Fatalf("the healthy gateway got %d renewals", good.count("PATCH"))
	}
}

// hookTransport carries the calls over the real transport and lets the
// test act on each answer after it arrived in full.
type hookTransport struct {
	mu    sync.Mutex
	after func(r *http.Request, resp *http.Response)
	seen  []*http.Request
}

func (h *hookTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r)
	after := h.after
	h.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if after != nil {
		after(r, resp)
	}
	return resp, nil
}

func (h *hookTransport) requests(method string) []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*http.Request
	for _, r := range h.seen {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// A grant whose answer arrived as the caller's context was cancelled is
// not thrown away: Lock gives it back (with its lease) and returns the
// cancellation. The cancel comes after the whole answer is read, so the
// order is fixed, not raced.
func TestUnitGrantAnsweredAsCancelledIsGivenBack(t *testing.T) {
	f := newFake(t, 30000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &hookTransport{after: func(r *http.Request, resp *http.Response) {
		if r.Method == "POST" && resp.StatusCode == 200 {
			cancel()
		}
	}}
	c, err := New(Config{Gateways: []string{f.srv.URL}, Transport: h})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, "a", nil)
	if l != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context: %v, %v", l, err)
	}
	dels := h.requests("DELETE")
	if len(dels) != 1 || f.count("DELETE") != 1 {
		t.Fatalf("the grant was given back %d times (gateway saw %d), want once", len(dels), f.count("DELETE"))
	}
	if got := dels[0].Header.Get("Fence-Lease"); got != "LLLLLLLLLLLLLLLLLLLLLL" {
		t.Fatalf("the give-back carried another lease (%d chars)", len(got))
	}
}

// A success answer to an acquire that carries a lease but is not a whole
// grant is given back with that lease before the error is returned.
func TestUnitMalformedGrantIsGivenBack(t *testing.T) {
	for _, tc := range []struct{ what, body string }{
		{"no sequencer", `{"name":"a","lease":"LLLLLLLLLLLLLLLLLLLLLL","token":7,"mode":"exclusive","ttl_ms":30000,"holds":1}`},
		{"no ttl", `{"name":"a","lease":"LLLLLLLLLLLLLLLLLLLLLL","token":7,"mode":"exclusive","sequencer":"fg1.seq","holds":1}`},
		{"token not a number", `{"name":"a","lease":"LLLLLLLLLLLLLLLLLLLLLL","token":"x","mode":"exclusive","ttl_ms":30000,"sequencer":"fg1.seq","holds":1}`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var mu sync.Mutex
			var released []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.Method {
				case "POST":
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, tc.body)
				case "DELETE":
					mu.Lock()
					released = append(released, r.Header.Get("Fence-Lease"))
					mu.Unlock()
					w.WriteHeader(204)
				default:
					w.WriteHeader(500)
				}
			}))
			defer srv.Close()
			c := fakeClient(t, srv.URL)
			l, err := c.Lock(context.Background(), "a", nil)
			if l != nil || err == nil {
				t.Fatalf("a malformed grant was taken: %v", err)
			}
			if strings.Contains(err.Error(), "LLLLLLLL") {
				t.Fatal("the error shows the lease")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(released) != 1 || released[0] != "LLLLLLLLLLLLLLLLLLLLLL" {
				t.Fatalf("releases with the lease: %d", len(released))
			}
		})
	}
}

// A success answer without any lease has nothing to give back.
func TestUnitGrantWithoutLeaseNotReleased(t *testing.T) {
	var deletes atomicCount
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "DELETE" {
			deletes.add()
		}
		_, _ = io.WriteString(w, `{"name":"a","token":7}`)
	}))
	defer srv.Close()
	c := fakeClient(t, srv.URL)
	if _, err := c.Lock(context.Background(), "a", nil); err == nil {
		t.Fatal("a grant without a lease was taken")
	}
	if deletes.get() != 0 {
		t.Fatal("a release was sent without a lease")
	}
}

type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (a *atomicCount) add() { a.mu.Lock(); a.n++; a.mu.Unlock() }
func (a *atomicCount) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// A late grant's confirmation goes to the next gateway when the first
// fails, as a renewal does.
func TestUnitLateGrantConfirmedOnTheNextGateway(t *testing.T) {
	f := newFake(t, 1500)
	f.delay = 700 * time.Millisecond
	f.renew = func(int) int { return 503 }
	g := newFake(t, 1500)
	c := fakeClient(t, f.srv.URL, g.srv.URL)
	l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 1500 * time.Millisecond, Wait: 2 * time.Second})
	if err != nil {
		t.Fatalf("a grant confirmable on the second gateway was refused: %v", err)
	}
	defer l.Release(context.Background())
	if f.count("PATCH") != 1 || g.count("PATCH") != 1 {
		t.Fatalf("confirmations: %d, %d; want one on each", f.count("PATCH"), g.count("PATCH"))
	}
	if time.Until(l.Deadline()) < time.Second {
		t.Fatal("the end was not moved by the confirmation")
	}
}

// A late grant that no gateway confirms within its time is given back and
// the error is ErrUnavailable; one a gateway refuses is given back and
// the error is ErrNotAcquired (not ErrLeaseLost: no lease was handed out).
func TestUnitLateGrantNotConfirmed(t *testing.T) {
	for _, tc := range []struct {
		what   string
		status int
		want   error
	}{
		{"no gateway answers", 503, ErrUnavailable},
		{"the grant is gone", 410, ErrNotAcquired},
		{"the grant is another's", 409, ErrNotAcquired},
	} {
		t.Run(tc.what, func(t *testing.T) {
			f := newFake(t, 900)
			f.delay = 400 * time.Millisecond
			f.renew = func(int) int { return tc.status }
			g := newFake(t, 900)
			g.renew = func(int) int { return tc.status }
			c := fakeClient(t, f.srv.URL, g.srv.URL)
			t0 := time.Now()
			l, err := c.Lock(context.Background(), "a", &LockOptions{TTL: 900 * time.Millisecond, Wait: 2 * time.Second})
			if l != nil || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, %v; want %v", l, err, tc.want)
			}
			if tc.want == ErrNotAcquired && errors.Is(err, ErrLeaseLost) {
				t.Fatalf("a refused confirmation matches ErrLeaseLost: %v", err)
			}
			var nc *GrantNotConfirmedError
			if !errors.As(err, &nc) || nc.Name != "a" {
				t.Fatalf("not a *GrantNotConfirmedError: %v", err)
			}
			asked := f.count("PATCH") + g.count("PATCH")
			if tc.status == 503 && (f.count("PATCH") < 1 || g.count("PATCH") < 1) {
				t.Fatalf("confirmations %d, %d: every gateway must be asked", f.count("PATCH"), g.count("PATCH"))
			}
			if tc.status != 503 && asked != 1 {
				t.Fatalf("%d confirmations after a refusal, want 1", asked)
			}
			if f.count("DELETE")+g.count("DELETE") != 1 {
				t.Fatalf("given back %d times, want once", f.count("DELETE")+g.count("DELETE"))
			}
			// bounded: a TTL after the answer, and the release
			if d := time.Since(t0); d > 5*time.Second {
				t.Fatalf("the confirmation took %v", d)
			}
		})
	}
}
