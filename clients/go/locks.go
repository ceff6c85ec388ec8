// locks.go - what the lock API tells about locks, without holding one:
// inspect, observe (long-poll), list, break, check; and leader election on
// top of them.
//
// Invariant: these calls change nothing but what they name (break ends
// the one grant whose token it is given), and none of them returns a
// lease.

package fencegate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// LockState is what inspect and observe answer about a lock.
type LockState struct {
	// Name is the lock's name.
	Name string
	// Held is true while at least one lease holds the lock.
	Held bool
	// Mode is "exclusive" or "shared" while held, else "".
	Mode string
	// Token is the current grant's token, or the last one's while the
	// lock is remembered; 0 when none is known.
	Token uint64
	// Holders is the number of leases holding the lock.
	Holders int
	// Waiters is the number of queued blocking acquires.
	Waiters int
	// TTL is the time until the grant ends; 0 when free.
	TTL time.Duration
	// Delay is what remains of a lock-delay.
	Delay time.Duration
	// Value is the lock's value while held ("" if none was set).
	Value string
	// Owner is the grant's owner text while held.
	Owner string
}

type stateJSON struct {
	Name    string  `json:"name"`
	Held    bool    `json:"held"`
	Mode    *string `json:"mode"`
	Token   *uint64 `json:"token"`
	Holders int     `json:"holders"`
	Waiters int     `json:"waiters"`
	TTLms   int64   `json:"ttl_ms"`
	DelayMs int64   `json:"delay_ms"`
	Value   *string `json:"value"`
	Owner   *string `json:"owner"`
}

func (j *stateJSON) state() *LockState {
	s := &LockState{Name: j.Name, Held: j.Held, Holders: j.Holders, Waiters: j.Waiters,
		TTL: time.Duration(j.TTLms) * time.Millisecond, Delay: time.Duration(j.DelayMs) * time.Millisecond}
	if j.Mode != nil {
		s.Mode = *j.Mode
	}
	if j.Token != nil {
		s.Token = *j.Token
	}
	if j.Value != nil {
		s.Value = *j.Value
	}
	if j.Owner != nil {
		s.Owner = *j.Owner
	}
	return s
}

func decode(a *answer, what string, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return fmt.Errorf("fencegate: the answer to %s does not parse: %v", what, err)
	}
	return nil
}

func (c *Client) state(ctx context.Context, name string, q string, wait time.Duration) (*LockState, error) {
	a, err := c.do(ctx, &call{method: "GET", path: lockPath(name) + q, wait: wait})
	if err != nil {
		return nil, err
	}
	var j stateJSON
	if err := decode(a, "inspect", &j); err != nil {
		return nil, err
	}
	return j.state(), nil
}

// Inspect gives the lock's state now.
func (c *Client) Inspect(ctx context.Context, name string) (*LockState, error) {
	return c.state(ctx, name, "", 0)
}

// Observe waits up to wait (at most 300s) for the lock to change, and
// gives its state then. With after 0 it waits for any change of held or
// token since the call; with after a token, until the lock is not held
// under that token (answered at once if that is already so).
func (c *Client) Observe(ctx context.Context, name string, after uint64, wait time.Duration) (*LockState, error) {
	if wait < 0 || wait > maxWaitChunk {
		wait = maxWaitChunk
	}
	q := "?wait_ms=" + strconv.FormatInt(ms(wait), 10)
	if after > 0 {
		q += "&after=" + strconv.FormatUint(after, 10)
	}
	return c.state(ctx, name, q, wait)
}

// Leader gives who leads the election held on lock name: the lock's state,
// whose Value the leader proclaimed (Held false: nobody leads).
func (c *Client) Leader(ctx context.Context, name string) (*LockState, error) {
	return c.Inspect(ctx, name)
}

// Campaign waits until this client leads the election held on lock name
// (or ctx ends), then holds leadership as a lease whose value is value.
// opts.Wait 0 means wait until ctx ends. Resign ends it; Proclaim changes
// the value; the lease's Context ends when leadership is lost.
func (c *Client) Campaign(ctx context.Context, name, value string, opts *LockOptions) (*Lease, error) {
	o := opts.withDefaults()
	o.Value = value
	if o.Wait == 0 {
		o.Wait = WaitForever
	}
	return c.Lock(ctx, name, &o)
}

// Holder is one holder or waiter in a list page. No lease is ever shown.
type Holder struct {
	// Owner is the owner text given at acquire ("" if none).
	Owner string `json:"owner"`
	// Principal is who it is under auth ("" in open mode).
	Principal string `json:"principal"`
	// Client is the address its acquire came from ("" if not known).
	Client string `json:"client"`
	// HeldMs is how long it has held the lock (holders).
	HeldMs int64 `json:"held_ms"`
	// WaitedMs is how long it has waited (waiters).
	WaitedMs int64 `json:"waited_ms"`
}

// ListedLock is one entry of a list page.
type ListedLock struct {
	// Name is the lock's name.
	Name string
	// Mode is "exclusive" or "shared" while held, else "".
	Mode string
	// Token is the current (or, in lock-delay, the last) grant's token.
	Token uint64
	// TTL is the time until the grant ends.
	TTL time.Duration
	// Delay is what remains of a lock-delay.
	Delay time.Duration
	// Holders are the grant's holders, the longest held first.
	Holders []Holder
	// Waiters are the queued acquires, in queue order.
	Waiters []Holder
}

// ListPage is one page of List.
type ListPage struct {
	// Locks are the held, waited for, or delayed locks of the page.
	Locks []ListedLock
	// Cursor continues the listing; "" after the last page.
	Cursor string
}

// List gives one page of the locks whose names start with prefix that
// are held, waited for or in lock-delay, in name order; limit 0 is the
// gateway's default (100); cursor "" starts at the first page.
func (c *Client) List(ctx context.Context, prefix string, limit int, cursor string) (*ListPage, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/_fence/v1/locks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	a, err := c.do(ctx, &call{method: "GET", path: path})
	if err != nil {
		return nil, err
	}
	var j struct {
		Locks []struct {
			Name    string   `json:"name"`
			Mode    *string  `json:"mode"`
			Token   *uint64  `json:"token"`
			TTLms   int64    `json:"ttl_ms"`
			DelayMs int64    `json:"delay_ms"`
			Holders []Holder `json:"holders"`
			Waiters []Holder `json:"waiters"`
		} `json:"locks"`
		Cursor *string `json:"cursor"`
	}
	if err := decode(a, "list", &j); err != nil {
		return nil, err
	}
	p := &ListPage{}
	if j.Cursor != nil {
		p.Cursor = *j.Cursor
	}
	for _, e := range j.Locks {
		ll := ListedLock{Name: e.Name, TTL: time.Duration(e.TTLms) * time.Millisecond,
			Delay: time.Duration(e.DelayMs) * time.Millisecond, Holders: e.Holders, Waiters: e.Waiters}
		if e.Mode != nil {
			ll.Mode = *e.Mode
		}
		if e.Token != nil {
			ll.Token = *e.Token
		}
		p.Locks = append(p.Locks, ll)
	}
	return p, nil
}

// ListAll follows List's cursors to the end (at most 10000 pages of 1000)
// and gives every entry.
func (c *Client) ListAll(ctx context.Context, prefix string) ([]ListedLock, error) {
	var out []ListedLock
	cursor := ""
	for pages := 0; pages < 10000; pages++ {
		p, err := c.List(ctx, prefix, 1000, cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Locks...)
		if p.Cursor == "" {
			return out, nil
		}
		cursor = p.Cursor
	}
	return out, fmt.Errorf("fencegate: listing %q did not end within 10000 pages", prefix)
}

// Break ends the grant of lock name whose token is given, whoever holds
// it, as if it had expired now. A token that is not the current grant's is
// ErrStaleToken (the *APIError carries Token and Current).
func (c *Client) Break(ctx context.Context, name string, token uint64) error {
	_, err := c.do(ctx, &call{method: "DELETE", path: lockPath(name), brk: strconv.FormatUint(token, 10)})
	return err
}

// CheckResult is what check answers about a sequencer.
type CheckResult struct {
	// Valid is true when the sequencer's grant holds its lock now.
	Valid bool `json:"valid"`
	// Reason is "stale", "expired", "forged" or "malformed" when not valid.
	Reason string `json:"reason"`
	// Name is the sequencer's lock, when valid.
	Name string `json:"name"`
	// Token is the grant's token, when valid.
	Token uint64 `json:"token"`
	// Mode is the grant's mode, when valid.
	Mode string `json:"mode"`
}

// Check asks whether sequencer belongs to the grant that holds its lock
// now.
func (c *Client) Check(ctx context.Context, sequencer string) (*CheckResult, error) {
	a, err := c.do(ctx, &call{method: "POST", path: "/_fence/v1/check",
		body: map[string]string{"sequencer": sequencer}})
	if err != nil {
		return nil, err
	}
	var r CheckResult
	if err := decode(a, "check", &r); err != nil {
		return nil, err
	}
	return &r, nil
}
