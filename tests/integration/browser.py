"""browser.py - a real headless Chromium, driven over the DevTools protocol.

Browser starts Debian's `chromium --headless=new` with a profile of its
own in the run's temporary directory and `--remote-debugging-port=0`,
reads the port Chromium chose from the profile's DevToolsActivePort file,
and talks to its one page over the page's DevTools websocket (Debian's
python3-websocket, scripts/install-deps.sh): navigate, evaluate script in
the page, set the window's size, take a screenshot. It is stopped by its
PID (harness.stop_process) whatever happens.

Everything the page reports as wrong is collected in `errors`, from the
moment the page is attached: console.error and console.assert calls
(Runtime.consoleAPICalled), uncaught exceptions (Runtime.exceptionThrown),
and the browser's own error entries (Log.entryAdded at level error:
failed loads, Content-Security-Policy violations, network errors). A test
reads them and says which, if any, it expects.

A missing chromium or websocket module is a failure of the setup, never
a skip.
"""

import base64
import http.client
import json
import os
import shutil
import tempfile
import threading
import time

import harness

CHROMIUM = "chromium"


def _websocket():
    try:
        import websocket
        return websocket
    except ImportError:
        pass
    # a python3 that is not Debian's: its module, for this import only
    d = "/usr/lib/python3/dist-packages"
    import sys
    if not os.path.isdir(d):
        raise harness.SetupError("python3-websocket is not installed "
                                 "(scripts/install-deps.sh)")
    sys.path.append(d)
    try:
        import websocket
        return websocket
    except ImportError:
        raise harness.SetupError("python3-websocket is not installed "
                                 "(scripts/install-deps.sh)")
    finally:
        sys.path.remove(d)


class CdpError(Exception):
    pass


class Browser:
    """One headless Chromium with one page. `log` is where Chromium's own
    output goes (a file beside the gateways' logs)."""

    def __init__(self, workdir):
        self.dir = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
        self.profile = os.path.join(self.dir, "profile")
        self.logpath = os.path.join(self.dir, "chromium.log")
        self.proc = None
        self.ws = None
        self.errors = []           # what the page reported as wrong
        self._next = 0
        self._replies = {}
        self._events = []          # (method, params) not yet taken
        self._cv = threading.Condition()
        self._reader = None

    # -- life ---------------------------------------------------------------

    def start(self, timeout=None):
        exe = shutil.which(CHROMIUM)
        if not exe:
            raise harness.SetupError("chromium is not installed "
                                     "(scripts/install-deps.sh)")
        websocket = _websocket()
        timeout = timeout or harness.slack(30.0)
        argv = [exe, "--headless=new", "--remote-debugging-port=0",
                "--user-data-dir=" + self.profile, "--no-sandbox",
                "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--mute-audio",
                "--hide-scrollbars", "--password-store=basic",
                "--use-mock-keychain", "about:blank"]
        with open(self.logpath, "ab") as log:
            self.proc = harness.spawn(argv, stdout=log, stderr=log,
                                      cwd=self.dir)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise harness.SetupError(
                    "chromium exited with %s; its log:\n%s"
                    % (self.proc.returncode, harness.file_tail(self.logpath)))
            try:
                with open(port_file) as f:
                    first = f.readline().strip()
                if first:
                    port = int(first)
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        if port is None:
            self.stop()
            raise harness.SetupError("chromium wrote no DevToolsActivePort "
                                     "within %.0f s" % timeout)
        page = None
        while time.monotonic() < deadline and page is None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/json/list")
                targets = json.loads(c.getresponse().read().decode())
                c.close()
                page = next((t for t in targets if t.get("type") == "page"),
                            None)
            except (OSError, ValueError):
                pass
            if page is None:
                time.sleep(0.05)
        if page is None:
            self.stop()
            raise harness.SetupError("chromium has no page to attach to")
        self.ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=timeout,
            suppress_origin=True)
        self.ws.settimeout(None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        for domain in ("Runtime", "Log", "Page"):
            self.send(domain + ".enable")
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
                if "id" in msg:
                    self._replies[msg["id"]] = msg
                else:
                    self._note(msg.get("method"), msg.get("params", {}))
                    self._events.append((msg.get("method"),
                                         msg.get("params", {})))
                self._cv.notify_all()

    def _note(self, method, p):
        if method == "Runtime.consoleAPICalled" and \
                p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", "")))
                            for a in p.get("args", []))
            self.errors.append({"from": "console", "text": text})
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            ex = d.get("exception", {})
            self.errors.append({"from": "exception",
                                "text": ex.get("description") or d.get("text", "")})
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                self.errors.append({"from": e.get("source", "log"),
                                    "text": e.get("text", ""),
                                    "url": e.get("url", "")})

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
                    raise CdpError("the DevTools connection closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CdpError("%s: no answer within %.0f s"
                                   % (method, timeout))
                self._cv.wait(left)
            msg = self._replies.pop(mid)
        if "error" in msg:
            raise CdpError("%s: %s" % (method, msg["error"]))
        return msg.get("result", {})

    def wait_event(self, method, timeout):
        """The first event `method` that came since the last call took
        one (or comes within timeout); None if none."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for i, (m, p) in enumerate(self._events):
                    if m == method:
                        del self._events[:i + 1]
                        return p
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)

    # -- what a test does ------------------------------------------------------

    def navigate(self, url, timeout=None):
        """Loads url and waits for its load event."""
        timeout = timeout or harness.slack(15.0)
        with self._cv:
            self._events.clear()
        r = self.send("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise CdpError("navigate %s: %s" % (url, r["errorText"]))
        if self.wait_event("Page.loadEventFired", timeout) is None:
            raise CdpError("%s did not load within %.0f s" % (url, timeout))

    def evaluate(self, expr):
        """The value of a script expression in the page (a promise is
        awaited); an exception in it raises CdpError."""
        r = self.send("Runtime.evaluate", {"expression": expr,
                                           "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CdpError("evaluate %r: %s" % (
                expr[:200], r["exceptionDetails"].get("exception", {})
                .get("description", r["exceptionDetails"].get("text"))))
        return r.get("result", {}).get("value")

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
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1,
            "mobile": mobile})

    def screenshot(self, path):
        """A PNG of the page as it is laid out at the window's size."""
        r = self.send("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return path

    def add_init_script(self, source):
        """Runs source before every page's own script from now on; the
        handle is for remove_init_script."""
        return self.send("Page.addScriptToEvaluateOnNewDocument",
                         {"source": source})["identifier"]

    def remove_init_script(self, handle):
        self.send("Page.removeScriptToEvaluateOnNewDocument",
                  {"identifier": handle})
