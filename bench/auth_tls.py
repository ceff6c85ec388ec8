"""auth_tls.py - the identity and TLS rows of bench/run.py (issue 17).

  auth: the per-request cost of a key. A fencegate with an auth-file of
    AUTH_PRINCIPALS principals (the bench key one of them; a key is looked
    up by comparing its SHA-256 with every principal's) and --proxy-auth
    required (fg-key), against an open fencegate, no auth-file (fg-open),
    same flags else: 1 KiB GETs, `Fence-Authorization: Bearer <key>` on
    every request to fg-key; lock cycles (fence_cycle.lua),
    `Authorization: Bearer <key>` on every request to fg-key.
  tls: one ECDSA P-256 certificate (self-signed, made with the openssl CLI)
    for a fencegate with --tls-cert/--tls-key (fg-tls) and for nginx as an
    HTTPS reverse proxy (nginx-tls, peers.ProxyNginx) to the same storage:
    1 KiB GETs over kept-alive connections; then one new TLS connection per
    GET (`Connection: close`), whose rate is the handshake rate. nginx keeps
    no session cache and issues no tickets, so its handshakes are full
    ones; whether each server resumes an offered session is checked and
    printed (wrk offers the last one on reconnect).

Each comparison runs AUTH_ROUNDS or TLS_ROUNDS rounds, the order reversed
every other round, the rounds averaged; the fencegate under test goes first
in the first round, so that a first run that comes out slower counts
against it. Each run also says how the server spread its CPU over its
threads (fencegate's loops share one listening socket, so connections can
land unevenly).

Invariant: the bench key lives only in files of mode 0600 under the run's
temp dir, read by the wrk scripts and by this module; it is never on a
command line, in a log or in the output. Every process started here is
registered with the harness and stopped by PID when its rows end.
"""

import os
import subprocess

import harness
from measure import SpreadHook, errs_of, kids, thread_ticks
from peers import ProxyNginx
from summary import Row, ratio, verdict

HERE = os.path.dirname(os.path.abspath(__file__))


def at_objects(B):
    """NOBJ OBJ_SIZE-byte objects at B.at_path on the storage; False on a
    failure."""
    obj = b"x" * B.k.OBJ_SIZE
    for i in range(B.k.NOBJ):
        code, body = B.http(B.store.url() + B.at_path + str(i), "PUT", obj)
        if code not in (201, 204):
            B.say("  pre-create PUT %s%d -> %s %s" % (B.at_path, i, code,
                                                     body[:200]))
            return False
    return True


def auth_file(B, d):
    """d/auth-file of AUTH_PRINCIPALS principals, each minted by
    `fencegate --new-key`; the one named bench (in the middle) holds the
    bench key, written to lock.hdr and proxy.hdr as the header lines of
    the lock API and of proxied requests. The key, or None."""
    os.makedirs(d, mode=0o700, exist_ok=True)
    path = os.path.join(d, "auth-file")
    mid = B.k.AUTH_PRINCIPALS // 2
    key = None
    lines = []
    for i in range(1, B.k.AUTH_PRINCIPALS + 1):
        name = "bench" if i == mid else "svc-%04d" % i
        p = subprocess.run([B.a.bin, "--new-key", name], capture_output=True,
                           text=True)
        out = p.stdout.splitlines()
        f = out[1].split() if len(out) > 1 else []
        if not out or len(f) < 2 or f[0] != name or \
                not f[1].startswith("sha256:"):
            B.say("  !! fencegate --new-key %s gave no key and auth-file line"
                  % name)
            return None
        if name == "bench":
            key = out[0].strip()
            lines.append("%s %s lock:* observe:* read:*" % (name, f[1]))
        else:
            lines.append("%s %s lock:%s/ observe:%s/ read:%s/"
                         % (name, f[1], name, name, name))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    for fn, h in (("lock.hdr", "Authorization"),
                  ("proxy.hdr", "Fence-Authorization")):
        fd = os.open(os.path.join(d, fn), os.O_WRONLY | os.O_CREAT |
                     os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("%s: Bearer %s\n" % (h, key))
    return key


def spread_run(B, pid, label, fn):
    """fn() (a wrk run labelled label) with pid's spread over its threads
    taken around the measured run, then said."""
    hook = SpreadHook(pid)
    B.m.hooks = [hook]
    try:
        fn()
    finally:
        B.m.hooks = []
    s = hook.spread.get(label)
    B.spread[label] = s
    B.say("  %-28s busiest thread: %s%% of the server's CPU (%d process(es), "
          "%d thread(s))" % ("", "?" if s is None else s, len(kids(pid)),
                             len(thread_ticks(pid))))


def mean_field(B, labels, key):
    v = [float(B.m.runs[l].result[key]) for l in labels
         if l in B.m.runs and B.m.runs[l].result and
         B.m.runs[l].result.get(key)]
    return "%.1f" % (sum(v) / len(v)) if v else None


def wrk_errs(B, labels):
    return sum(errs_of(B.m.runs[l].result) for l in labels
               if l in B.m.runs and B.m.runs[l].result)


def auth_rows(B):
    k, f = B.k, B.f
    B.spread = getattr(B, "spread", {})
    B.at_skipped = getattr(B, "at_skipped", [])
    B.at_path = "/fgt-%s/obj-" % B.runid
    B.say("[auth] a fencegate with an auth-file of %d principals and "
          "--proxy-auth required (fg-key) against an open one, no auth-file "
          "(fg-open); same flags else; the bench key one of the principals, "
          "rights lock:* observe:* read:*" % k.AUTH_PRINCIPALS)
    d = os.path.join(B.tmp, "auth")
    key = auth_file(B, d)
    if key is None:
        B.at_skipped.append("auth (no auth-file)")
        return
    af = os.path.join(d, "auth-file")
    with open(af) as fh:
        n_lines = sum(1 for l in fh if l.strip())
    B.say("  auth-file: %d lines, %d bytes, keys minted with fencegate "
          "--new-key" % (n_lines, os.path.getsize(af)))
    if not at_objects(B):
        B.at_skipped.append("auth (no objects)")
        return
    lock_h = {"Authorization": "Bearer " + key}
    proxy_h = {"Fence-Authorization": "Bearer " + key}
    go = B.start_fg("fg-open", B.redis.port)
    if go is None:
        B.xfg_died.append("fg-open did not start")
        return
    gk = B.start_fg("fg-key", B.redis.port, ["--auth-file", af,
                                             "--proxy-auth", "required"],
                    headers=lock_h)
    if gk is None:
        B.xfg_died.append("fg-key did not start")
        B.xfg_done(go, "the auth runs")
        return
    del key
    p0 = B.at_path + "0"
    c1 = B.http(gk.url + p0)
    c2 = B.http(gk.url + p0, headers=proxy_h)
    c3 = B.http(gk.url + harness.LOCKS + "fgbench-nokey-" + B.runid, "POST",
                b'{"ttl_ms":30000}', {"Content-Type": "application/json"})
    c4 = B.http(go.url + p0)
    B.say("  smoke: GET %s on fg-key without a key -> %s %s; with "
          "Fence-Authorization -> %s %d; acquire without a key -> %s; GET on "
          "fg-open -> %s %d" % (p0, c1[0], c1[1][:200].decode("utf-8",
                                                              "replace"),
                                c2[0], len(c2[1]), c3[0], c4[0], len(c4[1])))
    ok = (c1[0] == 401 and (c2[0], len(c2[1])) == (200, k.OBJ_SIZE) and
          c3[0] == 401 and (c4[0], len(c4[1])) == (200, k.OBJ_SIZE))
    if ok:
        B.m.only([("redis", B.redis.proc.pid),
                  ("nginx-store", B.store.proc.pid),
                  ("fg-open", go.proc.pid), ("fg-key", gk.proc.pid)])
        B.say("[auth GET] %d-byte GETs of %d objects, wrk -t%d -c%d; %d "
              "round(s), the order reversed every other round"
              % (k.OBJ_SIZE, k.NOBJ, k.WRK_THREADS, k.CONNS, k.AUTH_ROUNDS))
        hdr = os.path.join(d, "proxy.hdr")
        for r in range(1, k.AUTH_ROUNDS + 1):
            order = ["key", "open"] if r % 2 else ["open", "key"]
            for t in order:
                label = "auth-get-%s-r%d" % (t, r)
                g = gk if t == "key" else go
                spread_run(B, g.proc.pid, label, lambda: B.io_run(
                    label, g.name, g.url, "GET", "",
                    hdr if t == "key" else "", path=B.at_path))
        gets_o = ["auth-get-open-r%d" % r for r in range(1, k.AUTH_ROUNDS + 1)]
        gets_k = ["auth-get-key-r%d" % r for r in range(1, k.AUTH_ROUNDS + 1)]
        B.io_merge("auth-get-open", gets_o)
        B.io_merge("auth-get-key", gets_k)
        f["auth_get_open"] = B.iof("auth-get-open", "ok_rps")
        f["auth_get_key"] = B.iof("auth-get-key", "ok_rps")
        # throughput on a shared 2-core box drifts by more than the cost
        # measured; the gateway's own CPU per request drifts much less
        f["auth_get_open_us"] = B.m.cpu_us_per("fg-open", "requests", gets_o)
        f["auth_get_key_us"] = B.m.cpu_us_per("fg-key", "requests", gets_k)
        B.say("  CPU per GET over the rounds: fg-open %s us, fg-key %s us" % (
            f["auth_get_open_us"] or "-", f["auth_get_key_us"] or "-"))
        B.say("[auth cycles] the load of [lock cycles, fencegate] "
              "(fence_cycle.lua, ring of %d names per wrk thread); fg-key's "
              "requests carry Authorization: Bearer; %d round(s), the order "
              "reversed every other round" % (k.NAME_RING, k.AUTH_ROUNDS))
        lua = os.path.join(HERE, "fence_cycle.lua")
        lock_hdr = os.path.join(d, "lock.hdr")
        lo, lk = [], []
        for r in range(1, k.AUTH_ROUNDS + 1):
            order = ["key", "open"] if r % 2 else ["open", "key"]
            for t in order:
                B.say("  cycles-%s-r%d:" % (t, r))
                label = "auth-cycles-%s-r%d" % (t, r)
                g = gk if t == "key" else go
                args = ["fg%s-%s-r%d" % (t[0], B.runid, r), k.NAME_RING]
                if t == "key":
                    args.append(lock_hdr)
                got = {}
                spread_run(B, g.proc.pid, label, lambda: got.setdefault(
                    "r", B.m.wrk(label, g.name, lua, g.url, args)))
                if got.get("r"):
                    B.report_cycles(label, got["r"])
            lo.append("auth-cycles-open-r%d" % r)
            lk.append("auth-cycles-key-r%d" % r)
        f["auth_cps_open"] = mean_field(B, lo, "cps")
        f["auth_cps_key"] = mean_field(B, lk, "cps")
        f["auth_cyc_open_us"] = B.m.cpu_us_per("fg-open", "cycles", lo)
        f["auth_cyc_key_us"] = B.m.cpu_us_per("fg-key", "cycles", lk)
        B.say("  mean of %d round(s): fg-open %s cycles/s, fg-key %s cycles/s; "
              "CPU per cycle: fg-open %s us, fg-key %s us" % (
                  k.AUTH_ROUNDS, f["auth_cps_open"] or "-",
                  f["auth_cps_key"] or "-", f["auth_cyc_open_us"] or "-",
                  f["auth_cyc_key_us"] or "-"))
        f["auth_errs_fg"] = B.sum_errs(gets_k) + wrk_errs(B, lk)
        f["auth_errs_peer"] = B.sum_errs(gets_o) + wrk_errs(B, lo)
        B.m.back()
    else:
        B.say("  !! the smoke answers are not 401 / 200 %d / 401 / 200 %d: the "
              "auth rows are not measured" % (k.OBJ_SIZE, k.OBJ_SIZE))
        B.at_skipped.append("auth (smoke failed)")
    B.xfg_done(gk, "the auth runs")
    B.xfg_done(go, "the auth runs")


def tls_info(B, port, ca):
    """The protocol, suite, signature and key exchange the openssl client
    (wrk's library) gets from the server, on one line."""
    try:
        p = subprocess.run(["openssl", "s_client", "-brief", "-connect",
                            "127.0.0.1:%d" % port, "-servername", "127.0.0.1",
                            "-CAfile", ca], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return ""
    out = []
    for line in (p.stdout + p.stderr).splitlines():
        k, _, v = line.partition(":")
        if k in ("Protocol version", "Ciphersuite", "Signature type",
                 "Server Temp Key", "Verification"):
            out.append("%s %s" % (k, v.strip()))
    return ", ".join(out)


def tls_resumes(B, port, ca):
    """yes, no or ?: does the server resume a session the client offers.
    The first connection makes a whole request, so that a TLS 1.3 ticket
    has come; s_client writes the session when one comes (or, in TLS 1.2,
    when the server gives a session id), so an answer and no session
    written means the server offered nothing to resume."""
    s = os.path.join(B.tmp, "tls", "sess-%d.pem" % port)
    base = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
            "-servername", "127.0.0.1", "-CAfile", ca]
    try:
        p = subprocess.run(base + ["-quiet", "-ign_eof", "-sess_out", s],
                           input=b"GET /fgb-probe HTTP/1.1\r\nHost: 127.0.0.1"
                           b"\r\nConnection: close\r\n\r\n",
                           capture_output=True, timeout=10)
        if not p.stdout.startswith(b"HTTP/1.1 "):
            return "?"
        if not os.path.exists(s) or os.path.getsize(s) == 0:
            return "no"
        p = subprocess.run(base + ["-sess_in", s], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "?"
    out = p.stdout.decode("utf-8", "replace")
    if "\nReused, " in out:
        return "yes"
    if "\nNew, " in out:
        return "no"
    return "?"


def tls_rows(B):
    import ssl
    k, f = B.k, B.f
    B.spread = getattr(B, "spread", {})
    B.at_skipped = getattr(B, "at_skipped", [])
    B.at_path = "/fgt-%s/obj-" % B.runid
    B.say("[tls] one self-signed ECDSA P-256 certificate (openssl req -x509 "
          "-newkey ec, prime256v1; SAN IP:127.0.0.1) for a fencegate with "
          "--tls-cert/--tls-key (fg-tls) and nginx as an HTTPS reverse proxy "
          "(nginx-tls: the plain proxy's forwarding, %d worker(s), reuseport; "
          "ssl_session_cache off, ssl_session_tickets off)" % k.FG_LOOPS)
    d = os.path.join(B.tmp, "tls")
    os.makedirs(d, exist_ok=True)
    cert, keyf = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1", "-keyout", keyf, "-out",
                        cert], capture_output=True, text=True)
    if p.returncode != 0:
        B.say("  !! openssl could not make the certificate: "
              + " ".join(p.stderr.split())[:200])
        B.at_skipped.append("tls (no certificate)")
        return
    os.chmod(keyf, 0o600)
    t = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-text"],
                       capture_output=True, text=True).stdout
    parts = sorted({l.split(":", 1)[1].strip() for l in t.splitlines()
                    if any(x in l for x in ("Public Key Algorithm",
                                            "NIST CURVE",
                                            "Signature Algorithm"))})
    B.say("  certificate: " + ",".join(parts))
    if not at_objects(B):
        B.at_skipped.append("tls (no objects)")
        return
    close = os.path.join(d, "close.hdr")
    with open(close, "w") as fh:
        fh.write("Connection: close\n")
    try:
        ng = ProxyNginx("nginx-tls", k.FG_LOOPS, B.store.port,
                        tls=(cert, keyf)).start()
    except harness.SetupError as e:
        B.say("  !! nginx-tls did not start: " + str(e).splitlines()[0])
        B.at_skipped.append("tls (nginx-tls did not start)")
        return
    ng.name = "nginx-tls"
    g = B.start_fg("fg-tls", B.redis.port, ["--tls-cert", cert, "--tls-key",
                                            keyf], tls=cert)
    if g is None:
        B.xfg_died.append("fg-tls did not start (HTTPS)")
        ng.stop()
        return
    ctx = ssl.create_default_context(cafile=cert)
    p0 = B.at_path + "0"
    c1 = B.http(g.url + p0, ssl_context=ctx)
    c2 = B.http(ng.url() + p0, ssl_context=ctx)
    c3 = B.http("http://127.0.0.1:%d%s" % (g.port, p0), timeout=5)
    B.say("  smoke: GET %s over HTTPS (certificate verified) on fg-tls -> %s "
          "%d, on nginx-tls -> %s %d; plain HTTP on fg-tls's port -> %s "
          "(HTTPS only: no HTTP answer)" % (p0, c1[0], len(c1[1]), c2[0],
                                           len(c2[1]), c3[0] or "000"))
    ok = (c1[0], len(c1[1])) == (200, k.OBJ_SIZE) and \
        (c2[0], len(c2[1])) == (200, k.OBJ_SIZE) and c3[0] in (None, 400)
    B.say("  fg-tls:    " + tls_info(B, g.port, cert))
    B.say("  nginx-tls: " + tls_info(B, ng.port, cert))
    f["tls_resume_fg"] = tls_resumes(B, g.port, cert)
    f["tls_resume_ng"] = tls_resumes(B, ng.port, cert)
    B.say("  resumes an offered session: fg-tls %s, nginx-tls %s"
          % (f["tls_resume_fg"], f["tls_resume_ng"]))
    if ok:
        B.m.only([("redis", B.redis.proc.pid),
                  ("nginx-store", B.store.proc.pid),
                  ("fg-tls", g.proc.pid), ("nginx-tls", ng.proc.pid)])
        for kind in ("get", "hs"):
            if kind == "get":
                B.say("[tls GET] %d-byte GETs over HTTPS, kept-alive "
                      "connections, wrk -t%d -c%d; %d round(s), the order "
                      "reversed every other round" % (
                          k.OBJ_SIZE, k.WRK_THREADS, k.CONNS, k.TLS_ROUNDS))
            else:
                B.say("[tls handshakes] one new TLS connection per %d-byte GET "
                      "(Connection: close; wrk connects again after each "
                      "answer), wrk -t%d -c%d; %d round(s), the order reversed "
                      "every other round" % (k.OBJ_SIZE, k.WRK_THREADS,
                                             k.CONNS, k.TLS_ROUNDS))
            for r in range(1, k.TLS_ROUNDS + 1):
                order = ["fg", "nginx"] if r % 2 else ["nginx", "fg"]
                for t in order:
                    label = "tls-%s-%s-r%d" % (kind, t, r)
                    name, url, pid = ("fg-tls", g.url, g.proc.pid) \
                        if t == "fg" else ("nginx-tls", ng.url(), ng.proc.pid)
                    spread_run(B, pid, label, lambda: B.io_run(
                        label, name, url, "GET", "",
                        close if kind == "hs" else "", path=B.at_path))
            lf = ["tls-%s-fg-r%d" % (kind, r) for r in range(1, k.TLS_ROUNDS + 1)]
            ln = ["tls-%s-nginx-r%d" % (kind, r)
                  for r in range(1, k.TLS_ROUNDS + 1)]
            B.io_merge("tls-%s-fg" % kind, lf)
            B.io_merge("tls-%s-nginx" % kind, ln)
        # the handshake rate is bound by wrk's own share of the cores as
        # much as by the server's: the server's CPU per handshake says what
        # it costs
        f["tls_hs_fg_us"] = B.m.cpu_us_per("fg-tls", "requests", lf)
        f["tls_hs_ng_us"] = B.m.cpu_us_per("nginx-tls", "requests", ln)
        B.say("  CPU per new connection (handshake + GET): fg-tls %s us, "
              "nginx-tls %s us" % (f["tls_hs_fg_us"] or "-",
                                  f["tls_hs_ng_us"] or "-"))
        f["tls_get_fg"] = B.iof("tls-get-fg", "ok_rps")
        f["tls_get_ng"] = B.iof("tls-get-nginx", "ok_rps")
        f["tls_hs_fg"] = B.iof("tls-hs-fg", "ok_rps")
        f["tls_hs_ng"] = B.iof("tls-hs-nginx", "ok_rps")
        f["tls_errs_fg"] = B.sum_errs(["tls-get-fg", "tls-hs-fg"])
        f["tls_errs_peer"] = B.sum_errs(["tls-get-nginx", "tls-hs-nginx"])
        B.m.back()
    else:
        B.say("  !! the smoke answers are not 200 %d / 200 %d / none: the TLS "
              "rows are not measured" % (k.OBJ_SIZE, k.OBJ_SIZE))
        B.at_skipped.append("tls (smoke failed)")
    B.xfg_done(g, "the TLS runs")
    ng.stop()


def summary_rows(B):
    k, f, rows = B.k, B.f, B.rows
    R = Row
    if B.want("auth"):
        r = ratio(f.get("auth_get_key"), f.get("auth_get_open"))
        rows.append(R("GET %d B, key on each (proxy-auth), req/s" % k.OBJ_SIZE,
                      "wrk, Fence-Authorization: Bearer on every GET, auth-file "
                      "of AUTH_PRINCIPALS, mean of AUTH_ROUNDS rounds",
                      f.get("auth_get_key"), "open fencegate",
                      f.get("auth_get_open"), r, "2", ">= 0.95x",
                      verdict(r, ">=", 0.95)))
        rows.append(R("  fencegate CPU per GET, us", "utime + stime per request",
                      f.get("auth_get_key_us"), "open fencegate",
                      f.get("auth_get_open_us"),
                      ratio(f.get("auth_get_key_us"), f.get("auth_get_open_us")),
                      "2", "(info)", ""))
        r = ratio(f.get("auth_cps_key"), f.get("auth_cps_open"))
        rows.append(R("lock cycles, key on each, cycles/s", "fence_cycle.lua, "
                      "Authorization: Bearer on every request",
                      f.get("auth_cps_key"), "open fencegate",
                      f.get("auth_cps_open"), r, "2", ">= 0.95x",
                      verdict(r, ">=", 0.95)))
        rows.append(R("  fencegate CPU per cycle, us", "utime + stime per cycle",
                      f.get("auth_cyc_key_us"), "open fencegate",
                      f.get("auth_cyc_open_us"),
                      ratio(f.get("auth_cyc_key_us"), f.get("auth_cyc_open_us")),
                      "2", "(info)", ""))
        rows.append(R("  auth-file principals", "", k.AUTH_PRINCIPALS, "", None,
                      None, "", "", ""))
    if B.want("tls"):
        r = ratio(f.get("tls_get_fg"), f.get("tls_get_ng"))
        rows.append(R("HTTPS GET %d B, keep-alive, req/s" % k.OBJ_SIZE,
                      "wrk over kept-alive TLS connections, mean of TLS_ROUNDS",
                      f.get("tls_get_fg"), "nginx HTTPS proxy",
                      f.get("tls_get_ng"), r, "2", ">= 0.8x",
                      verdict(r, ">=", 0.8)))
        r = ratio(f.get("tls_hs_fg"), f.get("tls_hs_ng"))
        rows.append(R("TLS handshakes/s (ECDSA P-256, GET each)", "wrk, "
                      "Connection: close on every GET, one new TLS connection "
                      "each", f.get("tls_hs_fg"), "nginx HTTPS proxy",
                      f.get("tls_hs_ng"), r, "2", "report", ""))
        rows.append(R("  server CPU per handshake + GET, us", "utime + stime per "
                      "new connection", f.get("tls_hs_fg_us"),
                      "nginx HTTPS proxy", f.get("tls_hs_ng_us"),
                      ratio(f.get("tls_hs_fg_us"), f.get("tls_hs_ng_us")), "2",
                      "(info)", ""))
        rows.append(R("  session resumed when offered", "openssl s_client "
                      "-sess_out, then -sess_in", f.get("tls_resume_fg") or "-",
                      "nginx", f.get("tls_resume_ng") or "-", None, "", "", ""))
    spread = getattr(B, "spread", {})
    n = one = 0
    for label, s in spread.items():
        if not (label.startswith("auth-") or "-fg-" in label):
            continue
        n += 1
        if s is not None and s >= 90:
            one += 1
    if n:
        rows.append(R("  fencegate runs served by one loop", "runs whose "
                      "busiest thread did 90% or more of the server's CPU",
                      "%d of %d" % (one, n), "", None, None, "", "(info)", ""))
    ef = ep = None
    if "auth_errs_fg" in f or "tls_errs_fg" in f:
        ef = f.get("auth_errs_fg", 0) + f.get("tls_errs_fg", 0)
        ep = f.get("auth_errs_peer", 0) + f.get("tls_errs_peer", 0)
    rows.append(R("failed requests in the auth and TLS runs", "errors, socket "
                  "errors and answers >= 400 counted by wrk", ef, "peers", ep,
                  None, "", "0", verdict(ef, "==", 0)))
    if getattr(B, "at_skipped", None):
        rows.append(R("auth and TLS rows not measured", "", "", "", None, None,
                      "", "", "", peer_text=", ".join(B.at_skipped)))
