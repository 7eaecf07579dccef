# SPDX-License-Identifier: Apache-2.0
"""TLS defaults (issue 22, point 13): with no ssl_options.ciphers set, a
TLS 1.2 client offering only a SHA-1 CBC suite without forward secrecy
(AES128-SHA) is refused, and one offering ECDHE-RSA-AES128-GCM-SHA256
is served; ssl_options.ciphers.N still chooses; a private key readable
by group or others is named in a warning at start (openssl s_client,
tests/integration/tls-certs.sh's certificates)."""
import os
import re
import shutil
import subprocess

from hostile import Broker, check, check_healthy, run, until

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("srcdir") or os.path.join(HERE, "..", "..")
CERTS_SH = os.path.join(SRC, "tests", "integration", "tls-certs.sh")


def tls_port(b):
    m = re.search(r"listening for AMQP over TLS on .*\(port (\d+)\)",
                  b.log_text())
    return int(m.group(1)) if m else None


def handshake(port, cipher):
    """Whether a TLS 1.2 handshake offering only 'cipher' succeeds."""
    r = subprocess.run(["openssl", "s_client", "-connect",
                        "127.0.0.1:%d" % port, "-tls1_2", "-cipher", cipher,
                        "-servername", "localhost"],
                       input="", capture_output=True, text=True, timeout=20)
    m = re.search(r"Cipher is (\S+)", r.stdout)
    return r.returncode == 0 and m is not None and m.group(1) == cipher


def start(certs, key, extra=()):
    b = Broker(args=["-s", "listeners.ssl.default=0",
                     "-s", "ssl_options.certfile=" +
                     os.path.join(certs, "server-rsa.pem"),
                     "-s", "ssl_options.keyfile=" + key] + list(extra))
    b.start()
    until(lambda: tls_port(b) is not None, 5)
    return b


def main():
    if shutil.which("openssl") is None:
        print("SKIP no openssl")
        raise SystemExit(77)
    b0 = Broker()
    certs = os.path.join(b0.tmp, "certs")
    subprocess.run(["sh", CERTS_SH, certs], check=True, timeout=120,
                   stdout=subprocess.DEVNULL)
    key = os.path.join(certs, "server-rsa.key")
    os.chmod(key, 0o600)

    b = start(certs, key)
    port = tls_port(b)
    check("default: AES128-SHA (TLS 1.2, SHA-1 CBC, no forward secrecy) "
          "refused", not handshake(port, "AES128-SHA"), "")
    check("default: ECDHE-RSA-AES128-SHA (CBC, SHA-1) refused",
          not handshake(port, "ECDHE-RSA-AES128-SHA"), "")
    check("default: ECDHE-RSA-AES128-GCM-SHA256 served",
          handshake(port, "ECDHE-RSA-AES128-GCM-SHA256"), "")
    check("default: ECDHE-RSA-CHACHA20-POLY1305 served",
          handshake(port, "ECDHE-RSA-CHACHA20-POLY1305"), "")
    check("a 0600 key: no warning about it",
          "by its group or others" not in b.log_text(), b.tail())
    check_healthy("default ciphers", b, 64 * 1024)
    b.stop()

    os.chmod(key, 0o644)
    b = start(certs, key, ["-s", "ssl_options.ciphers.1=AES128-SHA"])
    port = tls_port(b)
    check("ssl_options.ciphers.1 = AES128-SHA: it is served",
          handshake(port, "AES128-SHA"), "")
    check("ssl_options.ciphers.1 = AES128-SHA: nothing else is",
          not handshake(port, "ECDHE-RSA-AES128-GCM-SHA256"), "")
    check("a 0644 key: a warning names it",
          key in b.log_text() and
          "by its group or others" in b.log_text(), b.tail())
    b.stop()


run(main)
