// fault_unit_test.go - fault shapes the real environment cannot make (a
// gateway that accepts and never answers, answers that race a cancel,
// malformed grants), against fake gateways.

package fencegate

import (
	"context"
	"net"
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
