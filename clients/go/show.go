// show.go - how a Lease and a Client print.
//
// Invariant: printing either, with any verb or flag (%v, %+v, %#v, %s,
// %q), shows only what is no secret: a lease's lock name, token and mode;
// a client's gateways as scheme and host. A lease string, a sequencer, a
// key or a URL's userinfo is never shown.

package fencegate

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// String gives the lock's name, the token and the mode.
func (l *Lease) String() string {
	if l == nil {
		return "<nil>"
	}
	return fmt.Sprintf("fencegate.Lease{Name: %q, Token: %d, Mode: %q}", l.name, l.token, l.mode)
}

// GoString is String: the fields that are no secret.
func (l *Lease) GoString() string { return l.String() }

// Format prints String for every verb, so that no verb or flag reaches
// the lease's fields.
func (l *Lease) Format(f fmt.State, verb rune) { format(f, verb, l.String()) }

// String gives the client's gateways, scheme and host only.
func (c *Client) String() string {
	if c == nil {
		return "<nil>"
	}
	hosts := make([]string, 0, len(c.gateways))
	for _, g := range c.gateways {
		hosts = append(hosts, strconv.Quote(gatewayHost(g)))
	}
	return "fencegate.Client{Gateways: [" + strings.Join(hosts, ", ") + "]}"
}

// GoString is String.
func (c *Client) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *Client) Format(f fmt.State, verb rune) { format(f, verb, c.String()) }

// gatewayHost is a gateway URL's scheme and host: no userinfo, path or
// query, which may carry a secret.
func gatewayHost(g string) string {
	u, err := url.Parse(g)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host
}

func format(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = io.WriteString(f, s)
}
