#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Make the certificates the TLS tests use, in DIR (made if missing), with
# openssl: a CA; a server certificate for localhost and 127.0.0.1 (ECDSA
# P-256, and an RSA 2048 one); client certificates signed by the CA
# (CN=roost-client, with a DNS and an email subjectAltName), one expired,
# and one signed by another CA. Every key is unencrypted except
# server-enc.key (password "secret").
#
#   tests/integration/tls-certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
q() { "$@" >/dev/null 2>&1 || { echo "tls-certs.sh: failed: $*" >&2; "$@"; exit 1; }; }
ec() { q openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# Two CAs.
for ca in ca otherca; do
    ec $ca.key
    q openssl req -x509 -new -key $ca.key -sha256 -days 3650 \
        -subj "/O=Roost tests/CN=Roost test $ca" -out $ca.pem \
        -addext basicConstraints=critical,CA:true \
        -addext keyUsage=critical,keyCertSign,cRLSign
done

# sign NAME CA DAYS SUBJECT EXTFILE
sign() {
    q openssl req -new -key "$1.key" -subj "$4" -out "$1.csr"
    q openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
        -CAcreateserial -sha256 -days "$3" -extfile "$5" -out "$1.pem"
    rm -f "$1.csr"
}
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'subjectAltName=DNS:client.example,email:client@example.com\nextendedKeyUsage=clientAuth\n' > client.ext

ec server.key
sign server ca 3650 "/O=Roost tests/CN=localhost" server.ext
q openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out server-rsa.key
sign server-rsa ca 3650 "/O=Roost tests/CN=localhost" server.ext
q openssl pkey -in server.key -aes256 -passout pass:secret -out server-enc.key

ec client.key
sign client ca 3650 "/C=US/O=Roost tests/OU=clients/CN=roost-client" client.ext
ec otherclient.key
sign otherclient otherca 3650 "/O=Roost tests/CN=roost-client" client.ext
# Expired: valid from two days ago to yesterday (openssl ca sets dates).
ec expired.key
q openssl req -new -key expired.key -subj "/O=Roost tests/CN=expired" -out expired.csr
: > index.txt
echo 1000 > serial
printf '[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\norganizationName=optional\n' > ca.cnf
q openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -notext \
    -startdate "$(date -u -d '2 days ago' +%Y%m%d%H%M%SZ)" \
    -enddate "$(date -u -d '1 day ago' +%Y%m%d%H%M%SZ)" \
    -extfile client.ext -in expired.csr -out expired.pem
rm -f expired.csr ./*.old index.txt* serial* ca.cnf 1000.pem ./*.srl
echo "$dir"
