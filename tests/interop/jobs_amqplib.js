#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// A job queue whose worker dies, with the Node.js amqplib client (promise
// API), against a broker on 127.0.0.1:PORT.
//
// The producer publishes 2000 transient jobs to a durable queue on a
// ConfirmChannel, each with a callback: every callback must fire with no
// error (basic.ack) and waitForConfirms must resolve; a mandatory publish
// nobody takes emits 'return' (312 NO_ROUTE) before its callback reports
// the ack. A persistent message for a durable queue is acked once it is
// on disk, by RabbitMQ and Roost alike. A worker process (this script with --worker) consumes under
// prefetch 50 with manual acks, acks 100 jobs, holds the next 50 unacked
// and is killed with SIGKILL: the broker requeues those 50. A second
// worker takes the rest: every job is acked exactly once, the dead
// worker's jobs come back first, in order, with redelivered=true, then the
// others in order; the queue ends empty.
//
// The worker reports on its stdout, one line each: "acked K IDS" after
// acking its first K jobs, "holding K IDS" when it holds K unacked and no
// more arrive, "extra K IDS" for any delivery after that; IDS are job ids
// in delivery order, comma-separated, "+" after a redelivered one.
// Usage: node jobs_amqplib.js PORT
'use strict';
const amqp = require('amqplib');
const { spawn } = require('node:child_process');

const N = 2000;          // jobs
const ACK_FIRST = 100;   // the worker that dies acks this many first
const PREFETCH = 50;     // basic.qos prefetch of both workers
const WORKER_LIFETIME = 50000; // a worker that was not killed gives up
const failures = [];
const fail = (m) => { console.log('FAIL: ' + m); failures.push(m); };
const ok = (m) => console.log('ok: ' + m);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const url = (port) => `amqp://guest:guest@127.0.0.1:${port}`;
const jobBody = (i) => Buffer.from(JSON.stringify({ job: i }));
const jobId = (msg) => JSON.parse(msg.content.toString()).job;
const fmtIds = (ds) => ds.map(([j, r]) => `${j}${r ? '+' : ''}`).join(',');
const parseIds = (s) => s.split(',').filter((t) => t)
  .map((t) => [parseInt(t, 10), t.endsWith('+')]);
const range = (a, b) => Array.from({ length: Math.max(0, b - a) }, (_, k) => a + k);

async function waitFor(cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(10);
  return cond();
}

// [3, 4, 5, 9] -> '3..5,9', for failure messages.
function ranges(ids) {
  const out = [];
  let start = null, prev = null;
  for (const i of [...ids, null]) {
    if (start !== null && (i === null || i !== prev + 1)) {
      out.push(start === prev ? `${start}` : `${start}..${prev}`);
      start = null;
    }
    if (i !== null && start === null) start = i;
    prev = i;
  }
  const s = out.join(',');
  return s.length < 300 ? s : s.slice(0, 300) + '...';
}

// --- the worker that dies (the child process) ---------------------------
async function worker(port, queue) {
  const conn = await amqp.connect(url(port));
  const ch = await conn.createChannel();
  await ch.prefetch(PREFETCH);
  const acked = [], held = [];
  let reported = false;
  const say = (kind, ds) => console.log(`${kind} ${ds.length} ${fmtIds(ds)}`);
  await ch.consume(queue, (msg) => {
    if (msg === null) { console.log('cancelled by the broker'); return; }
    const d = [jobId(msg), msg.fields.redelivered];
    if (acked.length < ACK_FIRST) {
      acked.push(d);
      ch.ack(msg);
      if (acked.length === ACK_FIRST) say('acked', acked);
      return;
    }
    held.push(d);
    if (reported) say('extra', [d]);
  }, { noAck: false });
  const start = Date.now();
  // Wait until the broker has filled the prefetch window with jobs we do
  // not ack, then a little longer to see that no more come.
  await waitFor(() => held.length >= PREFETCH, 15000);
  await sleep(300);
  say('holding', held);
  reported = true;
  await sleep(Math.max(0, start + WORKER_LIFETIME - Date.now())); // killed here
  console.log('not killed');
  process.exit(0);
}

// --- the parent -----------------------------------------------------------
async function publishJobs(ch, q) {
  const results = new Array(N).fill(null);
  const t0 = Date.now();
  for (let i = 0; i < N; i++) {
    ch.sendToQueue(q, jobBody(i), { deliveryMode: 1, contentType: 'application/json' },
      (err) => { results[i] = err ? `error: ${err.message}` : 'ack'; });
  }
  let waited = 'resolved';
  await ch.waitForConfirms().catch((e) => { waited = `rejected (${e.message})`; });
  const fired = results.filter((r) => r !== null).length;
  const acks = results.filter((r) => r === 'ack').length;
  const bad = results.map((r, i) => [r, i]).filter(([r]) => r !== 'ack');
  if (fired !== N || acks !== N || waited !== 'resolved') {
    fail(`${N} jobs on a ConfirmChannel: ${fired} callbacks fired, ${acks} acks, ` +
         `waitForConfirms ${waited}; first problems: ` +
         JSON.stringify(bad.slice(0, 5)));
  } else {
    ok(`${N} transient jobs published, every confirm callback fired without error ` +
       `(${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  const r = await ch.checkQueue(q);
  if (r.messageCount !== N) fail(`${q} holds ${r.messageCount} messages after publishing, expected ${N}`);
}

// mandatory, routed nowhere: basic.return, then basic.ack.
async function unroutable(ch, q) {
  const returned = [];
  ch.on('return', (m) => returned.push(m));
  let returnsAtConfirm = null;
  const err = await new Promise((resolve) => {
    ch.publish('', `${q}.nowhere`, Buffer.from('lost'), { mandatory: true }, (e) => {
      returnsAtConfirm = returned.length;
      resolve(e);
    });
  });
  await sleep(100);
  const got = returned.map((m) => [m.fields.replyCode, m.fields.replyText,
    m.fields.routingKey, m.content.toString()]);
  const want = [[312, 'NO_ROUTE', `${q}.nowhere`, 'lost']];
  if (err || JSON.stringify(got) !== JSON.stringify(want) || returnsAtConfirm !== 1) {
    fail(`mandatory unroutable publish: confirm ${err ? err.message : 'ack'}, ` +
         `returns ${JSON.stringify(got)} (${returnsAtConfirm} when the confirm came); ` +
         `expected ${JSON.stringify(want)} and then the ack`);
  } else {
    ok("mandatory unroutable publish: 'return' 312 NO_ROUTE, then the ack");
  }
}

// A persistent message for a durable queue is acked once it is on disk,
// and is in the queue (RabbitMQ and Roost alike).
async function persistent(ch, q, roost) {
  const pq = `${q}.persistent`;
  await ch.assertQueue(pq, { durable: true });
  const err = await new Promise((resolve) => {
    ch.sendToQueue(pq, Buffer.from('persistent'), { deliveryMode: 2 }, resolve);
  });
  const result = err ? 'nacked' : 'acked';
  const n = (await ch.checkQueue(pq)).messageCount;
  const want = ['acked', 1];
  const who = roost ? 'Roost' : 'RabbitMQ';
  if (result !== want[0] || n !== want[1]) {
    fail(`persistent message to a durable queue: ${result}, queue holds ${n}; ` +
         `expected from ${who}: ${want[0]}, ${want[1]}`);
  } else {
    ok(`persistent message to a durable queue ${result} by ${who}` +
       (err ? ` (callback: ${err.message})` : ''));
  }
  await ch.deleteQueue(pq);
}

function startWorker(port, q) {
  const child = spawn(process.execPath, [__filename, String(port), '--worker', q],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const report = { acked: [], held: [], holding: false, extra: [], other: [], exit: null, closed: false };
  let buf = '';
  const onData = (data) => {
    buf += data.toString();
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const line of lines) {
      const m = /^(acked|holding|extra) (\d+) ?(.*)$/.exec(line);
      if (!m) { if (line.trim()) report.other.push(line); continue; }
      const ds = parseIds(m[3]);
      if (m[1] === 'acked') report.acked = ds;
      else if (m[1] === 'holding') { report.held = ds; report.holding = true; }
      else report.extra.push(...ds);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', (d) => report.other.push(...d.toString().split('\n').filter((l) => l)));
  child.on('close', (code, signal) => { report.exit = signal || code; report.closed = true; });
  return { child, report };
}

function checkJobs(report, second) {
  const first = [...report.acked, ...report.held, ...report.extra];
  const held = [...report.held, ...report.extra];
  // The dead worker: jobs in queue order, first deliveries, ACK_FIRST
  // acked, then exactly PREFETCH unacked (basic.qos).
  const ids = first.map(([j]) => j);
  let bad = false;
  if (ids.some((j, k) => j !== k)) {
    fail(`dead worker got jobs ${ranges(ids)}, expected 0..${ids.length - 1} in order`);
    bad = true;
  }
  if (first.some(([, r]) => r)) {
    fail(`dead worker: redelivered=true on first deliveries of ${ranges(first.filter(([, r]) => r).map(([j]) => j))}`);
    bad = true;
  }
  if (report.acked.length !== ACK_FIRST || held.length !== PREFETCH) {
    fail(`dead worker acked ${report.acked.length} and then held ${held.length} ` +
         `unacked with prefetch ${PREFETCH}; expected ${ACK_FIRST} and ${PREFETCH}`);
    bad = true;
  }
  if (!bad) {
    ok(`dead worker acked jobs 0..${ACK_FIRST - 1}, then held ${ACK_FIRST}..` +
       `${ACK_FIRST + PREFETCH - 1} unacked (prefetch ${PREFETCH}) when killed`);
  }

  // Every job acked exactly once over both workers.
  const acked = [...report.acked.map(([j]) => j), ...second.map(([j]) => j)];
  const counts = new Map();
  acked.forEach((j) => counts.set(j, (counts.get(j) || 0) + 1));
  const dups = [...counts].filter(([, n]) => n > 1).map(([j]) => j).sort((a, b) => a - b);
  const missing = range(0, N).filter((j) => !counts.has(j));
  const unexpected = [...counts.keys()].filter((j) => !(j >= 0 && j < N)).sort((a, b) => a - b);
  if (dups.length || missing.length || unexpected.length) {
    fail(`acked jobs: ${acked.length} acks; acked twice: ${ranges(dups) || 'none'}; ` +
         `never acked: ${ranges(missing) || 'none'}; unexpected ids: ${ranges(unexpected) || 'none'}`);
  } else {
    ok(`every job 0..${N - 1} acked exactly once over both workers`);
  }

  // redelivered=false exactly on each job's first delivery.
  const seen = new Set(), again = [], wrong = [];
  for (const [j, r] of [...first, ...second]) {
    if (seen.has(j) && !r) again.push(j);
    if (!seen.has(j) && r) wrong.push(j);
    seen.add(j);
  }
  if (again.length || wrong.length) {
    fail(`delivered again with redelivered=false: ${ranges(again) || 'none'}; ` +
         `redelivered=true on a first delivery: ${ranges(wrong) || 'none'}`);
  } else {
    ok('a job is delivered twice only with redelivered=true the second time');
  }

  // The jobs the dead worker held come back first, in their original
  // order (RabbitMQ requeues them at their old place: the queue's head),
  // then the jobs nobody had, in order.
  const heldIds = held.map(([j]) => j);
  const redelivered = second.filter(([, r]) => r).map(([j]) => j);
  const had = new Set(ids);
  const never = range(0, N).filter((j) => !had.has(j));
  const want = [...heldIds.map((j) => [j, true]), ...never.map((j) => [j, false])];
  if (redelivered.join() !== heldIds.join()) {
    fail(`second worker got ${ranges(redelivered) || 'none'} redelivered; the dead worker held ${ranges(heldIds) || 'none'}`);
  } else if (JSON.stringify(second) !== JSON.stringify(want)) {
    let i = second.findIndex((d, k) => k >= want.length || d[0] !== want[k][0] || d[1] !== want[k][1]);
    if (i < 0) i = second.length;
    fail(`second worker: ${second.length} deliveries, expected ${want.length}; at ${i} got ` +
         `${JSON.stringify(second[i]) || 'nothing'}, expected ${JSON.stringify(want[i]) || 'nothing'} ` +
         `(the held jobs redelivered in order, then ${ranges(never)})`);
  } else {
    ok(`second worker got the dead worker's ${heldIds.length} jobs first, in order, ` +
       `redelivered, then ${never.length ? never[0] : N}..${N - 1} in order`);
  }
}

async function secondWorker(conn, q, firstAcked) {
  const ch = await conn.createChannel();
  ch.on('error', (e) => fail(`second worker's channel: ${e.message}`));
  await ch.prefetch(PREFETCH);
  const got = [];
  const pending = new Set(range(0, N));
  firstAcked.forEach((j) => pending.delete(j));
  const { consumerTag } = await ch.consume(q, (msg) => {
    if (msg === null) { fail('second worker cancelled by the broker'); return; }
    const j = jobId(msg);
    got.push([j, msg.fields.redelivered]);
    pending.delete(j);
    ch.ack(msg);
  }, { noAck: false });
  await waitFor(() => pending.size === 0, 15000);
  await sleep(200); // anything extra shows up here
  await ch.cancel(consumerTag);
  await ch.close();
  return got;
}

async function main() {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port <= 0 ||
      !(process.argv.length === 3 || (process.argv.length === 5 && process.argv[3] === '--worker'))) {
    console.error('usage: node jobs_amqplib.js PORT');
    process.exit(2);
  }
  if (process.argv[3] === '--worker') return worker(port, process.argv[4]);

  const q = `interop.jobs-amqplib.${process.pid}.${Date.now()}.jobs`;
  const conn = await amqp.connect(url(port));
  conn.on('error', (e) => fail(`connection error: ${e.message}`));
  const sp = conn.connection.serverProperties;
  const roost = 'roost_version' in sp;
  ok(`connected to ${sp.product} ${sp.version}${roost ? ` (Roost ${sp.roost_version})` : ''}`);
  const ch = await conn.createConfirmChannel();
  ch.on('error', (e) => fail(`confirm channel error: ${e.message}`));
  let ackFrames = 0, multipleAcks = 0;
  ch.on('ack', (f) => { ackFrames++; if (f.multiple) multipleAcks++; });
  await ch.assertQueue(q, { durable: true });
  await publishJobs(ch, q);
  ok(`the ${N} confirms came in ${ackFrames} basic.ack frames, ${multipleAcks} with multiple=true`);
  await unroutable(ch, q);
  await persistent(ch, q, roost);

  // The worker that dies.
  const { child, report } = startWorker(port, q);
  await waitFor(() => report.holding || report.closed, 20000);
  if (!report.holding) {
    fail(`the worker did not report what it holds unacked (exit ${report.exit}); ` +
         `its output: ${JSON.stringify(report.other.slice(-10))}`);
  }
  child.kill('SIGKILL');
  await waitFor(() => report.closed, 10000);
  if (report.exit !== 'SIGKILL') fail(`worker exit ${report.exit}, expected death by SIGKILL`);
  report.other.forEach((l) => fail(`worker said: ${l}`));
  const held = report.held.length + report.extra.length;
  const want = N - report.acked.length;
  const t0 = Date.now();
  let r;
  for (;;) {
    r = await ch.checkQueue(q);
    if ((r.messageCount === want && r.consumerCount === 0) || Date.now() > t0 + 10000) break;
    await sleep(20);
  }
  if (r.messageCount !== want || r.consumerCount !== 0) {
    fail(`after SIGKILL of a worker holding ${held} unacked: ${r.messageCount} ready, ` +
         `${r.consumerCount} consumers, expected ${want} and 0`);
  } else {
    ok(`after SIGKILL the ${held} unacked jobs are back in the queue ` +
       `(${((Date.now() - t0) / 1000).toFixed(2)} s)`);
  }

  const second = await secondWorker(conn, q, report.acked.map(([j]) => j));
  checkJobs(report, second);
  r = await ch.checkQueue(q);
  if (r.messageCount !== 0 || r.consumerCount !== 0) {
    fail(`at the end ${q} has ${r.messageCount} messages, ${r.consumerCount} consumers, expected none`);
  } else {
    ok('queue empty at the end');
  }
  await ch.deleteQueue(q);
  await ch.close();
  await conn.close();
  if (failures.length) {
    console.log(`jobs-amqplib: ${failures.length} problem(s)`);
    process.exit(1);
  }
  console.log('jobs-amqplib: all checks passed');
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
