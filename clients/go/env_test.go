// env_test.go - the test environment (real gateways, Redis, nginx,
// radosgw) as the FG_TEST_* variables describe it, and small helpers.
//
// Invariant: a test that needs the environment fails when it is not
// given; nothing is skipped.

package fencegate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// envVar gives a variable of the environment, failing the test without it.
func envVar(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: these tests run against the environment of tests/clients/run.py", name)
	}
	return v
}

func gateways(t *testing.T) []string {
	t.Helper()
	g := strings.Split(envVar(t, "FG_TEST_GATEWAYS"), ",")
	if len(g) < 2 {
		t.Fatalf("FG_TEST_GATEWAYS names %d gateway(s); two are needed", len(g))
	}
	return g
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Gateways == nil {
		cfg.Gateways = gateways(t)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// uniqueName is a fresh lock name under prefix ("app/"), with suffix.
func uniqueName(t *testing.T, prefix, suffix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "go-" + hex.EncodeToString(b[:]) + suffix
}

// bounded is a generous bound for a wait on a loaded machine.
func bounded(d time.Duration) time.Duration { return 3*d + 10*time.Second }

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// control asks the environment's control endpoint for a fault.
func control(t *testing.T, action string) {
	t.Helper()
	u := envVar(t, "FG_TEST_CONTROL") + action
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Post(u, "application/json", nil)
	if err != nil {
		t.Fatalf("control %s: %v", action, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("control %s: %d %s", action, resp.StatusCode, b)
	}
}

// storeGet reads path straight from the WebDAV store, past the gateway.
func storeGet(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(envVar(t, "FG_TEST_STORE") + path)
	if err != nil {
		t.Fatalf("GET %s at the store: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// put sends a PUT of body to gateway+path through hc.
func put(ctx context.Context, hc *http.Client, gateway, path, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "PUT", gateway+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// rawPut is a PUT with an explicit Fencing-Token, past the library's own
// checks: what the store's fence says about a sequencer.
func rawPut(t *testing.T, gateway, path, seq, body string) (int, error) {
	t.Helper()
	req, err := http.NewRequest("PUT", gateway+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Fencing-Token", seq)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", path, err)
	}
	return resp.StatusCode, ResponseError(resp)
}

// countingTransport counts the requests that reach it, and keeps the last
// one's headers.
type countingTransport struct {
	base http.RoundTripper
	n    int
	last http.Header
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	c.last = r.Header.Clone()
	return c.base.RoundTrip(r)
}

func waitDone(t *testing.T, l *Lease, within time.Duration, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("%s: the lease on %s was not signalled lost within %v", what, l.Name(), within)
	}
}

func inspectFree(t *testing.T, c *Client, name string) {
	t.Helper()
	st, err := c.Inspect(testCtx(t, 30*time.Second), name)
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	if st.Held {
		t.Fatalf("lock %s is still held (token %d)", name, st.Token)
	}
}
