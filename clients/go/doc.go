// Package fencegate is a client for fencegate's lock API: leased locks
// with fencing tokens, renewed in the background, whose loss is signalled
// at once, and whose sequencer fences every write sent through the
// gateway's proxy.
//
// The library holds these invariants:
//
//   - A lease's end is known from the gateway's answers alone: the ttl_ms
//     of a grant or a renewal, counted on the monotonic clock from the
//     moment that request was sent, never from the server's wall clock.
//   - Each lease has one renewal schedule (a third of its TTL). Transient
//     failures are retried on every gateway given until the lease's own
//     end; a definite refusal ends the lease at once.
//   - Once a lease is lost its Context is cancelled and its RoundTripper
//     sends nothing more.
//   - Leases, keys and sequencers never appear in an error message.
//
// Scoped use:
//
//	c, _ := fencegate.New(fencegate.Config{Gateways: []string{"http://127.0.0.1:8080"}})
//	err := c.WithLock(ctx, "app/a.txt", &fencegate.LockOptions{TTL: 10 * time.Second},
//		func(ctx context.Context, l *fencegate.Lease) error {
//			hc := &http.Client{Transport: l.RoundTripper(nil)}
//			req, _ := http.NewRequestWithContext(ctx, "PUT", gw+"/app/a.txt", body)
//			resp, err := hc.Do(req)
//			...
//		})
package fencegate
