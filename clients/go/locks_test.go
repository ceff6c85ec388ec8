// locks_test.go - election, inspect, list, break, typed errors, and the
// TLS gateway's keys and client certificates, against the environment.

package fencegate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"
)

// Campaign, leader, proclaim, observe, resign: the second candidate leads
// once the first resigns, and an observer following the first leader's
// token is answered then.
func TestElection(t *testing.T) {
	a := newClient(t, Config{})
	b := newClient(t, Config{})
	name := uniqueName(t, "app/", "")
	ctx := testCtx(t, 120*time.Second)

	la, err := a.Campaign(ctx, name, "http://10.0.0.1:80", &LockOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Leader(ctx, name)
	if err != nil || !st.Held || st.Value != "http://10.0.0.1:80" || st.Token != la.Token() {
		t.Fatalf("leader: %+v %v", st, err)
	}
	if err := la.Proclaim(ctx, "http://10.0.0.1:81"); err != nil {
		t.Fatal(err)
	}
	if st, err = b.Leader(ctx, name); err != nil || st.Value != "http://10.0.0.1:81" {
		t.Fatalf("after proclaim: %+v %v", st, err)
	}

	type res struct {
		l   *Lease
		err error
	}
	elected := make(chan res, 1)
	go func() {
		l, err := b.Campaign(ctx, name, "http://10.0.0.2:80", &LockOptions{TTL: 10 * time.Second})
		elected <- res{l, err}
	}()
	observed := make(chan *LockState, 1)
	go func() {
		st, err := b.Observe(ctx, name, la.Token(), 60*time.Second)
		if err != nil {
			t.Errorf("observe: %v", err)
		}
		observed <- st
	}()
	select {
	case r := <-elected:
		t.Fatalf("a second leader while the first leads: %v", r.err)
	case <-time.After(500 * time.Millisecond): // the window a wrong election would show in
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var r res
	select {
	case r = <-elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the second candidate was not elected after the resignation")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Resign(context.Background())
	select {
	case st := <-observed:
		if st == nil || (st.Held && st.Token == la.Token()) {
			t.Fatalf("observe answered %+v", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the observer was not answered")
	}
	st, err = a.Leader(ctx, name)
	if err != nil || st.Value != "http://10.0.0.2:80" || st.Token != r.l.Token() || r.l.Token() <= la.Token() {
		t.Fatalf("new leader: %+v %v", st, err)
	}
}

// Inspect and list show a held lock (no lease), break ends it and the
// holder's next renewal is refused: the loss is signalled.
func TestInspectListBreak(t *testing.T) {
	c := newClient(t, Config{})
	prefix := uniqueName(t, "app/", "/")
	name := prefix + "x"
	ctx := testCtx(t, 60*time.Second)
	l, err := c.Lock(ctx, name, &LockOptions{TTL: 1500 * time.Millisecond, Owner: "go-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	st, err := c.Inspect(ctx, name)
	if err != nil || !st.Held || st.Mode != "exclusive" || st.Owner != "go-test" || st.Holders != 1 || st.Token != l.Token() {
		t.Fatalf("inspect: %+v %v", st, err)
	}
	locks, err := c.ListAll(ctx, prefix)
	if err != nil || len(locks) != 1 || locks[0].Name != name || locks[0].Token != l.Token() ||
		len(locks[0].Holders) != 1 || locks[0].Holders[0].Owner != "go-test" {
		t.Fatalf("list: %+v %v", locks, err)
	}
	if err := c.Break(ctx, name, l.Token()+1); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("break with another token: %v, want ErrStaleToken", err)
	}
	if err := c.Break(ctx, name, l.Token()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, bounded(time.Second), "broken lease")
	var lost *LeaseLostError
	if !errors.As(l.Err(), &lost) || lost.Reason != ReasonRevoked || !errors.Is(lost, ErrLeaseLost) {
		t.Fatalf("after the break: %v, want revoked", l.Err())
	}
	var ae *APIError
	if !errors.As(lost.Cause, &ae) || ae.Status != 410 || ae.Code != "lease_expired" {
		t.Fatalf("the cause: %#v", lost.Cause)
	}
	r, err := c.Check(ctx, l.Sequencer())
	if err != nil || r.Valid {
		t.Fatalf("check after the break: %+v %v", r, err)
	}
	inspectFree(t, c, name)
}

// Errors carry their status and code and match their sentinels.
func TestTypedErrors(t *testing.T) {
	c := newClient(t, Config{})
	ctx := testCtx(t, 60*time.Second)
	_, err := c.Inspect(ctx, "app/a b")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "bad_lock_name" || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad name: %#v", err)
	}
	_, err = c.Lock(ctx, uniqueName(t, "app/", ""), &LockOptions{TTL: 50 * time.Millisecond})
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "bad_request" {
		t.Fatalf("TTL out of range: %#v", err)
	}
	name := uniqueName(t, "app/", "")
	l, err := c.Lock(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Lock(ctx, name, nil)
	if !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("held: %v", err)
	}
	err = c.Break(ctx, name, 1)
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "stale_token" || ae.Current != l.Token() || ae.Token != 1 {
		t.Fatalf("break: %#v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	st, err := rawPut(t, gateways(t)[0], "/"+name, l.Sequencer(), "x")
	if st != 409 || !errors.Is(err, ErrStaleToken) {
		t.Fatalf("write with a released grant's sequencer: %d %v", st, err)
	}
	st, err = rawPut(t, gateways(t)[0], "/"+name, "fg1.bm90.x.1.bm90", "x")
	if st/100 != 4 || err == nil {
		t.Fatalf("write with a made-up sequencer: %d %v", st, err)
	}
}

func tlsConfig(t *testing.T, cert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(envVar(t, "FG_TEST_CA"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("FG_TEST_CA holds no certificate")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert {
		kp, err := tls.LoadX509KeyPair(envVar(t, "FG_TEST_CLIENT_CERT"), envVar(t, "FG_TEST_CLIENT_KEY"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

// On the TLS gateway with an auth-file: a bearer key and a client
// certificate each name a principal; none is 401, another principal's
// prefix is 403, and the lock, renewals and release work with either.
func TestAuthKeyAndClientCert(t *testing.T) {
	gw := envVar(t, "FG_TEST_AUTH_GATEWAY")
	ctx := testCtx(t, 60*time.Second)
	name := uniqueName(t, "app/", "")

	for _, cfg := range []Config{
		{Gateways: []string{gw}, Key: envVar(t, "FG_TEST_KEY"), TLS: tlsConfig(t, false)},
		{Gateways: []string{gw}, TLS: tlsConfig(t, true)},
	} {
		c := newClient(t, cfg)
		l, err := c.Lock(ctx, name, &LockOptions{TTL: 1200 * time.Millisecond})
		if err != nil {
			t.Fatalf("lock (key %v): %v", cfg.Key != "", err)
		}
		select {
		case <-l.Done():
			t.Fatalf("lost (key %v): %v", cfg.Key != "", l.Err())
		case <-time.After(2500 * time.Millisecond): // renewed, more than once
		}
		// a fenced write through the TLS gateway, on the client's own
		// transport (its TLS settings)
		hc := &http.Client{Transport: l.RoundTripper(nil)}
		resp, err := put(ctx, hc, gw, "/"+name, "through TLS")
		if err != nil || ResponseError(resp) != nil {
			t.Fatalf("fenced write through TLS: %v %v", err, ResponseError(resp))
		}
		resp.Body.Close()
		if code, body := storeGet(t, "/"+name); code != 200 || body != "through TLS" {
			t.Fatalf("the store holds %d %q", code, body)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	none := newClient(t, Config{Gateways: []string{gw}, TLS: tlsConfig(t, false)})
	_, err := none.Inspect(ctx, name)
	var ae *APIError
	if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("no credential: %v", err)
	}
	other := newClient(t, Config{Gateways: []string{gw}, Key: envVar(t, "FG_TEST_OTHER_KEY"), TLS: tlsConfig(t, false)})
	if _, err := other.Lock(ctx, name, nil); !errors.Is(err, ErrForbidden) {
		t.Fatalf("another principal's lock: %v", err)
	}
	wrong := newClient(t, Config{Gateways: []string{gw}, Key: "not-a-key-of-this-gateway", TLS: tlsConfig(t, false)})
	if _, err := wrong.Inspect(ctx, name); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unknown key: %v", err)
	}
}

// A campaign whose context ends before it is elected returns the
// context's error, and its place in the queue goes with it.
func TestCampaignCancelled(t *testing.T) {
	a := newClient(t, Config{})
	b := newClient(t, Config{})
	name := uniqueName(t, "app/", "")
	ctx := testCtx(t, 60*time.Second)
	la, err := a.Campaign(ctx, name, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(context.Background())
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	if _, err := b.Campaign(short, name, "b", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled campaign: %v", err)
	}
	for end := time.Now().Add(bounded(time.Second)); ; time.Sleep(50 * time.Millisecond) {
		st, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 0 && st.Token == la.Token() {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the cancelled campaign is still queued: %+v", st)
		}
	}
}
