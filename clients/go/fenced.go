// fenced.go - requests fenced by a lease: the Fencing-Token header, and
// the S3 session token.
//
// Invariant: nothing is sent with a lease's sequencer once the lease is
// lost; the check is made at each request, against the lease's local end
// too, so a holder that was paused past its lease learns it before its
// next write rather than from the store.

package fencegate

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// RoundTripper gives a transport that sends each request through base
// (when nil, the client's own transport, with its Config.TLS) with header
// Fencing-Token set to the
// lease's sequencer, and Fence-Authorization set to the client's key when
// it has one (for a gateway with proxy-auth required). Once the lease is
// lost it sends nothing and returns the lease's *LeaseLostError
// (ErrLeaseLost), which http.Client wraps in a *url.Error.
func (l *Lease) RoundTripper(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = l.c.hc.Transport
	}
	return &fencedTransport{l: l, base: base, header: "Fencing-Token"}
}

// DestinationRoundTripper is RoundTripper for the Destination of a COPY
// or MOVE under another lock than its path's: it sets
// Destination-Fencing-Token. Stack it on the path lease's RoundTripper.
func (l *Lease) DestinationRoundTripper(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = l.c.hc.Transport
	}
	return &fencedTransport{l: l, base: base, header: "Destination-Fencing-Token"}
}

type fencedTransport struct {
	l      *Lease
	base   http.RoundTripper
	header string
}

// RoundTrip implements http.RoundTripper.
func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.l.Err(); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set(t.header, t.l.sequencer)
	if t.l.c.key != "" {
		r.Header.Set("Fence-Authorization", "Bearer "+t.l.c.key)
	}
	return t.base.RoundTrip(r)
}

// S3SessionToken gives the value for AWS_SESSION_TOKEN (an S3 client's
// session token) that fences writes through a gateway in S3 mode, exactly
// as `fencectl lock --s3` sets it: the lease's sequencer, after the one(s)
// the current AWS_SESSION_TOKEN holds if it holds sequencers already
// (nested locks), else alone. It fails once the lease is lost.
func (l *Lease) S3SessionToken() (string, error) {
	if err := l.Err(); err != nil {
		return "", err
	}
	return S3SessionToken(os.Getenv("AWS_SESSION_TOKEN"), l.sequencer)
}

// S3SessionToken joins sequencer to an existing session token the way
// `fencectl lock --s3` does: "existing,sequencer" when existing holds
// sequencers (it starts with "fg1."), else sequencer alone. It fails when
// the value would pass 8191 bytes.
func S3SessionToken(existing, sequencer string) (string, error) {
	v := sequencer
	if strings.HasPrefix(existing, sequencerPrefix) {
		v = existing + sessionTokenJoiner + sequencer
	}
	if len(v) > maxS3SessionToken {
		return "", fmt.Errorf("fencegate: the session token would be %d bytes, over %d", len(v), maxS3SessionToken)
	}
	return v, nil
}

// ResponseError reads the answer of a request through the gateway's proxy:
// nil for a 2xx; for any other status an *APIError with the gateway's
// code (stale_token, token_required, ...; Code "" when the answer is not
// the gateway's own JSON, such as the store's own error). It reads and
// closes the body only when it returns an error.
func ResponseError(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return apiError(&answer{status: resp.StatusCode, body: b})
}
