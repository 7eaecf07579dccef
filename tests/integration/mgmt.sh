#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The management HTTP API (broker/mgmt/, RabbitMQ's /api/...), with curl
# and RabbitMQ's own rabbitmqadmin unmodified: every endpoint's status
# codes and key JSON fields; basic auth (none, a bad password, a blank
# one, a user without management tags, one without administrator, a
# monitoring user's view); users made through the API logging in over
# AMQP (pika), with a password and with a RabbitMQ password hash; a vhost
# made through the API usable over AMQP and deleted with its queues; its
# limits; definitions exported and imported (whole and per vhost) with
# curl and rabbitmqadmin; bad input (malformed JSON, 1 MiB of garbage, a
# body over management.http.max_body_size, unknown paths, wrong methods,
# bad escapes, raw sockets sending garbage, oversized headers or half a
# request and vanishing) answered with the right status and roostd still
# serving AMQP and HTTP afterwards; HTTPS (management.ssl.*) with a
# SIGHUP reload; a taken default port (a warning, roostd runs) and a
# taken port set explicitly (startup refused, naming it); what the API
# changed kept across a restart.
# Prints "mgmt: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$*"; fi; }

if ! $py -c 'import pika' 2>/dev/null; then
    echo "mgmt: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
if ! command -v curl >/dev/null; then
    echo "mgmt: curl is missing (apt-get install curl); skipped"
    exit 77
fi
# RabbitMQ's rabbitmqadmin, unmodified: Debian's, or the copy that
# tests/interop/deps.sh takes out of its package ($RABBITMQADMIN says
# where, for distcheck's copy of the tree).
admin=
for a in "${RABBITMQADMIN:-}" /usr/bin/rabbitmqadmin \
         "$here/../interop/.rabbitmqadmin/rabbitmqadmin"; do
    [ -n "$a" ] && [ -x "$a" ] && { admin=$a; break; }
done

# The AMQP side: pika. Exit 0 when the case went as it says.
cat > "$tmp/amqp.py" <<'EOF'
import sys
import pika

case, port, user, password, vhost = sys.argv[1:6]
rest = sys.argv[6:]
params = pika.ConnectionParameters(
    host="127.0.0.1", port=int(port), virtual_host=vhost,
    credentials=pika.PlainCredentials(user, password),
    connection_attempts=1, socket_timeout=5, blocked_connection_timeout=5)
try:
    conn = pika.BlockingConnection(params)
except Exception as e:
    print("cannot connect: %r" % e)
    sys.exit(2 if case != "refused" else 0)
if case == "refused":
    print("connected, but should not have")
    sys.exit(1)
ch = conn.channel()
if case == "login":
    pass
elif case == "publish":
    # publish QUEUE: a durable queue with one persistent message
    ch.queue_declare(rest[0], durable=True)
    ch.basic_publish("", rest[0], b"hello",
                     pika.BasicProperties(delivery_mode=2))
elif case == "get":
    # get QUEUE BODY
    m, _, body = ch.basic_get(rest[0], auto_ack=True)
    if body != rest[1].encode():
        print("got %r" % (body,))
        sys.exit(1)
elif case == "exists":
    # exists QUEUE: 0 if it does, 1 if not
    try:
        ch.queue_declare(rest[0], passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        print("no queue: %r" % e)
        sys.exit(1)
conn.close()
EOF
amqp() { $py "$tmp/amqp.py" "$1" "$port" "${@:2}" >>"$tmp/amqp.out" 2>&1; }

# Hostile sockets: python3 sends and reads what it is told.
cat > "$tmp/raw.py" <<'EOF'
import socket, sys, time

case, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=5)

def answer():
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    return data

if case == "garbage":
    # binary noise instead of a request line: 400 and closed
    s.sendall(bytes(range(256)) * 64 + b"\r\n\r\n")
    a = answer()
    sys.exit(0 if a.startswith(b"HTTP/1.1 400") or a == b"" else 1)
elif case == "half":
    # half a request, then vanish
    s.sendall(b"PUT /api/users/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"pa")
    s.close()
elif case == "headers":
    # headers over the bound: refused, not buffered without end
    s.sendall(b"GET /api/overview HTTP/1.1\r\n")
    try:
        for _ in range(200):
            s.sendall(b"X-Junk: " + b"a" * 1000 + b"\r\n")
    except OSError:
        pass
    a = answer()
    sys.exit(0 if a.startswith(b"HTTP/1.1 4") or a == b"" else 1)
elif case == "longline":
    # a request line without end
    try:
        s.sendall(b"GET /" + b"a" * 200000)
    except OSError:
        pass
    a = answer()
    sys.exit(0 if a.startswith(b"HTTP/1.1 4") or a == b"" else 1)
elif case == "pipeline":
    # two requests in one write, keep-alive: two answers
    req = b"GET /api/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n"
    s.sendall(req + req)
    data = b""
    while data.count(b"HTTP/1.1 200") < 2:
        b = s.recv(65536)
        if not b:
            break
        data += b
    sys.exit(0 if data.count(b"HTTP/1.1 200") == 2 else 1)
elif case == "idle":
    # connect and say nothing: closed at management.tcp.idle_timeout
    t = time.time()
    a = answer()
    sys.exit(0 if a == b"" and time.time() - t < 4.5 else 1)
elif case == "slow":
    # half a request, then silence: closed at the idle timeout too
    s.sendall(b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n")
    t = time.time()
    a = answer()
    sys.exit(0 if time.time() - t < 4.5 else 1)
EOF
raw() { $py "$tmp/raw.py" "$1" "$mport" >>"$tmp/raw.out" 2>&1; }

# req METHOD PATH [CURL ARGS...]: sets $code, $body (in $tmp/body) and
# $headers (in $tmp/headers).
req() {
    local m=$1 p=$2
    shift 2
    local how=(-X "$m")
    [ "$m" = HEAD ] && how=(-I)
    code=$(curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' \
        "${how[@]}" "$@" "http://127.0.0.1:$mport$p")
    body=$(cat "$tmp/body")
}
# g sends a body as JSON (roostd refuses a body of another type, 415);
# gform as curl does by itself (application/x-www-form-urlencoded).
g() {
    case " ${*:3}" in
        *" -d "*|*" --data"*) gj "$@" ;;
        *) req "$1" "$2" -u guest:guest "${@:3}" ;;
    esac
}
gj() { req "$1" "$2" -u guest:guest -H 'Content-Type: application/json' "${@:3}"; }
gform() { req "$1" "$2" -u guest:guest "${@:3}"; }
# js EXPR: evaluate a Python expression over the last body (as 'j').
js() { $py -c "import json,sys; j=json.load(open('$tmp/body')); sys.exit(0 if ($1) else 1)" 2>/dev/null; }
is() { [ "$code" = "$1" ]; }
has_header() { grep -qi "^$1" "$tmp/headers"; }
adm() { $admin -H 127.0.0.1 -P "$mport" "$@" >"$tmp/adm.out" 2>&1; }

# mstart LOG [ARGS...]: roostd with the API on a free port; sets $mport.
mstart() {
    local log=$1
    shift
    mport=
    rm -rf "$tmp/data"
    start "$tmp/data" "$log" -s management.tcp.port=0 "$@" || return 1
    mport=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | head -1)
    [ -n "$mport" ]
}

log=$tmp/roostd.log
if ! mstart "$log" -s management.http.max_body_size=2000000 \
    -s management.tcp.idle_timeout=2000; then
    echo "mgmt: roostd did not start"; cat "$log"; exit 1
fi
ok "roostd logs 'management API listening on http://127.0.0.1:PORT/'"

# ---- authentication ----
req GET /api/overview
check "no credentials: 401 with WWW-Authenticate" is 401
check "no credentials: the realm is RabbitMQ's" grep -qi '^WWW-Authenticate: Basic realm="RabbitMQ Management"' "$tmp/headers"
req GET /api/overview -u guest:wrong
check "bad password: 401 Login failed" \
    eval 'is 401 && js "j==dict(error=\"not_authorized\",reason=\"Login failed\")" && has_header WWW-Authenticate'
req GET /api/overview -u nobody:x
check "unknown user: 401 Login failed" eval 'is 401 && js "j[\"reason\"]==\"Login failed\""'
req GET /api/overview -H 'Authorization: Basic !!!notbase64'
check "malformed Authorization: 401" is 401
req GET /api/overview -H 'Authorization: Bearer abc'
check "another scheme: 401" is 401

# ---- overview, whoami ----
g GET /api/overview
check "overview: 200" is 200
check "overview: versions and names" js 'j["rabbitmq_version"]=="3.10.8" and j["management_version"]=="3.10.8" and j["product_name"] and j["cluster_name"] and j["node"] and j["rates_mode"]=="basic"'
check "overview: object and queue totals" js 'set(j["object_totals"])=={"connections","channels","exchanges","queues","consumers"} and set(j["queue_totals"])=={"messages","messages_ready","messages_unacknowledged","messages_details","messages_ready_details","messages_unacknowledged_details"}'
check "overview: the AMQP and HTTP listeners" js "any(l['protocol']=='amqp' and l['port']==$port for l in j['listeners']) and any(l['protocol']=='http' and l['port']==$mport and l['ip_address']=='127.0.0.1' for l in j['listeners'])"
check "overview: message_stats with rates, no churn_rates" js '"rate" in j["message_stats"]["publish_details"] and "churn_rates" not in j and "rate" in j["queue_totals"]["messages_details"]'
check "overview: columns=" eval "g GET '/api/overview?columns=rabbitmq_version,object_totals.queues' && js 'set(j)=={\"rabbitmq_version\",\"object_totals\"}'"
g GET /api/whoami
check "whoami" eval 'is 200 && js "j==dict(name=\"guest\",tags=[\"administrator\"])"'
req HEAD /api/whoami -u guest:guest
check "HEAD: 200, no body" eval 'is 200 && ! grep -q guest "$tmp/body"'

# ---- users ----
g GET /api/users
check "users: a list with guest" js 'any(u["name"]=="guest" and u["tags"]==["administrator"] and u["hashing_algorithm"]=="rabbit_password_hashing_sha256" and len(u["password_hash"])==48 and u["limits"]=={} for u in j)'
g PUT /api/users/mgmt-alice -d '{"password":"s3cret","tags":"management"}'
check "PUT user (new): 201" is 201
g PUT /api/users/mgmt-alice -d '{"password":"s3cret2","tags":"management, monitoring"}'
check "PUT user (existing): 204" is 204
g GET /api/users/mgmt-alice
check "GET user: tags as a list" js 'j["name"]=="mgmt-alice" and j["tags"]==["management","monitoring"]'
g GET /api/users/mgmt-nobody
check "GET unknown user: 404 Object Not Found" eval 'is 404 && js "j==dict(error=\"Object Not Found\",reason=\"Not Found\")"'
g PUT /api/users/mgmt-x -d '{"password":"p"}'
check "PUT user without tags: 400 tags_not_present" eval 'is 400 && js "j==dict(error=\"bad_request\",reason=\"tags_not_present\")"'
g PUT /api/users/mgmt-x -d '{"password":"p","password_hash":"","tags":""}'
check "PUT user with password and hash: 400" is 400
g PUT /api/users/mgmt-x -d '{"password_hash":"!!!","tags":""}'
check "PUT user with a bad hash: 400 not_base64" eval 'is 400 && js "j[\"reason\"]==[\"not_base64\",\"!!!\"]"'
g PUT /api/users/mgmt-x -d '{"password_hash":"YWJj","tags":""}'
check "PUT user with a hash of the wrong length: 400" is 400
g PUT /api/users/mgmt-x -d '{"password":"p","tags":5}'
check "PUT user with tags neither string nor list: 400" is 400
g GET /api/users/mgmt-x
check "a refused PUT makes no user" is 404

# tags and their rules
g PUT /api/users/mgmt-plain -d '{"password":"p","tags":""}'
g PUT /api/users/mgmt-mgr -d '{"password":"p","tags":["management"]}'
req GET /api/whoami -u mgmt-plain:p
check "user without management tags: 401 Not management user" \
    eval 'is 401 && js "j==dict(error=\"not_authorised\",reason=\"Not management user\")"'
req GET /api/whoami -u mgmt-mgr:p
check "management user: whoami" eval 'is 200 && js "j[\"tags\"]==[\"management\"]"'
req GET /api/users -u mgmt-mgr:p
check "management user on /api/users: 401 Not administrator user" \
    eval 'is 401 && js "j[\"reason\"]==\"Not administrator user\""'
req GET /api/vhosts -u mgmt-mgr:p
check "management user without permissions sees no vhost" eval 'is 200 && js "j==[]"'
req GET /api/overview -u mgmt-mgr:p
check "management user's overview: no node or listeners" eval 'is 200 && js "\"listeners\" not in j and \"object_totals\" in j"'
req GET /api/vhosts -u mgmt-alice:s3cret2
check "monitoring user sees every vhost" eval 'is 200 && js "any(v[\"name\"]==\"/\" for v in j)"'
req GET /api/overview -u mgmt-alice:s3cret2
check "monitoring user's overview has the listeners" eval 'is 200 && js "\"listeners\" in j"'
g PUT /api/users/mgmt-nopass -d '{"tags":"management"}'
req GET /api/whoami -u mgmt-nopass:
check "blank password: 401 Login failed" eval 'is 401 && js "j[\"reason\"]==\"Login failed\""'

# a user made through the API logs in over AMQP
g PUT /api/permissions/%2F/mgmt-alice -d '{"configure":".*","write":".*","read":".*"}'
check "PUT permission (new): 201" is 201
check "API user logs in over AMQP" amqp login mgmt-alice s3cret2 /
check "API user's old password is refused" amqp refused mgmt-alice s3cret /
# the same hash under another name logs in with the same password
g GET /api/users/mgmt-alice
hash=$($py -c "import json; print(json.load(open('$tmp/body'))['password_hash'])")
g PUT /api/users/mgmt-twin -d "{\"password_hash\":\"$hash\",\"hashing_algorithm\":\"rabbit_password_hashing_sha256\",\"tags\":\"\"}"
check "PUT user with a RabbitMQ password hash: 201" is 201
g PUT /api/permissions/%2F/mgmt-twin -d '{"configure":".*","write":".*","read":".*"}'
check "a user given by its hash logs in with the password" amqp login mgmt-twin s3cret2 /
g DELETE /api/users/mgmt-twin
check "DELETE user: 204" is 204
g DELETE /api/users/mgmt-twin
check "DELETE user again: 404" is 404
check "a deleted user cannot log in" amqp refused mgmt-twin s3cret2 /
g GET /api/permissions/%2F/mgmt-twin
check "a deleted user's permissions are gone" is 404

# ---- vhosts ----
g GET /api/vhosts
check "vhosts: a list with /" js 'any(v["name"]=="/" and "messages" in v and v["tracing"]==False for v in j)'
g PUT /api/vhosts/mgmt-v1 -d '{"description":"first","tags":"a,b"}'
check "PUT vhost (new): 201" is 201
g PUT /api/vhosts/mgmt-v1 -d '{"description":"changed","tags":["x"]}'
check "PUT vhost (existing): 204" is 204
g GET /api/vhosts/mgmt-v1
check "GET vhost: description and tags" js 'j["name"]=="mgmt-v1" and j["description"]=="changed" and j["tags"]==["x"] and j["metadata"]=={"description":"changed","tags":["x"]}'
g GET /api/vhosts/%2F
check "GET vhost %2F is /" eval 'is 200 && js "j[\"name\"]==\"/\""'
g GET /api/vhosts/mgmt-none
check "GET unknown vhost: 404" is 404
g GET /api/vhosts/mgmt-v1/permissions
check "the vhost's maker has full permissions in it" js 'j==[dict(user="guest",vhost="mgmt-v1",configure=".*",write=".*",read=".*")]'
g GET /api/vhosts/mgmt-none/permissions
check "permissions of an unknown vhost: 404" is 404
g PUT /api/vhosts/mgmt-v1 -d '{"description":5}'
check "PUT vhost with a non-string description: 400" is 400

# permissions
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":".*","write":".*","read":".*"}'
check "PUT permission: 201" is 201
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":"^q","write":".*","read":".*"}'
check "PUT permission again: 204" is 204
g GET /api/permissions/mgmt-v1/mgmt-alice
check "GET permission" js 'j==dict(user="mgmt-alice",vhost="mgmt-v1",configure="^q",write=".*",read=".*")'
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":".*","write":".*"}'
check "PUT permission without read: 400 [{key_missing,read}]" eval 'is 400 && js "j[\"reason\"]==\"[{key_missing,read}]\""'
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":"(","write":".*","read":".*"}'
check "PUT permission with a bad regex: 400" is 400
g PUT /api/permissions/mgmt-none/mgmt-alice -d '{"configure":".*","write":".*","read":".*"}'
check "PUT permission in an unknown vhost: 400 vhost_or_user_not_found" eval 'is 400 && js "j[\"reason\"]==\"vhost_or_user_not_found\""'
g PUT /api/permissions/mgmt-v1/mgmt-none -d '{"configure":".*","write":".*","read":".*"}'
check "PUT permission for an unknown user: 400" is 400
g GET /api/permissions
check "permissions: every one, sorted by vhost" js '[p["vhost"] for p in j]==sorted(p["vhost"] for p in j) and any(p["user"]=="mgmt-alice" and p["vhost"]=="mgmt-v1" for p in j)'
g GET /api/users/mgmt-alice/permissions
check "a user's permissions" js 'sorted(p["vhost"] for p in j)==["/","mgmt-v1"]'
g GET /api/users/mgmt-none/permissions
check "permissions of an unknown user: 404" is 404
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":".*","write":".*","read":".*"}'

# the vhost over AMQP, and its deletion with its queues
check "API vhost: publish over AMQP" amqp publish mgmt-alice s3cret2 mgmt-v1 mgmt-q
g GET /api/vhosts/mgmt-v1
check "the vhost counts its message" js 'j["messages"]==1 and j["messages_ready"]==1'
g GET /api/overview
check "the overview counts the queue and the message" js 'j["object_totals"]["queues"]>=1 and j["queue_totals"]["messages"]>=1'
check "API vhost: get over AMQP" amqp get mgmt-alice s3cret2 mgmt-v1 mgmt-q hello
req GET /api/aliveness-test/mgmt-v1 -u mgmt-mgr:p
check "aliveness-test without permissions in the vhost: 401" is 401
req GET /api/aliveness-test/mgmt-v1 -u mgmt-alice:s3cret2
check "aliveness-test: 200 ok" eval 'is 200 && js "j==dict(status=\"ok\")"'
check "... through its queue, left empty, as RabbitMQ leaves it" eval \
    'amqp exists mgmt-alice s3cret2 mgmt-v1 aliveness-test && ! amqp get mgmt-alice s3cret2 mgmt-v1 aliveness-test test_message'
g GET /api/aliveness-test/mgmt-none
check "aliveness-test of an unknown vhost: 404" is 404
check "API vhost: a second queue" amqp publish mgmt-alice s3cret2 mgmt-v1 mgmt-q2
g DELETE /api/vhosts/mgmt-v1
check "DELETE vhost: 204" is 204
g DELETE /api/vhosts/mgmt-v1
check "DELETE vhost again: 404" is 404
g GET /api/permissions/mgmt-v1/mgmt-alice
check "a deleted vhost's permissions are gone" is 404
g PUT /api/vhosts/mgmt-v1
g PUT /api/permissions/mgmt-v1/mgmt-alice -d '{"configure":".*","write":".*","read":".*"}'
check "a deleted vhost's queues are gone" eval '! amqp exists mgmt-alice s3cret2 mgmt-v1 mgmt-q'

# limits
gj PUT /api/vhost-limits/mgmt-v1/max-connections -d '{"value":5}'
check "PUT max-connections: 204" is 204
gj PUT /api/vhost-limits/mgmt-v1/max-queues -d '{"value":7}'
check "PUT max-queues: 204" is 204
gform PUT /api/vhost-limits/mgmt-v1/max-queues -d '{"value":7}'
check "PUT limit without application/json: 415" is 415
g GET /api/vhost-limits
check "vhost-limits" js 'j==[dict(vhost="mgmt-v1",value={"max-connections":5,"max-queues":7})]'
g GET /api/vhost-limits/mgmt-v1
check "a vhost's limits" js 'j[0]["value"]=={"max-connections":5,"max-queues":7}'
g GET /api/vhost-limits/%2F
check "a vhost without limits: []" eval 'is 200 && js "j==[]"'
g GET /api/vhost-limits/mgmt-none
check "limits of an unknown vhost: 404" is 404
gj PUT /api/vhost-limits/mgmt-v1/max-queues -d '{"value":"x"}'
check "a limit that is not a number: 400 Validation failed" eval 'is 400 && js "j[\"reason\"].startswith(\"Validation failed\")"'
gj PUT /api/vhost-limits/mgmt-v1/max-bananas -d '{"value":1}'
check "an unknown limit: 400" is 400
gj PUT /api/vhost-limits/mgmt-v1/max-queues -d '{}'
check "a limit without value: 400 [{key_missing,value}]" eval 'is 400 && js "j[\"reason\"]==\"[{key_missing,value}]\""'
gj PUT /api/vhost-limits/mgmt-none/max-queues -d '{"value":1}'
check "a limit on an unknown vhost: 404 vhost_not_found" eval 'is 404 && js "j==dict(error=\"not_found\",reason=\"vhost_not_found\")"'
g DELETE /api/vhost-limits/mgmt-v1/max-queues
check "DELETE limit: 204" is 204
g GET /api/vhost-limits/mgmt-v1
check "the other limit stays" js 'j[0]["value"]=={"max-connections":5}'
g GET /api/vhost-limits/mgmt-v1/max-queues
check "GET one limit: 405 (PUT and DELETE only)" eval 'is 405 && grep -qi "^Allow: PUT, DELETE, OPTIONS" "$tmp/headers"'

# ---- definitions ----
amqp publish mgmt-alice s3cret2 mgmt-v1 mgmt-kept
g GET /api/definitions
check "GET definitions: users, vhosts, permissions, queues" js 'any(u["name"]=="mgmt-alice" for u in j["users"]) and any(v["name"]=="mgmt-v1" for v in j["vhosts"]) and any(p["user"]=="mgmt-alice" and p["vhost"]=="mgmt-v1" for p in j["permissions"]) and any(q["name"]=="mgmt-kept" and q["vhost"]=="mgmt-v1" for q in j["queues"])'
cp "$tmp/body" "$tmp/defs.json"
g GET /api/definitions/mgmt-v1
check "GET definitions of a vhost: its queue, without vhost" js 'any(q["name"]=="mgmt-kept" and "vhost" not in q for q in j["queues"]) and "users" not in j'
cp "$tmp/body" "$tmp/vdefs.json"
g GET /api/definitions/mgmt-none
check "GET definitions of an unknown vhost: 400 vhost_not_found" eval 'is 400 && js "j[\"reason\"]==\"vhost_not_found\""'
g DELETE /api/vhosts/mgmt-v1
g DELETE /api/users/mgmt-alice
gform POST /api/definitions --data-binary @"$tmp/defs.json"
check "POST definitions without application/json: 415" is 415
gj POST /api/definitions --data-binary @"$tmp/defs.json"
check "POST definitions: 204" is 204
g GET /api/vhosts/mgmt-v1
check "import brings the vhost back" is 200
check "import brings the user, its password and permissions back" amqp login mgmt-alice s3cret2 mgmt-v1
check "import brings the durable queue back" amqp exists mgmt-alice s3cret2 mgmt-v1 mgmt-kept
gj POST /api/definitions -d '{"queues": [{"name": 5}]}'
check "POST invalid definitions: 400" is 400
gj POST /api/definitions -d '{"queues": ['
check "POST malformed definitions: 400 failed_to_parse_json" eval 'is 400 && js "j[\"reason\"]==\"failed_to_parse_json\""'
g PUT /api/vhosts/mgmt-v2
gj POST /api/definitions/mgmt-v2 --data-binary @"$tmp/vdefs.json"
check "POST definitions into another vhost: 204" is 204
check "the queue is in that vhost" amqp exists guest guest mgmt-v2 mgmt-kept
gj POST /api/definitions/mgmt-none -d '{}'
check "POST definitions into an unknown vhost: 404" is 404
g GET '/api/definitions?download=x.json'
check "?download= offers a file" grep -qi '^Content-Disposition: attachment; filename=x.json' "$tmp/headers"

# ---- health ----
g GET /api/health/checks/alarms
check "alarms health check: 200 ok" eval 'is 200 && js "j==dict(status=\"ok\")"'

# ---- rabbitmqadmin, unmodified ----
[ -n "$admin" ] ||
    bad "rabbitmqadmin is there" "not in /usr/bin nor tests/interop/.rabbitmqadmin (tests/interop/deps.sh gets it)"
if [ -n "$admin" ]; then
    check "rabbitmqadmin list users" eval 'adm list users && grep -q "mgmt-alice" "$tmp/adm.out"'
    check "rabbitmqadmin list vhosts" eval 'adm list vhosts && grep -q "mgmt-v1" "$tmp/adm.out"'
    check "rabbitmqadmin list permissions" eval 'adm list permissions && grep -q "mgmt-alice" "$tmp/adm.out"'
    check "rabbitmqadmin declare user" adm declare user name=mgmt-adm password=pw tags=management,policymaker
    check "rabbitmqadmin declare vhost" adm declare vhost name=mgmt-admv
    check "rabbitmqadmin declare permission" adm declare permission vhost=mgmt-admv user=mgmt-adm configure='.*' write='.*' read='.*'
    check "rabbitmqadmin's user logs in over AMQP" amqp login mgmt-adm pw mgmt-admv
    check "rabbitmqadmin list vhost_limits" eval 'adm list vhost_limits && grep -q "max-connections" "$tmp/adm.out"'
    check "rabbitmqadmin show overview" eval 'adm show overview && grep -q "3.10.8" "$tmp/adm.out"'
    check "rabbitmqadmin export" eval 'adm export "$tmp/adm.json" && $py -c "import json; d=json.load(open(\"$tmp/adm.json\")); assert any(u[\"name\"]==\"mgmt-adm\" for u in d[\"users\"])"'
    check "rabbitmqadmin delete permission" adm delete permission vhost=mgmt-admv user=mgmt-adm
    check "rabbitmqadmin delete vhost" adm delete vhost name=mgmt-admv
    check "rabbitmqadmin delete user" adm delete user name=mgmt-adm
    check "rabbitmqadmin import" adm import "$tmp/adm.json"
    check "rabbitmqadmin's import brings them back" amqp login mgmt-adm pw mgmt-admv
    check "rabbitmqadmin -V export of a vhost" adm -V mgmt-v1 export "$tmp/adm-v.json"
    check "rabbitmqadmin as a non-administrator: refused" eval '! $admin -H 127.0.0.1 -P $mport -u mgmt-mgr -p p list users >/dev/null 2>&1'
else
    echo "SKIP rabbitmqadmin: /usr/bin/rabbitmqadmin is missing"
fi

# ---- bad input ----
g GET /api/nosuch
check "unknown path: 404 Object Not Found" eval 'is 404 && js "j==dict(error=\"Object Not Found\",reason=\"Not Found\")"'
req GET /api/nosuch
check "unknown path without credentials: 404" is 404
g GET /
check "/: the web page (web.sh tests it)" is 200
g GET /nosuch.html
check "a path outside /api/ that is no file of the page: 404" is 404
g GET /api/whoami/extra
check "a path longer than any route: 404" is 404
g GET /api/vhosts//
check "an empty name: 404" is 404
g GET /api/users/
check "a trailing slash is the same resource" is 200
g GET /api/vhosts/a%ZZ
check "a bad percent escape: 400" is 400
g GET /api/users/a%00b
check "a NUL in a name: 404" is 404
g POST /api/overview
check "wrong method: 405 with Allow" eval 'is 405 && grep -qi "^Allow: HEAD, GET, OPTIONS" "$tmp/headers"'
req POST /api/overview
check "wrong method without credentials: 405 first" is 405
g DELETE /api/definitions
check "DELETE definitions: 405" eval 'is 405 && grep -qi "^Allow: HEAD, GET, POST, OPTIONS" "$tmp/headers"'
g PATCH /api/users/guest
check "PATCH: 405" is 405
g OPTIONS /api/users/guest
check "OPTIONS: 200 with Allow" eval 'is 200 && grep -qi "^Allow: HEAD, GET, PUT, DELETE, OPTIONS" "$tmp/headers"'
g PUT /api/users/mgmt-bad -d '{bad json'
check "malformed JSON: 400 not_json" eval 'is 400 && js "j==dict(error=\"bad_request\",reason=\"not_json\")"'
g PUT /api/users/mgmt-bad -d '"a string"'
check "a JSON string body: 400 (doubly encoded)" eval 'is 400 && js "\"doubly\" in j[\"reason\"]"'
g PUT /api/users/mgmt-bad -d '[1,2]'
check "a JSON list body: 400 not_json" is 400
head -c 1048576 /dev/urandom > "$tmp/garbage"
g PUT /api/users/mgmt-bad --data-binary @"$tmp/garbage"
check "1 MiB of garbage: 400" is 400
gj POST /api/definitions --data-binary @"$tmp/garbage"
check "1 MiB of garbage as definitions: 400" is 400
$py -c "print('[' * 1000000)" > "$tmp/deep"
gj POST /api/definitions --data-binary @"$tmp/deep"
check "a million nested lists: 400" is 400
head -c 3000000 /dev/zero | tr '\0' ' ' > "$tmp/big"
gj POST /api/definitions --data-binary @"$tmp/big"
check "a body over management.http.max_body_size: 413" is 413
req GET /api/overview -u guest:guest -H "X-Big: $(head -c 70000 /dev/zero | tr '\0' a)"
check "headers over the bound: refused (4xx)" eval '[ "${code:0:1}" = 4 ]'
check "raw: binary garbage is refused" raw garbage
check "raw: half a request, then gone" raw half
check "raw: endless headers are cut" raw headers
check "raw: an endless request line is cut" raw longline
check "raw: a silent connection is closed at the idle timeout" raw idle
check "raw: half a request, then silence: closed at the idle timeout" raw slow
check "raw: two pipelined requests get two answers" raw pipeline
check "roostd still serves AMQP" amqp login guest guest /
g GET /api/whoami
check "roostd still serves HTTP" is 200
check "roostd is still running" kill -0 "$pid"

check "roostd stops cleanly with the API" stop

# What the API changed is kept: restart on the same data directory.
if start "$tmp/data" "$tmp/restart.log" -s management.tcp.port=0; then
    mport=$(sed -n 's|.*management API listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/restart.log" | head -1)
    g GET /api/vhosts/mgmt-v1
    check "after a restart: the vhost" is 200
    g GET /api/vhost-limits/mgmt-v1
    check "after a restart: its limits" js 'j[0]["value"]=={"max-connections":5}'
    g GET /api/permissions/mgmt-v1/mgmt-alice
    check "after a restart: the permission" is 200
    check "after a restart: the user logs in" amqp login mgmt-alice s3cret2 mgmt-v1
    g GET /api/users/mgmt-twin
    check "after a restart: a deleted user stays deleted" is 404
    stop
else
    bad "restart" "$(tail -3 "$tmp/restart.log")"
fi

# ---- ports ----
free_port() {
    $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# hold PORT: a listener on 127.0.0.1:PORT until killed; sets $holder.
hold() {
    $py -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1',$1)); s.listen(); time.sleep(60)" &
    holder=$!
    for _ in $(seq 1 100); do
        $py -c "import socket; socket.create_connection(('127.0.0.1',$1),1)" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
busy=$(free_port)
hold "$busy"
rm -rf "$tmp/data"
"$roostd" --port 0 --data-dir "$tmp/data" --log-file "$tmp/busy.log" \
    -s management.tcp.port="$busy" 2>>"$tmp/stderr"
rc=$?
check "a taken port set explicitly stops startup" [ "$rc" -ne 0 ]
check "... naming the address, the holder and the key" grep -q "management API: port $busy on 127.0.0.1 is in use by .* (pid [0-9]*); choose another with management.tcp.port" "$tmp/busy.log"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# The default port (15672), held by us or by another broker.
hold 15672 || true
rm -rf "$tmp/data"
if start "$tmp/data" "$tmp/default.log"; then
    check "a taken default port: a warning" grep -q "management API: port 15672 on 127.0.0.1 is in use by .* (pid [0-9]*); running without the management API and the web page" "$tmp/default.log"
    check "... and roostd serves AMQP without the API" amqp login guest guest /
    stop
else
    bad "a taken default port" "roostd did not start: $(tail -3 "$tmp/default.log")"
fi
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# ---- an alarm in effect ----
# A free-disk limit no disk meets sets the disk alarm at once.
if mstart "$tmp/alarm.log" -s disk_free_limit.absolute=1125899906842624; then
    g GET /api/health/checks/alarms
    check "alarms health check with the disk alarm: 503 and which" eval \
        'is 503 && js "j[\"status\"]==\"failed\" and [a[\"resource\"] for a in j[\"alarms\"]]==[\"disk\"]"'
    stop
else
    bad "alarm: roostd starts" "$(tail -3 "$tmp/alarm.log")"
fi

# ---- HTTPS ----
certs=$tmp/certs
if "$here/tls-certs.sh" "$certs" >/dev/null 2>&1; then
    cp "$certs/server.pem" "$certs/server.key" "$tmp/"
    rm -rf "$tmp/data"
    if start "$tmp/data" "$tmp/https.log" -s management.tcp.port=0 \
        -s management.ssl.port=0 -s management.ssl.certfile="$tmp/server.pem" \
        -s management.ssl.keyfile="$tmp/server.key" \
        -s management.tcp.idle_timeout=2000; then
        sport=$(sed -n 's|.*management API listening on https://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/https.log")
        check "HTTPS: logs https://127.0.0.1:PORT/" [ -n "$sport" ]
        code=$(curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$certs/ca.pem" \
            -u guest:guest "https://localhost:$sport/api/whoami")
        check "HTTPS: whoami over TLS" eval 'is 200 && js "j[\"name\"]==\"guest\""'
        code=$(curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$certs/ca.pem" \
            "https://localhost:$sport/api/whoami")
        check "HTTPS: 401 without credentials" is 401
        # Requests that arrive with the client's last handshake message
        # must not wait in OpenSSL (read-ahead), with TLS 1.3 and 1.2.
        cat > "$tmp/https.py" <<'EOF'
import base64, http.client, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
auth = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
    for _ in range(25):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.maximum_version = version
        c = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=5)
        c.request("GET", "/api/whoami", headers=auth)
        r = c.getresponse()
        if r.status != 200 or b"guest" not in r.read():
            sys.exit(1)
        c.close()
EOF
        check "HTTPS: 50 new connections each answered (TLS 1.3 and 1.2)" \
            $py "$tmp/https.py" "$sport" "$certs/ca.pem"
        check "HTTPS: a client that never handshakes is closed at the idle timeout" \
            eval 't0=$(date +%s); $py -c "import socket; s=socket.create_connection((\"127.0.0.1\",$sport)); s.settimeout(10); s.recv(1)"; [ $(( $(date +%s) - t0 )) -lt 6 ]'
        check "HTTPS: plain HTTP on the TLS port gets nothing" \
            eval '! curl -s -m 5 -u guest:guest "http://127.0.0.1:$sport/api/whoami" | grep -q guest'
        if [ -n "$admin" ]; then
            check "HTTPS: rabbitmqadmin --ssl list users" \
                eval '$admin --ssl --ssl-ca-cert-file="$certs/ca.pem" -H localhost -P "$sport" list users >"$tmp/adm.out" 2>&1 && grep -q guest "$tmp/adm.out" || { cat "$tmp/adm.out"; false; }'
        fi
        kill -HUP "$pid"
        for _ in $(seq 1 100); do
            grep -q "HTTPS certificate and key reloaded" "$tmp/https.log" && break
            sleep 0.05
        done
        check "HTTPS: SIGHUP reloads the certificate" grep -q "HTTPS certificate and key reloaded" "$tmp/https.log"
        code=$(curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$certs/ca.pem" \
            -u guest:guest "https://localhost:$sport/api/whoami")
        check "HTTPS: serves after the reload" is 200
        : > "$tmp/server.pem"
        kill -HUP "$pid"
        for _ in $(seq 1 100); do
            grep -q "management API HTTPS (management.ssl.*): .*nothing changed" "$tmp/https.log" && break
            sleep 0.05
        done
        check "HTTPS: a bad new certificate keeps the old one" grep -q "management API HTTPS (management.ssl.*): .*nothing changed" "$tmp/https.log"
        code=$(curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$certs/ca.pem" \
            -u guest:guest "https://localhost:$sport/api/whoami")
        check "HTTPS: still serves" is 200
        stop
    else
        bad "HTTPS start" "$(tail -3 "$tmp/https.log")"
    fi
    rm -rf "$tmp/data"
    "$roostd" --port 0 --data-dir "$tmp/data" --log-file "$tmp/nocert.log" \
        -s management.tcp.port=0 -s management.ssl.port=0 2>>"$tmp/stderr"
    rc=$?
    check "HTTPS without a certificate stops startup" eval '[ $rc -ne 0 ] && grep -q "management.ssl.certfile" "$tmp/nocert.log"'
else
    echo "SKIP HTTPS: cannot make certificates"
fi

echo "mgmt: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
