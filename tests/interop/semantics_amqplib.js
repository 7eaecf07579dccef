#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// Queue semantics from issue 11 with the Node.js amqplib client (promise
// API), against a broker on 127.0.0.1:PORT (roostd, or the reference
// RabbitMQ: the same expectations, recorded from it).
//
// Priority queues (assertQueue's maxPriority): higher priorities first and
// FIFO within one, above the maximum counting as the maximum; a consumer
// with prefetch 1 gets that order, a higher priority published while it
// holds one next; a nacked message goes back to its place within its
// priority; a durable priority queue with persistent messages on a
// ConfirmChannel, every confirm received.
//
// Delayed messages (x-delayed-message, x-delayed-type direct, x-delay):
// persistent ones in a durable exchange on a ConfirmChannel, confirmed
// while held; routed when due in due order (an x-delay given as a string
// too), none early, x-delay negated; bindings as direct's; no
// basic.return for a held mandatory publish. The reference RabbitMQ has
// no delayed-message plugin: against a broker run.sh did not start (no
// ROOSTD_LOG), that section is skipped, and says so.
//
// Policies, set through the management API (its port from roostd's log,
// or MGMT_PORT, e.g. 15699 for the reference): a max-length policy caps a
// queue declared with no arguments, a queue's own smaller x-max-length
// wins, a message-ttl policy expires messages, and deleting the policy
// lifts the cap.
// Usage: node semantics_amqplib.js PORT
'use strict';
const amqp = require('amqplib');

const failures = [];
const check = (name, cond, why) => {
  if (cond) console.log('ok: ' + name);
  else { console.log(`FAIL: ${name}: ${JSON.stringify(why)}`); failures.push(name); }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const prefix = (t) => `interop.amqplib.${t}.${process.pid}.${Date.now()}`;

// The management API's port: roostd's log says it, MGMT_PORT overrides.
function mgmtPort() {
  if (process.env.MGMT_PORT) return Number(process.env.MGMT_PORT);
  if (!process.env.ROOSTD_LOG) return 0;
  const fs = require('node:fs');
  const m = /management API listening on http:\/\/127\.0\.0\.1:(\d+)\//
    .exec(fs.readFileSync(process.env.ROOSTD_LOG, 'utf8'));
  return m ? Number(m[1]) : 0;
}

// An HTTP request to the management API as guest: its status.
function api(port, method, path, body) {
  const http = require('node:http');
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method, path: `/api/${path}`,
      auth: 'guest:guest', headers: { 'content-type': 'application/json' },
    }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

async function policies(conn) {
  const port = mgmtPort();
  if (!port) {
    console.log('skip: policies: no management port (ROOSTD_LOG or MGMT_PORT)');
    return;
  }
  const ch = await conn.createChannel();
  const base = prefix('pol');
  const name = encodeURIComponent(base);
  const re = `^${base.replace(/\./g, '\\.')}\\.`;
  let st = await api(port, 'PUT', `policies/%2F/${name}`, {
    pattern: re, definition: { 'max-length': 2, 'message-ttl': 60000 },
    'apply-to': 'queues', priority: 1,
  });
  check('policies: PUT a policy', st === 201 || st === 204, st);
  const q = `${base}.q`, own = `${base}.own`, ttlq = `${base}.ttl`;
  await ch.assertQueue(q, { durable: false });
  await ch.assertQueue(own, { durable: false, maxLength: 1 });
  for (let i = 0; i < 4; i++) {
    ch.sendToQueue(q, Buffer.from(`m${i}`));
    ch.sendToQueue(own, Buffer.from(`m${i}`));
  }
  // RabbitMQ counts what its queue has taken in so far.
  await sleep(200);
  const n = (await ch.checkQueue(q)).messageCount;
  const o = (await ch.checkQueue(own)).messageCount;
  check('policies: max-length 2 caps a matching queue, its own x-max-length 1 wins',
    n === 2 && o === 1, { n, o });
  st = await api(port, 'PUT', `policies/%2F/${name}.ttl`, {
    pattern: `^${ttlq.replace(/\./g, '\\.')}$`, definition: { 'message-ttl': 100 },
    'apply-to': 'queues', priority: 2,
  });
  await ch.assertQueue(ttlq, { durable: false });
  ch.sendToQueue(ttlq, Buffer.from('short'));
  await sleep(400);
  const t = (await ch.checkQueue(ttlq)).messageCount;
  check('policies: a message-ttl policy expires messages',
    (st === 201 || st === 204) && t === 0, { st, t });
  await api(port, 'DELETE', `policies/%2F/${name}.ttl`);
  st = await api(port, 'DELETE', `policies/%2F/${name}`);
  for (let i = 0; i < 3; i++) ch.sendToQueue(q, Buffer.from(`k${i}`));
  await sleep(200);
  const after = (await ch.checkQueue(q)).messageCount;
  check('policies: deleted, the cap is lifted', st === 204 && after === 5, { st, after });
  for (const x of [q, own, ttlq]) await ch.deleteQueue(x);
  await ch.close();
}

async function drain(ch, q) {
  const out = [];
  for (;;) {
    const m = await ch.get(q, { noAck: true });
    if (!m) return out;
    out.push(m.content.toString());
  }
}

async function priorities(conn) {
  const ch = await conn.createChannel();
  const q = prefix('prio');
  await ch.assertQueue(q, { durable: false, maxPriority: 3 });
  [0, 3, 1, 7, 2, undefined].forEach((p, i) =>
    ch.sendToQueue(q, Buffer.from(`m${i}`), p === undefined ? {} : { priority: p }));
  await ch.checkQueue(q);
  let got = await drain(ch, q);
  check('priority: higher first, FIFO within, above the maximum as the maximum',
    got.join() === 'm1,m3,m4,m2,m0,m5', got);

  // nack with requeue: back before the later one of its priority
  ['a', 'b'].forEach((b) => ch.sendToQueue(q, Buffer.from(b), { priority: 2 }));
  await ch.checkQueue(q);
  const a = await ch.get(q);
  ch.nack(a, false, true);
  got = await drain(ch, q);
  check('priority: a nacked message goes back to its place', got.join() === 'a,b', got);

  // A consumer with prefetch 1.
  [0, 3, 1].forEach((p, i) => ch.sendToQueue(q, Buffer.from(`c${i}`), { priority: p }));
  await ch.checkQueue(q);
  const cch = await conn.createChannel();
  await cch.prefetch(1);
  const seen = [];
  await cch.consume(q, async (m) => {
    seen.push(m.content.toString());
    if (seen.length === 1) {
      ch.sendToQueue(q, Buffer.from('hi'), { priority: 2 });
      await ch.checkQueue(q);
    }
    cch.ack(m);
  });
  for (let i = 0; i < 500 && seen.length < 4; i++) await sleep(10);
  check('priority: a consumer gets priority order, a higher one published meanwhile next',
    seen.join() === 'c1,hi,c2,c0', seen);
  await cch.close();
  await ch.deleteQueue(q);

  // Durable, persistent, confirmed.
  const cc = await conn.createConfirmChannel();
  const d = prefix('prio-durable');
  await cc.assertQueue(d, { durable: true, maxPriority: 9 });
  const acks = [];
  for (let i = 0; i < 50; i++) {
    acks.push(new Promise((res) => cc.sendToQueue(d, Buffer.from(`p${i}`),
      { priority: i % 10, persistent: true }, (err) => res(err))));
  }
  const errs = (await Promise.all(acks)).filter((e) => e);
  check('priority: 50 persistent messages to a durable priority queue confirmed',
    errs.length === 0, errs);
  got = await drain(cc, d);
  const want = [];
  for (let p = 9; p >= 0; p--) for (let i = p; i < 50; i += 10) want.push(`p${i}`);
  check('priority: ... and taken in priority order', got.join() === want.join(), got);
  await cc.deleteQueue(d);
  await cc.close();
  await ch.close();
}

async function delayed(conn) {
  if (!process.env.ROOSTD_LOG) {
    console.log('skip: delayed messages: the reference RabbitMQ has no delayed-message plugin');
    return;
  }
  const ch = await conn.createConfirmChannel();
  const x = prefix('delayed');
  const q = prefix('delayed-q');
  await ch.assertExchange(x, 'x-delayed-message',
    { durable: true, arguments: { 'x-delayed-type': 'direct' } });
  await ch.assertQueue(q, { durable: true });
  await ch.bindQueue(q, x, 'k');
  let returns = 0;
  ch.on('return', () => { returns++; });
  const t0 = Date.now();
  const pubs = [['d500', 'k', 500], ['d150', 'k', 150], ['other', 'j', 100],
    ['s300', 'k', '300'], ['held-mandatory', 'nowhere', 100]];
  await Promise.all(pubs.map(([body, key, delay]) => new Promise((resolve, reject) =>
    ch.publish(x, key, Buffer.from(body),
      { persistent: true, headers: { 'x-delay': delay }, mandatory: key === 'nowhere' },
      (err) => (err ? reject(err) : resolve())))));
  check('delayed: persistent held messages confirmed', true);
  const got = [];
  await ch.consume(q, (m) => {
    if (!m) return;   // cancelled: the queue is deleted below
    got.push([m.content.toString(), Date.now() - t0, m.properties.headers['x-delay']]);
  }, { noAck: true });
  await sleep(1200);
  check('delayed: routed when due, in due order, as direct, x-delay negated',
    JSON.stringify(got.map(([b, , d]) => [b, d])) ===
      JSON.stringify([['d150', -150], ['s300', -300], ['d500', -500]]), got);
  check('delayed: none early',
    got.every(([b, at]) => at >= Number(b.slice(1))), got);
  check('delayed: no basic.return for a held mandatory publish', returns === 0, returns);
  await ch.deleteQueue(q);
  await ch.deleteExchange(x);
  await ch.close();
}

async function main() {
  const port = Number(process.argv[2]);
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${port}`);
  await priorities(conn);
  await delayed(conn);
  await policies(conn);
  await conn.close();
  console.log(`${failures.length} failed`);
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => { console.log('FAIL: ' + (e.stack || e)); process.exit(1); });
