"""test_litmus.py - the WebDAV compliance suite `litmus` (Debian) against
each origin directly and through fencegate: every litmus test that passes
against the origin must pass through the gateway too.

litmus cannot send a Fencing-Token, so it talks to a real front, an nginx
reverse proxy that adds the sequencer to every request (`proxy_set_header`,
as a deployment would in front of a client that cannot) and passes the
client's Host; one lock guards the whole test collection through a route
rule. Both runs' tallies are printed; a difference names the tests."""

import os
import re
import socket
import subprocess
import tempfile
import uuid

import harness
from apache import ApacheDav
from harness import (LOCKS, SetupError, TestCase, free_port, slack, spawn,
                     wait_until)
from storage import Nginx, _nginx_executable, write_config

ROUTE = "fenced"


def parse_litmus(text):
    """{(suite, number, name): 'pass' | 'FAIL' | 'SKIPPED'} of a litmus
    run's output (a test's result may follow a warning on the next line)."""
    out, suite, cur = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^-> running `(\w+)'", line)
        if m:
            suite, cur = m.group(1), None
            continue
        m = re.match(r"^\s*(\d+)\.\s+(\w+)", line)
        if m:
            cur = (suite, int(m.group(1)), m.group(2))
        r = re.findall(r"\b(pass|FAIL|SKIPPED)\b", line)
        if r and cur is not None:
            out[cur] = r[-1]
            cur = None
    return out


def tally(results):
    n = {"pass": 0, "FAIL": 0, "SKIPPED": 0}
    for v in results.values():
        n[v] += 1
    return "%d passed, %d failed, %d skipped of %d" % (
        n["pass"], n["FAIL"], n["SKIPPED"], len(results))


class FencingFront(harness.Process):
    """nginx as a reverse proxy in front of a gateway, adding one
    sequencer to every request and passing the client's Host."""

    def __init__(self, gw_port, sequencer):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="front-", dir=harness.tmp_root())
        self.gw_port = gw_port
        self.sequencer = sequencer
        self.proc = None

    def start(self):
        d = self.dir
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write("\n".join([
                "daemon off;", "master_process off;", "worker_processes 1;",
                "user root;" if os.getuid() == 0 else "",
                "pid %s/nginx.pid;" % d,
                "error_log %s/error.log info;" % d,
                "events { worker_connections 256; }",
                "http {",
                "  client_body_temp_path %s/body;" % d,
                "  proxy_temp_path %s/proxy;" % d,
                "  fastcgi_temp_path %s/f; uwsgi_temp_path %s/u; "
                "scgi_temp_path %s/s;" % (d, d, d),
                "  access_log off;",
                "  server {",
                "    listen 127.0.0.1:%d;" % self.port,
                "    client_max_body_size 0;",
                "    location / {",
                "      proxy_pass http://127.0.0.1:%d;" % self.gw_port,
                "      proxy_http_version 1.1;",
                "      proxy_request_buffering off;",
                "      proxy_buffering off;",
                "      proxy_set_header Host $http_host;",
                "      proxy_set_header Fencing-Token \"%s\";" % self.sequencer,
                "      proxy_redirect off;",
                "    }",
                "  }",
                "}", ""]))
        with open(os.path.join(d, "stderr.log"), "ab") as out:
            self.proc = spawn([_nginx_executable(), "-p", d + os.sep, "-c",
                               conf, "-e", os.path.join(d, "error.log")],
                              stdout=out, stderr=subprocess.STDOUT, cwd=d)
        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return True
            except OSError:
                return False
        if not wait_until(up, slack(10.0), 0.02):
            self.stop()
            raise SetupError("the nginx front did not start")
        return self


class LitmusTests(TestCase):
    uses_shared_env = False

    def litmus(self, url):
        exe = "/usr/bin/litmus"
        if not os.access(exe, os.X_OK):
            raise SetupError("litmus not found (Debian package litmus; "
                             "scripts/install-deps.sh installs it)")
        cwd = tempfile.mkdtemp(prefix="litmus-", dir=harness.tmp_root())
        p = subprocess.run([exe, "-k", url], cwd=cwd, capture_output=True,
                           timeout=slack(180.0))
        text = p.stdout.decode("utf-8", "replace")
        results = parse_litmus(text)
        if not results:
            raise SetupError("litmus ran no test against %s:\n%s"
                             % (url, text[-2000:]))
        return results

    def compare(self, origin, mkdir):
        env = self.start_env(upstream=False)
        tag = uuid.uuid4().hex[:8]
        cfg = write_config("route /%s/ %s\n" % (ROUTE, ROUTE))
        gw = self.start_gateway(env.redis.port, origin.port, ("--config", cfg))
        r = gw.request("POST", LOCKS + ROUTE, body={"ttl_ms": 600000})
        self.assertEqual(r.status, 200, r)
        front = FencingFront(gw.port, r.json["sequencer"]).start()
        self.addCleanup(front.stop)
        direct_path = "/direct-%s/" % tag
        fenced_path = "/%s/%s/" % (ROUTE, tag)
        mkdir(direct_path)
        mkdir(fenced_path)
        direct = self.litmus("http://127.0.0.1:%d%s" % (origin.port, direct_path))
        through = self.litmus("http://127.0.0.1:%d%s" % (front.port, fenced_path))
        name = type(origin).__name__
        print("\nlitmus against %s directly: %s" % (name, tally(direct)))
        print("litmus against %s through fencegate: %s" % (name, tally(through)))
        lost = sorted("%s %d %s: %s" % (k[0], k[1], k[2], through.get(k, "not run"))
                      for k, v in direct.items()
                      if v == "pass" and through.get(k) != "pass")
        self.assertEqual(lost, [], "litmus tests that pass against %s "
                         "directly (%s) but not through fencegate (%s)"
                         % (name, tally(direct), tally(through)))
        return direct, through

    def test_litmus_through_fencegate_in_front_of_apache_passes_what_apache_passes(self):
        apache = ApacheDav().start()
        self.addCleanup(apache.stop)

        direct, through = self.compare(apache, apache.mkdir)
        # Apache is a whole WebDAV server: litmus's every suite runs on it
        self.assertGreater(sum(v == "pass" for v in direct.values()), 90,
                           tally(direct))

    def test_litmus_through_fencegate_in_front_of_nginx_passes_what_nginx_passes(self):
        nginx = Nginx().start()
        self.addCleanup(nginx.stop)

        def mkdir(path):
            os.makedirs(nginx.file_of(path), exist_ok=True)
        self.compare(nginx, mkdir)
