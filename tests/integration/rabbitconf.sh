#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# roostd -c rabbitmq.conf (broker/lib/config.c, broker/lib/rabbitconf.c,
# docs/configuration.md): a file written as RabbitMQ's docs show it
# (listeners.tcp and .ssl, ssl_options with verify_peer and
# fail_if_no_peer_cert, watermarks with units, default user, vhost and
# permissions, loopback_users, heartbeat, frame_max, channel_max,
# management.tcp.port, log.dir, log.file and its level, default user
# tags) starts roostd,
# and pika, TLS and the management API see what it asks for; the keys it
# skips are warned about with their line on standard error and in the
# log; .relative watermarks win over .absolute ones as in RabbitMQ; each
# class of RabbitMQ key Roost does not implement stops the start with the
# file, line and key; --ignore-unsupported makes that a warning; -t on
# good and bad files; a malformed line, a bad unit and an unknown key.
# Prints "rabbitconf: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$*"; fi; }

if ! $py -c 'import pika' 2>/dev/null; then
    echo "rabbitconf: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
helper="$py $here/rabbitconf.py"
certs=$tmp/certs
"$here/tls-certs.sh" "$certs" >/dev/null || { echo "rabbitconf: cannot make certificates"; exit 1; }

free_port() {
    $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# rstart CONF LOG [ARGS...]: start roostd on CONF alone (its own log.*
# keys decide where it logs), wait for LOG to say it is ready.
rstart() {
    local conf=$1 log=$2
    shift 2
    rm -rf "$tmp/data"
    "$roostd" -c "$conf" --data-dir "$tmp/data" "$@" 2>"$tmp/stderr" &
    pid=$!
    for _ in $(seq 1 200); do
        grep -q "ready for connections" "$log" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

amqp=$(free_port) amqps=$(free_port) mgmt=$(free_port)
mkdir -p "$tmp/logs"
conf=$tmp/rabbitmq.conf
cat > "$conf" <<CONF
# A rabbitmq.conf as RabbitMQ's documentation writes one.
listeners.tcp.default = 127.0.0.1:$amqp
listeners.ssl.default = $amqps

ssl_options.cacertfile = $certs/ca.pem
ssl_options.certfile   = $certs/server.pem
ssl_options.keyfile    = $certs/server.key
ssl_options.verify     = verify_peer
ssl_options.fail_if_no_peer_cert = true

vm_memory_high_watermark.absolute = 512MiB
disk_free_limit.absolute = 1GB

default_user = alice
default_pass = s3cret
default_vhost = prod
default_permissions.configure = ^rabbitconf-
default_permissions.read = .*
default_permissions.write = .*
default_user_tags.administrator = true
default_user_tags.monitoring = true
loopback_users.guest = false
loopback_users.alice = false

heartbeat = 15
frame_max = 64KB
channel_max = 100

management.tcp.port = $mgmt
management.tcp.ip   = 127.0.0.1
prometheus.tcp.port = 0

log.dir = $tmp/logs
log.file = roost.log
log.file.level = debug

# Keys with no effect on a single node: skipped, with a warning.
cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config
cluster_name = rabbitconf-test
num_acceptors.tcp = 10
CONF

out=$("$roostd" -t -c "$conf" 2>&1); rc=$?
check "-t on a good rabbitmq.conf exits 0" test $rc -eq 0
check "-t says it is ok" grep -q "configuration ok" <<<"$out"
check "-t prints the warnings with their line" \
    grep -q "rabbitmq.conf:38: cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config: RabbitMQ's key, skipped" <<<"$out"

if rstart "$conf" "$tmp/logs/roost.log"; then
    ok "roostd starts with the rabbitmq.conf"
    check "warned keys named on standard error" \
        grep -q "warning: .*rabbitmq.conf:39: cluster_name = rabbitconf-test" "$tmp/stderr"
    check "warned keys named in the log" \
        grep -q "rabbitmq.conf:40: num_acceptors.tcp = 10: RabbitMQ's key, skipped" "$tmp/logs/roost.log"
    check "log.file is under log.dir" test -s "$tmp/logs/roost.log"
    check "nothing logged on standard error" test "$(grep -vc 'warning: ' "$tmp/stderr")" -eq 0
    run_checks "rabbitconf.py main" $helper main "$amqp" "$amqps" "$mgmt" "$certs" alice s3cret
    check "log.file.level = debug logs debug lines" grep -q "Z debug " "$tmp/logs/roost.log"
    check "stops cleanly" stop
else
    bad "roostd starts with the rabbitmq.conf" "$(cat "$tmp/stderr"; tail -5 "$tmp/logs/roost.log")"
fi

# The relative watermarks win when both are set, as in RabbitMQ; the
# file's own output level wins over log.default.level.
cat > "$tmp/relative.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$amqp
management.tcp.port = $mgmt
vm_memory_high_watermark.relative = 0.25
vm_memory_high_watermark.absolute = 2GB
disk_free_limit.absolute = 1GB
disk_free_limit.relative = 0.01
log.file = $tmp/relative.log
log.default.level = debug
log.file.level = info
CONF
if rstart "$tmp/relative.conf" "$tmp/relative.log"; then
    ok "roostd starts with relative watermarks"
    run_checks "rabbitconf.py limits" $helper limits "$mgmt" guest guest 0.25 0.01
    check "info lines are logged" grep -q "Z info " "$tmp/relative.log"
    check "the ignored .absolute lines are warned about" \
        grep -q "relative.conf:4: vm_memory_high_watermark.absolute is ignored" "$tmp/stderr"
    check "log.file.level wins over log.default.level" \
        test "$(grep -c 'Z debug ' "$tmp/relative.log")" -eq 0
    check "stops cleanly" stop
else
    bad "roostd starts with relative watermarks" "$(cat "$tmp/stderr")"
fi

# Each class of RabbitMQ key Roost does not implement: the start stops,
# naming the file, the line and the key; --ignore-unsupported warns.
refusals=(
    "cluster_formation.peer_discovery_backend = rabbit_peer_discovery_k8s"
    "cluster_formation.k8s.host = kubernetes.default.svc.cluster.local"
    "cluster_formation.peer_discovery_backend = aws"
    "cluster_formation.consul.host = consul.local"
    "cluster_formation.etcd.endpoints.1 = etcd:2379"
    "auth_backends.1 = ldap"
    "auth_backends.2 = http"
    "auth_ldap.servers.1 = ldap.example.com"
    "ssl_options.crl_check = peer"
    "ssl_options.dhfile = /etc/ssl/dh.pem"
    "mqtt.listeners.tcp.default = 1883"
    "stomp.listeners.tcp.1 = 61613"
    "web_stomp.tcp.port = 15674"
    "stream.listeners.tcp.1 = 5552"
    "proxy_protocol = true"
    "log.syslog = true"
)
n=0
for line in "${refusals[@]}"; do
    n=$((n + 1))
    key=${line%% =*}
    printf 'heartbeat = 20\nlisteners.tcp.default = 127.0.0.1:%s\n%s\n' "$amqp" "$line" > "$tmp/refuse$n.conf"
    out=$("$roostd" -c "$tmp/refuse$n.conf" --data-dir "$tmp/refdata" 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -q "refuse$n.conf:3: $key = .*not supported" <<<"$out" &&
       ! grep -q "ready for connections" <<<"$out"; then
        ok "refused: $key"
    else
        bad "refused: $key" "exit $rc: $out"
    fi
    out=$("$roostd" -t --ignore-unsupported -c "$tmp/refuse$n.conf" 2>&1); rc=$?
    if [ $rc -eq 0 ] && grep -q "warning: .*refuse$n.conf:3: $key = .*skipped (--ignore-unsupported)" <<<"$out"; then
        ok "--ignore-unsupported warns: $key"
    else
        bad "--ignore-unsupported warns: $key" "exit $rc: $out"
    fi
done

# --ignore-unsupported at a real start: roostd runs without the key.
if rstart "$tmp/refuse1.conf" "$tmp/ignored.log" --ignore-unsupported --log-file "$tmp/ignored.log"; then
    ok "--ignore-unsupported starts roostd"
    check "the skipped key is in the log" grep -q "refuse1.conf:3: cluster_formation.peer_discovery_backend" "$tmp/ignored.log"
    check "stops cleanly" stop
else
    bad "--ignore-unsupported starts roostd" "$(cat "$tmp/stderr")"
fi

# -t on bad files: a malformed line, a bad unit, an unknown key.
bad_file() {
    local name=$1 text=$2 want=$3
    printf 'heartbeat = 20\n%s\n' "$text" > "$tmp/bad.conf"
    out=$("$roostd" -t -c "$tmp/bad.conf" 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -qF "bad.conf:2: $want" <<<"$out" &&
       ! grep -q "configuration ok" <<<"$out"; then
        ok "-t refuses $name"
    else
        bad "-t refuses $name" "exit $rc: $out"
    fi
}
bad_file "a malformed line" "listeners.tcp.default 5672" "expected 'key = value'"
bad_file "a bad unit" "vm_memory_high_watermark.absolute = 2XB" \
    "vm_memory_high_watermark.absolute: '2XB' is not a number of bytes"
bad_file "a fraction with a unit" "disk_free_limit.absolute = 1.5GB" \
    "disk_free_limit.absolute: '1.5GB' is not a number of bytes"
bad_file "frame_max in 1000s" "frame_max = 128kB" "frame_max: '128kB' is not a number of bytes"
bad_file "an unknown key" "cluster_formation.k9s.host = x" "unknown key 'cluster_formation.k9s.host'"
bad_file "a slip of a key, naming the nearest" "heartbeats = 30" \
    "unknown key 'heartbeats' (did you mean 'heartbeat'?)"
bad_file "a bad log level" "log.file.level = loud" "log.file.level: 'loud' is not debug"
bad_file "an unknown key even with --ignore-unsupported" "no_such.key = 1" "unknown key 'no_such.key'"
out=$("$roostd" -t --ignore-unsupported -c "$tmp/bad.conf" 2>&1); rc=$?
check "--ignore-unsupported does not take an unknown key" test $rc -ne 0

echo "rabbitconf: $pass passed, $fail failed"
[ $fail -eq 0 ]
