#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# AMQP over TLS (tls/, docs/security.md): certificates made at test time
# (tls-certs.sh); pika (Debian's python3) over TLS with and without a
# client certificate, with verify_peer and fail_if_no_peer_cert; expired
# and other-CA client certificates refused; TLS 1.1 refused, 1.2 and 1.3
# taken; plain AMQP on the TLS port closed at once; a silent client cut
# at ssl_handshake_timeout; sockets in the handshake counted against
# connection_max; certificates reloaded on SIGHUP while a TLS
# connection stays open, a bad new certificate keeping the old one; a
# password-protected key; SASL EXTERNAL (offered only over TLS with a
# verified client certificate and when auth_mechanisms names it; the user
# named by the DN, the CN or a subjectAltName; refused for an unknown
# name); cipher suites (TLS 1.2 ones and TLS 1.3 ones apart,
# honor_cipher_order); startup refused, naming the file, for a
# missing, mismatched or unreadable certificate or key; RabbitMQ's
# listeners.tcp.NAME and listeners.tcp = none; the TLS details (protocol,
# suite, client certificate) in GET /api/connections and roostctl
# list_connections.
# Prints "tls: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name" "$*"; fi; }

if ! $py -c 'import pika' 2>/dev/null; then
    echo "tls: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
certs=$tmp/certs
"$here/tls-certs.sh" "$certs" >/dev/null || { echo "tls: cannot make certificates"; exit 1; }

# A port nobody listens on now.
free_port() {
    $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The arguments for a TLS listener on a free port with the test
# certificates (the server's are copies, for the reload test).
tls_args=(--set listeners.ssl.default=0
          --set ssl_options.cacertfile="$certs/ca.pem"
          --set ssl_options.certfile="$tmp/server.pem"
          --set ssl_options.keyfile="$tmp/server.key")
cp "$certs/server.pem" "$certs/server.key" "$tmp/"
# tstart LOG [ARGS...]: start roostd on a fresh data directory; sets $pid,
# $port (plain AMQP, or the first listener) and $tport (TLS, if any).
tstart() {
    local log=$1
    shift
    tport=
    rm -rf "$tmp/data"
    start "$tmp/data" "$log" "$@" || return 1
    tport=$(sed -n 's/.*listening for AMQP over TLS on .*(port \([0-9]*\)).*/\1/p' "$log" | head -1)
}

# The client side: python3 ssl + pika. 'case' names what to try; exit 0
# when it went as that case expects, else 1 with a message.
cat > "$tmp/client.py" <<'EOF'
import os, socket, ssl, sys, time
import pika

case, port, certs = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def context(cert=None, key=None, lo=None, hi=None, verify=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if verify:
        ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(os.path.join(certs, cert), os.path.join(certs, key))
    if lo:
        ctx.set_ciphers("DEFAULT@SECLEVEL=0")
        ctx.minimum_version = lo
        ctx.maximum_version = hi
    return ctx

def connect(ctx):
    p = pika.ConnectionParameters(host="localhost", port=port,
                                  ssl_options=pika.SSLOptions(ctx, "localhost"),
                                  connection_attempts=1, socket_timeout=5)
    return pika.BlockingConnection(p)

def roundtrip(c, n=200):
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    bodies = [bytes([i % 251]) * (300000 if i % 50 == 0 else 10 + i)
              for i in range(n)]
    for b in bodies:
        ch.basic_publish("", q, b)
    got = []
    for m, p, b in ch.consume(q, auto_ack=True, inactivity_timeout=5):
        if m is None:
            break
        got.append(b)
        if len(got) == n:
            break
    ch.cancel()
    if got != bodies:
        sys.exit("%d of %d bodies came back intact" %
                 (sum(1 for a, b in zip(got, bodies) if a == b), n))

def refused(ctx):
    try:
        c = connect(ctx)
    except Exception as e:
        return
    c.close()
    sys.exit("connected, but should have been refused")

if case == "client-cert":
    c = connect(context("client.pem", "client.key"))
    roundtrip(c)
    c.close()
elif case == "no-verify":
    c = connect(context(verify=False))
    roundtrip(c)
    c.close()
elif case == "no-client-cert":
    refused(context())
elif case == "expired":
    refused(context("expired.pem", "expired.key"))
elif case == "other-ca":
    refused(context("otherclient.pem", "otherclient.key"))
elif case in ("tls1.1", "tls1.2", "tls1.3"):
    v = {"tls1.1": ssl.TLSVersion.TLSv1_1, "tls1.2": ssl.TLSVersion.TLSv1_2,
         "tls1.3": ssl.TLSVersion.TLSv1_3}[case]
    ctx = context("client.pem", "client.key", lo=v, hi=v)
    if case == "tls1.1":
        refused(ctx)
    else:
        c = connect(ctx)
        roundtrip(c, 20)
        c.close()
elif case == "plain-amqp":
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(3)
    t = time.time()
    s.sendall(b"AMQP\x00\x00\x09\x01")
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    if time.time() - t > 1.5:
        sys.exit("not closed at once (%.1f s)" % (time.time() - t))
    if data.startswith(b"\x01\x00\x00"):
        sys.exit("got an AMQP frame over the TLS port")
elif case == "silent":
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(5)
    t = time.time()
    try:
        d = s.recv(1)
    except (ConnectionResetError, socket.timeout):
        d = None
    el = time.time() - t
    if d != b"" or not (0.3 <= el <= 2.5):
        sys.exit("silent client: recv %r after %.2f s" % (d, el))
elif case == "hold":
    # Open a TLS connection, say so, wait for the go file, use it again.
    c = connect(context("client.pem", "client.key"))
    roundtrip(c, 10)
    open(sys.argv[4], "w").write("open")
    for _ in range(200):
        if os.path.exists(sys.argv[5]):
            break
        time.sleep(0.05)
    roundtrip(c, 10)
    c.close()
elif case == "server-key":
    # Print the server certificate's key type: "ec" or "rsa".
    ctx = context("client.pem", "client.key")
    with socket.create_connection(("127.0.0.1", port)) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            der = t.getpeercert(binary_form=True)
    open(sys.argv[4], "wb").write(ssl.DER_cert_to_PEM_cert(der).encode())
elif case == "cipher":
    # Print the cipher negotiated with a client offering argv[5] (in that
    # order) over TLS argv[4] ("1.2" or "1.3"), or "refused".
    ctx = context()
    v = ssl.TLSVersion.TLSv1_2 if sys.argv[4] == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = v
    if sys.argv[4] == "1.2":
        ctx.set_ciphers(sys.argv[5])
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                print(t.cipher()[0])
    except (ssl.SSLError, ConnectionError):
        print("refused")
elif case == "limit":
    # argv[4] sockets that never start their handshake are held; the
    # next one must be closed at once (connection_max + 128 sockets).
    held = [socket.create_connection(("127.0.0.1", port))
            for _ in range(int(sys.argv[4]))]
    time.sleep(0.3)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(2)
    t = time.time()
    try:
        d = s.recv(1)
    except ConnectionResetError:
        d = b""
    except socket.timeout:
        sys.exit("the socket beyond the limit was not closed")
    if d != b"" or time.time() - t > 1:
        sys.exit("the socket beyond the limit got %r after %.2f s" % (d, time.time() - t))
    for h in held:
        h.close()
elif case == "mechanisms":
    # Print the mechanisms connection.start offers (over TLS with the
    # client certificate if argv[4] is "cert", plain TCP if "plain").
    s = socket.create_connection(("127.0.0.1", port))
    if sys.argv[4] != "plain":
        ctx = context("client.pem", "client.key") if sys.argv[4] == "cert" \
            else context()
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"AMQP\x00\x00\x09\x01")
    buf = b""
    while len(buf) < 7 or len(buf) < 8 + int.from_bytes(buf[3:7], "big"):
        d = s.recv(65536)
        if not d:
            sys.exit("closed before connection.start")
        buf += d
    p = buf[7:]
    assert p[0:4] == b"\x00\x0a\x00\x0a", "not connection.start"
    i = 6
    i += 4 + int.from_bytes(p[i:i + 4], "big")      # server properties
    n = int.from_bytes(p[i:i + 4], "big")
    print(p[i + 4:i + 4 + n].decode())
elif case in ("external", "external-refused"):
    ctx = context(sys.argv[4], sys.argv[5])
    p = pika.ConnectionParameters(host="localhost", port=port,
                                  ssl_options=pika.SSLOptions(ctx, "localhost"),
                                  credentials=pika.credentials.ExternalCredentials(),
                                  connection_attempts=1, socket_timeout=5)
    try:
        c = pika.BlockingConnection(p)
    except Exception as e:
        if case == "external":
            sys.exit("EXTERNAL login failed: %r" % e)
        sys.exit(0)
    if case == "external-refused":
        sys.exit("EXTERNAL login should have been refused")
    roundtrip(c, 10)
    c.close()
elif case == "details":
    # Hold a connection over TLS argv[5] ("1.2", "1.3"; "plain": none)
    # offering suite
    # argv[6] ("" = any) with client certificate argv[7] ("" = none),
    # and while it is open write what GET /api/connections (API port
    # argv[4]) says of it to argv[8].json and what roostctl argv[9]
    # lists to argv[8].ctl (its columns from argv[10] on).
    import base64, json, subprocess, urllib.request
    api, ver, suite, cert, out, ctl = sys.argv[4:10]
    opts = None                 # ver "plain": plain TCP
    if ver != "plain":
        ctx = context(cert + ".pem", cert + ".key") if cert else context()
        ctx.minimum_version = ctx.maximum_version = \
            ssl.TLSVersion.TLSv1_2 if ver == "1.2" else ssl.TLSVersion.TLSv1_3
        if suite:
            ctx.set_ciphers(suite)
        opts = pika.SSLOptions(ctx, "localhost")
    name = "details %s %s" % (ver, cert or "without a certificate")
    p = pika.ConnectionParameters(host="localhost", port=port,
                                  ssl_options=opts,
                                  client_properties={"connection_name": name},
                                  connection_attempts=1, socket_timeout=5)
    c = pika.BlockingConnection(p)
    auth = base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request("http://127.0.0.1:%s/api/connections" % api,
                                 headers={"Authorization": "Basic " + auth})
    mine = [x for x in json.load(urllib.request.urlopen(req, timeout=5))
            if x.get("user_provided_name") == name]
    json.dump(mine[0] if mine else None, open(out + ".json", "w"))
    r = subprocess.run([ctl, "--host", "127.0.0.1", "--port", api,
                        "list_connections"] + sys.argv[10:],
                       capture_output=True, text=True)
    open(out + ".ctl", "w").write(r.stdout + r.stderr)
    c.close()
else:
    sys.exit("unknown case " + case)
EOF
client() { $py -W ignore::DeprecationWarning "$tmp/client.py" "$1" "$2" "$certs" "${@:3}"; }
server_key_type() {
    client server-key "$tport" "$tmp/peer.pem" &&
        openssl x509 -in "$tmp/peer.pem" -noout -text | grep -q "$1"
}

# ---- verify_peer, fail_if_no_peer_cert ----
log=$tmp/peer.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.verify=verify_peer \
        --set ssl_options.fail_if_no_peer_cert=true \
        --set ssl_handshake_timeout=500; then
    check "pika over TLS with a client certificate" client client-cert "$tport"
    check "no client certificate refused" client no-client-cert "$tport"
    check "expired client certificate refused" client expired "$tport"
    check "client certificate of another CA refused" client other-ca "$tport"
    check "a refused handshake is logged with its reason" \
        grep -q "TLS handshake failed" "$log"
    check "TLS 1.1 refused" client tls1.1 "$tport"
    check "by the server, for its version" grep -q "unsupported protocol" "$log"
    check "TLS 1.2 taken" client tls1.2 "$tport"
    check "TLS 1.3 taken" client tls1.3 "$tport"
    check "plain AMQP on the TLS port closed at once" client plain-amqp "$tport"
    check "a silent client cut at ssl_handshake_timeout" client silent "$tport"
    check "the plain listener still works beside it" \
        $py -c "import pika; pika.BlockingConnection(pika.ConnectionParameters('127.0.0.1', $port)).close()"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with verify_peer" "$(tail -3 "$log")"
fi

# ---- handshakes count against connection_max ----
log=$tmp/limit.log
if tstart "$log" "${tls_args[@]}" --set connection_max=2; then
    check "sockets in the TLS handshake count against connection_max (+128)" \
        client limit "$tport" 130
    check "logged" grep -q "connection_max (2) reached" "$log"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with connection_max" "$(tail -3 "$log")"
fi

# ---- verify_none; SIGHUP reloads the certificates ----
log=$tmp/reload.log
if tstart "$log" "${tls_args[@]}"; then
    check "without peer verification" client no-verify "$tport"
    check "the server certificate is the ECDSA one" server_key_type "id-ecPublicKey"
    rm -f "$tmp/open" "$tmp/go"
    client hold "$tport" "$tmp/open" "$tmp/go" & holder=$!
    for _ in $(seq 1 100); do [ -e "$tmp/open" ] && break; sleep 0.05; done
    cp "$certs/server-rsa.pem" "$tmp/server.pem"
    cp "$certs/server-rsa.key" "$tmp/server.key"
    kill -HUP "$pid"
    for _ in $(seq 1 100); do grep -q "TLS certificates and key loaded again" "$log" && break; sleep 0.05; done
    check "SIGHUP reloads the certificates" grep -q "TLS certificates and key loaded again" "$log"
    check "a new connection gets the new (RSA) certificate" server_key_type "rsaEncryption"
    touch "$tmp/go"
    check "the TLS connection open across the reload goes on" wait "$holder"
    echo "not a certificate" > "$tmp/server.pem"
    kill -HUP "$pid"
    for _ in $(seq 1 100); do grep -q "nothing changed" "$log" && break; sleep 0.05; done
    check "a bad new certificate keeps the old one, logged" \
        grep -q "reload: TLS (ssl_options.*): cannot load ssl_options.certfile $tmp/server.pem" "$log"
    check "and new connections still get the old one" server_key_type "rsaEncryption"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with verify_none" "$(tail -3 "$log")"
fi
cp "$certs/server.pem" "$certs/server.key" "$tmp/"

# ---- SASL EXTERNAL ----
dn="CN=roost-client,OU=clients,O=Roost tests,C=US"
ext_args=("${tls_args[@]}" --set ssl_options.verify=verify_peer
          --set auth_mechanisms.1=PLAIN --set auth_mechanisms.2=AMQPLAIN
          --set auth_mechanisms.3=EXTERNAL)
log=$tmp/external.log
if tstart "$log" "${ext_args[@]}" --set default_user="$dn"; then
    m=$(client mechanisms "$tport" cert)
    check "EXTERNAL offered over TLS with a verified client certificate" \
        test "$m" = "AMQPLAIN EXTERNAL PLAIN"
    m=$(client mechanisms "$tport" nocert)
    check "not over TLS without a client certificate ($m)" test "$m" = "AMQPLAIN PLAIN"
    m=$(client mechanisms "$port" plain)
    check "not over plain TCP ($m)" test "$m" = "AMQPLAIN PLAIN"
    check "EXTERNAL logs in as the certificate's DN (RFC 4514, CN first)" \
        client external "$tport" client.pem client.key
    check "as user '$dn'" grep -q "user '$dn' opened vhost" "$log"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with EXTERNAL" "$(tail -3 "$log")"
fi
log=$tmp/external-cn.log
if tstart "$log" "${ext_args[@]}" --set ssl_cert_login_from=common_name \
        --set default_user=roost-client; then
    check "ssl_cert_login_from = common_name" client external "$tport" client.pem client.key
    stop || bad "clean stop" "exit status $?"
else
    bad "start with common_name" "$(tail -3 "$log")"
fi
for san in "dns 0 client.example" "email 0 client@example.com"; do
    set -- $san
    log=$tmp/external-san-$1.log
    if tstart "$log" "${ext_args[@]}" --set ssl_cert_login_from=subject_alternative_name \
            --set ssl_cert_login_san_type=$1 --set ssl_cert_login_san_index=$2 \
            --set default_user=$3; then
        check "ssl_cert_login_from = subject_alternative_name, $1 $2: $3" \
            client external "$tport" client.pem client.key
        stop || bad "clean stop" "exit status $?"
    else
        bad "start with a $1 SAN" "$(tail -3 "$log")"
    fi
done
log=$tmp/external-nouser.log
if tstart "$log" "${ext_args[@]}"; then
    check "EXTERNAL refused when no user has the certificate's name" \
        client external-refused "$tport" client.pem client.key
    check "and the log says whose name it was" \
        grep -q "no user '$dn' (the client certificate's name)" "$log"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with EXTERNAL (no such user)" "$(tail -3 "$log")"
fi
log=$tmp/external-off.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.verify=verify_peer \
        --set default_user="$dn"; then
    check "EXTERNAL not offered unless auth_mechanisms names it" \
        client external-refused "$tport" client.pem client.key
    stop || bad "clean stop" "exit status $?"
else
    bad "start without EXTERNAL" "$(tail -3 "$log")"
fi

# ---- cipher suites ----
a128=ECDHE-ECDSA-AES128-GCM-SHA256 a256=ECDHE-ECDSA-AES256-GCM-SHA384
log=$tmp/ciphers.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.ciphers.1=$a128 \
        --set ssl_options.ciphers.2=$a256 \
        --set ssl_options.ciphers.3=TLS_CHACHA20_POLY1305_SHA256; then
    c=$(client cipher "$tport" 1.2 ECDHE-ECDSA-CHACHA20-POLY1305)
    check "a TLS 1.2 cipher not configured is refused ($c)" test "$c" = refused
    c=$(client cipher "$tport" 1.2 "$a256:$a128")
    check "without honor_cipher_order the client's order wins ($c)" test "$c" = "$a256"
    c=$(client cipher "$tport" 1.3 x)
    check "TLS 1.3 suites are set apart (TLS_...: $c)" test "$c" = TLS_CHACHA20_POLY1305_SHA256
    stop || bad "clean stop" "exit status $?"
else
    bad "start with ciphers" "$(tail -3 "$log")"
fi
log=$tmp/honor.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.ciphers.1=$a128 \
        --set ssl_options.ciphers.2=$a256 \
        --set ssl_options.honor_cipher_order=true; then
    c=$(client cipher "$tport" 1.2 "$a256:$a128")
    check "with honor_cipher_order the server's order wins ($c)" test "$c" = "$a128"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with honor_cipher_order" "$(tail -3 "$log")"
fi

# ---- TLS details in GET /api/connections and roostctl list_connections ----
. "$here/roostctl_lib.sh"
# jf FILE KEY: the JSON of KEY in the connection FILE holds.
jf() {
    $py -c 'import json, sys
v = json.load(open(sys.argv[1]))
print(json.dumps(v.get(sys.argv[2], "(missing)")) if v else "(no such connection)")' "$1" "$2"
}
# field FILE KEY WANT: a check that KEY is WANT (JSON) in FILE.
field() { local got; got=$(jf "$1" "$2"); check "$3: $2 = $4 ($got)" test "$got" = "$4"; }
# ISO 8601 UTC of openssl's "notBefore=Jan  1 00:00:00 2026 GMT".
iso() { date -u -d "${1#*=}" +%Y-%m-%dT%H:%M:%SZ; }
subj=$(openssl x509 -in "$certs/client.pem" -noout -subject -nameopt RFC2253)
issuer=$(openssl x509 -in "$certs/client.pem" -noout -issuer -nameopt RFC2253)
validity="$(iso "$(openssl x509 -in "$certs/client.pem" -noout -startdate)") - $(iso "$(openssl x509 -in "$certs/client.pem" -noout -enddate)")"
g12=ECDHE-ECDSA-AES256-GCM-SHA384 cbc12=ECDHE-ECDSA-AES128-SHA256
cols=(name ssl ssl_protocol ssl_key_exchange ssl_cipher ssl_hash
      peer_cert_subject peer_cert_issuer peer_cert_validity)
# seen TAG VERSION SUITE CERT WHAT [PORT]: hold a connection (client
# details; to $tport unless PORT), the files it writes in $tmp/TAG.*
# ($d), WHAT ($what) naming its checks.
seen() {
    d=$tmp/$1 what=$5
    check "$what: seen by the API and roostctl" client details "${6:-$tport}" \
        "$api" "$2" "$3" "$4" "$d" "$ctl_bin" "${cols[@]}"
}
# suite PROTOCOL KEY_EXCHANGE CIPHER HASH: checks of $d's ssl_* fields.
suite() {
    local kv
    for kv in ssl_protocol=$1 ssl_key_exchange=$2 ssl_cipher=$3 ssl_hash=$4; do
        field $d.json "${kv%%=*}" "$what" "\"${kv#*=}\""
    done
}
log=$tmp/details.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.verify=verify_peer \
        --set ssl_options.ciphers.1=$g12 --set ssl_options.ciphers.2=$cbc12 \
        --set ssl_options.ciphers.3=TLS_AES_256_GCM_SHA384 \
        --set management.tcp.port=0 && api=$(mgmt_port "$log"); then
    seen d13 1.3 "" client "TLS 1.3, certificate"
    field $d.json ssl "$what" true
    suite tlsv1.3 any aes_256_gcm aead
    field $d.json peer_cert_subject "$what" "\"${subj#subject=}\""
    field $d.json peer_cert_issuer "$what" "\"${issuer#issuer=}\""
    field $d.json peer_cert_validity "$what" "\"$validity\""
    n=$(jf $d.json name | tr -d '"')
    row=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$n" true tlsv1.3 any \
          aes_256_gcm aead "${subj#subject=}" "${issuer#issuer=}" "$validity")
    check "roostctl list_connections ${cols[*]}" grep -qxF "$row" $d.ctl
    seen d12 1.2 $g12 client "TLS 1.2 $g12"
    suite tlsv1.2 ecdhe_ecdsa aes_256_gcm aead
    field $d.json peer_cert_subject "$what" "\"${subj#subject=}\""
    seen dcbc 1.2 $cbc12 client "TLS 1.2 $cbc12"
    suite tlsv1.2 ecdhe_ecdsa aes_128_cbc sha256
    seen dnocert 1.3 "" "" "TLS 1.3, no certificate"
    suite tlsv1.3 any aes_256_gcm aead
    for k in peer_cert_subject peer_cert_issuer peer_cert_validity; do
        field $d.json $k "$what" null
    done
    seen dplain plain "" "" "plain TCP" "$port"
    field $d.json ssl "$what" false
    suite "" "" "" ""
    for k in peer_cert_subject peer_cert_issuer peer_cert_validity; do
        field $d.json $k "$what" null
    done
    stop || bad "clean stop" "exit status $?"
else
    bad "start with the management API" "$(tail -3 "$log")"
fi

# ---- a password-protected key ----
log=$tmp/enc.log
if tstart "$log" "${tls_args[@]}" --set ssl_options.keyfile="$certs/server-enc.key" \
        --set ssl_options.password=secret; then
    check "a key with ssl_options.password" client no-verify "$tport"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with an encrypted key" "$(tail -3 "$log")"
fi

# ---- refusals at startup: roostd exits 1 and names the file ----
refuse() {
    local name=$1 want=$2
    shift 2
    rm -rf "$tmp/data"
    "$roostd" --port 0 --data-dir "$tmp/data" --log-file "$tmp/refuse.log" \
        "$@" 2>>"$tmp/stderr" &
    local p=$!
    wait $p
    local rc=$?
    if [ $rc -ne 1 ]; then
        bad "$name" "exit status $rc, expected 1"
    elif ! grep -q -- "$want" "$tmp/refuse.log"; then
        bad "$name" "log does not say '$want': $(grep -i tls "$tmp/refuse.log" | tail -2)"
    else
        ok "$name"
    fi
}
refuse "missing certfile" "ssl_options.certfile $tmp/nope.pem: No such file" \
    "${tls_args[@]}" --set ssl_options.certfile="$tmp/nope.pem"
chmod 000 "$tmp/server.key"
if [ "$(id -u)" = 0 ]; then
    # root reads anything: make the key a directory instead.
    chmod 600 "$tmp/server.key"
    refuse "unreadable keyfile" "cannot load ssl_options.keyfile $tmp" \
        "${tls_args[@]}" --set ssl_options.keyfile="$tmp"
else
    refuse "unreadable keyfile" "ssl_options.keyfile $tmp/server.key: Permission denied" \
        "${tls_args[@]}"
    chmod 600 "$tmp/server.key"
fi
refuse "mismatched key and certificate" "does not match" \
    "${tls_args[@]}" --set ssl_options.keyfile="$certs/server-rsa.key"
refuse "encrypted key without its password" "cannot load ssl_options.keyfile $certs/server-enc.key" \
    "${tls_args[@]}" --set ssl_options.keyfile="$certs/server-enc.key"
refuse "a TLS listener without certfile" "needs ssl_options.certfile" \
    --set listeners.ssl.default=0
refuse "an unknown cipher" "ssl_options.ciphers" \
    "${tls_args[@]}" --set ssl_options.ciphers.1=NO-SUCH-CIPHER
refuse "TLS 1.1 asked for" "tlsv1.1' is not offered" \
    "${tls_args[@]}" --set ssl_options.versions.1=tlsv1.1
busy=$(free_port)
$py -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$busy)); s.listen(); time.sleep(5)" &
sq=$!
sleep 0.3
refuse "a TLS port already taken" "AMQP over TLS listener: port $busy on 127.0.0.1 is in use by python3 (pid $sq); choose another with listeners.ssl.default" \
    "${tls_args[@]}" --set listeners.ssl.default="127.0.0.1:$busy"
kill $sq 2>/dev/null; wait $sq 2>/dev/null

# ---- RabbitMQ's listener keys ----
log=$tmp/listeners.log
p1=$(free_port) p2=$(free_port)
if tstart "$log" --set listeners.tcp.default="$p1" \
        --set listeners.tcp.local="127.0.0.1:$p2"; then
    for p in "$p1" "$p2"; do
        check "listeners.tcp: port $p takes AMQP" \
            $py -c "import pika; pika.BlockingConnection(pika.ConnectionParameters('127.0.0.1', $p)).close()"
    done
    stop || bad "clean stop" "exit status $?"
else
    bad "start with listeners.tcp.NAME" "$(tail -3 "$log")"
fi
log=$tmp/none.log
if tstart "$log" "${tls_args[@]}" --set listeners.tcp=none; then
    check "listeners.tcp = none: only the TLS listener" \
        test "$port" = "$tport" -a "$(grep -c 'listening for AMQP' "$log")" = 1
    check "and it takes connections" client no-verify "$tport"
    stop || bad "clean stop" "exit status $?"
else
    bad "start with listeners.tcp = none" "$(tail -3 "$log")"
fi

echo "tls: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
