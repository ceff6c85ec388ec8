"""test_s3_faults.py - the faults of contract v1.1 and v1.1.1 on S3,
through the gateway in front of a real radosgw: a client paused past its
lease; writes whose lease ends mid-body (release, break, expiry, a
shorter renewal, through either gateway; PutObject, UploadPart, an
aws-chunked body, DeleteObjects' body read before its check); a client
that leaves mid-body; Redis down before a write and during one; the
store down before a write and during one. Every outcome is read back
from the store itself.

The bodies are sent by hand (storage.RawRequest, signed here) so that the
end of the lease comes while the body is still on its way."""

import base64
import datetime
import hashlib
import os
import re
import threading
import time
import urllib.parse
import uuid

import harness
import rgw
import s3env
from harness import slack, wait_lock_free
from s3env import S3Case
from storage import RawRequest

KIB = 1024
# the gateway's fence-margin-ms (its default, which these gateways run)
MARGIN_S = 0.25
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
# radosgw's log line for a request it begins (debug_rgw 1)
STORE_BEGUN = re.compile(
    r"^(\S+) \S+ +\d+ ====== starting new request req=(\S+) ", re.M)


def pattern(n, tag):
    """n bytes of a body nobody else writes."""
    unit = (b"%s-" % tag.encode()) * 7 + b"\n"
    return (unit * (n // len(unit) + 1))[:n]


class SlowS3Write:
    """A signed S3 write whose body the test paces: the head and `first`
    bytes now, then (trickle()) 256 bytes every 50 ms from a thread, never
    reaching the last KiB, until stop(); finish() sends the rest."""

    def __init__(self, tc, method, target, body, token, headers=None,
                 payload_hash=None, first=64 * KIB):
        h = {"Host": tc.host(), "Content-Length": str(len(body)),
             "x-amz-security-token": token}
        h.update(headers or {})
        ph = payload_hash or hashlib.sha256(body).hexdigest()
        h["x-amz-content-sha256"] = ph
        path, _, query = target.partition("?")
        self.when = datetime.datetime.now(datetime.timezone.utc)
        self.signature = s3env.sign(method, path, query, h, ph,
                                    when=self.when)
        self.body = body
        self.rq = RawRequest(tc.gw.port, method, target,
                             [(k, v) for k, v in h.items() if k != "Host"])
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self.failed = False
        if first:
            self.send(first)

    def send(self, n):
        with self._lock:
            n = min(n, len(self.body) - self.sent)
            self.rq.send(self.body[self.sent:self.sent + n])
            self.sent += n

    def _run(self):
        while not self._stop.wait(0.05):
            if len(self.body) - self.sent <= KIB:
                continue
            try:
                self.send(256)
            except OSError:
                self.failed = True
                return

    def trickle(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(slack(5.0))

    def finish(self):
        """The rest of the body; errors mean the gateway gave up on it."""
        self.stop()
        try:
            while self.sent < len(self.body):
                self.send(64 * KIB)
        except OSError:
            self.failed = True

    def close(self):
        self.stop()
        self.rq.close()


class FaultHelpers:
    """What both classes share."""

    def resume_redis(self):
        """SIGCONT after pause(). Cluster nodes stopped for longer than
        their node timeout flag each other failed as they wake, and a
        replica may be promoted: the next test waits until every node
        agrees on the slot map again (a failover the gateway must then
        follow, which the Cluster tests check on their own)."""
        self.redis.resume()
        settle = getattr(self.redis, "wait_ok", None)
        if settle is not None:
            settle(slack(30.0))

    def fresh_bucket(self):
        """A bucket of this test's own, made at the store (S3Case.bucket()
        counts per test, so two tests of a class would share names)."""
        return self.make_bucket(self.bucket(uuid.uuid4().hex[:8]))

    def store_mark(self):
        """Where and when the store's log is now (wait_upstream's
        `since`)."""
        return self.store.rgw.log_offset(), time.time()

    def wait_upstream(self, what, since):
        """Waits until the store has begun a request after `since` that it
        has not finished: the write this test sent then (nothing else
        reaches this class's store while a test waits here). radosgw's
        clock is coarse (a few ms): a request begun within 20 ms before
        the mark counts, unless it is done."""
        offset, t_mark = since
        path = os.path.join(self.store.rgw.dir, "log", rgw.RGW_NAME + ".log")

        def begun():
            with open(path, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
            for m in STORE_BEGUN.finditer(text):
                t = datetime.datetime.strptime(m.group(1),
                                               "%Y-%m-%dT%H:%M:%S.%f%z")
                done = "====== req done req=%s " % m.group(2)
                if t.timestamp() >= t_mark - 0.020 and \
                        done not in text[m.end():]:
                    return True
            return False
        self.wait_for(begun, slack(5.0), "%s to reach the store" % what)

    def transfers(self):
        return harness.metric_value(self.gw, "fencegate_upstream_transfers")

    def wait_no_transfers(self, what):
        """Waits until the gateway holds no transfer (from a request's
        head to its answer's last byte)."""
        self.wait_for(lambda: self.transfers() == 0, slack(5.0),
                      "%s to end" % what)


class S3FaultTests(FaultHelpers, S3Case):
    """Two gateways on one Redis in front of radosgw (the writes go
    through the first; a lease may end through the second), Redis calls
    bounded to 500 ms."""

    extra_config = ("redis-timeout-ms 500",)
    gateway_count = 2   # a lease ended through the other one

    # -- helpers ---------------------------------------------------------

    def put_ok(self, bucket, key, data, seq):
        r = self.s3("PUT", "/%s/%s" % (bucket, key), body=data, token=seq)
        self.assertEqual(r.status, 200, r)
        return r

    def assert_cut(self, up, what):
        """The client of a write cut off mid-body sends the rest of its
        body (which, were it forwarded, would complete the write: its
        payload hash is right) and gets 409 FenceStaleToken in S3 XML:
        the gateway answers once it has read the body, as for WebDAV."""
        up.finish()
        r = up.rq.read_response(slack(5.0))
        self.assertIsNotNone(r, "%s: no answer" % what)
        self.assertS3Error(r, 409, "FenceStaleToken")
        self.wait_no_transfers(what)
        return r

    def assert_stored(self, bucket, key, data, what):
        status, body = self.store_get(bucket, key)
        self.assertEqual((status, body), (200, data),
                         "%s: the store holds %r" % (what, body[:80]))

    def end_lease(self, how, lock, g):
        """Ends grant g (an acquire's answer) as `how` says, through this
        gateway or, "... through the other gateway", the second one;
        returns once the lock says it ended and the margin has passed.

        The end of a lease reaches a running write as a message from
        Redis, and the guarantee is that the write stops within the
        margin of the end (docs/safety.md, 8.5 and window 6): the bytes a
        test sends next, to show they are not passed, come after it. (On
        a Cluster the message crosses the cluster bus; on a loaded
        machine the gateway may read the client's next bytes before the
        message.)"""
        try:
            self._end_lease(how, lock, g)
        finally:
            time.sleep(slack(MARGIN_S))

    def _end_lease(self, how, lock, g):
        gw = self.gw
        if how.endswith(" through the other gateway"):
            gw = self.env.gateways[1]
            how = how[:-len(" through the other gateway")]
        if how == "release":
            self.release_ok(lock, g["lease"], gw=gw)
        elif how == "break":
            r = gw.request("DELETE", harness.LOCKS + lock,
                           headers={"Fence-Break": str(g["token"])})
            self.assertEqual(r.status, 204, r)
        elif how == "shorter renewal":
            r = self.renew(lock, g["lease"], gw=gw, ttl_ms=300)
            self.assertEqual(r.status, 200, r)
            wait_lock_free(self, lock, timeout=slack(5.0), gw=gw)
        elif how == "expiry":
            wait_lock_free(self, lock, timeout=slack(10.0))
        else:
            raise AssertionError(how)

    # -- a client paused past its lease ------------------------------------

    def test_write_of_a_client_paused_past_its_lease_is_refused_and_the_new_holders_object_stays(self):
        b = self.fresh_bucket()
        lock = "%s/obj" % b
        a = self.acquire_ok(lock, ttl_ms=400)
        # the client pauses with its sequencer; its lease runs out
        wait_lock_free(self, lock, timeout=slack(5.0))
        n = self.acquire_ok(lock, ttl_ms=30000)
        self.addCleanup(self.release, lock, n["lease"])
        new = b"the new holder's object\n"
        self.put_ok(b, "obj", new, n["sequencer"])
        # the paused client wakes and writes, as a PutObject, a multipart
        # create and a delete
        for method, target, body in (
                ("PUT", "/%s/obj" % b, b"the paused client's object\n"),
                ("POST", "/%s/obj?uploads" % b, b""),
                ("DELETE", "/%s/obj" % b, b"")):
            with self.subTest(method=method, target=target):
                r = self.s3(method, target, body=body, token=a["sequencer"])
                self.assertS3Error(r, 409, "FenceStaleToken")
                self.assertEqual(r.body.count(b"<Token>%d</Token>"
                                              % a["token"]), 1, r)
                self.assertEqual(r.body.count(b"<CurrentToken>%d</CurrentToken>"
                                              % n["token"]), 1, r)
        with self.subTest(method="presigned PUT"):
            target = s3env.presign("PUT", "/%s/obj" % b, self.host(),
                                   token=a["sequencer"])
            data = b"the paused client's presigned object\n"
            r = s3env.send(self.gw.port, "PUT", target, {
                "Host": self.host(), "Content-Length": str(len(data))}, data)
            self.assertS3Error(r, 409, "FenceStaleToken")
        self.assert_stored(b, "obj", new, "after the stale writes")
        ups = self.store_s3("GET", "/%s?uploads" % b)
        self.assertEqual(ups.status, 200, ups)
        self.assertNotIn(b"<UploadId>", ups.body,
                         "the stale CreateMultipartUpload reached the store")

    # -- lease ends mid-body ---------------------------------------------------

    def test_put_object_cut_off_mid_body_by_every_end_of_its_lease_is_never_applied_and_the_next_holder_does_not_wait(self):
        for how in ("release", "break", "expiry", "shorter renewal",
                    "release through the other gateway",
                    "shorter renewal through the other gateway",
                    "expiry while the client is paused"):
            with self.subTest(how=how):
                b = self.fresh_bucket()
                key = "big.bin"
                lock = "%s/%s" % (b, key)
                old = b"the object before\n"
                self.assertEqual(self.store_s3("PUT", "/%s/%s" % (b, key),
                                               body=old).status, 200)
                ttl = 3000 if how.startswith("expiry") else 30000
                g = self.acquire_ok(lock, ttl_ms=ttl)
                body = pattern(1024 * KIB, "cut-" + how.replace(" ", "-"))
                since = self.store_mark()
                up = SlowS3Write(self, "PUT", "/%s/%s" % (b, key), body,
                                 g["sequencer"])
                self.addCleanup(up.close)
                self.wait_upstream("the PutObject", since)
                # the body keeps coming through the end of the lease and the
                # next holder's write, or the client stops sending, as if
                # paused, until the rest of its body goes at once
                if how == "expiry while the client is paused":
                    self.end_lease("expiry", lock, g)
                else:
                    up.trickle()
                    self.end_lease(how, lock, g)
                self.assert_stored(b, key, old, how)
                # the next holder writes at once: it does not wait for the
                # old body, still on its way
                n = self.acquire_ok(lock, ttl_ms=30000)
                self.addCleanup(self.release, lock, n["lease"])
                t0 = time.monotonic()
                new = b"the next holder's object\n"
                r = self.s3("PUT", "/%s/%s" % (b, key), body=new,
                            token=n["sequencer"], timeout=slack(5.0))
                self.assertEqual(r.status, 200, r)
                self.assertLess(time.monotonic() - t0, slack(2.0))
                self.assertFalse(up.failed, "the old body was refused "
                                 "before it ended")
                self.assertLess(up.sent, len(body))
                # the old body ends, every byte right: too late
                self.assert_cut(up, "the cut PutObject")
                self.assert_stored(b, key, new, how + ", next holder")

    def upload_id(self, r):
        m = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body)
        self.assertIsNotNone(m, r)
        return m.group(1).decode()

    def test_upload_part_cut_off_mid_body_is_not_part_of_the_upload(self):
        for how in ("release", "break through the other gateway"):
            with self.subTest(how=how):
                b = self.fresh_bucket()
                key = "multi.bin"
                lock = "%s/%s" % (b, key)
                g = self.acquire_ok(lock, ttl_ms=30000)
                r = self.s3("POST", "/%s/%s?uploads" % (b, key),
                            token=g["sequencer"])
                self.assertEqual(r.status, 200, r)
                uid = self.upload_id(r)
                q = urllib.parse.quote(uid, safe="")
                body = pattern(1024 * KIB + 17, "part-" + how)
                since = self.store_mark()
                up = SlowS3Write(self, "PUT", "/%s/%s?partNumber=1&uploadId=%s"
                                 % (b, key, q), body, g["sequencer"])
                self.addCleanup(up.close)
                self.wait_upstream("the UploadPart", since)
                up.trickle()
                up.stop()
                self.end_lease(how, lock, g)
                self.assertLess(up.sent, len(body))
                self.assert_cut(up, "the cut UploadPart")
                parts = self.store_s3("GET", "/%s/%s?uploadId=%s" % (b, key, q))
                self.assertEqual(parts.status, 200, parts)
                self.assertNotIn(b"<PartNumber>", parts.body,
                                 "the cut part is in the upload: %r"
                                 % parts.body)
                etag = hashlib.md5(body).hexdigest()
                complete = ("<CompleteMultipartUpload><Part><PartNumber>1"
                            "</PartNumber><ETag>\"%s\"</ETag></Part>"
                            "</CompleteMultipartUpload>" % etag).encode()
                c = self.store_s3("POST", "/%s/%s?uploadId=%s" % (b, key, q),
                                  body=complete)
                self.assertEqual(c.status, 400, c)
                self.assertEqual(self.s3_error(c), "InvalidPart", c)
                self.assertEqual(self.store_get(b, key)[0], 404)

    def streaming_put(self, b, key, seq, data, chunk):
        """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD PutObject's head sent on a
        raw connection: (the request, its framed body, one chunk's size
        framed)."""
        h = {"Host": self.host(),
             "Content-Length": str(s3env.streaming_length(len(data), chunk)),
             "Content-Encoding": "aws-chunked",
             "x-amz-decoded-content-length": str(len(data)),
             "x-amz-security-token": seq,
             "x-amz-content-sha256": STREAMING}
        when = datetime.datetime.now(datetime.timezone.utc)
        seed = s3env.sign("PUT", "/%s/%s" % (b, key), "", h, STREAMING,
                          when=when)
        framed = s3env.aws_chunked(data, chunk, seed, when)
        self.assertEqual(len(framed), int(h["Content-Length"]))
        rq = RawRequest(self.gw.port, "PUT", "/%s/%s" % (b, key),
                        [(k, v) for k, v in h.items() if k != "Host"])
        self.addCleanup(rq.close)
        return rq, framed, len(b"%x;chunk-signature=" % chunk) + 64 + 4 + chunk

    def test_aws_chunked_put_cut_between_chunks_is_not_created(self):
        chunk = 64 * KIB
        for how in ("expiry", "release through the other gateway",
                    "the client leaves mid-chunk"):
            with self.subTest(how=how):
                b = self.fresh_bucket()
                key = "streamed.bin"
                lock = "%s/%s" % (b, key)
                g = self.acquire_ok(lock, ttl_ms=3000 if how == "expiry"
                                    else 30000)
                data = pattern(8 * chunk, "chunked-" + how)
                since = self.store_mark()
                rq, framed, one = self.streaming_put(b, key, g["sequencer"],
                                                     data, chunk)
                # two whole chunks: the first, verified, goes upstream
                rq.send(framed[:2 * one])
                self.wait_upstream("the streaming PutObject", since)
                if how == "the client leaves mid-chunk":
                    rq.send(framed[2 * one:2 * one + one // 2])
                    rq.close()
                    self.wait_no_transfers("the abandoned streaming PutObject")
                    self.assertEqual(self.store_get(b, key)[0], 404)
                    # the same holder streams the object whole, at once
                    t0 = time.monotonic()
                    rq, framed, one = self.streaming_put(
                        b, key, g["sequencer"], data, chunk)
                    rq.send(framed)
                    r = rq.read_response(slack(5.0))
                    self.assertIsNotNone(r)
                    self.assertEqual(r.status, 200, r)
                    self.assertLess(time.monotonic() - t0, slack(2.0))
                    self.assert_stored(b, key, data, "streamed whole")
                    self.release_ok(lock, g["lease"])
                    continue
                self.end_lease(how, lock, g)
                # the next chunks come after the lease's end: the whole
                # body, every chunk signed right, which would create the
                # object were it passed
                rq.send(framed[2 * one:])
                r = rq.read_response(slack(5.0))
                self.assertIsNotNone(r, "the cut streaming PutObject: no answer")
                self.assertS3Error(r, 409, "FenceStaleToken")
                self.wait_no_transfers("the streaming PutObject")
                self.assertEqual(self.store_get(b, key)[0], 404,
                                 "the cut streaming upload created the object")

    def delete_objects_body(self, keys):
        return ("<Delete>%s</Delete>" % "".join(
            "<Object><Key>%s</Key></Object>" % k for k in keys)).encode()

    def slow_delete_objects(self, b, keys, seq, first):
        body = self.delete_objects_body(keys)
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        return SlowS3Write(self, "POST", "/%s?delete" % b, body, seq,
                           headers={"Content-MD5": md5}, first=first)

    def test_delete_objects_whose_lease_ends_while_its_body_is_read_is_refused(self):
        # DeleteObjects' body is read whole before the check: a lease that
        # ends meanwhile refuses it, however right the rest of the body
        for how in ("release", "expiry", "shorter renewal through the other gateway"):
            with self.subTest(how=how):
                b = self.fresh_bucket()
                lock = "%s/doomed.txt" % b
                self.assertEqual(self.store_s3("PUT", "/%s/doomed.txt" % b,
                                               body=b"kept\n").status, 200)
                g = self.acquire_ok(lock, ttl_ms=1500 if how == "expiry"
                                    else 30000)
                up = self.slow_delete_objects(b, ["doomed.txt"],
                                              g["sequencer"], first=20)
                self.addCleanup(up.close)
                harness.wait_read_by_server(self.gw.port, [up.rq.sock],
                                            slack(5.0))
                self.end_lease(how, lock, g)
                up.finish()
                r = up.rq.read_response(slack(5.0))
                self.assertIsNotNone(r, "no answer")
                self.assertS3Error(r, 409, "FenceStaleToken")
                self.assertEqual(self.store_get(b, "doomed.txt"),
                                 (200, b"kept\n"))

    def test_delete_objects_whose_client_leaves_mid_body_deletes_nothing(self):
        b = self.fresh_bucket()
        lock = "%s/stays.txt" % b
        self.assertEqual(self.store_s3("PUT", "/%s/stays.txt" % b,
                                       body=b"stays\n").status, 200)
        g = self.acquire_ok(lock, ttl_ms=30000)
        self.addCleanup(self.release, lock, g["lease"])
        up = self.slow_delete_objects(b, ["stays.txt"], g["sequencer"],
                                      first=30)
        harness.wait_read_by_server(self.gw.port, [up.rq.sock], slack(5.0))
        up.close()
        self.assertTrue(self.gw.alive())
        self.assertEqual(self.store_get(b, "stays.txt"), (200, b"stays\n"))
        # the same holder's whole DeleteObjects goes through at once
        body = self.delete_objects_body(["stays.txt"])
        t0 = time.monotonic()
        r = self.s3("POST", "/%s?delete" % b, body=body, token=g["sequencer"],
                    headers={"Content-MD5": base64.b64encode(
                        hashlib.md5(body).digest()).decode()},
                    timeout=slack(5.0))
        self.assertEqual(r.status, 200, r)
        self.assertLess(time.monotonic() - t0, slack(2.0))
        self.assertEqual(self.store_get(b, "stays.txt")[0], 404)

    # -- a client that leaves mid-body --------------------------------------

    def test_client_that_leaves_mid_body_writes_nothing_and_its_admission_is_given_back(self):
        for how in ("close", "reset"):
            with self.subTest(how=how):
                b = self.fresh_bucket()
                key = "left.bin"
                lock = "%s/%s" % (b, key)
                old = b"the object before\n"
                self.assertEqual(self.store_s3("PUT", "/%s/%s" % (b, key),
                                               body=old).status, 200)
                g = self.acquire_ok(lock, ttl_ms=30000)
                self.addCleanup(self.release, lock, g["lease"])
                body = pattern(512 * KIB, "left-" + how)
                since = self.store_mark()
                up = SlowS3Write(self, "PUT", "/%s/%s" % (b, key), body,
                                 g["sequencer"], first=len(body) // 2)
                self.wait_upstream("the half-sent PutObject", since)
                if how == "reset":
                    up.rq.abort()
                else:
                    up.close()
                self.wait_no_transfers("the abandoned PutObject")
                self.assertTrue(self.gw.alive())
                self.assert_stored(b, key, old, "after the client left")
                # the same holder writes again at once: the departed write
                # holds nothing back
                again = b"written again by the same holder\n"
                t0 = time.monotonic()
                r = self.s3("PUT", "/%s/%s" % (b, key), body=again,
                            token=g["sequencer"], timeout=slack(5.0))
                self.assertEqual(r.status, 200, r)
                self.assertLess(time.monotonic() - t0, slack(2.0))
                self.assert_stored(b, key, again, "the same holder's next write")
                self.assertEqual(self.state(lock)["token"], g["token"])
                # and the next holder waits for nothing either
                self.release_ok(lock, g["lease"])
                n = self.acquire_ok(lock, ttl_ms=30000)
                self.addCleanup(self.release, lock, n["lease"])
                t0 = time.monotonic()
                r = self.s3("PUT", "/%s/%s" % (b, key), body=b"next\n",
                            token=n["sequencer"], timeout=slack(5.0))
                self.assertEqual(r.status, 200, r)
                self.assertLess(time.monotonic() - t0, slack(2.0))
                self.assert_stored(b, key, b"next\n", "the next holder's write")

    # -- Redis down --------------------------------------------------------------

    def test_s3_write_while_redis_is_down_gets_503_xml_with_retry_after_and_writes_nothing(self):
        b = self.fresh_bucket()
        key = "redis-down.txt"
        lock = "%s/%s" % (b, key)
        g = self.acquire_ok(lock, ttl_ms=30000)
        self.addCleanup(self.release, lock, g["lease"])
        before = b"written before Redis went down\n"
        self.put_ok(b, key, before, g["sequencer"])
        self.redis.pause()
        try:
            for method, target, body in (
                    ("PUT", "/%s/%s" % (b, key), b"while Redis is down\n"),
                    ("DELETE", "/%s/%s" % (b, key), b""),
                    ("POST", "/%s/%s?uploads" % (b, key), b"")):
                with self.subTest(method=method, target=target):
                    r = self.s3(method, target, body=body,
                                token=g["sequencer"], timeout=slack(5.0))
                    self.assertS3Error(r, 503, "FenceStoreUnavailable")
                    ra = r.header("Retry-After")
                    self.assertIsNotNone(ra, r)
                    self.assertRegex(ra.strip(), r"^\d+$")
                    self.assertLess(r.elapsed, 0.5 + slack(1.5))
        finally:
            self.resume_redis()
        self.assert_stored(b, key, before, "after the 503s")
        ups = self.store_s3("GET", "/%s?uploads" % b)
        self.assertNotIn(b"<UploadId>", ups.body, ups)
        # Redis back: the same write goes through
        self.wait_for(lambda: self.health().status == 200, slack(5.0),
                      "the gateway to find Redis again")
        after = b"written after Redis came back\n"
        self.put_ok(b, key, after, g["sequencer"])
        self.assert_stored(b, key, after, "after Redis came back")

    def test_s3_write_in_flight_when_redis_goes_down_is_cut_at_its_deadline(self):
        # Redis cannot say the lease was renewed: the write ends by the
        # deadline it was admitted with, and the old object stays
        b = self.fresh_bucket()
        key = "redis-gone.bin"
        lock = "%s/%s" % (b, key)
        old = b"the object before\n"
        self.assertEqual(self.store_s3("PUT", "/%s/%s" % (b, key),
                                       body=old).status, 200)
        g = self.acquire_ok(lock, ttl_ms=2000)
        log0 = os.path.getsize(self.gw.logpath)
        since = self.store_mark()
        up = SlowS3Write(self, "PUT", "/%s/%s" % (b, key),
                         pattern(1024 * KIB, "redis-gone"), g["sequencer"])
        self.addCleanup(up.close)
        self.wait_upstream("the PutObject", since)
        up.trickle()
        self.redis.pause()
        try:
            def aborted():
                with open(self.gw.logpath, "rb") as f:
                    f.seek(log0)
                    text = f.read().decode("utf-8", "replace")
                return re.search(r"write to lock %s .*aborted upstream"
                                 % re.escape(lock), text)
            self.wait_for(aborted, slack(10.0),
                          "the write to be aborted at its deadline")
            up.stop()
            self.assert_cut(up, "the PutObject Redis went down under")
        finally:
            self.resume_redis()
        self.assert_stored(b, key, old, "after the deadline")
        self.wait_for(lambda: self.health().status == 200, slack(5.0),
                      "the gateway to find Redis again")


class S3StoreDownTests(FaultHelpers, S3Case):
    """The store stopped: the class's radosgw is not used again."""

    def test_s3_write_with_the_store_down_gets_502_xml_and_refusals_still_speak_s3(self):
        b = self.make_bucket(self.bucket(uuid.uuid4().hex[:8]))
        key = "store-down.txt"
        lock = "%s/%s" % (b, key)
        g = self.acquire_ok(lock, ttl_ms=30000)
        self.addCleanup(self.release, lock, g["lease"])
        r = self.s3("PUT", "/%s/%s" % (b, key), body=b"before\n",
                    token=g["sequencer"])
        self.assertEqual(r.status, 200, r)
        # a write in flight when the store dies
        since = self.store_mark()
        up = SlowS3Write(self, "PUT", "/%s/%s" % (b, key),
                         pattern(1024 * KIB, "store-dies"), g["sequencer"])
        self.addCleanup(up.close)
        self.wait_upstream("the PutObject", since)
        self.store.stop()
        up.finish()
        r = up.rq.read_response(slack(10.0))
        self.assertIsNotNone(r, "the write the store died under: no answer")
        self.assertS3Error(r, 502, "FenceUpstreamUnavailable")
        for method, target, body in (
                ("PUT", "/%s/%s" % (b, key), b"while the store is down\n"),
                ("GET", "/%s/%s" % (b, key), b"")):
            with self.subTest(method=method):
                r = self.s3(method, target, body=body, token=g["sequencer"],
                            timeout=slack(10.0))
                self.assertS3Error(r, 502, "FenceUpstreamUnavailable")
        # a fence refusal comes before the store: still the fence's answer
        r = self.s3("PUT", "/%s/%s" % (b, key), body=b"no token\n")
        self.assertS3Error(r, 428, "FenceTokenRequired")
        self.assertTrue(self.gw.alive())
