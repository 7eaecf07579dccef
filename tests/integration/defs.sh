#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# RabbitMQ definitions files and the offline commands on a data directory:
# --import-definitions at start (objects exist, their arguments apply,
# routing goes through the imported bindings, permissions and policies
# are imported, global parameters reported as not imported, a second
# import keeps what exists),
# users with RabbitMQ's password hashes (SHA-256 made by RabbitMQ 3.10.8,
# SHA-512, MD5, and MD5 read from a 3.5 file without an algorithm) log in,
# are kept across a restart and exported with their hashes, the default
# user is made once, a bad hash stops the import; a
# malformed or invalid file stops the start and changes nothing,
# --export-definitions on a stopped broker's directory (what was imported
# comes back, deterministic; refused while a roostd holds the directory,
# naming its pid), and --check-data (counts; exit 1 on a corrupt record).
# Talks AMQP with pika (Debian's python3). Prints "defs: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "defs: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi

cat > "$tmp/defs.json" <<'EOF'
{
  "rabbit_version": "3.10.8",
  "rabbitmq_version": "3.10.8",
  "users": [
    {"name": "app", "password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR",
     "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ""}
  ],
  "vhosts": [{"name": "/"}],
  "permissions": [
    {"user": "app", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
  ],
  "topic_permissions": [],
  "parameters": [],
  "global_parameters": [{"name": "cluster_name", "value": "rabbit@example"}],
  "policies": [
    {"vhost": "/", "name": "ha", "pattern": "^ha\\.", "apply-to": "queues",
     "definition": {"max-length": 10}, "priority": 0}
  ],
  "queues": [
    {"name": "orders", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-message-ttl": 60000, "x-dead-letter-exchange": "dlx"}},
    {"name": "dead", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {}}
  ],
  "exchanges": [
    {"name": "events", "vhost": "/", "type": "topic", "durable": true,
     "auto_delete": false, "internal": false, "arguments": {}},
    {"name": "front", "vhost": "/", "type": "direct", "durable": true,
     "auto_delete": false, "internal": false, "arguments": {}},
    {"name": "dlx", "vhost": "/", "type": "fanout", "durable": true,
     "auto_delete": false, "internal": false, "arguments": {}},
    {"name": "amq.topic", "vhost": "/", "type": "topic", "durable": true,
     "auto_delete": false, "internal": false, "arguments": {}}
  ],
  "bindings": [
    {"source": "events", "vhost": "/", "destination": "orders",
     "destination_type": "queue", "routing_key": "order.*", "arguments": {}},
    {"source": "front", "vhost": "/", "destination": "events",
     "destination_type": "exchange", "routing_key": "order.new",
     "arguments": {}},
    {"source": "dlx", "vhost": "/", "destination": "dead",
     "destination_type": "queue", "routing_key": "", "arguments": {}}
  ]
}
EOF

# ---- import at start ----
if start "$tmp/data" "$tmp/log1" --import-definitions "$tmp/defs.json"; then
    ok import-starts
else
    bad import-starts "$(cat "$tmp/stderr" "$tmp/log1")"
fi
log=$(cat "$tmp/log1")
[[ $log == *"1 global parameter not imported (not implemented yet)"* ]] &&
    ok reports-not-imported || bad reports-not-imported "$log"
[[ $log == *"1 user, 1 permission, 0 vhost limits and 1 policy set; 0 vhosts, 3 exchanges, 2 queues and 3 bindings added; 1 already present and kept; 1 amq.* or default exchange skipped"* ]] &&
    ok reports-imported || bad reports-imported "$log"

# The objects exist with their arguments, and messages route through the
# imported bindings: front -(order.new)-> events -(order.*)-> orders, and
# a message rejected from orders dead-letters through dlx into dead.
$py - "$port" > "$tmp/amqp1" 2>&1 <<'EOF'
import sys
import pika
params = pika.ConnectionParameters('127.0.0.1', int(sys.argv[1]))
conn = pika.BlockingConnection(params)
ch = conn.channel()
results = []
def check(name, cond, detail=''):
    results.append(cond)
    print(('PASS ' if cond else 'FAIL ') + name + ('' if cond else ': ' + str(detail)))
for q in ('orders', 'dead'):
    ch.queue_declare(q, passive=True)
for x in ('events', 'front', 'dlx'):
    ch.exchange_declare(x, passive=True)
check('passive-declares', True)
# Declaring with the imported arguments is equivalent; another TTL is not.
ch.queue_declare('orders', durable=True,
                 arguments={'x-message-ttl': 60000,
                            'x-dead-letter-exchange': 'dlx'})
try:
    ch.queue_declare('orders', durable=True,
                     arguments={'x-message-ttl': 5,
                                'x-dead-letter-exchange': 'dlx'})
    check('arguments-imported', False, 'a different TTL was accepted')
except pika.exceptions.ChannelClosedByBroker as e:
    check('arguments-imported', e.reply_code == 406, e)
    ch = conn.channel()
persistent = pika.BasicProperties(delivery_mode=2)
ch.confirm_delivery()
ch.basic_publish('front', 'order.new', b'm1', persistent)
ch.basic_publish('events', 'order.paid', b'm2', persistent)
m, _, body = ch.basic_get('orders')
check('routes-exchange-to-exchange', m is not None and body == b'm1', body)
ch.basic_reject(m.delivery_tag, requeue=False)
m, _, body = ch.basic_get('dead', auto_ack=True)
check('dead-letters-through-dlx', m is not None and body == b'm1', body)
n = ch.queue_declare('orders', passive=True).method.message_count
check('routes-topic', n == 1, n)
conn.close()
sys.exit(0 if all(results) else 1)
EOF
rc=$?
cat "$tmp/amqp1"
pass=$((pass + $(grep -c '^PASS' "$tmp/amqp1")))
fail=$((fail + $(grep -c '^FAIL' "$tmp/amqp1")))
[ $rc -eq 0 ] || [ "$(grep -c '^FAIL' "$tmp/amqp1")" -gt 0 ] ||
    bad amqp-script "exit $rc: $(cat "$tmp/amqp1")"

# A running broker's directory: export and check are refused, naming it.
out=$("$roostd" --export-definitions "$tmp/refused.json" --data-dir "$tmp/data" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ $out == *"in use by process $pid"* ]] && [ ! -e "$tmp/refused.json" ]; then
    ok export-refused-while-running
else
    bad export-refused-while-running "exit $rc: $out"
fi
out=$("$roostd" --check-data "$tmp/data" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == *"in use by process $pid"* ]] &&
    ok check-refused-while-running || bad check-refused-while-running "exit $rc: $out"
stop && ok stops || bad stops "$(tail -5 "$tmp/stderr")"

# Importing again keeps what exists (the message in orders stays).
if start "$tmp/data" "$tmp/log2" --set load_definitions="$tmp/defs.json"; then
    log=$(cat "$tmp/log2")
    [[ $log == *"0 vhosts, 0 exchanges, 0 queues and 0 bindings added; 9 already present and kept"* ]] &&
        ok reimport-keeps || bad reimport-keeps "$log"
    n=$($py - "$port" <<'EOF'
import sys
import pika
conn = pika.BlockingConnection(pika.ConnectionParameters('127.0.0.1', int(sys.argv[1])))
print(conn.channel().queue_declare('orders', passive=True).method.message_count)
conn.close()
EOF
)
    [ "$n" = 1 ] && ok reimport-keeps-messages || bad reimport-keeps-messages "orders holds '$n'"
    stop || bad stops-again "$(tail -5 "$tmp/stderr")"
else
    bad reimport-keeps "$(cat "$tmp/stderr" "$tmp/log2")"
fi

# ---- export from the stopped broker's directory ----
out=$("$roostd" --export-definitions "$tmp/out.json" --data-dir "$tmp/data" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out.json" ]; then
    ok export
else
    bad export "exit $rc: $out"
fi
$py - "$tmp/defs.json" "$tmp/out.json" > "$tmp/cmp" 2>&1 <<'EOF'
import json
import re
import sys
want = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))
problems = []
def key_of(section, o):
    if section == 'bindings':
        return (o['vhost'], o['source'], o['destination_type'],
                o['destination'], o['routing_key'])
    return (o.get('vhost'), o['name'])
for section in ('vhosts', 'queues', 'exchanges', 'bindings'):
    w = {key_of(section, o): o for o in want[section]
         if not o.get('name', '').startswith('amq.')}
    g = {key_of(section, o): o for o in got[section]}
    if w != g:
        problems.append('%s: want %s, got %s' % (section, w, g))
    if list(g) != sorted(g):
        problems.append('%s not sorted: %s' % (section, list(g)))
# The imported permission, and the default user's from the first start,
# sorted by vhost and user.
full = {'configure': '.*', 'write': '.*', 'read': '.*'}
perms = [dict(user='app', vhost='/', **full), dict(user='guest', vhost='/', **full)]
if got['permissions'] != perms:
    problems.append('permissions: %s' % got['permissions'])
if got['policies'] != want['policies']:
    problems.append('policies: %s' % got['policies'])
# The imported user with its hash, and the default user made at the
# first start; tags as lists, as RabbitMQ 3.10 exports them.
users = {u['name']: u for u in got['users']}
app = users.get('app', {})
if app.get('password_hash') != want['users'][0]['password_hash'] or \
        app.get('hashing_algorithm') != 'rabbit_password_hashing_sha256' or \
        app.get('tags') != []:
    problems.append('users: app is %r' % app)
if users.get('guest', {}).get('tags') != ['administrator']:
    problems.append('users: guest is %r' % users.get('guest'))
if not re.match(r'^\d+\.\d+\.\d+$', got.get('rabbit_version', '')):
    problems.append('rabbit_version: %r' % got.get('rabbit_version'))
print('\n'.join(problems))
sys.exit(1 if problems else 0)
EOF
[ $? -eq 0 ] && ok export-matches-import || bad export-matches-import "$(cat "$tmp/cmp")"

# The export imports into a fresh broker, and exports the same bytes.
if start "$tmp/data2" "$tmp/log3" --import-definitions "$tmp/out.json"; then
    stop
    "$roostd" --export-definitions "$tmp/out2.json" --data-dir "$tmp/data2" 2>/dev/null
    cmp -s "$tmp/out.json" "$tmp/out2.json" && ok export-round-trip ||
        bad export-round-trip "$(diff "$tmp/out.json" "$tmp/out2.json")"
else
    bad export-round-trip "$(cat "$tmp/log3")"
fi
out=$("$roostd" --export-definitions "$tmp/x.json" --data-dir "$tmp/nowhere" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == *"not a Roost data directory"* ]] &&
    ok export-no-data-dir || bad export-no-data-dir "exit $rc: $out"

# ---- users and RabbitMQ's password hashes ----
# alice's hash was made by RabbitMQ 3.10.8 (add_user alice s3cret, then
# export_definitions); the others are made here as RabbitMQ makes them: a
# 4-byte salt, then the digest of the salt and the password.
$py - "$tmp/users.json" "$tmp/old-users.json" <<'EOF'
import base64, hashlib, json, os, sys
def h(alg, pw):
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.new(alg, salt + pw.encode()).digest()).decode()
users = [
    {"name": "alice", "password_hash": "euUS78tRxP2IdDbSA5PsL4J1x3hbAcvZliLIKSnsAG25IoyE",
     "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["monitoring", "management"], "limits": {}},
    {"name": "bob", "password_hash": h("sha512", "b0b"),
     "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": "administrator"},
    {"name": "carol", "password_hash": h("md5", "car0l"),
     "hashing_algorithm": "rabbit_password_hashing_md5", "tags": ""},
    {"name": "erin", "password_hash": h("sha256", "er1n"), "tags": []},
]
# frank has a password but no permissions: he cannot open a vhost.
users.append({"name": "frank", "password_hash": h("sha256", "fr4nk"), "tags": []})
full = {"vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
perms = [dict(user=u["name"], **full) for u in users if u["name"] != "frank"]
json.dump({"rabbit_version": "3.10.8", "users": users, "permissions": perms},
          open(sys.argv[1], "w"))
# A file from RabbitMQ 3.5 has no hashing_algorithm: its hashes are MD5.
json.dump({"rabbit_version": "3.5.7", "users": [
    {"name": "dave", "password_hash": h("md5", "dav3"), "tags": "management"}],
    "permissions": [dict(user="dave", **full)]},
    open(sys.argv[2], "w"))
EOF
cat > "$tmp/login.py" <<'EOF'
import sys, pika
port, user, pw = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials(user, pw),
        connection_attempts=1)).close()
except pika.exceptions.ProbableAuthenticationError:
    sys.exit(1)
except pika.exceptions.ProbableAccessDeniedError as e:
    print(e.args[0])
    sys.exit(2)
EOF
login() { $py "$tmp/login.py" "$port" "$1" "$2"; }
logins() {
    local when=$1
    for up in alice:s3cret bob:b0b carol:car0l dave:dav3 erin:er1n; do
        if login "${up%%:*}" "${up#*:}"; then ok "$when: ${up%%:*} logs in"
        else bad "$when: ${up%%:*} logs in" "refused"; fi
    done
    if login alice wrong; then bad "$when: a wrong password" "accepted"
    else ok "$when: a wrong password is refused"; fi
    out=$(login frank fr4nk); rc=$?
    [ $rc -eq 2 ] && [ "$out" = "ConnectionClosedByBroker: (530) \"NOT_ALLOWED - access to vhost '/' refused for user 'frank'\"" ] &&
        ok "$when: a user without permissions cannot open the vhost" ||
        bad "$when: a user without permissions cannot open the vhost" "exit $rc: $out"
}
if start "$tmp/udata" "$tmp/ulog0" --import-definitions "$tmp/old-users.json"; then
    stop
    grep -q "1 user, 1 permission" "$tmp/ulog0" && ok users-imported-from-3.5 ||
        bad users-imported-from-3.5 "$(grep definitions "$tmp/ulog0")"
else
    bad users-start "$(tail -3 "$tmp/ulog0")"
fi
if start "$tmp/udata" "$tmp/ulog1" --import-definitions "$tmp/users.json"; then
    grep -q "5 users, 4 permissions" "$tmp/ulog1" && ok users-imported ||
        bad users-imported "$(grep definitions "$tmp/ulog1")"
    logins "imported"
    stop
else
    bad users-start "$(tail -3 "$tmp/ulog1")"
fi
# Kept across a restart; the default user is made once (RabbitMQ's
# rule), so a new default_pass changes nothing.
if start "$tmp/udata" "$tmp/ulog2" --set default_pass=other; then
    logins "after a restart"
    if login guest guest; then ok "the default user is kept from the first start"
    else bad "the default user is kept from the first start" "guest/guest refused"; fi
    stop
else
    bad users-restart "$(tail -3 "$tmp/ulog2")"
fi
"$roostd" --export-definitions "$tmp/users-out.json" --data-dir "$tmp/udata" 2>/dev/null
if $py - "$tmp/users.json" "$tmp/users-out.json" > "$tmp/ucmp" <<'EOF'
import json, sys
want = {u["name"]: u for u in json.load(open(sys.argv[1]))["users"]}
got = {u["name"]: u for u in json.load(open(sys.argv[2]))["users"]}
bad = []
for name, u in want.items():
    g = got.get(name, {})
    tags = u["tags"] if isinstance(u["tags"], list) else [t for t in u["tags"].split(",") if t]
    alg = u.get("hashing_algorithm", "rabbit_password_hashing_sha256")
    if g.get("password_hash") != u["password_hash"] or g.get("tags") != tags or g.get("hashing_algorithm") != alg:
        bad.append("%s: %r" % (name, g))
if got.get("dave", {}).get("hashing_algorithm") != "rabbit_password_hashing_md5":
    bad.append("dave: %r" % got.get("dave"))
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
then ok "users exported with their hashes"
else bad "users exported with their hashes" "$(cat "$tmp/ucmp")"; fi
echo '{"users": [{"name": "x", "password_hash": "c2hvcnQ=", "hashing_algorithm": "rabbit_password_hashing_sha256"}]}' > "$tmp/badhash.json"
rm -rf "$tmp/bdata"
"$roostd" --port 0 --data-dir "$tmp/bdata" --log-file "$tmp/blog" --import-definitions "$tmp/badhash.json" 2>/dev/null
rc=$?
if [ $rc -ne 0 ] && grep -q 'users\[0\]: "password_hash" is not the base64 of a rabbit_password_hashing_sha256 hash (36 bytes)' "$tmp/blog"; then
    ok "a hash of the wrong length stops the import"
else
    bad "a hash of the wrong length stops the import" "rc $rc: $(grep -i definitions "$tmp/blog")"
fi
# A permission pattern that does not compile, or for a user that is
# nowhere, stops the import and names it.
badperm() {
    local name=$1 json=$2 want=$3
    echo "$json" > "$tmp/badperm.json"
    rm -rf "$tmp/bdata"
    "$roostd" --port 0 --data-dir "$tmp/bdata" --log-file "$tmp/blog" \
        --import-definitions "$tmp/badperm.json" 2>/dev/null
    rc=$?
    if [ $rc -ne 0 ] && grep -qF "$want" "$tmp/blog"; then ok "$name"
    else bad "$name" "rc $rc: $(grep -i definitions "$tmp/blog")"; fi
}
badperm "a permission pattern that does not compile stops the import" \
    '{"permissions": [{"user": "guest", "vhost": "/", "configure": "(", "write": "", "read": ""}]}' \
    'permissions[0]: "configure": invalid regular expression '"'"'('"'"': missing )'
badperm "a permission of an unknown user stops the import" \
    '{"permissions": [{"user": "nobody", "vhost": "/", "configure": "", "write": "", "read": ""}]}' \
    "permissions[0]: no user 'nobody'"

# ---- check-data ----
out=$("$roostd" --check-data "$tmp/data" 2>&1); rc=$?
if [ $rc -eq 0 ] &&
   [[ $out == *"total: 1 vhost, 3 exchanges, 2 queues, 3 bindings; 1 message in 1 queue entry"* ]] &&
   [[ $out == *"defs.log: "*" records ("*"3 exchange, 2 queue, 3 binding"* ]] &&
   [[ $out == *"msgs/00000000"*".seg: "*"message"*"enqueue"* ]] &&
   [[ $out == *"ok: no corrupt records"* ]]; then
    ok check-data
else
    bad check-data "exit $rc: $out"
fi
# A byte changed in the first definition record: the records after it
# still check out, so it is corrupt, not torn.
cp -r "$tmp/data" "$tmp/bad"
printf 'X' | dd of="$tmp/bad/defs.log" bs=1 seek=20 conv=notrunc 2>/dev/null
out=$("$roostd" --check-data "$tmp/bad" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out == *"corrupt record at offset 0"* ]] && [[ $out == *CORRUPT* ]] &&
    ok check-data-corrupt || bad check-data-corrupt "exit $rc: $out"

# ---- files that stop the start ----
printf '{\n  "queues": [\n    {"name": "q" "vhost": "/"}\n  ]\n}\n' > "$tmp/malformed.json"
"$roostd" --port 0 --data-dir "$tmp/data3" --import-definitions "$tmp/malformed.json" \
    >"$tmp/out4" 2>&1; rc=$?
out=$(cat "$tmp/out4")
if [ $rc -ne 0 ] && [[ $out == *"malformed.json:3:"* ]] && [[ $out != *"ready for connections"* ]]; then
    ok malformed-json-stops-start
else
    bad malformed-json-stops-start "exit $rc: $out"
fi
cat > "$tmp/invalid.json" <<'EOF'
{"vhosts": [{"name": "/"}],
 "exchanges": [{"name": "x1", "vhost": "/", "type": "direct", "durable": true}],
 "queues": [{"name": "fine", "vhost": "/", "durable": true},
            {"name": "q", "vhost": "/", "durable": true,
             "arguments": {"x-message-ttl": "soon"}}]}
EOF
"$roostd" --port 0 --data-dir "$tmp/data4" --import-definitions "$tmp/invalid.json" \
    >"$tmp/out5" 2>&1; rc=$?
out=$(cat "$tmp/out5")
if [ $rc -ne 0 ] && [[ $out == *"invalid.json: queues[1]: invalid arg 'x-message-ttl'"* ]]; then
    ok invalid-item-named
else
    bad invalid-item-named "exit $rc: $out"
fi
"$roostd" --export-definitions - --data-dir "$tmp/data4" 2>/dev/null > "$tmp/out5.json"
$py -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(1 if d["queues"] or d["exchanges"] else 0)' \
    "$tmp/out5.json" && ok invalid-changes-nothing || bad invalid-changes-nothing "$(cat "$tmp/out5.json")"
out=$("$roostd" --port 0 --data-dir "$tmp/data5" --import-definitions "$tmp/absent.json" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == *"absent.json"* ]] &&
    ok missing-file-stops-start || bad missing-file-stops-start "exit $rc: $out"

echo "defs: $pass passed, $fail failed"
[ $fail -eq 0 ]
