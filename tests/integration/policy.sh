#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Policies and operator policies (policy.py, pika): the API's answers and
# refusals, matching, priority and apply-to, each key's effect on a real
# queue or exchange, arguments against policies against operator
# policies, changes applied to existing queues, definitions export and
# import; after a restart (from a compacted snapshot), still set and
# still applied; --check-data reads the records. Then RabbitMQ's
# own rabbitmqadmin, unmodified, declares, lists and deletes a policy and
# an operator policy. policy.py --reference runs the same checks against
# RabbitMQ. Prints "policy: N passed, M failed".
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if ! $py -c 'import pika' 2>/dev/null; then
    echo "policy: pika for /usr/bin/python3 is missing (apt-get install python3-pika); skipped"
    exit 77
fi
admin=
for a in "${RABBITMQADMIN:-}" /usr/bin/rabbitmqadmin \
         "$here/../interop/.rabbitmqadmin/rabbitmqadmin"; do
    [ -n "$a" ] && [ -x "$a" ] && { admin=$a; break; }
done

http_port() {
    sed -n 's|.*management API listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log" | tail -n1
}

# rabbitmqadmin's policy commands, as RabbitMQ's users run them.
with_rabbitmqadmin() {
    local http=$1 out
    if [ -z "$admin" ]; then
        echo "policy: rabbitmqadmin not found; its checks skipped"
        return
    fi
    local ra="$py $admin -P $http"
    out=$($ra declare policy name=ra pattern='^ra' \
        definition='{"max-length":2}' priority=1 apply-to=queues 2>&1)
    [ "$out" = "policy declared" ] && ok "rabbitmqadmin declare policy" ||
        bad "rabbitmqadmin declare policy" "$out"
    out=$($ra -f tsv list policies 2>&1)
    [[ $out == *$'/\tra\tqueues\t{"max-length": 2}\t^ra\t1'* ]] &&
        ok "rabbitmqadmin list policies" ||
        bad "rabbitmqadmin list policies" "$out"
    out=$($ra declare operator_policy name=rao pattern='^ra' \
        definition='{"max-length":1}' 2>&1)
    [ "$out" = "operator_policy declared" ] &&
        ok "rabbitmqadmin declare operator_policy" ||
        bad "rabbitmqadmin declare operator_policy" "$out"
    out=$($ra -f tsv list operator_policies 2>&1)
    [[ $out == *$'/\trao\tall\t{"max-length": 1}\t^ra\t0'* ]] &&
        ok "rabbitmqadmin list operator_policies" ||
        bad "rabbitmqadmin list operator_policies" "$out"
    out=$($ra declare policy name=bad pattern='(' \
        definition='{"max-length":2}' 2>&1)
    [[ $out == *'invalid: {"missing )",1}'* ]] &&
        ok "rabbitmqadmin shows a refusal's reason" ||
        bad "rabbitmqadmin shows a refusal's reason" "$out"
    out=$($ra delete policy name=ra 2>&1; $ra delete operator_policy name=rao 2>&1)
    [ "$out" = $'policy deleted\noperator_policy deleted' ] &&
        ok "rabbitmqadmin delete policy and operator_policy" ||
        bad "rabbitmqadmin delete policy and operator_policy" "$out"
    $ra delete policy name=ra >/dev/null 2>&1 &&
        bad "rabbitmqadmin delete of a missing policy fails" "exit 0" ||
        ok "rabbitmqadmin delete of a missing policy fails"
}

for phase in before after; do
    log=$tmp/log-$phase
    if start "$tmp/data" "$log" --set management.tcp.port=0; then
        http=$(http_port)
        if [ -z "$http" ]; then
            bad "$phase: management API" "no port in the log"
        else
            run_checks "$phase: policy.py" $py "$here/policy.py" \
                --amqp "$port" --http "$http" $phase
            [ $phase = before ] && with_rabbitmqadmin "$http"
        fi
        stop || bad "$phase: clean stop" "$(tail -3 "$log")"
        if [ $phase = before ]; then
            [ -s "$tmp/data/defs.snap" ] &&
                ok "the definitions were compacted into a snapshot" ||
                bad "the definitions were compacted into a snapshot" \
                    "no defs.snap"
        fi
    else
        bad "$phase: start" "$(tail -3 "$log")"
    fi
done
out=$("$roostd" --check-data "$tmp/data" 2>&1) &&
    ok "check-data reads the policy records" ||
    bad "check-data reads the policy records" "$out"

echo "policy: $pass passed, $fail failed"
[ $fail -eq 0 ]
