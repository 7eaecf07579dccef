# SPDX-License-Identifier: Apache-2.0
"""Every page of roostd's web page in headless Chromium, at 1280 and 420
px wide (web_pages.sh sets the broker up and runs this).

    web_pages.py CHROMIUM URL USER PASSWORD OUTDIR STATE.json

STATE names what web_pages.sh made: queues, the exchange and its
binding, the policy, the held connections, and the burst it published
(how many, and the depth it left). Each page is opened at each width,
its elements must be visible, inside the window and not overlapping, the
page must not scroll sideways, and a screenshot is kept in OUTDIR. Then
what each page shows is checked against what was made: the charts are
read back from the uPlot instances they drew (el.uplot) and from their
canvas pixels. Prints "PASS name" / "FAIL name: why" (lib.sh's
run_checks counts them).
"""
import json
import os
import shutil
import sys
import tempfile
import time
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_driver import Browser  # noqa: E402

# What must be visible and must not overlap on every page: the header's
# parts, headings, cards, charts, action boxes and table frames (a
# table itself may be wider than the window: its frame scrolls).
LAYOUT = ("header.top .brand, #nav a, #who-name, #logout, #view h1, "
          "#view .card, #view .chart, #view .seg, #view .action, "
          "#view .scroll, #view table.kv")

LAYOUT_JS = r"""
(sel => {
  const W = document.documentElement.clientWidth;
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (e.className && typeof e.className === 'string' ?
     '.' + e.className.trim().split(/\s+/).join('.') : '') +
    (e.textContent ? ' "' + e.textContent.trim().slice(0, 20) + '"' : '');
  const els = [...document.querySelectorAll(sel)]
    .filter((e) => e.getClientRects().length > 0);
  const bad = [];
  const box = els.map((e) => e.getBoundingClientRect());
  els.forEach((e, i) => {
    const r = box[i];
    if (r.width < 1 || r.height < 1)
      bad.push('empty: ' + name(e));
    else if (r.left < -1 || r.right > W + 1)
      bad.push('outside the window (' + Math.round(r.left) + '..' +
               Math.round(r.right) + ' of ' + W + '): ' + name(e));
  });
  for (let i = 0; i < els.length; i++)
    for (let j = i + 1; j < els.length; j++) {
      if (els[i].contains(els[j]) || els[j].contains(els[i]))
        continue;
      const a = box[i], b = box[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1)
        bad.push('overlap: ' + name(els[i]) + ' / ' + name(els[j]));
    }
  return {count: els.length, sideways: document.documentElement.scrollWidth
          - W, bad};
})(%s)
"""

# How many of a chart's canvas pixels are drawn (not transparent).
INK_JS = r"""
(id => {
  const c = document.querySelector('#' + id + ' canvas');
  if (!c) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
})(%s)
"""


def main():
    chromium, url, user, password, out, state_file = sys.argv[1:7]
    with open(state_file) as f:
        st = json.load(f)
    os.makedirs(out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="roost-web-pages-")
    log = open(os.path.join(out, "chromium.log"), "wb")
    results = []

    def check(name, ok, why=""):
        results.append(bool(ok))
        print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
        sys.stdout.flush()
        return ok

    b = Browser(chromium, profile, log)

    def width(w):
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": w, "height": 900, "deviceScaleFactor": 1,
                "mobile": False})

    def ready(name, extra="true", timeout=15):
        return b.wait("(v => v.dataset.page === %s && v.dataset.state === "
                      "'ready' && (%s))(document.getElementById('view'))"
                      % (json.dumps(name), extra), timeout)

    def go(hash_, name, extra="true"):
        b.eval("location.hash = %s" % json.dumps(hash_))
        return ready(name, extra)

    def q(vhost, name):
        return "%s/%s" % (quote(vhost, safe=""), quote(name, safe=""))

    def txt(sel):
        return b.eval("(e => e ? e.textContent : null)"
                      "(document.querySelector(%s))" % json.dumps(sel))

    vh = st["vhost"]
    # page: (hash, page name, what must be there before it is looked at)
    pages = [
        ("#/", "overview", "!!document.querySelector('#overview-rates "
         "canvas')"),
        ("#/queues", "queues", "!!document.querySelector('tr[data-queue]')"),
        ("#/queues/" + q(vh, st["queue"]), "queue",
         "!!document.querySelector('#queue-rates canvas')"),
        ("#/queues/" + q(vh, st["dlq"]), "queue",
         "!document.getElementById('replay-box').hidden"),
        ("#/exchanges", "exchanges",
         "!!document.querySelector('tr[data-exchange]')"),
        ("#/exchanges/" + q(vh, st["exchange"]), "exchange",
         "!!document.querySelector('tr[data-binding]')"),
        ("#/connections", "connections",
         "document.querySelectorAll('tr[data-connection]').length >= 2"),
        ("#/channels", "channels",
         "!!document.querySelector('tr[data-channel]')"),
        ("#/admin", "admin",
         "!!document.querySelector('#admin-policies tr[data-policy]')"),
    ]
    try:
        b.attach()
        width(1280)
        b.goto(url)
        b.wait("!document.getElementById('login').hidden")
        b.type_into("#login-user", user)
        b.type_into("#login-pass", password)
        b.click("#login-submit")
        check("logs in", ready("overview"), b.eval("document.body.innerText"))

        # ---- each page at each width ----
        for w in (1280, 420):
            width(w)
            for i, (hash_, name, extra) in enumerate(pages):
                shown = go(hash_, name, extra)
                time.sleep(0.3)         # charts resize, fonts settle
                tag = "%s at %d px" % (hash_, w)
                if not check("%s shows its content" % tag, shown,
                             b.eval("document.getElementById('view')"
                                    ".innerText")[:300]):
                    continue
                lay = b.eval(LAYOUT_JS % json.dumps(LAYOUT))
                check("%s: %d elements visible, inside the window, none "
                      "overlapping" % (tag, lay["count"]),
                      lay["count"] >= 5 and not lay["bad"],
                      "; ".join(lay["bad"][:6]))
                check("%s: the page does not scroll sideways" % tag,
                      lay["sideways"] <= 1, "%d px too wide" %
                      lay["sideways"])
                print("screenshot: %s" % b.screenshot(os.path.join(
                    out, "%02d-%s-%d.png" % (i, name, w))))
            # the queue list at this width: names are not cut into
            # letters (one line of text is ~20 px high)
            go("#/queues", "queues")
            hgt = b.eval("(a => a ? a.getBoundingClientRect().height : -1)"
                         "([...document.querySelectorAll('tr[data-queue] a')"
                         "].find(a => a.textContent === %s))"
                         % json.dumps(st["long_queue"]))
            check("at %d px a long queue name takes at most 3 lines (%s px)"
                  % (w, hgt), 0 < hgt <= 62, "%s px high" % hgt)
        width(1280)

        # ---- the overview: version, favicon, charts ----
        go("#/", "overview", pages[0][2])
        ver = txt("#version") or ""
        check("the overview names Roost's version beside the announced "
              "RabbitMQ 3.10.8", ver.startswith("Roost " + st["version"]) and
              ver.endswith("announces RabbitMQ 3.10.8") and
              "announces the RabbitMQ version" in (txt("#version-why") or ""),
              ver)
        fav = b.eval("(l => l && fetch(l.href).then(r => r.status + ' ' + "
                     "r.headers.get('Content-Type')))(document.querySelector("
                     "'link[rel=icon]'))")
        check("a favicon is linked and served", fav == "200 image/svg+xml",
              fav)
        u = b.eval("(u => ({labels: u.series.map(s => s.label), data: "
                   "u.data}))(document.getElementById('overview-rates')"
                   ".uplot)")
        check("the rate chart draws publish, deliver, ack, redeliver and "
              "dead-letter", u["labels"][1:] == ["Publish", "Deliver", "Ack",
                                                  "Redeliver",
                                                  "Dead-lettered"],
              u["labels"])
        xs, pub = u["data"][0], u["data"][1]
        drawn = sum((pub[i] or 0) * (xs[i] - xs[i - 1])
                    for i in range(1, len(xs)))
        check("the publish series adds up to the burst (%d messages; "
              "drawn: %.0f)" % (st["burst"], drawn),
              st["burst"] <= drawn + 0.5 <= st["published"] + 0.5,
              "points %r" % list(zip(xs, pub))[-6:])
        dl = u["data"][5]
        check("the dead-letter series shows the %d rejected messages"
              % st["dead"], abs(sum((dl[i] or 0) * (xs[i] - xs[i - 1])
                                    for i in range(1, len(xs))) -
                                st["dead"]) < 0.5, dl[-6:])
        d = b.eval("document.getElementById('overview-depths').uplot.data")
        ready_now = [v for v in d[1] if v is not None]
        check("the depth chart ends at the %d ready messages" %
              st["ready_total"], ready_now and
              ready_now[-1] == st["ready_total"], d[1][-6:])
        ink = b.eval(INK_JS % json.dumps("overview-rates"))
        check("the rate chart's canvas is drawn (%d pixels)" % ink,
              ink > 2000, ink)
        b.click("button[data-range='1h']")
        check("the 1 hour button asks for an hour of history",
              b.wait("document.getElementById('overview-history')"
                     ".dataset.range === '1h'", 10) and
              any("msg_rates_age=3600" in e["params"]["request"]["url"]
                  for e in b.events
                  if e["method"] == "Network.requestWillBeSent"), "")
        wide = b.eval("(u => u.scales.x.max - u.scales.x.min)(document."
                      "getElementById('overview-rates').uplot)")
        check("and its time axis spans the hour (%s s)" % wide,
              abs(wide - 3600) < 1, wide)
        b.click("button[data-range='10m']")

        # ---- a queue's page ----
        go(pages[2][0], "queue", pages[2][2])
        check("a queue shows its lag (the oldest ready message's age)",
              (txt("#q-age") or "").endswith(" s") or "min" in
              (txt("#q-age") or ""), txt("#q-age"))
        pol = txt("#q-policy") or ""
        check("a queue shows its effective policy", "max-length" in pol, pol)
        check("no replay box where the queue holds no dead letters",
              b.eval("document.getElementById('replay-box').hidden"))
        wide = b.eval("(u => u.scales.x.max - u.scales.x.min)(document."
                      "getElementById('queue-depths').uplot)")
        check("the queue's time axis spans 10 minutes, even with few "
              "samples (%s s)" % wide, abs(wide - 600) < 1, wide)
        qd = b.eval("document.getElementById('queue-depths').uplot.data[1]")
        check("the queue's depth chart ends at its %d ready messages" %
              st["ready"], [v for v in qd if v is not None][-1:] ==
              [st["ready"]], qd[-6:])
        b.eval("document.getElementById('get-count').value = '2'")
        b.click("#get")
        got = b.wait("(e => e.dataset.done && e.querySelectorAll("
                     "'tr[data-got]').length)(document.getElementById("
                     "'get-result'))", 10)
        check("Get shows 2 messages (and requeues them)", got == 2,
              txt("#get-result"))
        go("#/queues/" + q(vh, st["source"]), "queue")
        dead = txt("#q-dead") or ""
        check("a queue shows what it dead-lettered, by reason",
              ("rejected %d" % st["dead"]) in dead, dead)
        check("and what it dropped, by reason (none)",
              txt("#q-dropped") == "none", txt("#q-dropped"))
        go(pages[3][0], "queue", pages[3][2])
        check("the replay box is there where the queue holds dead letters",
              b.eval("!document.getElementById('replay-box').hidden"))

        # delete, with the second click that confirms it
        go("#/queues/" + q(vh, st["doomed"]), "queue")
        b.click("#delete")
        asked = b.wait("!document.getElementById('delete-confirm').hidden",
                       3)
        gone = asked and b.click("#delete-confirm") and \
            b.wait("location.hash === '#/queues'", 10)
        still = b.eval("fetch('api/queues/%s', {headers: {Authorization: "
                       "'Basic ' + sessionStorage.getItem('roost.auth')}})"
                       ".then(r => r.status)" % q(vh, st["doomed"]))
        check("Delete asks to confirm, then deletes the queue (now 404)",
              asked and gone and still == 404, "asked %r, gone %r, %r" %
              (asked, gone, still))

        # ---- an exchange: bindings and publishing ----
        go(pages[5][0], "exchange", pages[5][2])
        bound = b.eval("[...document.querySelectorAll('#exchange-bindings-"
                       "source tr[data-binding]')].map(t => t.dataset"
                       ".binding + ' ' + t.cells[2].textContent)")
        check("the exchange lists its binding to %s" % st["queue"],
              (st["queue"] + " " + st["key"]) in bound, bound)
        for key, routed in ((st["key"], "true"), ("nowhere", "false")):
            b.eval("document.getElementById('publish-key').value = %s"
                   % json.dumps(key))
            b.eval("document.getElementById('publish-payload').value = "
                   "'from the web page'")
            b.click("#publish")
            said = b.wait("(e => e.dataset.routed)(document.getElementById("
                          "'publish-result'))", 10)
            check("Publish with key %r: routed %s" % (key, routed),
                  said == routed, txt("#publish-result"))
            b.eval("delete document.getElementById('publish-result')"
                   ".dataset.routed")

        # ---- connections, channels, admin ----
        go(pages[6][0], "connections", pages[6][2])
        rows = b.eval("[...document.querySelectorAll('tr[data-connection]')]"
                      ".map(t => [(t.querySelector('.given') || {})"
                      ".textContent, t.querySelector('td.tls').textContent])")
        tls = [r for r in rows if r[0] == st["tls_name"]]
        plain = [r for r in rows if r[0] == st["plain_name"]]
        check("connections are listed by the name the client gives itself",
              tls and plain, rows)
        check("with TLS details on the TLS one", tls and
              tls[0][1].lower().startswith("tlsv1.") and len(tls[0][1]) > 10 and
              plain and plain[0][1] == "no", rows)
        go(pages[7][0], "channels", pages[7][2])
        pf = b.eval("[...document.querySelectorAll('tr[data-channel]')]"
                    ".map(t => t.cells[4].textContent)")
        check("the channels page shows the held channel's prefetch %d" %
              st["prefetch"], str(st["prefetch"]) in pf, pf)
        go(pages[8][0], "admin", pages[8][2])
        seen = b.eval("({users: [...document.querySelectorAll('#admin-users "
                      "tr[data-user]')].map(t => t.dataset.user), vhosts: "
                      "[...document.querySelectorAll('#admin-vhosts "
                      "tr[data-vhost]')].map(t => t.dataset.vhost), perms: "
                      "document.querySelectorAll('#admin-permissions tbody "
                      "tr').length, policies: [...document.querySelectorAll("
                      "'#admin-policies tr[data-policy]')].map(t => t."
                      "dataset.policy)})")
        check("the admin page lists users, vhosts, permissions and policies",
              user in seen["users"] and vh in seen["vhosts"] and
              seen["perms"] >= 1 and st["policy"] in seen["policies"], seen)

        # ---- a stream's page ----
        go("#/queues/" + q(vh, st["stream"]), "queue",
           "!!document.getElementById('q-stream-names')")
        check("a stream shows its range", txt("#q-stream-range") ==
              "0 \u2013 9", txt("#q-stream-range"))
        check("a stream shows its retention",
              txt("#q-stream-retention") == "max age 1D",
              txt("#q-stream-retention"))
        check("a stream shows its size and append times",
              txt("#q-stream-bytes") == "20 B" and
              (txt("#q-stream-times") or "").count("20") >= 2,
              (txt("#q-stream-bytes"), txt("#q-stream-times")))
        row = b.eval("(r => r ? [...r.cells].map(c => c.textContent) : null)"
                     "(document.querySelector('#q-stream-names "
                     "tr[data-name=\"wp-name\"]'))")
        check("a stream lists its consumer names with offset and lag",
              row is not None and row[1:4] == ["2", "8", "1"], row)
        cons = b.eval("[...document.querySelectorAll('#queue-consumers th')]"
                      ".map(c => c.textContent)")
        lag = b.eval("(r => r ? [...r.cells].slice(-2).map(c => "
                     "c.textContent) : null)(document.querySelector("
                     "'#queue-consumers tbody tr'))")
        check("a stream's consumers show their offset and lag",
              "Offset" in " ".join(cons) and lag == ["5", "5"], (cons, lag))

        errors = [e["params"]["exceptionDetails"] for e in b.events
                  if e["method"] == "Runtime.exceptionThrown"]
        check("no script errors", not errors, str(errors)[:400])
        csp = [e["params"]["entry"]["text"] for e in b.events
               if e["method"] == "Log.entryAdded" and
               "Content Security Policy" in e["params"]["entry"]["text"]]
        check("no Content-Security-Policy violations (uPlot included)",
              not csp, " | ".join(csp))
    finally:
        b.close()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
