#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// The Node.js amqplib client (promise API) against a broker on
// 127.0.0.1:PORT: assertExchange of each type, assertQueue, bindQueue,
// publish, consume with prefetch and ack (in batches, allUpTo), checking
// that every queue gets its messages exactly once and in order; then get,
// nack with requeue (redelivered), a mandatory publish that is returned,
// checkQueue on a missing queue failing with 404 on its channel only,
// requeueing of unacked messages when a channel closes, and basic.cancel
// to the consumers of a deleted queue.
// Usage: node amqplib_test.js PORT
'use strict';
const amqp = require('amqplib');

const N = 100;
const PREFETCH = 10;
const failures = [];
const fail = (m) => { console.log('FAIL: ' + m); failures.push(m); };
const ok = (m) => console.log('ok: ' + m);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(10);
  return cond();
}

function compare(queue, got, want) {
  if (got.length === want.length && got.every((b, i) => b === want[i])) return null;
  const counts = new Map();
  got.forEach((b) => counts.set(b, (counts.get(b) || 0) + 1));
  const dups = [...counts].filter(([, c]) => c > 1).map(([b]) => b);
  const missing = want.filter((b) => !counts.has(b));
  const extra = got.filter((b) => !want.includes(b));
  let msg = `queue ${queue}: got ${got.length} messages, expected ${want.length}`;
  if (dups.length) msg += `; duplicated: ${dups.slice(0, 5)}`;
  if (missing.length) msg += `; missing: ${missing.slice(0, 5)}`;
  if (extra.length) msg += `; unexpected: ${extra.slice(0, 5)}`;
  if (!dups.length && !missing.length && !extra.length) {
    const i = got.findIndex((b, j) => b !== want[j]);
    msg += `; out of order at ${i}: got ${got[i]}, expected ${want[i]}`;
  }
  return msg;
}

function plan(pfx) {
  const ex = {};
  for (const t of ['direct', 'fanout', 'topic', 'headers']) ex[t] = `${pfx}.${t}`;
  const q = (s) => `${pfx}.q.${s}`;
  const bindings = [
    [q('d1'), ex.direct, 'red', {}],
    [q('d2'), ex.direct, 'red', {}],
    [q('d2'), ex.direct, 'green', {}],
    [q('f1'), ex.fanout, '', {}],
    [q('f2'), ex.fanout, 'ignored', {}],
    [q('t1'), ex.topic, 'a.*.c', {}],
    [q('t2'), ex.topic, 'a.#', {}],
    [q('t2'), ex.topic, '#.c', {}],
    [q('h1'), ex.headers, '', { 'x-match': 'all', h1: 'v1', h2: 'v2' }],
    [q('h2'), ex.headers, '', { 'x-match': 'any', h1: 'v1', h3: 'v3' }],
  ];
  const queues = [...new Set(bindings.map((b) => b[0]))];
  const expected = Object.fromEntries(queues.map((n) => [n, []]));
  const messages = [];
  const dk = ['red', 'green', 'blue'];
  const tk = ['a.b.c', 'a.x.y', 'b.b.c', 'z'];
  const hs = [{ h1: 'v1', h2: 'v2' }, { h1: 'v1' }, { h3: 'v3', h2: 'v2' }, { h2: 'v2' }];
  for (let i = 0; i < N; i++) {
    const k = dk[i % 3], body = `direct:${i}:${k}`;
    messages.push([ex.direct, k, undefined, body]);
    if (k === 'red') expected[q('d1')].push(body);
    if (k !== 'blue') expected[q('d2')].push(body);
  }
  for (let i = 0; i < N; i++) {
    const body = `fanout:${i}`;
    messages.push([ex.fanout, `k${i}`, undefined, body]);
    expected[q('f1')].push(body);
    expected[q('f2')].push(body);
  }
  for (let i = 0; i < N; i++) {
    const k = tk[i % 4], body = `topic:${i}:${k}`;
    messages.push([ex.topic, k, undefined, body]);
    if (k === 'a.b.c') expected[q('t1')].push(body);
    if (k !== 'z') expected[q('t2')].push(body);
  }
  for (let i = 0; i < N; i++) {
    const h = hs[i % 4], body = `headers:${i}:${Object.keys(h).sort()}`;
    messages.push([ex.headers, '', h, body]);
    if (i % 4 === 0) expected[q('h1')].push(body);
    if (i % 4 !== 3) expected[q('h2')].push(body);
  }
  return { ex, queues, bindings, messages, expected };
}

// Close the connection right after acking 500 deliveries one by one and
// publishing 4 MiB more, as an application does when its work is done.
// amqplib interleaves the frames of its channels, so connection.close goes
// out before most of the acks and publishes: the broker must go on reading
// (and discarding) until the client closes the socket, as RabbitMQ does
// after close-ok; if it closes first, the client's next write fails with
// EPIPE or ECONNRESET, an 'error' event that kills an application that has
// no handler for it, and close() never settles.
async function closeWithAcksInFlight(port) {
  const M = 500;
  const c = await amqp.connect(`amqp://guest:guest@127.0.0.1:${port}`);
  const errors = [];
  c.on('error', (e) => errors.push(e.message));
  const ch = await c.createChannel();
  const q = (await ch.assertQueue('', { exclusive: true })).queue;
  for (let i = 0; i < M; i++) ch.sendToQueue(q, Buffer.from(`c:${i}`));
  const held = [];
  await new Promise((resolve) => ch.consume(q, (m) => {
    held.push(m);
    if (held.length === M) resolve();
  }));
  // Ack them one by one, publish 4 MiB more and close at once: amqplib
  // queues it all and writes the close between the other frames.
  for (const m of held) ch.ack(m);
  const big = Buffer.alloc(1 << 20, 'b');
  for (let i = 0; i < 4; i++) ch.sendToQueue(q, big);
  const closed = await Promise.race([
    c.close().then(() => 'resolved', (e) => `rejected (${e.message})`),
    sleep(3000).then(() => 'still pending after 3 s'),
  ]);
  await sleep(200);
  if (errors.length || closed !== 'resolved') {
    fail(`closing the connection right after acks: 'error' events ${JSON.stringify(errors)}, close() ${closed}; against RabbitMQ: no error, close() resolved`);
  } else {
    ok(`connection closed cleanly right after acking ${M} deliveries and publishing 4 MiB`);
  }
}

// Consumer priorities: the higher one gets everything while it has
// room; single active consumer: one gets everything, the next takes over
// when it cancels.
async function priorities(conn, pfx) {
  const ch = await conn.createChannel();
  const q = `${pfx}.prio`;
  await ch.assertQueue(q, { durable: false, autoDelete: true });
  const got = { hi: 0, lo: 0 };
  await ch.consume(q, () => { got.lo++; }, { noAck: true });
  await ch.consume(q, () => { got.hi++; }, { noAck: true, priority: 10 });
  for (let i = 0; i < 20; i++) ch.sendToQueue(q, Buffer.from(`p${i}`));
  await waitFor(() => got.hi + got.lo === 20, 5000);
  if (got.hi !== 20 || got.lo !== 0) fail(`priority 10 got ${got.hi}, priority 0 got ${got.lo}`);
  else ok('the consumer with x-priority 10 gets every message');

  const sq = `${pfx}.sac`;
  await ch.assertQueue(sq, { durable: false, autoDelete: true,
                             arguments: { 'x-single-active-consumer': true } });
  const seen = { a: [], b: [] };
  const a = await ch.consume(sq, (m) => seen.a.push(m.content.toString()), { noAck: true });
  await ch.consume(sq, (m) => seen.b.push(m.content.toString()), { noAck: true });
  for (let i = 0; i < 5; i++) ch.sendToQueue(sq, Buffer.from(`s${i}`));
  await waitFor(() => seen.a.length === 5, 5000);
  await ch.cancel(a.consumerTag);
  for (let i = 5; i < 8; i++) ch.sendToQueue(sq, Buffer.from(`s${i}`));
  await waitFor(() => seen.b.length === 3, 5000);
  if (seen.a.join() !== 's0,s1,s2,s3,s4' || seen.b.join() !== 's5,s6,s7')
    fail(`single active consumer: a ${seen.a}, b ${seen.b}`);
  else ok('single active consumer: the first gets all, the next takes over');
  await ch.close();
}

// CC and BCC headers route to more queues; BCC never reaches one.
async function ccBcc(conn, pfx) {
  const ch = await conn.createConfirmChannel();
  const [a, b, d] = ['a', 'b', 'd'].map((x) => `${pfx}.cc-${x}`);
  for (const q of [a, b, d]) await ch.assertQueue(q, { durable: false, autoDelete: true });
  ch.sendToQueue(a, Buffer.from('sel'), { headers: { CC: [b], BCC: [d], traceparent: '00-abc-01' } });
  await ch.waitForConfirms();
  const got = [];
  for (const q of [a, b, d]) {
    const m = await ch.get(q, { noAck: true });
    got.push(m ? `${m.content}:${JSON.stringify(m.properties.headers)}` : 'none');
  }
  const want = `sel:${JSON.stringify({ CC: [b], traceparent: '00-abc-01' })}`;
  if (got.some((g) => g !== want)) fail(`CC/BCC: ${got}`);
  else ok('CC and BCC route to their queues; BCC is removed, the rest kept');
  for (const q of [a, b, d]) await ch.deleteQueue(q);
  await ch.close();
}

// RPC over amq.rabbitmq.reply-to: the reply reaches the requester's
// no-ack consumer with the request's correlation id.
async function directReplyTo(conn, pfx) {
  const ch = await conn.createChannel();
  const srv = `${pfx}.rpc`;
  await ch.assertQueue(srv, { durable: false, autoDelete: true });
  const replies = [];
  await ch.consume('amq.rabbitmq.reply-to',
                   (m) => replies.push(`${m.properties.correlationId}:${m.content}`),
                   { noAck: true });
  ch.sendToQueue(srv, Buffer.from('2+2'), { replyTo: 'amq.rabbitmq.reply-to', correlationId: 'r1' });
  const sch = await conn.createChannel();
  let req = false;
  for (let i = 0; i < 100 && !req; i++) {
    req = await sch.get(srv, { noAck: true });
    if (!req) await sleep(20);
  }
  if (!req || !req.properties.replyTo.startsWith('amq.rabbitmq.reply-to.')) {
    fail(`direct reply-to: request ${req && req.properties.replyTo}`);
    return;
  }
  sch.sendToQueue(req.properties.replyTo, Buffer.from('4'), { correlationId: req.properties.correlationId });
  await waitFor(() => replies.length > 0, 5000);
  if (replies.join() !== 'r1:4') fail(`direct reply-to: replies ${replies}`);
  else ok("direct reply-to: the reply reaches the requester's consumer");
  await sch.close();
  await ch.close();
}

async function main() {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port <= 0) {
    console.error('usage: node amqplib_test.js PORT');
    process.exit(2);
  }
  const pfx = `interop.amqplib.${process.pid}.${Date.now()}`;
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${port}`);
  const sp = conn.connection.serverProperties;
  ok(`connected to ${sp.product} ${sp.version}`);
  conn.on('error', (e) => fail(`connection error: ${e.message}`));
  const ch = await conn.createChannel();
  let chClosedUnexpectedly = null;
  ch.on('error', (e) => { chClosedUnexpectedly = e.message; fail(`channel error: ${e.message}`); });

  const { ex, queues, bindings, messages, expected } = plan(pfx);
  for (const t of Object.keys(ex)) {
    const r = await ch.assertExchange(ex[t], t, { durable: false, autoDelete: false });
    if (r.exchange !== ex[t]) fail(`assertExchange returned ${JSON.stringify(r)}`);
    await ch.checkExchange(ex[t]);
  }
  for (const name of queues) {
    const r = await ch.assertQueue(name, { durable: false, autoDelete: false });
    if (r.queue !== name || r.messageCount !== 0 || r.consumerCount !== 0) {
      fail(`assertQueue ${name}: ${JSON.stringify(r)}`);
    }
  }
  for (const [q, e, k, a] of bindings) await ch.bindQueue(q, e, k, a);
  ok(`declared 4 exchanges, ${queues.length} queues, ${bindings.length} bindings`);

  for (const [e, k, h, body] of messages) {
    ch.publish(e, k, Buffer.from(body), { headers: h, contentType: 'text/plain' });
  }
  ok(`published ${messages.length} messages`);
  for (const name of queues) {
    const r = await ch.checkQueue(name);
    if (r.messageCount !== expected[name].length) {
      fail(`${name}: messageCount ${r.messageCount}, expected ${expected[name].length}`);
    }
  }

  // Consume every queue at once, prefetch per consumer; ack in batches.
  await ch.prefetch(PREFETCH);
  const got = {}, pending = {}, tags = {};
  const problems = [];
  for (const name of queues) {
    got[name] = [];
    pending[name] = [];
    const r = await ch.consume(name, (msg) => {
      if (msg === null) { problems.push(`${name}: consumer cancelled by the broker`); return; }
      got[name].push(msg.content.toString());
      pending[name].push(msg);
      if (msg.fields.redelivered) problems.push(`${name}: redelivered on first delivery`);
      if (pending[name].length > PREFETCH) {
        problems.push(`${name}: ${pending[name].length} unacked with prefetch ${PREFETCH}`);
      }
      if (pending[name].length >= PREFETCH || got[name].length >= expected[name].length) {
        ch.ack(msg, true);
        pending[name] = [];
      }
    }, { noAck: false });
    if (!r.consumerTag.startsWith('amq.ctag-')) fail(`consumer tag ${r.consumerTag}`);
    tags[name] = r.consumerTag;
  }
  await waitFor(() => queues.every((n) => got[n].length >= expected[n].length));
  await sleep(200);
  for (const name of queues) await ch.cancel(tags[name]);
  problems.slice(0, 5).forEach(fail);
  let bad = false;
  for (const name of queues) {
    const d = compare(name, got[name], expected[name]);
    if (d) { fail(d); bad = true; }
  }
  if (!bad) ok(`every queue got its messages once and in order (${queues.length} consumers, prefetch ${PREFETCH})`);
  for (const name of queues) {
    const r = await ch.checkQueue(name);
    if (r.messageCount !== 0 || r.consumerCount !== 0) {
      fail(`${name} after consuming: ${JSON.stringify(r)}`);
    }
  }

  // get, get-empty, nack with requeue.
  const gq = (await ch.assertQueue('', { exclusive: true })).queue;
  if (!gq.startsWith('amq.gen-')) fail(`server-named queue ${gq}`);
  ch.sendToQueue(gq, Buffer.from('x'));
  ch.sendToQueue(gq, Buffer.from('y'));
  const m1 = await ch.get(gq);
  if (!m1 || m1.content.toString() !== 'x' || m1.fields.messageCount !== 1 || m1.fields.redelivered) {
    fail(`get: ${m1 && JSON.stringify(m1.fields)} ${m1 && m1.content}`);
  }
  ch.nack(m1, false, true);
  const m2 = await ch.get(gq);
  if (!m2 || m2.content.toString() !== 'x' || !m2.fields.redelivered) {
    fail(`get after nack requeue: ${m2 && JSON.stringify(m2.fields)} ${m2 && m2.content}`);
  } else {
    ok('nack with requeue: the message comes back first with redelivered=true');
  }
  ch.ack(m2);
  const m3 = await ch.get(gq, { noAck: true });
  if (!m3 || m3.content.toString() !== 'y') fail(`get: expected y, got ${m3 && m3.content}`);
  if ((await ch.get(gq)) !== false) fail('get on an empty queue did not return false');

  // mandatory publish to nowhere is returned.
  const returned = [];
  ch.on('return', (msg) => returned.push(msg));
  ch.publish(ex.direct, 'nowhere', Buffer.from('lost'), { mandatory: true });
  await waitFor(() => returned.length > 0, 5000);
  await sleep(100);
  if (returned.length !== 1) {
    fail(`mandatory unroutable publish: ${returned.length} returns`);
  } else {
    const f = returned[0].fields;
    if (f.replyCode !== 312 || f.replyText !== 'NO_ROUTE' || f.routingKey !== 'nowhere' ||
        returned[0].content.toString() !== 'lost') {
      fail(`basic.return: ${JSON.stringify(f)} ${returned[0].content}`);
    } else {
      ok('mandatory unroutable publish returned 312 NO_ROUTE');
    }
  }

  // A channel error (404 on a missing queue) closes that channel only.
  const ch2 = await conn.createChannel();
  let ch2err = null;
  ch2.on('error', (e) => { ch2err = e; });
  try {
    await ch2.checkQueue(`${pfx}.missing`);
    fail('checkQueue of a missing queue succeeded');
  } catch (e) {
    const want = `NOT_FOUND - no queue '${pfx}.missing' in vhost '/'`;
    if (e.code !== 404 || !e.message.includes(want)) {
      fail(`checkQueue missing: code ${e.code} message ${e.message}`);
    } else {
      ok('checkQueue on a missing queue: 404 NOT_FOUND, RabbitMQ\'s text');
    }
  }
  await waitFor(() => ch2err !== null, 2000);

  // Unacked deliveries go back, in order and redelivered, when their
  // channel closes.
  const rq = `${pfx}.requeue`;
  await ch.assertQueue(rq, { durable: false });
  for (let i = 0; i < 10; i++) ch.sendToQueue(rq, Buffer.from(`r:${i}`));
  const ch3 = await conn.createChannel();
  await ch3.prefetch(4);
  const held = [];
  await ch3.consume(rq, (m) => held.push(m), { noAck: false });
  await waitFor(() => held.length >= 4);
  await sleep(100);
  if (held.length !== 4) fail(`prefetch 4 without acks: ${held.length} deliveries`);
  await ch3.close();
  const back = [];
  for (let m; (m = await ch.get(rq, { noAck: true })) !== false;) {
    back.push(`${m.content}${m.fields.redelivered ? '+' : ''}`);
  }
  const wantBack = [...Array(10).keys()].map((i) => `r:${i}${i < 4 ? '+' : ''}`);
  if (back.join() !== wantBack.join()) {
    fail(`after closing a channel with 4 unacked: ${back} (+ = redelivered), expected ${wantBack}`);
  } else {
    ok('unacked deliveries requeued in order, redelivered, on channel close');
  }
  await ch.deleteQueue(rq);

  // Deleting a queue cancels its consumers: amqplib calls back with null.
  const cq = `${pfx}.cancel`;
  await ch.assertQueue(cq, { durable: false });
  const ch4 = await conn.createChannel();
  let cancelled = 0;
  await ch4.consume(cq, (m) => { if (m === null) cancelled++; });
  await ch.deleteQueue(cq);
  await waitFor(() => cancelled > 0, 5000);
  if (cancelled !== 1) fail(`consumer got ${cancelled} cancel notifications, expected 1`);
  else ok('deleting the queue cancels its consumer (basic.cancel)');
  await ch4.close();

  await closeWithAcksInFlight(port);
  await priorities(conn, pfx);
  await ccBcc(conn, pfx);
  await directReplyTo(conn, pfx);

  for (const name of queues) await ch.deleteQueue(name);
  for (const t of Object.keys(ex)) await ch.deleteExchange(ex[t]);
  await ch.close();
  await conn.close();
  if (failures.length) {
    console.log(`amqplib: ${failures.length} problem(s)`);
    process.exit(1);
  }
  console.log('amqplib: all checks passed');
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
