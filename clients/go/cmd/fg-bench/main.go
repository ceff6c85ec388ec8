// Command fg-bench measures lock cycles or fenced writes through one
// gateway, from one goroutine, with the client library or with net/http
// alone, and prints one line: cycles_per_s=N.
//
//	fg-bench -gateway URL -lock-prefix P -seconds S -mode lock|put -impl client|raw
//
// mode lock: each cycle is an acquire and a release of a fresh lock name,
// P+"lock-"+N. mode put: lock P+"put.txt" is taken once; each cycle is a
// PUT of 1 KiB to /P+"put.txt" carrying its sequencer. P must name a place the gateway's
// store can write (an existing collection, such as "app/bench-").
//
// Invariant: both implementations send the same requests in the same
// order; raw differs only in doing it by hand.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	fencegate "github.com/fencegate/fencegate/clients/go"
)

func main() {
	gateway := flag.String("gateway", "", "the gateway's base URL")
	prefix := flag.String("lock-prefix", "bench/", "prefix of the lock names used")
	seconds := flag.Float64("seconds", 5, "how long to run")
	mode := flag.String("mode", "lock", "lock (acquire+release) or put (fenced PUTs)")
	impl := flag.String("impl", "client", "client (the library) or raw (net/http)")
	profile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *gateway == "" || *seconds <= 0 || (*mode != "lock" && *mode != "put") ||
		(*impl != "client" && *impl != "raw") {
		flag.Usage()
		os.Exit(2)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fg-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "fg-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	base := strings.TrimRight(*gateway, "/")
	d := time.Duration(*seconds * float64(time.Second))
	var n int
	var err error
	switch {
	case *impl == "client" && *mode == "lock":
		n, err = clientLock(base, *prefix+"lock-", d)
	case *impl == "client":
		n, err = clientPut(base, *prefix+"put.txt", d)
	case *mode == "lock":
		n, err = rawLock(base, *prefix+"lock-", d)
	default:
		n, err = rawPut(base, *prefix+"put.txt", d)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "fg-bench:", err)
		os.Exit(1)
	}
	fmt.Printf("cycles_per_s=%.1f\n", float64(n)/d.Seconds())
}

func newClient(base string) (*fencegate.Client, error) {
	return fencegate.New(fencegate.Config{Gateways: []string{base}})
}

func clientLock(base, name string, d time.Duration) (int, error) {
	c, err := newClient(base)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		l, err := c.Lock(ctx, name+strconv.Itoa(n), &fencegate.LockOptions{TTL: 30 * time.Second, Wait: 5 * time.Second})
		if err != nil {
			return n, err
		}
		if err := l.Release(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

func clientPut(base, name string, d time.Duration) (int, error) {
	c, err := newClient(base)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	l, err := c.Lock(ctx, name, &fencegate.LockOptions{TTL: 30 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	defer l.Release(ctx)
	hc := &http.Client{Transport: l.RoundTripper(nil)}
	body := bytes.Repeat([]byte("x"), 1024)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		req, err := http.NewRequestWithContext(ctx, "PUT", base+"/"+name, bytes.NewReader(body))
		if err != nil {
			return n, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return n, err
		}
		if err := fencegate.ResponseError(resp); err != nil {
			return n, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return n, nil
}

// raw: the same calls on net/http directly.

var rawClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}

type rawGrant struct {
	Lease     string `json:"lease"`
	Sequencer string `json:"sequencer"`
}

func rawAcquire(base, name string) (*rawGrant, error) {
	resp, err := rawClient.Post(base+"/_fence/v1/locks/"+name, "application/json",
		strings.NewReader(`{"ttl_ms":30000,"wait_ms":5000}`))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("acquire: HTTP %d", resp.StatusCode)
	}
	var g rawGrant
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

func rawRelease(base, name, lease string) error {
	req, err := http.NewRequest("DELETE", base+"/_fence/v1/locks/"+name, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Fence-Lease", lease)
	resp, err := rawClient.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 {
		return fmt.Errorf("release: HTTP %d", resp.StatusCode)
	}
	return nil
}

func rawLock(base, name string, d time.Duration) (int, error) {
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		g, err := rawAcquire(base, name+strconv.Itoa(n))
		if err != nil {
			return n, err
		}
		if err := rawRelease(base, name+strconv.Itoa(n), g.Lease); err != nil {
			return n, err
		}
	}
	return n, nil
}

func rawPut(base, name string, d time.Duration) (int, error) {
	g, err := rawAcquire(base, name)
	if err != nil {
		return 0, err
	}
	defer rawRelease(base, name, g.Lease)
	body := bytes.Repeat([]byte("x"), 1024)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		req, err := http.NewRequest("PUT", base+"/"+name, bytes.NewReader(body))
		if err != nil {
			return n, err
		}
		req.Header.Set("Fencing-Token", g.Sequencer)
		resp, err := rawClient.Do(req)
		if err != nil {
			return n, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return n, fmt.Errorf("PUT: HTTP %d", resp.StatusCode)
		}
	}
	return n, nil
}
