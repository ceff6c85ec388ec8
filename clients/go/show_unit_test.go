// show_unit_test.go - printing a Lease or a Client shows no secret.

package fencegate

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestUnitPrintingShowsNoSecret(t *testing.T) {
	f := newFake(t, 30000)
	// userinfo, path and query of a gateway URL are not shown either
	u := strings.Replace(f.srv.URL, "http://", "http://user:pass-SECRET@", 1) + "/?k=qSECRET"
	c, err := New(Config{Gateways: []string{u}, Key: "key-SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(context.Background(), "app/x.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	secrets := []string{l.lease, l.sequencer, "SECRET", "pass"}
	var nilLease *Lease
	var nilClient *Client
	for _, v := range []any{l, c, nilLease, nilClient, []any{l, c}, struct{ L *Lease }{l}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Fatalf("%s of %T shows a secret: %s", verb, v, out)
				}
			}
		}
	}
	for _, want := range []string{"app/x.txt", "7", "exclusive"} {
		if !strings.Contains(fmt.Sprintf("%v", l), want) {
			t.Fatalf("%%v of a lease lacks %q: %v", want, l)
		}
	}
	if host := strings.TrimPrefix(f.srv.URL, "http://"); !strings.Contains(fmt.Sprintf("%+v", c), host) {
		t.Fatalf("%%+v of a client lacks its gateway %s: %+v", host, c)
	}
}
