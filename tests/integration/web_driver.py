# SPDX-License-Identifier: Apache-2.0
"""Drive roostd's web page in headless Chromium (web.sh runs this).

Chromium is driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ending in NUL, commands on fd 3,
answers and events on fd 4), so nothing but Debian's python3 and
chromium is needed. Clicks and typing are real input events at the
elements' places, as a user's would be.

    web_driver.py CHROMIUM URL USER PASSWORD VHOST QUEUE READY OUTDIR \
                  OTHER REBIND DLQ:DEAD

The page is opened at URL, logged in, the queue QUEUE (with READY ready
messages) looked for in the list and opened, and purged with its Purge
button; the dead-letter queue DLQ's DEAD messages are browsed and
replayed with its Replay button; on the connections page, pika's
connection (web.sh holds one open) is closed with a reason. Then, from URL's page, a
cross-origin DELETE with the user's credentials to OTHER (the same
roostd under another of its names) must be refused by the browser (the
preflight gets 403); and REBIND (http://rebind.test:PORT, which the
browser is told resolves to 127.0.0.1, as a rebinding attacker's name
would) must get roostd's 421, not the page. Prints "PASS name" and
"FAIL name: why" lines (lib.sh's run_checks counts them), "NOTE ..."
lines for what the broker cannot show yet, and the screenshots' paths.
Every request the browser makes must go to URL's origin, and the page
must raise no script error and no Content-Security-Policy violation.
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote, urlsplit


class Browser:
    def __init__(self, chromium, profile, log, resolve=None):
        r_cmd, self.w_cmd = os.pipe()
        self.r_ev, w_ev = os.pipe()

        def fds():
            a, b = os.dup(r_cmd), os.dup(w_ev)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            # --no-sandbox: CI runs as root; --disable-dev-shm-usage:
            # containers have a small /dev/shm.
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage",
             "--remote-debugging-pipe", "--user-data-dir=" + profile,
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--metrics-recording-only",
             "--window-size=1280,1000", "--lang=en-US"] +
            (["--host-resolver-rules=MAP %s 127.0.0.1" % resolve]
             if resolve else []) + ["about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=fds, close_fds=False)
        os.close(r_cmd)
        os.close(w_ev)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w_cmd)
        os.close(self.r_ev)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            r, _, _ = select.select([self.r_ev], [], [], left)
            if r:
                chunk = os.read(self.r_ev, 1 << 20)
                if not chunk:
                    raise EOFError("chromium went away")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, timeout=30, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.w_cmd, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def attach(self):
        targets = self.call("Target.getTargets", session=False)
        page = next(t for t in targets["targetInfos"] if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget",
            {"targetId": page["targetId"], "flatten": True},
            session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")

    def eval(self, expr, timeout=30):
        r = self.call("Runtime.evaluate",
                      {"expression": expr, "returnByValue": True,
                       "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expr, timeout=15):
        """The first truthy value of 'expr' within 'timeout' s, or None."""
        deadline = time.time() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > deadline:
                return None
            time.sleep(0.1)

    def goto(self, url):
        self.call("Page.navigate", {"url": url})
        return self.wait("document.readyState === 'complete'")

    def click(self, selector):
        """A mouse click in the middle of the element; False if it is not
        there or not visible."""
        box = self.eval(
            "(() => { const e = document.querySelector(%s);"
            " if (!e || e.offsetParent === null) return null;"
            " e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
            % json.dumps(selector))
        if not box:
            return False
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": box[0], "y": box[1],
                       "button": "left", "clickCount": 1})
        return True

    def type_into(self, selector, text):
        if not self.click(selector):
            return False
        self.call("Input.insertText", {"text": text})
        return True

    def screenshot(self, path):
        """The whole page, not only what the window shows."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        data = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"],
                     "height": size["height"], "scale": 1}})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path


def main():
    chromium, url, user, password, vhost, queue, ready, out = sys.argv[1:9]
    other, rebind, dlq = sys.argv[9:12]
    dlq, dead = dlq.split(":")
    dead = int(dead)
    ready = int(ready)
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    os.makedirs(out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="roost-web-")
    log = open(os.path.join(out, "chromium.log"), "wb")
    results = []

    def check(name, ok, why=""):
        results.append(ok)
        print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
        sys.stdout.flush()
        return ok

    def shot(name):
        print("screenshot: %s" % b.screenshot(os.path.join(out, name)))

    b = Browser(chromium, profile, log, urlsplit(rebind).hostname)
    try:
        b.attach()
        b.goto(url)
        check("the page loads and shows the login form",
              b.wait("!document.getElementById('login').hidden"),
              "no login form: %s" % b.eval("document.body.innerText"))
        check("the page has no inline script",
              b.eval("[...document.scripts].every(s => s.src)"))

        b.type_into("#login-user", user)
        b.type_into("#login-pass", "wrong" + password)
        b.click("#login-submit")
        msg = b.wait("(e => !e.hidden && e.textContent)"
                     "(document.getElementById('login-error'))")
        check("a wrong password is refused on the form", msg and
              "Login failed" in msg, "said %r" % msg)
        b.eval("document.getElementById('login-pass').value = ''")
        b.type_into("#login-pass", password)
        b.click("#login-submit")
        ok = b.wait("(v => v.dataset.page === 'overview' && "
                    "v.dataset.state === 'ready')"
                    "(document.getElementById('view'))")
        check("logs in and shows the overview", ok,
              b.eval("document.body.innerText"))
        check("the credentials are in sessionStorage, not in a cookie",
              b.eval("!!sessionStorage.getItem('roost.auth') && "
                     "document.cookie === ''"))
        total = b.eval("(e => e && e.textContent)"
                       "(document.getElementById('total-messages'))")
        check("the overview shows the queued messages", total is not None
              and total.replace(",", "").isdigit()
              and int(total.replace(",", "")) >= ready,
              "total %r" % total)
        shot("overview.png")

        # The queue list.
        b.click('a[data-nav="queues"]')
        row = ("[...document.querySelectorAll('tr[data-queue]')].find("
               "t => t.dataset.queue === %s && t.dataset.vhost === %s)"
               % (json.dumps(queue), json.dumps(vhost)))
        listed = b.wait("(v => v.dataset.page === 'queues' && "
                        "v.dataset.state === 'ready' && !!(%s))"
                        "(document.getElementById('view'))" % row)
        seen = b.eval("document.getElementById('view').innerText")
        check("the queue list shows the queue the test made", listed,
              "the page shows: %s" % seen[:300].replace("\n", " | "))
        if listed:
            cnt = b.eval("(%s).querySelector('[data-col=ready]').textContent"
                         % row)
            check("the list shows its %d ready messages" % ready,
                  cnt == str(ready), "shows %r" % cnt)
        # A queue whose name is HTML is shown as its text, not made an
        # element (and its handler would not run: no inline script).
        xss = os.environ.get("WEB_XSS_QUEUE")
        if xss:
            shown = b.wait("[...document.querySelectorAll('tr[data-queue]')]"
                           ".some(t => t.dataset.queue === %s && t."
                           "querySelector('a').textContent === %s)"
                           % (json.dumps(xss), json.dumps(xss)), timeout=5)
            check("a queue named with HTML is listed as text",
                  shown and b.eval("!document.querySelector('#view img') "
                                   "&& window.pwned === undefined"),
                  b.eval("document.getElementById('view').innerHTML")[:300])

        # Most messages first: the test's queue has the most.
        b.eval("(s => { s.value = 'messages'; s.dispatchEvent("
               "new Event('change')); })(document.getElementById("
               "'queue-sort'))")
        b.wait("(t => t && t.dataset.queue === %s)(document.querySelector("
               "'tr[data-queue]'))" % json.dumps(queue), timeout=5)
        first = b.eval("document.querySelector('tr[data-queue]')"
                       ".dataset.queue")
        check("sorted by most messages, the test's queue comes first",
              first == queue, "first is %r" % first)
        shot("queues.png")

        # The queue's page: from its link, or by its address when the
        # list could not show it.
        if listed:
            b.eval("(%s).querySelector('a').scrollIntoView()" % row)
            b.click("tr[data-queue] a[href=%s]" % json.dumps(
                "#/queues/%s/%s" % (quote(vhost, safe=""),
                                    quote(queue, safe=""))))
        else:
            b.eval("location.hash = %s" % json.dumps(
                "#/queues/%s/%s" % (quote(vhost, safe=""),
                                    quote(queue, safe=""))))
        ok = b.wait("(v => v.dataset.page === 'queue' && "
                    "v.dataset.state === 'ready')"
                    "(document.getElementById('view'))")
        check("the queue's page opens", ok, b.eval("location.hash"))
        shown = b.wait("(e => e && e.textContent)"
                       "(document.getElementById('q-ready'))", timeout=3)
        check("the queue's page shows its ready messages",
              shown == str(ready), "shows %r" % shown)
        browse = b.wait("(e => e && e.querySelector('table, "
                        "[data-unavailable]') && e.querySelectorAll("
                        "'tr[data-position]').length + 1)"
                        "(document.getElementById('queue-browse'))")
        if b.eval("!!document.querySelector("
                  "'#queue-browse [data-unavailable]')"):
            print("NOTE browse: /api/queues/V/Q/browse answers 404 here")
        else:
            check("the browse table shows the %d messages" % ready,
                  browse == ready + 1, "rows %r" % ((browse or 1) - 1))
        shot("queue-before-purge.png")

        # Purge, with the second click that confirms it.
        clicked = b.click("#purge") and b.wait(
            "!document.getElementById('purge-confirm').hidden", 3) and \
            b.click("#purge-confirm")
        res = b.wait("(e => e.dataset.done && e.textContent)"
                     "(document.getElementById('purge-result'))")
        check("the Purge button purges (as the page says)", clicked and
              b.eval("document.getElementById('purge-result')"
                     ".dataset.done === 'true'"), "the page says %r" % res)
        b.wait("(e => e && e.textContent === '0')"
               "(document.getElementById('q-ready'))", timeout=5)
        shot("queue.png")

        # Replay of dead letters, on the DLQ's page.
        b.eval("location.hash = %s" % json.dumps(
            "#/queues/%s/%s" % (quote(vhost, safe=""), quote(dlq, safe=""))))
        b.wait("(v => v.dataset.page === 'queue' && v.dataset.state === "
               "'ready' && document.getElementById('q-ready').textContent "
               "=== %s)(document.getElementById('view'))"
               % json.dumps(str(dead)))
        rows = b.wait("(e => e && e.querySelector('table, "
                      "[data-unavailable]') && [...e.querySelectorAll("
                      "'tr[data-position]')].map(t => t.textContent))"
                      "(document.getElementById('queue-browse'))")
        if b.eval("!!document.querySelector("
                  "'#queue-browse [data-unavailable]')"):
            print("NOTE browse: /api/queues/V/Q/browse answers 404 here")
        else:
            check("browse shows the %d dead letters with their x-death"
                  % dead, rows is not None and len(rows) == dead and
                  all("x-death: rejected" in r for r in rows), rows)
        b.click("#replay")
        said = b.wait("(e => (e.dataset.done || e.textContent.includes("
                      "'not available')) && e.textContent)"
                      "(document.getElementById('replay-result'))")
        shot("replay.png")
        if said and "not available" in said:
            print("NOTE replay: POST /api/queues/V/Q/replay answers 404 "
                  "here")
        else:
            check("Replay dead letters runs to its end (as the page says)",
                  b.eval("document.getElementById('replay-result')"
                         ".dataset.state") == "done", "said %r" % said)

        # Connections.
        b.click('a[data-nav="connections"]')
        ok = b.wait("(v => v.dataset.page === 'connections' && "
                    "v.dataset.state === 'ready')"
                    "(document.getElementById('view'))")
        check("the connections page opens", ok,
              b.eval("document.body.innerText")[:300])
        # Close the test's held connection (pika's) with a reason.
        name = b.wait("(r => r && r.dataset.connection)([...document."
                      "querySelectorAll('tr[data-connection]')].find(t => "
                      "t.textContent.includes('Pika')))", timeout=10)
        check("the connections page lists the test's pika connection",
              name, b.eval("document.getElementById('view').innerText")
              [:300].replace("\n", " | "))
        if name:
            sel = lambda a: "[%s=%s]" % (a, json.dumps(name))
            b.click(sel("data-close"))
            b.eval("document.querySelector(%s).value = ''" %
                   json.dumps(sel("data-close-reason")))
            b.type_into(sel("data-close-reason"), "closed by web.sh")
            shot("connections.png")
            b.click(sel("data-close-confirm"))
            said = b.wait("(f => !f.hidden && f.textContent)"
                          "(document.getElementById('flash'))")
            check("Close closes it (as the page says)",
                  said and said.startswith("Closed connection"),
                  "the page says %r" % said)
        else:
            shot("connections.png")

        # A management user who is not a monitor: /api/nodes refuses it
        # (401 "Not monitor user"), which must not end its session.
        user2 = os.environ.get("WEB_USER2")
        if user2:
            name2, pass2 = user2.split(":", 1)
            b.click("#logout")
            check("Log out shows the login form and forgets the "
                  "credentials", b.wait("!document.getElementById('login')"
                                        ".hidden && !sessionStorage."
                                        "getItem('roost.auth')"))
            b.eval("location.hash = '#/'")
            b.eval("document.getElementById('login-user').value = ''")
            b.type_into("#login-user", name2)
            b.type_into("#login-pass", pass2)
            b.click("#login-submit")
            ok = b.wait("(v => v.dataset.page === 'overview' && "
                        "v.dataset.state === 'ready')"
                        "(document.getElementById('view'))")
            time.sleep(0.5)
            mem = b.eval("document.body.innerText")
            check("a management user stays logged in where it may not "
                  "read (/api/nodes)", ok and "Not available (no /api/nodes"
                  in mem and b.eval("document.getElementById('login')"
                                    ".hidden"), mem[:300].replace("\n", " | "))

        # What the browser did along the way.
        foreign = [e["params"]["request"]["url"] for e in b.events
                   if e["method"] == "Network.requestWillBeSent" and
                   not e["params"]["request"]["url"].startswith(origin + "/")
                   and not e["params"]["request"]["url"].startswith("data:")]
        check("nothing is loaded from outside the broker", not foreign,
              " ".join(foreign[:5]))
        errors = [e["params"]["exceptionDetails"].get("exception", {})
                  .get("description", e["params"]["exceptionDetails"]
                       .get("text"))
                  for e in b.events if e["method"] ==
                  "Runtime.exceptionThrown"]
        check("no script errors", not errors, " | ".join(map(str, errors)))
        csp = [e["params"]["entry"]["text"] for e in b.events
               if e["method"] == "Log.entryAdded" and
               "Content Security Policy" in e["params"]["entry"]["text"]]
        check("no Content-Security-Policy violations", not csp,
              " | ".join(csp))

        # Another origin, with the user's credentials: the browser sends
        # a preflight (DELETE, Authorization), roostd refuses it.
        got = b.eval(
            "fetch(%s + '/api/queues/%%2F/web-guard-q/contents', "
            "{method: 'DELETE', credentials: 'omit', headers: "
            "{Authorization: 'Basic ' + sessionStorage.getItem('roost.auth')}"
            "}).then(r => 'answered ' + r.status, e => 'refused: ' + e)"
            % json.dumps(other))
        check("a page on another origin cannot DELETE (the browser refuses)",
              got.startswith("refused"), got)

        # A name that resolves to 127.0.0.1 but is not roostd's.
        b.goto(rebind + "/")
        page = b.eval("document.body ? document.body.innerText : ''")
        check("under a rebinding name the page is refused (421)",
              "misdirected_request" in page and
              b.eval("!document.getElementById('login')"), page[:200])

        with open(os.path.join(out, "console.txt"), "w") as f:
            for e in b.events:
                if e["method"] in ("Log.entryAdded", "Runtime.exceptionThrown",
                                   "Runtime.consoleAPICalled"):
                    f.write(json.dumps(e["params"]) + "\n")
    finally:
        b.close()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
