// s3_test.go - the S3 session token: a PutObject signed (by a small SigV4
// signer of the test's own) with the lease's token goes through the S3
// gateway to radosgw; after the release the same token is refused; and
// the token is what `fencectl lock --s3` exports.

package fencegate

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// signV4 signs req (path-style, no query) with AWS Signature Version 4,
// the payload hash signed; token, when not empty, is the session token.
func signV4(req *http.Request, body []byte, keyID, secret, region, token string) {
	now := time.Now().UTC()
	amzDate := now.Format("20060102T150405Z")
	day := amzDate[:8]
	payload := sha256hex(body)
	req.Header.Set("x-amz-date", amzDate)
	req.Header.Set("x-amz-content-sha256", payload)
	if token != "" {
		req.Header.Set("x-amz-security-token", token)
	}
	headers := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.TrimSpace(strings.Join(v, ","))
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canon strings.Builder
	for _, k := range names {
		canon.WriteString(k + ":" + headers[k] + "\n")
	}
	signed := strings.Join(names, ";")
	creq := strings.Join([]string{req.Method, req.URL.EscapedPath(), req.URL.RawQuery,
		canon.String(), signed, payload}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256hex([]byte(creq))
	k := hmacSHA256([]byte("AWS4"+secret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+keyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+hex.EncodeToString(hmacSHA256(k, sts)))
}

func s3Do(t *testing.T, method, base, path string, body []byte, keyID, secret, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	signV4(req, body, keyID, secret, envVar(t, "FG_TEST_S3_REGION"), token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestS3SessionTokenFencesPutObject(t *testing.T) {
	gw := envVar(t, "FG_TEST_S3_GATEWAY")
	bucket := envVar(t, "FG_TEST_S3_BUCKET")
	keyID, secret := envVar(t, "FG_TEST_S3_KEY_ID"), envVar(t, "FG_TEST_S3_SECRET")
	store := envVar(t, "FG_TEST_S3_STORE")
	storeKey, storeSecret := envVar(t, "FG_TEST_S3_STORE_KEY_ID"), envVar(t, "FG_TEST_S3_STORE_SECRET")
	key := uniqueName(t, "", ".txt")
	path := "/" + bucket + "/" + key
	c := newClient(t, Config{Gateways: []string{gw}})
	ctx := testCtx(t, 60*time.Second)
	t.Setenv("AWS_SESSION_TOKEN", "")

	l, err := c.Lock(ctx, bucket+"/"+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := l.S3SessionToken()
	if err != nil || token != l.Sequencer() {
		t.Fatalf("session token: %v (equal to the sequencer: %v)", err, token == l.Sequencer())
	}
	body := []byte("put under the lock, through S3 mode")
	if st, b := s3Do(t, "PUT", gw, path, body, keyID, secret, token); st != 200 {
		t.Fatalf("PutObject with the session token: %d %s", st, b)
	}
	if st, b := s3Do(t, "PUT", gw, path, []byte("no token"), keyID, secret, ""); st != 428 ||
		!strings.Contains(b, "FenceTokenRequired") {
		t.Fatalf("PutObject without a token: %d %s", st, b)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.S3SessionToken(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("session token after the release: %v", err)
	}
	if st, b := s3Do(t, "PUT", gw, path, []byte("stale"), keyID, secret, token); st != 409 ||
		!strings.Contains(b, "FenceStaleToken") {
		t.Fatalf("PutObject with the released token: %d %s", st, b)
	}
	if st, b := s3Do(t, "GET", store, path, nil, storeKey, storeSecret, ""); st != 200 || b != string(body) {
		t.Fatalf("the store holds %d %q", st, b)
	}
}

// The session token is the one `fencectl lock --s3` gives its command,
// whatever AWS_SESSION_TOKEN held before.
func TestS3SessionTokenMatchesFencectl(t *testing.T) {
	fencectl := envVar(t, "FG_TEST_FENCECTL")
	gw := envVar(t, "FG_TEST_S3_GATEWAY")
	bucket := envVar(t, "FG_TEST_S3_BUCKET")
	for _, before := range []string{"", "an-aws-session-token", "fg1.YQ.x.1.bWFj"} {
		name := bucket + "/" + uniqueName(t, "", "")
		cmd := exec.Command(fencectl, "lock", name, "--s3", "--gateway", gw, "--",
			"sh", "-c", `printf '%s\n%s' "$FENCE_SEQUENCER" "$AWS_SESSION_TOKEN"`)
		cmd.Env = append(os.Environ(), "AWS_SESSION_TOKEN="+before)
		if before == "" {
			cmd.Env = append(os.Environ(), "AWS_SESSION_TOKEN=")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fencectl: %v", err)
		}
		lines := strings.SplitN(string(out), "\n", 2)
		if len(lines) != 2 {
			t.Fatalf("fencectl printed %d lines", len(lines))
		}
		got, err := S3SessionToken(before, lines[0])
		if err != nil || got != lines[1] {
			t.Fatalf("before %q: the library gives another session token than fencectl", before)
		}
	}
	t.Setenv("AWS_SESSION_TOKEN", "fg1.YQ.x.1.bWFj")
	c := newClient(t, Config{Gateways: []string{gw}})
	ctx := testCtx(t, 30*time.Second)
	err := c.WithLock(ctx, bucket+"/"+uniqueName(t, "", ""), nil, func(_ context.Context, l *Lease) error {
		tok, err := l.S3SessionToken()
		if err != nil || tok != "fg1.YQ.x.1.bWFj,"+l.Sequencer() {
			t.Errorf("nested session token: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
