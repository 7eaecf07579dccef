#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The web page (www/, built into roostd) in headless Chromium, and the
# management listener's protections, with curl.
#
# roostd starts on free ports; pika makes a queue with messages; the
# browser (web_driver.py, over the DevTools protocol) opens the page,
# logs in, finds the queue in the list, opens its page and purges it
# with the Purge button; pika then counts the queue (empty). Three
# messages rejected into a dead-letter queue are browsed and replayed
# from its page, back into the queue they died in (once roostd has the
# dead-letter endpoints). The connections page closes a connection pika
# holds open, with a reason pika sees. A script on another origin (the
# same roostd under another of its names) tries to purge a second
# queue: refused, the queue keeps its messages. The browser opens the
# page under a name that resolves to 127.0.0.1 but is not one of
# roostd's (DNS rebinding): refused.
# Screenshots go to the output directory ($WEB_OUT, by default
# tests/integration/web.out under the current directory); their paths
# are printed.
#
# With curl: every answer (page, API, errors) carries the
# Content-Security-Policy, nosniff and X-Frame-Options headers; the
# static files, their types, ETag and 304, 404 for an unknown path, 405
# for a write; a Host that is not roostd's gets 421 (names,
# management.allowed_hosts, addresses); a write with a foreign Origin
# gets 403, with its own Origin passes; a write without Authorization
# gets 401; a body that is not JSON gets 415.
# Prints "web: N passed, M failed"; exit 77 (skipped) only when chromium,
# pika or curl is missing.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$*"; fi; }

chromium=$(find_chromium)
need web chromium chromium test -n "$chromium"
need web "pika for /usr/bin/python3" python3-pika $py -c 'import pika'
need web curl curl command -v curl
out=${WEB_OUT:-$PWD/tests/integration/web.out}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# pika: fill QUEUE N (a durable queue with N persistent messages), or
# count QUEUE (prints its ready messages).
cat > "$tmp/amqp.py" <<'EOF'
import sys
import time
import pika

case, port, queue = sys.argv[1:4]
conn = pika.BlockingConnection(pika.ConnectionParameters(
    host="127.0.0.1", port=int(port), connection_attempts=1,
    socket_timeout=5))
ch = conn.channel()
if case == "fill":
    ch.queue_declare(queue, durable=True)
    for i in range(int(sys.argv[4])):
        ch.basic_publish("", queue, b"web test message %d" % i,
                         pika.BasicProperties(delivery_mode=2,
                                              message_id="web-%d" % i))
elif case == "dead":
    # dead QUEUE N: N messages rejected from QUEUE into QUEUE-dlq (through
    # the default exchange), each with its x-death
    ch.queue_declare(queue + "-dlq", durable=True)
    ch.queue_declare(queue, durable=True, arguments={
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": queue + "-dlq"})
    for i in range(int(sys.argv[4])):
        ch.basic_publish("", queue, b"dead letter %d" % i,
                         pika.BasicProperties(delivery_mode=2))
        m, _, _ = ch.basic_get(queue)
        ch.basic_reject(m.delivery_tag, requeue=False)
elif case == "count":
    print(ch.queue_declare(queue, passive=True).method.message_count)
elif case == "hold":
    # wait (at most 60 s) for the broker to close the connection
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            conn.process_data_events(time_limit=1)
    except pika.exceptions.ConnectionClosedByBroker as e:
        print("closed by the broker: %d %s" % (e.reply_code, e.reply_text))
        sys.exit(0)
    print("still open")
    sys.exit(1)
conn.close()
EOF
amqp() { $py "$tmp/amqp.py" "$1" "$port" "${@:2}"; }

# req METHOD PATH [CURL ARGS...]: sets $code and the body and headers
# (in $tmp/body, $tmp/headers).
req() {
    local m=$1 p=$2
    shift 2
    local how=(-X "$m")
    [ "$m" = HEAD ] && how=(-I)
    rm -f "$tmp/body"       # curl writes no file for an empty body
    code=$(curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' \
        "${how[@]}" "$@" "http://127.0.0.1:$mport$p")
}
g() { req "$1" "$2" -u guest:guest "${@:3}"; }
is() { [ "$code" = "$1" ]; }
header() { sed -n "s/^$1: *//Ip" "$tmp/headers" | tr -d '\r'; }
body_has() { grep -q -- "$1" "$tmp/body"; }
secured() {
    header Content-Security-Policy | grep -q "default-src 'self'" &&
    header Content-Security-Policy | grep -q "frame-ancestors 'none'" &&
    ! header Content-Security-Policy | grep -q "unsafe-inline" &&
    [ "$(header X-Content-Type-Options)" = nosniff ] &&
    [ "$(header X-Frame-Options)" = DENY ]
}

log=$tmp/roostd.log
if ! start "$tmp/data" "$log" -s management.tcp.port=0 \
    -s management.allowed_hosts.extra=roost-web.example; then
    echo "web: roostd did not start"; cat "$log"; exit 1
fi
mport=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | head -1)
if [ -z "$mport" ]; then
    echo "web: roostd logged no management port"; cat "$log"; exit 1
fi
ok "roostd serves the management listener on port $mport"

# ---- the static files ----
req GET /
check "GET /: 200 text/html" eval 'is 200 && header Content-Type | grep -q "^text/html"'
check "GET /: the security headers" secured
check "the page is the one in www/" cmp -s "$tmp/body" "$here/../../www/index.html"
etag=$(header ETag)
check "GET /: an ETag and Cache-Control: no-cache" eval '[ -n "$etag" ] && [ "$(header Cache-Control)" = no-cache ]'
req GET / -H "If-None-Match: $etag"
check "GET / with its ETag: 304, no body" eval 'is 304 && [ ! -s "$tmp/body" ] && secured'
req HEAD /
check "HEAD /: 200, no body" eval 'is 200 && ! grep -q "<html" "$tmp/body"'
req GET /index.html
check "GET /index.html: 200" is 200
req GET /app.js
check "GET /app.js: 200 text/javascript" eval 'is 200 && header Content-Type | grep -q "^text/javascript" && cmp -s "$tmp/body" "$here/../../www/app.js"'
req GET /app.css
check "GET /app.css: 200 text/css" eval 'is 200 && header Content-Type | grep -q "^text/css"'
req GET /nope.js
check "an unknown file: 404 JSON, with the headers" eval 'is 404 && body_has "Not Found" && secured'
req GET /../broker/roostd --path-as-is
check "a path with ..: 404" eval 'is 404 || is 400'
req POST / -H 'Content-Type: application/json' -d '{}'
check "POST /: 405 with Allow" eval 'is 405 && header Allow | grep -q "GET"'
check "index.html has no inline script or style" eval '! grep -Eq "<script>|<script [^>]*>[^<]|style=|[[:space:]]on[a-z]+=" "$here/../../www/index.html"'
check "nothing in www/ names another site" eval '! grep -l "://" "$here"/../../www/*.html "$here"/../../www/*.js "$here"/../../www/*.css'

# ---- every answer carries the headers ----
g GET /api/overview
check "API answers carry the security headers" eval 'is 200 && secured'
req GET /api/overview
check "a 401 carries them too" eval 'is 401 && secured'
g GET /api/no-such-thing
check "an API 404 carries them too" eval 'is 404 && secured'

# ---- Host (DNS rebinding) ----
g GET /api/overview -H 'Host: evil.example'
check "Host evil.example: 421 with a JSON error" eval 'is 421 && body_has misdirected_request && secured'
req GET / -H "Host: evil.example:$mport"
check "Host evil.example on the page: 421" is 421
g GET /api/overview -H "Host: localhost.evil.example:$mport"
check "Host localhost.evil.example: 421" is 421
g GET /api/overview -H "Host: evil.example.:$mport"
check "Host evil.example. (trailing dot): 421" is 421
g GET /api/overview -H "Host: 127.0.0.1:$mport@evil.example"
check "Host with junk after the port: 421" is 421
for h in "localhost:$mport" "LOCALHOST" "127.0.0.1:$mport" "127.0.0.1" \
         "[::1]:$mport" "$(hostname):$mport" "roost-web.example:$mport" \
         "Roost-Web.Example"; do
    g GET /api/whoami -H "Host: $h"
    check "Host $h: allowed" is 200
done
check "roostd logs a refused Host, once a minute at most" eval '[ "$(grep -c "refused a request with Host" "$log")" = 1 ]'

# ---- Origin (cross-site requests) ----
check "fill web-guard-q over AMQP" amqp fill web-guard-q 2
g DELETE /api/queues/%2F/web-guard-q/contents -H 'Origin: http://evil.example'
check "DELETE with a foreign Origin: 403 with a JSON error" eval 'is 403 && body_has forbidden && secured'
g PUT /api/vhosts/web-evil -H 'Origin: http://evil.example' -H 'Content-Type: application/json' -d '{}'
check "PUT with a foreign Origin: 403" is 403
g PUT /api/vhosts/web-evil -H 'Origin: null' -H 'Content-Type: application/json' -d '{}'
check "PUT with Origin null: 403" is 403
g PUT /api/vhosts/web-evil -H "Origin: http://localhost:$mport" -H 'Content-Type: application/json' -d '{}'
check "PUT with the Origin of another of its names: 403" is 403
g OPTIONS /api/vhosts/web-evil -H 'Origin: http://evil.example' -H 'Access-Control-Request-Method: PUT'
check "a cross-origin preflight: 403, no CORS headers" eval 'is 403 && [ -z "$(header Access-Control-Allow-Origin)" ]'
g GET /api/vhosts/web-evil
check "the refused writes made nothing" is 404
check "the refused DELETE purged nothing" eval '[ "$(amqp count web-guard-q)" = 2 ]'
g GET /api/whoami -H 'Origin: http://evil.example'
check "GET with a foreign Origin: answered (reads are not refused)" is 200
g PUT /api/vhosts/web-own -H "Origin: http://127.0.0.1:$mport" -H 'Content-Type: application/json' -d '{}'
check "PUT with its own Origin: 201" is 201
g DELETE /api/vhosts/web-own -H "Origin: http://127.0.0.1:$mport"
check "DELETE with its own Origin: 204" is 204

# ---- Authorization and JSON ----
req PUT /api/vhosts/web-x -H 'Content-Type: application/json' -d '{}'
check "PUT without Authorization: 401" is 401
req DELETE /api/users/guest
check "DELETE without Authorization: 401" is 401
req DELETE /api/users/guest -H 'Cookie: m=Z3Vlc3Q6Z3Vlc3Q='
check "DELETE with a cookie but no Authorization: 401" is 401
g PUT /api/vhosts/web-x -d '{}'
check "PUT with a form body: 415 with a JSON error" eval 'is 415 && body_has application/json'
g PUT /api/vhosts/web-x -H 'Content-Type: text/plain' -d '{}'
check "PUT with text/plain: 415" is 415
g PUT /api/vhosts/web-x -H 'Content-Type: text/plain'
check "PUT with a type but no body: 415" is 415
g GET /api/vhosts/web-x
check "the refused PUTs made nothing" is 404
g PUT /api/vhosts/web-x -H 'Content-Type: application/json; charset=utf-8' -d '{}'
check "PUT with application/json: 201" is 201
g PUT /api/vhosts/web-y
check "PUT without a body or a type: 201 (as RabbitMQ)" is 201

# ---- the page in the browser ----
check "fill web-q over AMQP" amqp fill web-q 5
check "3 dead letters in web-work-dlq over AMQP" amqp dead web-work 3
# A management user (not a monitor) for the page to log in as, too.
g PUT /api/users/web-mgmt -H 'Content-Type: application/json' -d '{"password":"pw","tags":"management"}'
check "make the management user web-mgmt" is 201
g PUT /api/permissions/%2F/web-mgmt -H 'Content-Type: application/json' -d '{"configure":".*","write":".*","read":".*"}'
# A connection for the page to close.
amqp hold web-q > "$tmp/held.out" 2>&1 &
held=$!
for _ in $(seq 1 100); do
    g GET /api/connections
    grep -q '"name"' "$tmp/body" && break
    sleep 0.1
done
xss='<img src=x onerror="window.pwned=1">'
check "a queue named with HTML, over AMQP" amqp fill "$xss" 1
WEB_XSS_QUEUE=$xss WEB_USER2=web-mgmt:pw run_checks "the browser test" \
    $py "$here/web_driver.py" "$chromium" \
    "http://127.0.0.1:$mport/" guest guest / web-q 5 "$out" \
    "http://localhost:$mport" "http://rebind.test:$mport" web-work-dlq:3
grep -v '^PASS \|^FAIL ' "$tmp/checks.out"
if grep -q "^NOTE replay" "$tmp/checks.out"; then
    echo "NOTE the replay's counts are not checked: no replay in this roostd"
else
    n=$(amqp count web-work-dlq) m=$(amqp count web-work)
    check "the replay moved the dead letters back (dlq $n, queue $m)" \
        [ "$n/$m" = 0/3 ]
fi
wait "$held"
check "the connection closed on the page got 320 and the reason typed" \
    grep -q "closed by the broker: 320 .*closed by web.sh" "$tmp/held.out"
n=$(amqp count web-q)
check "after Purge on the page the queue is empty (AMQP count: $n)" [ "$n" = 0 ]
check "the other origin's DELETE left web-guard-q alone" eval '[ "$(amqp count web-guard-q)" = 2 ]'
for f in overview queues queue connections; do
    check "screenshot $f.png" test -s "$out/$f.png"
done

check "roostd exits cleanly" stop
echo "web: $pass passed, $fail failed"
[ $fail -eq 0 ]
