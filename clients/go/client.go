// client.go - the client: its gateways, its credentials, one call.
//
// Invariant: a call goes to the gateway that answered last; a gateway that
// gives no answer (or a 5xx) makes the call go to the next one, each at
// most once per call, and the one that answers becomes the current one.
// A key is only ever sent in a header, never shown.

package fencegate

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one call to a gateway when Config.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// maxAnswer bounds what is read of an answer of the lock API.
const maxAnswer = 1 << 20

// Config says which gateways to use and how to reach them.
type Config struct {
	// Gateways are base URLs ("http://127.0.0.1:8080"), tried in turn.
	// At least one.
	Gateways []string
	// Key is a bearer key. It is sent as "Authorization: Bearer" on the
	// lock API, and as "Fence-Authorization: Bearer" by a lease's
	// RoundTripper (proxy-auth). Empty: none.
	Key string
	// TLS is used for https:// gateways: RootCAs to verify the gateway,
	// Certificates for a client certificate. Nil: the system's defaults.
	TLS *tls.Config
	// Timeout bounds each call (a blocking acquire or a long poll gets its
	// wait on top). 0: DefaultTimeout.
	Timeout time.Duration
	// Transport, when set, carries the calls instead of the client's own
	// (TLS is then the transport's business).
	Transport http.RoundTripper
}

// Client talks to a set of gateways that share one lock store. It is safe
// for use by many goroutines.
type Client struct {
	gateways []string
	shown    []string
	key      string
	timeout  time.Duration
	hc       *http.Client
	current  atomic.Int32
}

// New makes a client. The gateway URLs must be http:// or https:// URLs.
func New(cfg Config) (*Client, error) {
	if len(cfg.Gateways) == 0 {
		return nil, errors.New("fencegate: no gateway given")
	}
	c := &Client{key: cfg.Key, timeout: cfg.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	for _, g := range cfg.Gateways {
		u, err := url.Parse(g)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("fencegate: %q is not an http:// or https:// URL", shownURL(g))
		}
		c.gateways = append(c.gateways, strings.TrimRight(g, "/"))
		c.shown = append(c.shown, shownURL(strings.TrimRight(g, "/")))
	}
	rt := cfg.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.MaxIdleConnsPerHost = 16
		if cfg.TLS != nil {
			t.TLSClientConfig = cfg.TLS.Clone()
		}
		rt = t
	}
	c.hc = &http.Client{Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// Gateways gives the gateway URLs, the one in use first.
func (c *Client) Gateways() []string {
	n := len(c.gateways)
	at := int(c.current.Load())
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, c.gateways[(at+i)%n])
	}
	return out
}

// shownURL is a URL without the user or password it may carry.
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if i := strings.Index(s, "@"); i >= 0 && err != nil {
			return "(a URL that does not parse)"
		}
		return s
	}
	u.User = nil
	return u.String()
}

// answer is one answer of the gateway.
type answer struct {
	status int
	body   []byte
	header http.Header
	sent   time.Time // when the request that got it was sent
	at     int       // the gateway that gave it
}

// call is one request of the lock API.
type call struct {
	method string
	path   string // from /_fence/v1/
	body   any    // JSON, nil: no body
	lease  string // Fence-Lease
	brk    string // Fence-Break
	wait   time.Duration
	limit  time.Duration // when above 0, bounds the call below the timeout
}

// once sends c to gateway at. A non-2xx answer is an *APIError together
// with the answer; no answer is an *UnavailableError.
func (c *Client) once(parent context.Context, at int, k *call) (*answer, error) {
	var body io.Reader
	if k.body != nil {
		b, err := json.Marshal(k.body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	bound := c.timeout + k.wait
	if k.limit > 0 && k.limit < bound {
		bound = k.limit
	}
	// the bound is this call's own, so running out of it is no answer
	// from this gateway (the next one may answer), not the caller's end
	ctx, cancel := context.WithTimeout(parent, bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, k.method, c.gateways[at]+k.path, body)
	if err != nil {
		return nil, err
	}
	if k.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if k.lease != "" {
		req.Header.Set("Fence-Lease", k.lease)
	}
	if k.brk != "" {
		req.Header.Set("Fence-Break", k.brk)
	}
	a := &answer{sent: time.Now(), at: at}
	resp, err := c.hc.Do(req)
	if err != nil {
		if parent.Err() != nil {
			return nil, parent.Err()
		}
		return nil, &UnavailableError{Gateway: c.shown[at], Err: scrub(err)}
	}
	defer resp.Body.Close()
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, &UnavailableError{Gateway: c.shown[at], Err: scrub(err)}
	}
	if a.status >= 200 && a.status < 300 {
		return a, nil
	}
	return a, apiError(a)
}

// scrub keeps the cause of a transport error but not the URL it names.
func scrub(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

func apiError(a *answer) *APIError {
	e := &APIError{Status: a.status}
	var b struct {
		Error        string  `json:"error"`
		Message      string  `json:"message"`
		RetryAfterMs uint64  `json:"retry_after_ms"`
		Token        *uint64 `json:"token"`
		Current      *uint64 `json:"current"`
	}
	if json.Unmarshal(a.body, &b) == nil {
		e.Code, e.Message = b.Error, b.Message
		e.RetryAfter = time.Duration(b.RetryAfterMs) * time.Millisecond
		if b.Token != nil {
			e.Token = *b.Token
		}
		if b.Current != nil {
			e.Current = *b.Current
		}
	}
	return e
}

// do sends k to the current gateway, and on no answer or a 5xx to each
// other one in turn; the one that answers becomes the current one.
func (c *Client) do(ctx context.Context, k *call) (*answer, error) {
	n := len(c.gateways)
	start := int(c.current.Load())
	var a *answer
	var err error
	for i := 0; i < n; i++ {
		at := (start + i) % n
		a, err = c.once(ctx, at, k)
		// an answer is returned even when ctx ended as it came: a grant
		// thrown away here would hold its lock, unknown, for its TTL
		if !transient(err) && (a != nil || err == nil) {
			c.current.CompareAndSwap(int32(start), int32(at))
			return a, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !transient(err) {
			return nil, err
		}
	}
	return a, err
}

// moveOn makes the gateway after `from` the current one, unless another
// goroutine moved already.
func (c *Client) moveOn(from int) {
	c.current.CompareAndSwap(int32(from), int32((from+1)%len(c.gateways)))
}

// lockPath is the lock API path of a lock name. Names are
// [A-Za-z0-9._~/-], which need no escaping; anything else is escaped so
// that the gateway answers bad_lock_name for it.
func lockPath(name string) string {
	var b strings.Builder
	b.WriteString("/_fence/v1/locks/")
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if ch == '/' || ch == '.' || ch == '_' || ch == '~' || ch == '-' ||
			(ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// minShare is the least time one attempt gets when a wait is shared out
// among the gateways: less is too short for any answer.
const minShare = 100 * time.Millisecond

// share is the time one attempt may take when what is left until end is to
// be shared among every gateway: a gateway that never answers must leave
// the others time to be asked.
func (c *Client) share(end time.Time) time.Duration {
	d := time.Until(end) / time.Duration(len(c.gateways))
	if d > c.timeout {
		d = c.timeout
	}
	if d < minShare {
		d = minShare
	}
	return d
}

func ms(d time.Duration) int64 { return int64(d / time.Millisecond) }

// CloseIdleConnections closes the client's idle connections to its
// gateways (the client stays usable).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }
