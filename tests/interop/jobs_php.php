<?php
// SPDX-License-Identifier: Apache-2.0
// php-amqplib (Debian php-amqplib) job queue where a worker dies, against
// 127.0.0.1:PORT. A producer publishes N transient jobs to a durable queue
// with publisher confirms (confirm_select, set_ack_handler/set_nack_handler,
// wait_for_pending_acks: all acked, none nacked, the queue then holds N)
// and one mandatory job to an unroutable key (wait_for_pending_acks_returns:
// basic.return, then its confirm is an ack). A persistent publish to another
// durable queue is acked once it is on disk, by Roost and RabbitMQ alike,
// and enqueued. A worker made with
// pcntl_fork (prefetch 50, manual acks) acks the first M jobs, holds the next
// ones unacked and is SIGKILLed; its unacked jobs are requeued. A second
// worker then acks the rest: every id is acked exactly once, the dead
// worker's unacked jobs come back first, in their order, with
// redelivered=true, then the never-delivered ones in order with
// redelivered=false, and the queue ends empty.
// Usage: php jobs_php.php PORT
require_once '/usr/share/php/PhpAmqpLib/autoload.php';

use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Message\AMQPMessage;
use PhpAmqpLib\Exception\AMQPTimeoutException;

const N = 2000;       // jobs
const M = 100;        // jobs the first worker acks before it stops acking
const PREFETCH = 50;
$failures = [];
function fail($m) { global $failures; echo "FAIL: $m\n"; $failures[] = $m; }
function ok($m) { echo "ok: $m\n"; }
function job_id($body) {
    return preg_match('/\Ajob:(\d+)\z/', $body, $m) ? (int)$m[1] : null;
}
// Shorten a list of ids for a message: "[100,101,...,149] (50)".
function ids(array $list) {
    $list = array_values($list);
    if (!$list) return '[]';
    $s = implode(',', array_slice($list, 0, 8));
    if (count($list) > 8) $s .= ',...,' . end($list);
    return "[$s] (" . count($list) . ')';
}
function connect($port) {
    return new AMQPStreamConnection('127.0.0.1', $port, 'guest', 'guest');
}
// Run $ch's event loop for $seconds, or until $stop() is true.
function pump($ch, $seconds, $stop = null) {
    $deadline = microtime(true) + $seconds;
    while (($stop === null || !$stop()) && microtime(true) < $deadline) {
        try { $ch->wait(null, false, 0.1); } catch (AMQPTimeoutException $e) {}
    }
}

if ($argc != 2 || !ctype_digit($argv[1])) {
    fwrite(STDERR, "usage: php jobs_php.php PORT\n");
    exit(2);
}
if (!function_exists('pcntl_fork')) {
    echo "FAIL: php-cli has no pcntl\n";
    exit(1);
}
$port = (int)$argv[1];
$pfx = 'interop.jobs-php.' . getmypid() . '.' . time();
$qname = "$pfx.jobs";
$pname = "$pfx.persistent";

// --- the first worker: forked now, before the parent connects, so that it
// shares no connection with the parent (whose destructors would otherwise
// run in the child). It waits for "go QUEUE", consumes with prefetch
// PREFETCH and manual acks, acks the first M deliveries, then acks nothing
// more. It reports on the socket: "d ID REDELIVERED" for every delivery,
// "a ID" after every ack, "held K" once it holds K = PREFETCH unacked jobs,
// "error TEXT" if something goes wrong. The parent kills it.
$pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
$worker_pid = pcntl_fork();
if ($worker_pid < 0) {
    echo "FAIL: pcntl_fork failed\n";
    exit(1);
}
if ($worker_pid == 0) {
    fclose($pair[0]);
    $sock = $pair[1];
    $report = function ($line) use ($sock) { fwrite($sock, "$line\n"); };
    try {
        $line = fgets($sock);
        if ($line === false || !str_starts_with($line, 'go ')) exit(0);
        $wq = rtrim(substr($line, 3), "\n");
        $wconn = connect($port);
        $wch = $wconn->channel();
        $wch->basic_qos(0, PREFETCH, false);
        $delivered = 0;
        $unacked = 0;
        $held = false;
        $wch->basic_consume($wq, '', false, false, false, false,
            function (AMQPMessage $m) use (&$delivered, &$unacked, &$held, $report) {
                $delivered++;
                $id = job_id($m->getBody()) ?? json_encode($m->getBody());
                $report("d $id " . ($m->isRedelivered() ? 1 : 0));
                if ($delivered <= M) {
                    $m->ack();
                    $report("a $id");
                } else {
                    $unacked++;
                    if ($unacked >= PREFETCH && !$held) {
                        $held = true;
                        $report("held $unacked");
                    }
                }
            });
        pump($wch, 30); // the parent kills us long before this
        $report('error worker 1 was not killed within 30 s');
    } catch (Throwable $e) {
        $report('error ' . get_class($e) . ': ' . $e->getMessage());
    }
    exit(0);
}
fclose($pair[1]);
$sock = $pair[0];

$conn = null;
try {
    $conn = connect($port);
    $sp = $conn->getServerProperties();
    $roost = isset($sp['roost_version']);
    ok("connected to {$sp['product'][1]} {$sp['version'][1]}" .
       ($roost ? " (Roost {$sp['roost_version'][1]})" : ''));
    $ch = $conn->channel();
    [, $count] = $ch->queue_declare($qname, false, true, false, false);
    if ($count !== 0) fail("queue $qname declared with $count messages");

    // --- 1. the producer: N transient jobs with publisher confirms -------
    $events = []; // confirms and returns, in the order the client saw them
    $ch->set_ack_handler(function (AMQPMessage $m) use (&$events) {
        $events[] = ['ack', $m->getDeliveryTag(), $m->getBody()];
    });
    $ch->set_nack_handler(function (AMQPMessage $m) use (&$events) {
        $events[] = ['nack', $m->getDeliveryTag(), $m->getBody()];
    });
    $ch->set_return_listener(function ($code, $text, $ex, $key, AMQPMessage $m) use (&$events) {
        $events[] = ['return', $code, $text, $ex, $key, $m->getBody()];
    });
    $ch->confirm_select();
    for ($i = 0; $i < N; $i++) {
        $ch->basic_publish(new AMQPMessage("job:$i", [
            'delivery_mode' => AMQPMessage::DELIVERY_MODE_NON_PERSISTENT,
            'message_id' => "job-$i",
        ]), '', $qname);
    }
    $ch->wait_for_pending_acks(15);
    $acked = [];
    $nacked = [];
    $other = [];
    foreach ($events as $e) {
        if ($e[0] === 'ack' && $e[2] === 'job:' . ($e[1] - 1)) $acked[$e[1]] = true;
        elseif ($e[0] === 'nack') $nacked[] = $e[1];
        else $other[] = $e;
    }
    $events = [];
    if (count($acked) === N && !$nacked && !$other) {
        ok(N . ' transient jobs to a durable queue: all confirmed with basic.ack, no nacks');
    } else {
        fail('confirms of ' . N . ' jobs: ' . count($acked) . ' acked, nacked ' . ids($nacked) .
             ', other events ' . json_encode(array_slice($other, 0, 3)));
    }
    [, $count] = $ch->queue_declare($qname, true);
    if ($count === N) {
        ok('after the confirms the queue holds ' . N . ' jobs');
    } else {
        fail("after the confirms the queue holds $count jobs, expected " . N);
    }

    // A mandatory publish to an unroutable key: basic.return, then basic.ack.
    $nowhere = "$pfx.nowhere";
    $ch->basic_publish(new AMQPMessage('lost job'), '', $nowhere, true);
    $ch->wait_for_pending_acks_returns(10);
    $want = [['return', 312, 'NO_ROUTE', '', $nowhere, 'lost job'], ['ack', N + 1, 'lost job']];
    if ($events === $want) {
        ok('mandatory unroutable publish: basic.return 312 NO_ROUTE, then its confirm is an ack');
    } else {
        fail('mandatory unroutable publish in confirm mode: saw ' . json_encode($events) .
             ', expected ' . json_encode($want));
    }

    // --- 2. a persistent publish to a durable queue, on its own channel --
    $pch = $conn->channel();
    $pch->queue_declare($pname, false, true, false, false);
    $p_events = [];
    $pch->set_ack_handler(function (AMQPMessage $m) use (&$p_events) { $p_events[] = ['ack', $m->getDeliveryTag()]; });
    $pch->set_nack_handler(function (AMQPMessage $m) use (&$p_events) { $p_events[] = ['nack', $m->getDeliveryTag()]; });
    $pch->confirm_select();
    $pch->basic_publish(new AMQPMessage('persistent job',
        ['delivery_mode' => AMQPMessage::DELIVERY_MODE_PERSISTENT]), '', $pname);
    $pch->wait_for_pending_acks(10);
    [, $p_count] = $pch->queue_declare($pname, true);
    $who = $roost ? 'Roost' : 'RabbitMQ';
    if ($p_events === [['ack', 1]] && $p_count === 1) {
        ok("$who: persistent publish to a durable queue is acked and enqueued");
    } else {
        fail("$who: persistent publish to a durable queue: confirms " . json_encode($p_events) .
             ", queue holds $p_count; expected an ack and 1");
    }
    $pch->queue_delete($pname);
    $pch->close();

    // --- 3. the first worker: acks M, holds PREFETCH, is killed ----------
    fwrite($sock, "go $qname\n");
    $w1_deliveries = []; // [id, redelivered]
    $w1_acked = [];
    $w1_errors = [];
    $held = null;
    $buf = '';
    // Read reports until $stop() or the deadline; true at EOF.
    $read = function ($seconds, $stop) use ($sock, &$buf, &$w1_deliveries, &$w1_acked, &$w1_errors, &$held) {
        $deadline = microtime(true) + $seconds;
        while (!$stop() && ($left = $deadline - microtime(true)) > 0) {
            $r = [$sock]; $w = null; $x = null;
            if (!stream_select($r, $w, $x, 0, (int)(min($left, 0.1) * 1e6))) continue;
            $data = fread($sock, 65536);
            if ($data === '' || $data === false) return true;
            $buf .= $data;
            while (($i = strpos($buf, "\n")) !== false) {
                $line = substr($buf, 0, $i);
                $buf = substr($buf, $i + 1);
                if (preg_match('/\Ad (\d+) ([01])\z/', $line, $m)) $w1_deliveries[] = [(int)$m[1], $m[2] === '1'];
                elseif (preg_match('/\Aa (\d+)\z/', $line, $m)) $w1_acked[] = (int)$m[1];
                elseif (preg_match('/\Aheld (\d+)\z/', $line, $m)) $held = (int)$m[1];
                else $w1_errors[] = $line;
            }
        }
        return false;
    };
    $eof = $read(15, function () use (&$held, &$w1_errors) { return $held !== null || $w1_errors; });
    if ($held === null) {
        throw new RuntimeException('worker 1 never reported holding ' . PREFETCH . ' unacked jobs (' .
            count($w1_deliveries) . ' deliveries, ' . count($w1_acked) . ' acks, ' .
            json_encode(array_slice($w1_errors, 0, 3)) . ($eof ? ', exited' : '') . ')');
    }
    // It keeps receiving for a moment (nothing more may come: prefetch).
    $read(0.3, fn() => false);
    posix_kill($worker_pid, SIGKILL);
    pcntl_waitpid($worker_pid, $status);
    $worker_pid = 0;
    $read(5, fn() => false); // the rest of the socket, to EOF
    if (!pcntl_wifsignaled($status) || pcntl_wtermsig($status) !== SIGKILL) {
        fail("worker 1 was not killed by SIGKILL: status $status");
    }
    foreach ($w1_errors as $e) fail("worker 1: $e");
    $w1_ids = array_column($w1_deliveries, 0);
    $w1_held = array_values(array_diff($w1_ids, $w1_acked));
    $w1_redelivered = array_column(array_filter($w1_deliveries, fn($d) => $d[1]), 0);
    if ($w1_ids !== range(0, count($w1_ids) - 1) || $w1_redelivered) {
        fail('worker 1 deliveries: ' . ids($w1_ids) . ', redelivered ' . ids($w1_redelivered) .
             '; expected 0, 1, 2, ... in order, none redelivered');
    }
    if ($w1_acked !== range(0, M - 1) || count($w1_held) !== PREFETCH) {
        fail('worker 1 acked ' . ids($w1_acked) . ' and held ' . ids($w1_held) . ' unacked; expected the first ' .
             M . ' acked and ' . PREFETCH . ' (the prefetch) held');
    } else {
        ok('worker 1 (prefetch ' . PREFETCH . ') got jobs ' . ids($w1_ids) . ' in order, acked ' . M .
           ', held ' . count($w1_held) . ' unacked, killed with SIGKILL');
    }

    // The broker notices the dead connection and requeues what it held.
    $want_ready = N - count(array_unique($w1_acked));
    $deadline = microtime(true) + 10;
    do {
        [, $ready, $consumers] = $ch->queue_declare($qname, true);
        if ($ready === $want_ready && $consumers === 0) break;
        usleep(10000);
    } while (microtime(true) < $deadline);
    if ($ready === $want_ready && $consumers === 0) {
        ok("after the kill: $want_ready jobs ready, 0 consumers (the " . count($w1_held) .
           ' unacked were requeued)');
    } else {
        fail("10 s after the kill: $ready jobs ready and $consumers consumers, expected $want_ready and 0");
    }

    // --- 4. the second worker consumes everything left -------------------
    $conn2 = connect($port);
    $ch2 = $conn2->channel();
    $ch2->basic_qos(0, PREFETCH, false);
    $w2 = []; // [id, redelivered] in delivery order
    $left = array_fill_keys(array_diff(range(0, N - 1), $w1_acked), true);
    $tag = $ch2->basic_consume($qname, '', false, false, false, false,
        function (AMQPMessage $m) use (&$w2, &$left) {
            $id = job_id($m->getBody());
            $w2[] = [$id ?? $m->getBody(), $m->isRedelivered()];
            $m->ack();
            unset($left[$id]);
        });
    pump($ch2, 20, function () use (&$left) { return !$left; });
    pump($ch2, 0.2); // anything extra would show up now
    $ch2->basic_cancel($tag);
    $w2_ids = array_column($w2, 0);

    $union = array_unique(array_merge($w1_acked, $w2_ids));
    sort($union);
    if ($union === range(0, N - 1) && count($w1_acked) + count($w2_ids) === N) {
        ok('every job id 0..' . (N - 1) . ' acked exactly once over both workers');
    } else {
        fail('acked ids over both workers: ' . count($union) . ' distinct of ' . N . ', missing ' .
             ids(array_diff(range(0, N - 1), $union)) . ', ' . count($w1_acked) . '+' . count($w2_ids) .
             ' acks, unexpected ' . ids(array_diff($union, range(0, N - 1))));
    }
    // Delivered more than once: only with redelivered=true on the later delivery.
    $seen = array_fill_keys($w1_ids, true);
    $bad_dups = [];
    foreach ($w2 as [$id, $red]) {
        if (isset($seen[$id]) && !$red) $bad_dups[] = $id;
        $seen[$id] = true;
    }
    if ($bad_dups) fail('delivered again without redelivered=true: ' . ids($bad_dups));
    $redelivered = array_column(array_filter($w2, fn($d) => $d[1]), 0);
    $fresh = array_values(array_column(array_filter($w2, fn($d) => !$d[1]), 0));
    $never = array_values(array_diff(range(0, N - 1), $w1_ids));
    $sorted_red = $redelivered; sort($sorted_red);
    $sorted_held = $w1_held; sort($sorted_held);
    $want_order = array_merge($w1_held, $never);
    if ($sorted_red !== $sorted_held) {
        fail('redelivered to worker 2: ' . ids($redelivered) . '; the dead worker held ' . ids($w1_held));
    } elseif ($w2_ids !== $want_order) {
        $k = 0;
        while ($k < count($w2_ids) && $w2_ids[$k] === ($want_order[$k] ?? null)) $k++;
        fail("worker 2 order: at $k got " . json_encode($w2[$k] ?? null) . ', expected ' .
             json_encode($want_order[$k] ?? null) . '; want the ' . count($w1_held) .
             ' requeued (in order) then ' . count($never) . ' never delivered (in order)');
    } elseif ($fresh !== $never) {
        fail('worker 2: never-delivered jobs ' . ids($fresh) . ', expected ' . ids($never));
    } else {
        ok('worker 2 got the ' . count($w1_held) . ' requeued jobs first, in order, redelivered=true, then the ' .
           count($never) . ' never-delivered in order, redelivered=false');
    }

    [, $count, $consumers] = $ch->queue_declare($qname, true);
    if ($count === 0 && $consumers === 0) {
        ok('the job queue is empty at the end (passive declare: 0 messages, 0 consumers)');
    } else {
        fail("at the end the job queue has $count messages, $consumers consumers");
    }

    $ch2->close();
    $conn2->close();
    $ch->queue_delete($qname);
    $ch->close();
    $conn->close();
} catch (Throwable $e) {
    fail(get_class($e) . ': ' . $e->getMessage());
} finally {
    if ($worker_pid > 0) {
        posix_kill($worker_pid, SIGKILL);
        pcntl_waitpid($worker_pid, $status);
    }
    // After a failure: delete what we created (the success path did already).
    if ($conn && $conn->isConnected()) {
        try {
            $c = $conn->channel();
            $c->queue_delete($qname);
            $c->queue_delete($pname);
            $conn->close();
        } catch (Throwable $e) {}
    }
}

if ($failures) {
    echo 'jobs-php: ' . count($failures) . " problem(s)\n";
    exit(1);
}
echo "jobs-php: all checks passed\n";
