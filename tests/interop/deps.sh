#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what the interop tests need, and only what is missing:
#   Debian packages python3-pika python3-kombu python3-celery ruby-bunny
#   amqp-tools php-cli php-amqplib (and nodejs/npm only when no node/npm is on PATH,
#   since node may come from elsewhere), then the npm package amqplib into
#   tests/interop/node_modules from the committed package-lock.json.
#   RabbitMQ's own rabbitmqadmin (the management API tests drive it
#   unmodified): /usr/bin/rabbitmqadmin if rabbitmq-server is installed,
#   else taken out of Debian's rabbitmq-server package (downloaded, not
#   installed: no Erlang, no service) into tests/interop/.rabbitmqadmin/.
# Run as root (or with sudo available). Exits 0 when everything is there.
#   tests/interop/deps.sh          install what is missing
#   tests/interop/deps.sh --check  only report; exit 1 if something is missing
# NODE_DIR (default tests/interop) is where node_modules goes; run.sh sets
# it to a build directory when the source tree is read-only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node_dir=${NODE_DIR:-$here}
# Compare directories by their resolved paths ("../../tests/interop" and
# "/abs/tests/interop" are one place).
node_dir=$(mkdir -p "$node_dir" && cd "$node_dir" && pwd)
check_only=0
[ "${1:-}" = "--check" ] && check_only=1

pkgs=(python3-pika python3-kombu python3-celery ruby-bunny amqp-tools php-cli php-amqplib)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$p")
done

# The npm package counts as present when the version the lock file pins
# is the one in node_modules.
npm_missing=0
want=$(sed -n '/"node_modules\/amqplib"/,/}/s/.*"version": *"\([^"]*\)".*/\1/p' \
       "$here/package-lock.json" | head -n1)
have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
       "$node_dir/node_modules/amqplib/package.json" 2>/dev/null | head -n1 || true)
[ -n "$want" ] && [ "$want" = "$have" ] || npm_missing=1

# rabbitmqadmin: Debian's, or the one from the package.
admin_dir=$here/.rabbitmqadmin
admin_missing=0
[ -x /usr/bin/rabbitmqadmin ] || [ -x "$admin_dir/rabbitmqadmin" ] ||
    admin_missing=1

if [ $check_only = 1 ]; then
    [ ${#missing[@]} -eq 0 ] && [ $npm_missing = 0 ] && exit 0
    [ ${#missing[@]} -eq 0 ] || echo "interop deps missing: ${missing[*]}"
    [ $npm_missing = 0 ] || echo "interop deps missing: npm amqplib $want (have: ${have:-none})"
    [ $admin_missing = 0 ] || echo "interop deps missing: rabbitmqadmin"
    exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
    echo "interop deps: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    # Update the package lists only if the first try finds nothing.
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        { $sudo apt-get update -q &&
          $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; }
fi

if [ $npm_missing = 1 ]; then
    echo "interop deps: npm ci (amqplib $want) in $node_dir"
    if [ "$node_dir" != "$here" ]; then
        mkdir -p "$node_dir"
        cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
        chmod u+w "$node_dir/package.json" "$node_dir/package-lock.json"
    fi
    (cd "$node_dir" && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error)
fi

if [ $admin_missing = 1 ]; then
    echo "interop deps: rabbitmqadmin from Debian's rabbitmq-server package into $admin_dir"
    dl=$(mktemp -d)
    chmod 755 "$dl"    # apt's download sandbox user writes here
    (cd "$dl" && { apt-get download -q rabbitmq-server ||
                   { apt-get update -q && apt-get download -q rabbitmq-server; }; }) &&
        mkdir -p "$admin_dir" &&
        dpkg-deb --fsys-tarfile "$dl"/rabbitmq-server_*.deb |
            tar -x -O ./usr/bin/rabbitmqadmin > "$admin_dir/rabbitmqadmin.new" &&
        chmod 755 "$admin_dir/rabbitmqadmin.new" &&
        mv "$admin_dir/rabbitmqadmin.new" "$admin_dir/rabbitmqadmin"
    ok=$?
    rm -rf "$dl"
    [ $ok = 0 ] || { echo "interop deps: could not get rabbitmqadmin"; exit 1; }
fi
