"""test_ui.py - the status page (contract v1.5) in a real browser.

One class, one headless Chromium (browser.py; the second class runs the
same tests in Firefox, firefox.py) and one environment: a
Redis, an nginx WebDAV store and two gateways in front of them, the first
open, the second with an auth-file. The page is loaded from a real
gateway; what a test does goes through the lock API and the fencing
proxy as any client's calls would, and the page must show it within a
second: a held lock with its holder, a waiter in its lock's queue, a
refused write as a refused event. Under the auth-file a principal that
may observe only one prefix enters its key once (kept for the tab) and
sees nothing of another prefix, neither a lock nor an event. The page
loads with its Content-Security-Policy and the console has no errors; an
inline script or an image of another host put in the page is refused by
the browser, and that refusal is among the errors the tests look at.
Screenshots at 1280x800 and at a phone's 390x844 are saved beside the
gateways' logs (their paths are printed).

The timings are from the moment the call that made the change was
answered (the waiter: from the moment its acquire was sent) to the moment
the page shows it; the page is polled every 30 ms. What happened before
a page opened (its history) is held to the bound of the page's load, 5 s,
not to the second: on a Cluster the first read is one XRANGE per slot,
after the gateway's follower has read every slot once.
"""

import hashlib
import json
import os
import secrets
import time

import browser
import firefox
import harness
import matrix
from harness import LOCKS, slack
from storage import StoreEnv, StoreTestCase

UI = "/_fence/v1/ui/"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; "
       "connect-src 'self'; img-src 'self'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
TAG = secrets.token_hex(3)
A = "ui-%s-a/" % TAG      # what principal `seer` may observe
B = "ui-%s-b/" % TAG      # what it may not
SEER_KEY = secrets.token_urlsafe(32)
SIZES = (("1280x800", 1280, 800, False), ("390x844", 390, 844, True))


def js(v):
    return json.dumps(v)


def shown_lock(name):
    """A page expression: the lock's entry, as text, or null."""
    return ("(() => { for (const li of document.querySelectorAll('#locks "
            "li.lock')) if (li.dataset.lock === %s) return li.innerText; "
            "return null; })()" % js(name))


def shown_event(kind, lock):
    return ("(() => { for (const li of document.querySelectorAll('#events "
            "li.ev')) if (li.dataset.kind === %s && li.dataset.lock === %s) "
            "return li.innerText; return null; })()" % (js(kind), js(lock)))


def expected_refusal(e):
    """A browser error entry that is an answer the page asked for and
    handles: a 401 or 403 of the lock API (the first call without a key,
    the metrics a principal may not read), which Chromium logs as a failed
    load."""
    return e["from"] == "network" and "/_fence/v1/" in e.get("url", "") and \
        ("status of 401" in e["text"] or "status of 403" in e["text"])


class StatusPage(StoreTestCase):

    axes = matrix.GATEWAY_AND_REDIS
    origin = "nginx"
    test_timeout = 90.0
    maxDiff = None
    _page_env = None
    _page_env_error = None
    _browser = None

    @classmethod
    def page_env(cls):
        env = cls._page_env
        if env is not None and env.healthy():
            return env
        if env is not None:
            env.stop()
            cls._page_env = None
        if cls._page_env_error:
            raise harness.SetupError("environment failed earlier: "
                                     + cls._page_env_error)
        try:
            d = os.path.join(harness.tmp_root(), "ui-auth-" + TAG)
            os.makedirs(d, exist_ok=True)
            auth = os.path.join(d, "auth")
            with open(auth, "w") as f:
                f.write("seer sha256:%s observe:%s lock:%s\n"
                        % (hashlib.sha256(SEER_KEY.encode()).hexdigest(),
                           A, A))
            os.chmod(auth, 0o600)
            base = ["--forward-token", "yes"]
            env = StoreEnv(gateway_flags=[base, base + ["--auth-file", auth]])
            env.start()
            for g in env.gateways:
                if not g.wait_healthy(slack(10.0)):
                    raise harness.SetupError("a gateway is not healthy:\n"
                                             + g.log_tail())
        except Exception as e:
            cls._page_env_error = str(e)
            raise
        cls._page_env = env
        return env

    browser_kind = browser.Browser

    @classmethod
    def the_browser(cls):
        b = cls._browser
        if b is not None and b.proc is not None and b.proc.poll() is None:
            return b
        if b is not None:
            b.stop()
        cls._browser = cls.browser_kind(harness.tmp_root()).start()
        return cls._browser

    @classmethod
    def tearDownClass(cls):
        if cls._browser is not None:
            cls._browser.stop()
            cls._browser = None
        env, cls._page_env = cls._page_env, None
        if env is not None:
            for r in env.stop():
                harness.LATE_FAILURES.append(
                    "%s: sanitizer report from its fencegate:\n%s"
                    % (cls.__name__, r))
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        env = self.page_env()
        self.use(env)
        self.open_gw, self.auth_gw = env.gateways
        self.b = self.the_browser()
        self.log_paths.append(self.b.logpath)

    # -- what the tests share ------------------------------------------------

    def url(self, gw, query=""):
        return "http://127.0.0.1:%d%s%s" % (gw.port, UI, query)

    def open_page(self, gw=None, query="", size=SIZES[0]):
        """The page as a fresh tab sees it: its session storage is
        emptied before the page's own script runs."""
        gw = gw or self.open_gw
        # the page before is unloaded first: what it reports as it goes
        # (an answer in flight) is not this page's
        self.b.navigate("about:blank")
        self.b.set_size(size[1], size[2], size[3])
        self.b.errors.clear()
        # (not in the blank document a navigation may pass through,
        # whose storage Firefox refuses to script)
        s = self.b.add_init_script(
            "if (location.protocol === 'http:') sessionStorage.clear()")
        try:
            self.b.navigate(self.url(gw, query))
        finally:
            self.b.remove_init_script(s)
        v, _ = self.b.wait_for(
            "document.getElementById('verdict').textContent !== 'Loading…'",
            slack(5.0))
        self.assertTrue(v, "the page never left its loading state")

    def names(self, prefix, tag):
        self._counter += 1
        return "%s%s/%d-%s" % (prefix, self._testMethodName[5:60],
                               self._counter, tag)

    def store_path(self, lock):
        """The store path the lock guards (the default route: the path
        is the lock's name), its collection made."""
        path = "/" + lock
        self.store.mkdir(path.rsplit("/", 1)[0] + "/")
        return path

    def refuse_a_write(self, gw, lock):
        """A PUT through the proxy with a sequencer older than the lock's
        grant now: refused 409 stale_token before the store. Returns when
        the refusal was answered, and the grant left holding."""
        path = self.store_path(lock)
        old = self.grant(lock, gw=gw, ttl_ms=30000)
        self.release_ok(lock, old["lease"], gw)
        now = self.grant(lock, gw=gw, ttl_ms=30000)
        self.addCleanup(self._release_quietly, lock, now["lease"], gw)
        r = self.put(path, b"late\n", old["sequencer"], gw=gw)
        self.assert_error(r, 409, "stale_token", "a stale write")
        return now

    def _release_quietly(self, name, lease, gw):
        try:
            self.release(name, lease, gw)
        except OSError:
            pass

    def assert_shows(self, expr, what, t0=None):
        """expr becomes truthy within 1 s of t0 (default: now)."""
        t0 = t0 if t0 is not None else time.monotonic()
        v, _ = self.b.wait_for(expr, max(0.0, t0 + slack(1.0)
                                         - time.monotonic()))
        took = time.monotonic() - t0
        self.assertTrue(v, "%s: not on the page %.2f s later; the page "
                        "says: %r" % (what, took, self.page_text()))
        self.assertLessEqual(took, slack(1.0) + 0.05,
                             "%s took %.2f s" % (what, took))
        print("%s: on the page after %.3f s" % (what, took))
        return v

    def page_text(self):
        return self.b.evaluate("document.body.innerText")[:3000]

    def assert_no_console_errors(self, allow_refusals=False):
        errs = [e for e in self.b.errors
                if not (allow_refusals and expected_refusal(e))]
        self.assertEqual(errs, [], "the page reported errors")

    # -- served as it should be ---------------------------------------------

    def test_page_and_its_files_are_served_with_the_csp(self):
        for path, ctype in ((UI, "text/html"), (UI + "ui.css", "text/css"),
                            (UI + "ui.js", "text/javascript"),
                            (UI + "icon.svg", "image/svg+xml")):
            for gw in (self.open_gw, self.auth_gw):
                r = gw.request("GET", path)
                self.assertEqual(r.status, 200, "%s: %r" % (path, r))
                self.assertTrue(r.header("Content-Type").startswith(ctype),
                                r.header("Content-Type"))
                self.assertEqual(r.header("Content-Security-Policy"), CSP)
                self.assertEqual(r.header("X-Content-Type-Options"),
                                 "nosniff")
                self.assertTrue(r.body)
                etag = r.header("ETag")
                self.assertRegex(etag, r'^"[0-9a-f]{16}"$')
                r2 = gw.request("GET", path,
                                headers={"If-None-Match": etag})
                self.assertEqual(r2.status, 304, r2)
                self.assertEqual(r2.body, b"")
                h = gw.request("HEAD", path)
                self.assertEqual(h.status, 200, h)
                self.assertEqual(h.body, b"")
        # no inline script or style: the CSP would refuse them
        page = self.open_gw.request("GET", UI).body.decode()
        self.assertNotIn("<style", page)
        self.assertNotRegex(page, r"<script(?![^>]*\bsrc=)")
        self.assertNotIn(" style=", page)
        r = self.open_gw.request("GET", "/_fence/v1/ui?prefix=a/")
        self.assertEqual(r.status, 308, r)
        self.assertEqual(r.header("Location"), "ui/?prefix=a/")
        r = self.open_gw.request("POST", UI, body={})
        self.assert_error(r, 405, "method_not_allowed")
        r = self.open_gw.request("GET", UI + "index.html")
        self.assert_error(r, 404, "not_found")

    def test_page_loads_with_no_console_errors(self):
        self.open_page()
        # every call the page makes has been answered once
        v, _ = self.b.wait_for(
            "document.getElementById('updated').textContent"
            ".startsWith('Listing as of') && document.querySelector("
            "'#t-redis .v').textContent === 'up' && document.querySelector("
            "'#t-events .v').textContent === 'live'", slack(3.0))
        self.assertTrue(v, "the page did not take its data and its event "
                        "stream: %r" % self.page_text())
        # a window for an error that would come after the first answers
        # (the next round of health and metrics, the stream's first
        # bytes): no event marks its absence
        time.sleep(2.2)
        self.assert_no_console_errors()

    def test_csp_blocks_inline_script_and_other_hosts_and_is_seen(self):
        # what the page would do if a lock name ever got in as markup: the
        # browser refuses it, and the errors the other tests hold to
        # nothing are where such a refusal shows
        self.open_page()
        self.b.evaluate(
            "const s = document.createElement('script');"
            "s.textContent = 'window.injected = 1';"
            "document.body.appendChild(s);"
            "const i = document.createElement('img');"
            "i.src = 'http://example.invalid/x.png';"
            "document.body.appendChild(i); true")
        found = self.wait_for(
            lambda: len([e for e in self.b.errors
                         if e["from"] == "security"]) >= 2,
            slack(2.0), "two Content-Security-Policy violations reported")
        self.assertTrue(found)
        self.assertIsNone(self.b.evaluate("window.injected"))
        texts = " ".join(e["text"] for e in self.b.errors)
        self.assertIn("script-src", texts)
        self.assertIn("img-src", texts)

    # -- live ---------------------------------------------------------------

    def test_held_lock_shows_with_its_holder_within_a_second(self):
        self.open_page()
        lock = self.names(A, "held")
        g = self.acquire_ok(lock, gw=self.open_gw, ttl_ms=30000,
                            owner="ops@build-3:4121")
        t0 = time.monotonic()
        self.addCleanup(self._release_quietly, lock, g["lease"], self.open_gw)
        text = self.assert_shows(
            "(() => { const t = %s; return t && t.includes('ops@build-3:4121')"
            " && t; })()" % shown_lock(lock), "the held lock", t0)
        self.assertIn("holder", text)
        self.assertIn("exclusive", text)
        self.assertIn("TTL", text)

    def test_the_browsers_own_event_source_gets_every_event_as_a_message(self):
        # the stream as any EventSource reads it, on the page's origin:
        # open at once, each event an onmessage with its id as the
        # lastEventId, its kind in the JSON
        self.open_page()
        lock = self.names(A, "es")
        prefix = lock.rsplit("/", 1)[0] + "/"
        self.b.evaluate(
            "(() => { window.esGot = []; window.esOpen = false;"
            " const es = new EventSource('/_fence/v1/events?prefix=' +"
            " encodeURIComponent(%s));"
            " es.onopen = () => { window.esOpen = true; };"
            " es.onmessage = (m) => { const e = JSON.parse(m.data);"
            " window.esGot.push([e.kind, e.lock, e.id, m.lastEventId]); };"
            " window.es = es; return true; })()" % js(prefix))
        self.addCleanup(self.b.evaluate,
                        "window.es && window.es.close(), true")
        v, _ = self.b.wait_for("window.esOpen", slack(2.0))
        self.assertTrue(v, "the EventSource did not open")
        g = self.acquire_ok(lock, gw=self.open_gw, ttl_ms=30000)
        self.release_ok(lock, g["lease"], self.open_gw)
        v, _ = self.b.wait_for("window.esGot.length >= 2 && window.esGot",
                               slack(2.0))
        self.assertTrue(v, "the EventSource's onmessage got %r"
                        % self.b.evaluate("window.esGot"))
        self.assertEqual([(k, l) for k, l, _, _ in v],
                         [("granted", lock), ("released", lock)])
        for _, _, eid, last in v:
            self.assertTrue(eid)
            self.assertEqual(last, eid)
        self.assert_no_console_errors()

    def test_waiter_shows_in_its_locks_queue_within_a_second(self):
        self.open_page()
        lock = self.names(A, "queue")
        g = self.acquire_ok(lock, gw=self.open_gw, ttl_ms=30000,
                            owner="first")
        # the grant's own refresh is over: a queued waiter makes no event,
        # so what shows it is the page's next listing, however late
        self.assert_shows(shown_lock(lock), "the held lock")
        t0 = time.monotonic()
        w = self.waiter(lock, gw=self.open_gw, ttl_ms=30000, wait_ms=20000,
                        owner="second")
        self.assert_shows(
            "(() => { const t = %s; return t && t.includes('waiter 1') && "
            "t.includes('second') && t; })()" % shown_lock(lock),
            "the waiter", t0)
        self.release_ok(lock, g["lease"], self.open_gw)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.release_ok(lock, r.json["lease"], self.open_gw)

    def test_refused_write_shows_as_a_refused_event_within_a_second(self):
        self.open_page()
        lock = self.names(A, "refused")
        self.refuse_a_write(self.open_gw, lock)
        t0 = time.monotonic()
        text = self.assert_shows(shown_event("refused", lock),
                                 "the refused write", t0)
        self.assertIn("stale_token", text)
        self.assertIn("PUT", text)
        banner, _ = self.b.wait_for(
            "!document.getElementById('refusals').hidden && "
            "document.getElementById('refusals-text').textContent",
            slack(1.0))
        self.assertIn(lock, banner or "", "the refusal is not on top")
        self.assert_no_console_errors()

    def test_screenshots_at_desk_and_phone_width(self):
        # names as a deployment's: the first is the README's picture
        lock, write = A + "jobs/nightly", A + "reports/q4.csv"
        held = self.acquire_ok(lock, gw=self.open_gw, ttl_ms=30000,
                               owner="deploy@build-7:311")
        w = self.waiter(lock, gw=self.open_gw, ttl_ms=30000, wait_ms=20000,
                        owner="deploy@build-8:977")
        self.refuse_a_write(self.open_gw, write)
        shown = {}
        for name, width, height, mobile in SIZES:
            self.open_page(size=(name, width, height, mobile))
            v, _ = self.b.wait_for(
                "(() => { const t = %s; return t && t.includes('waiter 1'); "
                "})()" % shown_lock(lock), slack(3.0))
            self.assertTrue(v, "%s: the page did not show the lock and its "
                            "waiter: %r" % (name, self.page_text()))
            # the refusal came before the page opened: its history
            shown[name], _ = self.b.wait_for(
                "!document.getElementById('refusals').hidden && %s"
                % shown_event("refused", write), slack(5.0))
            # at a phone's width nothing is wider than the window
            scroll = self.b.evaluate(
                "document.documentElement.scrollWidth")
            self.assertLessEqual(scroll, width, "%s: the page is %d px wide"
                                 % (name, scroll))
            path = self.b.screenshot(os.path.join(
                self.open_gw.dir, "ui-%s.png" % name))
            self.assertGreater(os.path.getsize(path), 1000)
            print("screenshot %s: %s" % (name, path))
        self.release_ok(lock, held["lease"], self.open_gw)
        r = w.result(slack(10.0))
        self.assertEqual(r.status, 200, r)
        self.release_ok(lock, r.json["lease"], self.open_gw)
        for name, v in shown.items():
            self.assertTrue(v, "%s: the refusal is not on the page" % name)
        self.assert_no_console_errors()

    # -- under an auth-file -----------------------------------------------

    def enter_key(self, key):
        v, _ = self.b.wait_for("!document.getElementById('login').hidden",
                               slack(2.0))
        self.assertTrue(v, "the page did not ask for a key: %r"
                        % self.page_text())
        self.b.evaluate("document.getElementById('key').value = %s; "
                        "document.getElementById('use-key').click(); true"
                        % js(key))

    def seer_page(self, query):
        """The auth gateway's page, seer's key entered once."""
        self.open_page(self.auth_gw, query)
        self.enter_key(SEER_KEY)

    def test_principal_sees_locks_of_its_prefix_only(self):
        mine, theirs = self.names(A, "mine"), self.names(B, "theirs")
        t = self.acquire_ok(theirs, gw=self.open_gw, ttl_ms=30000,
                            owner="not-for-seer")
        self.addCleanup(self._release_quietly, theirs, t["lease"],
                        self.open_gw)
        held = self.acquire_ok(mine, gw=self.open_gw, ttl_ms=30000,
                               owner="for-seer")
        self.addCleanup(self._release_quietly, mine, held["lease"],
                        self.open_gw)

        self.seer_page("?prefix=" + A)
        self.assert_shows(shown_lock(mine), "the principal's lock")
        text = self.page_text()
        self.assertNotIn(B, text)
        self.assertNotIn("not-for-seer", text)
        self.assertEqual(self.b.evaluate(
            "[...document.querySelectorAll('[data-lock]')]"
            ".filter(e => e.dataset.lock.startsWith(%s)).length" % js(B)), 0)
        # the metrics are not its to read: said calmly
        v, _ = self.b.wait_for(
            "document.getElementById('rates-from').textContent"
            ".includes('not permitted')", slack(3.0))
        self.assertTrue(v, self.page_text())

        # asked once: a reload in the same tab keeps the key
        self.b.navigate(self.url(self.auth_gw, "?prefix=" + A))
        self.assert_shows(shown_lock(mine), "the lock after a reload")
        self.assertTrue(self.b.evaluate(
            "document.getElementById('login').hidden"))

        # every lock, or another prefix: refused, and it says so; nothing
        # of B shows
        for query in ("", "?prefix=" + B):
            self.b.navigate(self.url(self.auth_gw, query))
            v, _ = self.b.wait_for(
                "!document.getElementById('notice').hidden && "
                "document.getElementById('notice').textContent", slack(2.0))
            self.assertIn("may not see", v or "", self.page_text())
            self.assertTrue(self.b.evaluate(
                "document.getElementById('login').hidden"))
            self.assertNotIn(theirs, self.page_text())
            self.assertNotIn("not-for-seer", self.page_text())
        self.assert_no_console_errors(allow_refusals=True)

    def test_principal_sees_events_of_its_prefix_only(self):
        # live: the page is open and past its history (a grant of A made
        # before it opened is on it) when B's grant and refused write
        # happen, then A's; were B's shown, they would be before A's
        marker = self.names(A, "before")
        m = self.acquire_ok(marker, gw=self.open_gw, ttl_ms=30000)
        self.addCleanup(self._release_quietly, marker, m["lease"],
                        self.open_gw)
        self.seer_page("?prefix=" + A)
        self.assert_history_shows(shown_event("granted", marker),
                                  "the grant before the page opened")
        theirs, refused_b = self.names(B, "theirs"), self.names(B, "write")
        t = self.acquire_ok(theirs, gw=self.open_gw, ttl_ms=30000,
                            owner="not-for-seer")
        self.addCleanup(self._release_quietly, theirs, t["lease"],
                        self.open_gw)
        self.refuse_a_write(self.open_gw, refused_b)
        mine, refused_a = self.names(A, "mine"), self.names(A, "write")
        held = self.acquire_ok(mine, gw=self.open_gw, ttl_ms=30000,
                               owner="for-seer")
        t0 = time.monotonic()
        self.addCleanup(self._release_quietly, mine, held["lease"],
                        self.open_gw)
        self.assert_shows(shown_event("granted", mine),
                          "the principal's grant", t0)
        self.refuse_a_write(self.open_gw, refused_a)
        t0 = time.monotonic()
        self.assert_shows(shown_event("refused", refused_a),
                          "the principal's refused write", t0)
        self.assert_nothing_of_b()

        # history: a tab opened after all of it shows A's events as they
        # were recorded, and none of B's
        self.seer_page("?prefix=" + A)
        self.assert_history_shows(shown_event("refused", refused_a),
                                  "the principal's refused write, from "
                                  "the history")
        self.assertTrue(self.b.evaluate(shown_event("granted", mine)),
                        self.page_text())
        self.assert_nothing_of_b()
        self.assert_no_console_errors(allow_refusals=True)

    def assert_history_shows(self, expr, what):
        """expr becomes truthy within the bound of a page's load: what
        happened before the page opened comes with its first answers (on
        a Cluster a history read is one XRANGE per slot)."""
        t0 = time.monotonic()
        v, _ = self.b.wait_for(expr, slack(5.0))
        self.assertTrue(v, "%s: not on the page %.2f s after it opened; "
                        "the page says: %r"
                        % (what, time.monotonic() - t0, self.page_text()))
        print("%s: on the page after %.3f s" % (what, time.monotonic() - t0))

    def assert_nothing_of_b(self):
        text = self.page_text()
        self.assertNotIn(B, text)
        self.assertNotIn("not-for-seer", text)
        self.assertEqual(self.b.evaluate(
            "[...document.querySelectorAll('[data-lock]')]"
            ".filter(e => e.dataset.lock.startsWith(%s)).length" % js(B)), 0)


@harness.single_redis("the page's Redis kind is the Chromium class's axis: "
                      "Firefox reads the same answers")
class StatusPageFirefox(StatusPage):
    """The same page and the same tests in Firefox (Debian's firefox-esr,
    over WebDriver BiDi: firefox.py), once: which gateway build or Redis
    serves the page is the Chromium class's matrix. Firefox logs no
    failed load of an answer the page asked for; a Content-Security-
    Policy violation reaches the errors through the page's own event."""

    axes = ("redis",)
    browser_kind = firefox.Firefox
    _page_env = None
    _page_env_error = None
    _browser = None
