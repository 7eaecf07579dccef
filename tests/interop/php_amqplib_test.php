<?php
// SPDX-License-Identifier: Apache-2.0
// php-amqplib (Debian php-amqplib) against a broker on 127.0.0.1:PORT.
// Logs in with AMQPLAIN (php-amqplib's default) and with PLAIN; declares a
// topic and a fanout exchange, queues and bindings, publishes, consumes
// with prefetch and acks, checks every message arrives once and in order;
// basic_get, nack with requeue (redelivered), a mandatory publish returned.
// Usage: php php_amqplib_test.php PORT
require_once '/usr/share/php/PhpAmqpLib/autoload.php';

use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Message\AMQPMessage;
use PhpAmqpLib\Wire\AMQPTable;

const N = 100;
const PREFETCH = 10;
$failures = [];
function fail($m) { global $failures; echo "FAIL: $m\n"; $failures[] = $m; }
function ok($m) { echo "ok: $m\n"; }
function compare($queue, $got, $want) {
    if ($got === $want) return null;
    $counts = array_count_values($got);
    $dups = array_keys(array_filter($counts, fn($c) => $c > 1));
    $missing = array_values(array_diff($want, $got));
    $extra = array_values(array_diff($got, $want));
    $m = "queue $queue: got " . count($got) . " messages, expected " . count($want);
    if ($dups) $m .= "; duplicated: " . implode(' ', array_slice($dups, 0, 5));
    if ($missing) $m .= "; missing: " . implode(' ', array_slice($missing, 0, 5));
    if ($extra) $m .= "; unexpected: " . implode(' ', array_slice($extra, 0, 5));
    if (!$dups && !$missing && !$extra) {
        foreach ($got as $i => $b) {
            if ($b !== $want[$i]) { $m .= "; out of order at $i: got $b, expected {$want[$i]}"; break; }
        }
    }
    return $m;
}

if ($argc != 2 || !ctype_digit($argv[1])) {
    fwrite(STDERR, "usage: php php_amqplib_test.php PORT\n");
    exit(2);
}
$port = (int)$argv[1];
$pfx = 'interop.php.' . getmypid() . '.' . time();

try {
    // PLAIN first, briefly, then the default AMQPLAIN for the test itself.
    $c = new AMQPStreamConnection('127.0.0.1', $port, 'guest', 'guest', '/', false, 'PLAIN');
    $c->channel()->close();
    $c->close();
    ok('logged in with PLAIN');
    // A wrong password over AMQPLAIN: refused with RabbitMQ's text.
    try {
        new AMQPStreamConnection('127.0.0.1', $port, 'guest', 'wrong');
        fail('AMQPLAIN login with a wrong password succeeded');
    } catch (PhpAmqpLib\Exception\AMQPConnectionClosedException $e) {
        $want = 'ACCESS_REFUSED - Login was refused using authentication mechanism AMQPLAIN. '
              . 'For details see the broker logfile.';
        if ($e->getMessage() !== $want . '(0, 0)') {
            fail('AMQPLAIN wrong password: ' . $e->getMessage() . "; RabbitMQ: $want(0, 0)");
        } else {
            ok('AMQPLAIN login with a wrong password refused with RabbitMQ\'s text');
        }
    }
    $conn = new AMQPStreamConnection('127.0.0.1', $port, 'guest', 'guest');
    $sp = $conn->getServerProperties();
    ok("logged in with AMQPLAIN to {$sp['product'][1]} {$sp['version'][1]}");
    $ch = $conn->channel();

    $topic = "$pfx.topic";
    $fanout = "$pfx.fanout";
    $ch->exchange_declare($topic, 'topic', false, false, false);
    $ch->exchange_declare($fanout, 'fanout', false, false, false);
    $queues = ["$pfx.t1" => [], "$pfx.t2" => [], "$pfx.f1" => []];
    foreach (array_keys($queues) as $q) {
        [$name, $count, $consumers] = $ch->queue_declare($q, false, false, false, false);
        if ($name !== $q || $count !== 0) fail("queue_declare $q: $name $count");
    }
    $ch->queue_bind("$pfx.t1", $topic, 'stock.*.nyse');
    $ch->queue_bind("$pfx.t2", $topic, 'stock.#');
    $ch->queue_bind("$pfx.t2", $topic, '*.*.nyse');
    $ch->queue_bind("$pfx.f1", $fanout);
    ok('declared 2 exchanges, 3 queues, 4 bindings');

    $keys = ['stock.usd.nyse', 'stock.eur', 'bond.usd.nyse', 'stock.x.y.nyse', 'misc'];
    for ($i = 0; $i < N; $i++) {
        $k = $keys[$i % count($keys)];
        $body = "topic:$i:$k";
        $ch->basic_publish(new AMQPMessage($body, [
            'content_type' => 'text/plain', 'delivery_mode' => AMQPMessage::DELIVERY_MODE_NON_PERSISTENT,
            'application_headers' => new AMQPTable(['seq' => $i, 'key' => $k]),
        ]), $topic, $k);
        if ($k === 'stock.usd.nyse') $queues["$pfx.t1"][] = $body;
        if (str_starts_with($k, 'stock.') || $k === 'bond.usd.nyse') $queues["$pfx.t2"][] = $body;
        $body = "fanout:$i";
        $ch->basic_publish(new AMQPMessage($body), $fanout, "k$i");
        $queues["$pfx.f1"][] = $body;
    }
    ok('published ' . (2 * N) . ' messages');

    $ch->basic_qos(0, PREFETCH, false);
    $got = [];
    $tags = [];
    $problems = [];
    foreach ($queues as $q => $want) {
        $got[$q] = [];
        $pending = 0;
        $tags[$q] = $ch->basic_consume($q, '', false, false, false, false,
            function (AMQPMessage $m) use ($q, &$got, &$pending, &$problems, $queues) {
                $got[$q][] = $m->getBody();
                $pending++;
                if ($m->isRedelivered()) $problems[] = "$q: redelivered on first delivery";
                if ($pending > PREFETCH) $problems[] = "$q: $pending unacked with prefetch " . PREFETCH;
                if ($pending >= PREFETCH || count($got[$q]) >= count($queues[$q])) {
                    $m->ack(true);
                    $pending = 0;
                }
            });
        if (!str_starts_with($tags[$q], 'amq.ctag-')) fail("consumer tag {$tags[$q]}");
    }
    $deadline = microtime(true) + 10;
    $done = function () use (&$got, $queues) {
        foreach ($queues as $q => $want) if (count($got[$q]) < count($want)) return false;
        return true;
    };
    while (!$done() && microtime(true) < $deadline) {
        try { $ch->wait(null, false, 0.5); } catch (PhpAmqpLib\Exception\AMQPTimeoutException $e) {}
    }
    $end = microtime(true) + 0.2;
    while (microtime(true) < $end) {
        try { $ch->wait(null, false, 0.1); } catch (PhpAmqpLib\Exception\AMQPTimeoutException $e) {}
    }
    foreach ($tags as $t) $ch->basic_cancel($t);
    foreach (array_slice($problems, 0, 5) as $p) fail($p);
    $bad = false;
    foreach ($queues as $q => $want) {
        if ($d = compare($q, $got[$q], $want)) { fail($d); $bad = true; }
    }
    if (!$bad) ok('every queue got its messages once and in order (prefetch ' . PREFETCH . ')');

    // basic_get, nack with requeue.
    [$gq] = $ch->queue_declare('', false, false, true, true);
    if (!str_starts_with($gq, 'amq.gen-')) fail("server-named queue $gq");
    $ch->basic_publish(new AMQPMessage('x'), '', $gq);
    $ch->basic_publish(new AMQPMessage('y'), '', $gq);
    $m1 = $ch->basic_get($gq);
    $m1->nack(true);
    $m2 = $ch->basic_get($gq);
    if (!$m1 || !$m2 || $m1->getBody() !== 'x' || $m1->isRedelivered() ||
        $m2->getBody() !== 'x' || !$m2->isRedelivered()) {
        fail('nack requeue: ' . ($m1 ? $m1->getBody() : 'none') . ' then ' . ($m2 ? $m2->getBody() : 'none'));
    } else {
        ok('nack with requeue: the message comes back first with redelivered=true');
    }
    $m2->ack();
    $m3 = $ch->basic_get($gq, true);
    if (!$m3 || $m3->getBody() !== 'y') fail('basic_get: expected y');
    if ($ch->basic_get($gq) !== null) fail('basic_get on an empty queue returned a message');

    // mandatory publish to nowhere is returned.
    $returned = [];
    $ch->set_return_listener(function ($code, $text, $ex, $key, $msg) use (&$returned) {
        $returned[] = [$code, $text, $ex, $key, $msg->getBody()];
    });
    $ch->basic_publish(new AMQPMessage('lost'), $topic, 'nowhere', true);
    $deadline = microtime(true) + 5;
    while (!$returned && microtime(true) < $deadline) {
        try { $ch->wait(null, false, 0.2); } catch (PhpAmqpLib\Exception\AMQPTimeoutException $e) {}
    }
    if ($returned != [[312, 'NO_ROUTE', $topic, 'nowhere', 'lost']]) {
        fail('basic.return: ' . json_encode($returned));
    } else {
        ok('mandatory unroutable publish returned 312 NO_ROUTE');
    }

    foreach (array_keys($queues) as $q) $ch->queue_delete($q);
    $ch->exchange_delete($topic);
    $ch->exchange_delete($fanout);
    $ch->close();
    $conn->close();
} catch (Throwable $e) {
    fail(get_class($e) . ': ' . $e->getMessage());
}

if ($failures) {
    echo 'php-amqplib: ' . count($failures) . " problem(s)\n";
    exit(1);
}
echo "php-amqplib: all checks passed\n";
