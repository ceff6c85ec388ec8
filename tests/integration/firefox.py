"""firefox.py - a real headless Firefox, driven over WebDriver BiDi.

Firefox starts Debian's `firefox-esr --headless` with a profile of its own
in the run's temporary directory and `--remote-debugging-port=0`, reads
the port Firefox chose from the line it prints ("WebDriver BiDi listening
on ws://..."), and talks to its one tab over the BiDi websocket (Debian's
python3-websocket): navigate, evaluate script in the page, set the
viewport's size, take a screenshot, add a script that runs before every
page's own. The methods are the ones browser.Browser has, so a test class
runs the same tests in either browser. It is stopped by its PID
(harness.stop_process) whatever happens.

What the page reports as wrong is collected in `errors`: console.error and
console.assert calls and uncaught exceptions (log.entryAdded at level
error), and every Content-Security-Policy violation, which Firefox tells
the page (the `securitypolicyviolation` event) but not the protocol: a
preload script passes each one over a BiDi channel (script.message), as
{"from": "security"} with the directive it broke in its text, the form
browser.Browser gives Chromium's.

A missing firefox-esr or websocket module is a failure of the setup, never
a skip.
"""

import base64
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time

import harness
from browser import CdpError, _websocket

FIREFOX = "firefox-esr"

# a quiet profile: nothing fetched from Mozilla, no first-run pages
PREFS = {
    "app.update.disabledForTesting": True,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.startup.page": 0,
    "browser.tabs.warnOnClose": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "extensions.update.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "dom.disable_open_during_load": False,
    "remote.prefs.recommended": True,
}

# what the page's CSP violations are handed to
CSP_WATCH = ("(channel) => document.addEventListener("
             "'securitypolicyviolation', (e) => channel({directive: "
             "e.violatedDirective, blocked: String(e.blockedURI || ''), "
             "source: String(e.sourceFile || '')}))")


def _value(rv):
    """A BiDi RemoteValue as the Python value a test compares."""
    if not isinstance(rv, dict):
        return rv
    t = rv.get("type")
    if t in ("undefined", "null"):
        return None
    if t in ("string", "boolean"):
        return rv.get("value")
    if t == "number":
        v = rv.get("value")
        if isinstance(v, str):  # NaN, Infinity, -0
            return {"NaN": float("nan"), "Infinity": float("inf"),
                    "-Infinity": float("-inf"), "-0": 0}.get(v, v)
        return v
    if t in ("array", "set"):
        return [_value(x) for x in rv.get("value", [])]
    if t in ("object", "map"):
        out = {}
        for k, v in rv.get("value", []):
            out[_value(k) if isinstance(k, dict) else k] = _value(v)
        return out
    return rv.get("value", {"type": t})


class Firefox:
    """One headless Firefox with one tab. `logpath` is where Firefox's
    own output goes (a file beside the gateways' logs)."""

    def __init__(self, workdir):
        self.dir = tempfile.mkdtemp(prefix="firefox-", dir=workdir)
        self.profile = os.path.join(self.dir, "profile")
        self.logpath = os.path.join(self.dir, "firefox.log")
        self.proc = None
        self.ws = None
        self.context = None
        self.errors = []
        self._next = 0
        self._replies = {}
        self._cv = threading.Condition()
        self._reader = None
        self._watch = None

    # -- life ---------------------------------------------------------------

    def start(self, timeout=None):
        exe = shutil.which(FIREFOX)
        if not exe:
            raise harness.SetupError("firefox-esr is not installed "
                                     "(scripts/install-deps.sh)")
        websocket = _websocket()
        timeout = timeout or harness.slack(60.0)
        os.makedirs(self.profile, exist_ok=True)
        with open(os.path.join(self.profile, "user.js"), "w") as f:
            for k, v in PREFS.items():
                f.write("user_pref(%s, %s);\n" % (json.dumps(k),
                                                   json.dumps(v)))
        argv = [exe, "--headless", "--no-remote", "--profile", self.profile,
                "--remote-debugging-port=0", "about:blank"]
        env = dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1",
                   HOME=self.dir)
        with open(self.logpath, "ab") as log:
            self.proc = harness.spawn(argv, stdout=log, stderr=log,
                                      cwd=self.dir, env=env)
        deadline = time.monotonic() + timeout
        url = None
        while time.monotonic() < deadline and url is None:
            if self.proc.poll() is not None:
                raise harness.SetupError(
                    "firefox exited with %s; its log:\n%s"
                    % (self.proc.returncode, harness.file_tail(self.logpath)))
            try:
                with open(self.logpath, errors="replace") as f:
                    m = re.search(r"WebDriver BiDi listening on "
                                  r"(ws://[0-9.:\[\]a-z]+)", f.read())
                if m:
                    url = m.group(1)
            except OSError:
                pass
            if url is None:
                time.sleep(0.05)
        if url is None:
            self.stop()
            raise harness.SetupError("firefox did not say where BiDi listens "
                                     "within %.0f s" % timeout)
        self.ws = websocket.create_connection(url + "/session",
                                              timeout=timeout,
                                              suppress_origin=True)
        self.ws.settimeout(None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.send("session.new", {"capabilities": {}})
        self.send("session.subscribe", {"events": ["log.entryAdded",
                                                   "script.message"]})
        tree = self.send("browsingContext.getTree", {})
        self.context = tree["contexts"][0]["context"]
        self._watch = self.send("script.addPreloadScript", {
            "functionDeclaration": CSP_WATCH,
            "arguments": [{"type": "channel",
                           "value": {"channel": "csp"}}]})["script"]
        return self

    def stop(self):
        if self.ws is not None:
            try:
                self.ws.close()
            except OSError:
                pass
            self.ws = None
        if self.proc is not None:
            harness.stop_process(self.proc)
            # its content processes are in its group: none outlives it
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc = None
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- the protocol --------------------------------------------------------

    def _read(self):
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except Exception:
                with self._cv:
                    self._replies[None] = "closed"
                    self._cv.notify_all()
                return
            with self._cv:
                if msg.get("type") in ("success", "error") and "id" in msg:
                    self._replies[msg["id"]] = msg
                elif msg.get("type") == "event":
                    self._note(msg.get("method"), msg.get("params", {}))
                self._cv.notify_all()

    def _note(self, method, p):
        if method == "log.entryAdded" and p.get("level") == "error":
            self.errors.append({"from": "console" if p.get("type") ==
                                "console" else "exception",
                                "text": p.get("text") or ""})
        elif method == "script.message" and p.get("channel") == "csp":
            v = _value(p.get("data")) or {}
            self.errors.append({"from": "security",
                                "text": "Content-Security-Policy: %s "
                                        "refused %s" % (v.get("directive"),
                                                        v.get("blocked")),
                                "url": v.get("source", "")})

    def send(self, method, params=None, timeout=None):
        timeout = timeout or harness.slack(15.0)
        with self._cv:
            self._next += 1
            mid = self._next
        self.ws.send(json.dumps({"id": mid, "method": method,
                                 "params": params or {}}))
        deadline = time.monotonic() + timeout
        with self._cv:
            while mid not in self._replies:
                if None in self._replies:
                    raise CdpError("the BiDi connection closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError("%s: no answer within %.0f s"
                                   % (method, timeout))
                self._cv.wait(left)
            msg = self._replies.pop(mid)
        if msg.get("type") == "error":
            raise CdpError("%s: %s: %s" % (method, msg.get("error"),
                                           msg.get("message")))
        return msg.get("result", {})

    # -- what a test does ------------------------------------------------------

    def navigate(self, url, timeout=None):
        """Loads url and waits for its load event."""
        timeout = timeout or harness.slack(15.0)
        self.send("browsingContext.navigate",
                  {"context": self.context, "url": url, "wait": "complete"},
                  timeout=timeout)

    def evaluate(self, expr):
        """The value of a script expression in the page (a promise is
        awaited); an exception in it raises CdpError."""
        r = self.send("script.evaluate", {
            "expression": expr, "target": {"context": self.context},
            "awaitPromise": True, "resultOwnership": "none"})
        if r.get("type") == "exception":
            d = r.get("exceptionDetails", {})
            raise CdpError("evaluate %r: %s" % (expr[:200], d.get("text")))
        return _value(r.get("result"))

    def wait_for(self, expr, timeout, interval=0.03):
        """Evaluates expr until it is truthy: (value, seconds it took), or
        (None, seconds) once timeout has passed."""
        t0 = time.monotonic()
        while True:
            v = self.evaluate(expr)
            dt = time.monotonic() - t0
            if v:
                return v, dt
            if dt >= timeout:
                return None, dt
            time.sleep(interval)

    def set_size(self, width, height, mobile=False):
        """The viewport's size (Firefox has no phone emulation: a window
        of a phone's width is what the page sees)."""
        self.send("browsingContext.setViewport", {
            "context": self.context,
            "viewport": {"width": width, "height": height},
            "devicePixelRatio": 1})

    def screenshot(self, path):
        """A PNG of the page as it is laid out at the viewport's size."""
        r = self.send("browsingContext.captureScreenshot",
                      {"context": self.context})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return path

    def add_init_script(self, source):
        """Runs source before every page's own script from now on; the
        handle is for remove_init_script."""
        return self.send("script.addPreloadScript", {
            "functionDeclaration": "() => { %s }" % source})["script"]

    def remove_init_script(self, handle):
        self.send("script.removePreloadScript", {"script": handle})
