#!/usr/bin/ruby
# SPDX-License-Identifier: Apache-2.0
# Bunny (Ruby) against a broker on 127.0.0.1:PORT: one exchange of each
# type, queues and bindings, publish to each, subscribe with manual acks
# under prefetch (acking in batches, multiple=true), and check that every
# queue gets exactly its messages once and in order; then pop, nack with
# requeue (redelivered), and a mandatory publish that is returned.
# Usage: ruby bunny_test.rb PORT
require 'bunny'

N = 100
PREFETCH = 10
$failures = []
def fail(msg) puts "FAIL: #{msg}"; $stdout.flush; $failures << msg end
def ok(msg) puts "ok: #{msg}"; $stdout.flush end

def wait_for(timeout = 10)
  deadline = Time.now + timeout
  sleep 0.01 until yield || Time.now > deadline
  yield
end

def compare(queue, got, want)
  return nil if got == want
  dups = got.group_by { |b| b }.select { |_, v| v.size > 1 }.keys
  missing = want - got
  extra = got - want
  msg = "queue #{queue}: got #{got.size} messages, expected #{want.size}"
  msg += "; duplicated: #{dups.first(5)}" unless dups.empty?
  msg += "; missing: #{missing.first(5)}" unless missing.empty?
  msg += "; unexpected: #{extra.first(5)}" unless extra.empty?
  if dups.empty? && missing.empty? && extra.empty?
    i = got.each_index.find { |j| got[j] != want[j] }
    msg += "; out of order at #{i}: got #{got[i]}, expected #{want[i]}"
  end
  msg
end

port = Integer(ARGV[0] || '', exception: false)
abort 'usage: bunny_test.rb PORT' unless port && ARGV.size == 1
pfx = "interop.bunny.#{Process.pid}.#{Time.now.to_i}"

begin
  conn = Bunny.new(host: '127.0.0.1', port: port, user: 'guest', password: 'guest',
                   automatically_recover: false, connection_timeout: 10,
                   logger: Logger.new(nil))
  conn.start
  sp = conn.server_properties
  ok "connected to #{sp['product']} #{sp['version']}"
  ch = conn.create_channel

  ex = {
    direct: ch.direct("#{pfx}.direct", durable: false, auto_delete: false),
    fanout: ch.fanout("#{pfx}.fanout", durable: false, auto_delete: false),
    topic: ch.topic("#{pfx}.topic", durable: false, auto_delete: false),
    headers: ch.headers("#{pfx}.headers", durable: false, auto_delete: false),
  }
  qn = ->(s) { "#{pfx}.q.#{s}" }
  bindings = [
    ['d1', :direct, 'red', {}], ['d2', :direct, 'red', {}], ['d2', :direct, 'green', {}],
    ['f1', :fanout, '', {}], ['f2', :fanout, 'ignored', {}],
    ['t1', :topic, 'a.*.c', {}], ['t2', :topic, 'a.#', {}], ['t2', :topic, '#.c', {}],
    ['h1', :headers, '', { 'x-match' => 'all', 'h1' => 'v1', 'h2' => 'v2' }],
    ['h2', :headers, '', { 'x-match' => 'any', 'h1' => 'v1', 'h3' => 'v3' }],
  ]
  names = bindings.map(&:first).uniq
  queues = {}
  names.each do |n|
    q = ch.queue(qn.(n), durable: false, auto_delete: false, exclusive: false)
    fail "queue #{n} declared with #{q.message_count} messages" unless q.message_count == 0
    queues[n] = q
  end
  bindings.each { |n, t, k, a| queues[n].bind(ex[t], routing_key: k, arguments: a) }
  ok "declared 4 exchanges, #{names.size} queues, #{bindings.size} bindings"

  want = Hash[names.map { |n| [n, []] }]
  N.times do |i|
    k = %w[red green blue][i % 3]
    body = "direct:#{i}:#{k}"
    ex[:direct].publish(body, routing_key: k)
    want['d1'] << body if k == 'red'
    want['d2'] << body if k != 'blue'
  end
  N.times do |i|
    body = "fanout:#{i}"
    ex[:fanout].publish(body, routing_key: "k#{i}")
    want['f1'] << body
    want['f2'] << body
  end
  N.times do |i|
    k = %w[a.b.c a.x.y b.b.c z][i % 4]
    body = "topic:#{i}:#{k}"
    ex[:topic].publish(body, routing_key: k)
    want['t1'] << body if k == 'a.b.c'
    want['t2'] << body if k != 'z'
  end
  hsets = [{ 'h1' => 'v1', 'h2' => 'v2' }, { 'h1' => 'v1' }, { 'h3' => 'v3', 'h2' => 'v2' },
           { 'h2' => 'v2' }]
  N.times do |i|
    h = hsets[i % 4]
    body = "headers:#{i}:#{h.keys.sort.join(',')}"
    ex[:headers].publish(body, headers: h)
    want['h1'] << body if i % 4 == 0
    want['h2'] << body if i % 4 != 3
  end
  ok "published #{4 * N} messages"
  names.each do |n|
    c = queues[n].message_count
    fail "#{n}: message_count #{c}, expected #{want[n].size}" unless c == want[n].size
  end

  ch.prefetch(PREFETCH)
  got = Hash[names.map { |n| [n, []] }]
  pending = Hash[names.map { |n| [n, 0] }]
  problems = Queue.new
  consumers = names.map do |n|
    queues[n].subscribe(manual_ack: true, block: false) do |di, _props, body|
      got[n] << body
      pending[n] += 1
      problems << "#{n}: redelivered on first delivery" if di.redelivered?
      if pending[n] > PREFETCH
        problems << "#{n}: #{pending[n]} unacked with prefetch #{PREFETCH}"
      end
      if pending[n] >= PREFETCH || got[n].size >= want[n].size
        ch.ack(di.delivery_tag, true)
        pending[n] = 0
      end
    end
  end
  wait_for { names.all? { |n| got[n].size >= want[n].size } }
  sleep 0.2
  consumers.each(&:cancel)
  fail(problems.pop) until problems.empty?
  bad = false
  names.each do |n|
    d = compare(n, got[n], want[n])
    if d
      fail d
      bad = true
    end
  end
  ok "every queue got its messages once and in order (#{names.size} consumers, prefetch #{PREFETCH})" unless bad
  names.each do |n|
    q = queues[n]
    fail "#{n} after consuming: #{q.message_count} messages, #{q.consumer_count} consumers" \
      unless q.message_count == 0 && q.consumer_count == 0
  end

  # pop, nack with requeue, reject without.
  gq = ch.queue('', exclusive: true)
  fail "server-named queue #{gq.name}" unless gq.name.start_with?('amq.gen-')
  %w[x y].each { |b| ch.default_exchange.publish(b, routing_key: gq.name) }
  d1, _, b1 = gq.pop(manual_ack: true)
  ch.nack(d1.delivery_tag, false, true)
  d2, _, b2 = gq.pop(manual_ack: true)
  if [b1, d1.redelivered?, b2, d2 && d2.redelivered?] != ['x', false, 'x', true]
    fail "nack requeue: #{b1.inspect}/#{d1.redelivered?} then #{b2.inspect}/#{d2 && d2.redelivered?}"
  else
    ok 'nack with requeue: the message comes back first with redelivered=true'
  end
  ch.reject(d2.delivery_tag, false)
  _, _, b3 = gq.pop(manual_ack: false)
  fail "pop after reject: #{b3.inspect}, expected y" unless b3 == 'y'
  _, _, b4 = gq.pop
  fail "pop on an empty queue gave #{b4.inspect}" unless b4.nil?

  # mandatory publish to nowhere is returned.
  returned = Queue.new
  ex[:direct].on_return { |ri, _props, body| returned << [ri, body] }
  ex[:direct].publish('lost', routing_key: 'nowhere', mandatory: true)
  wait_for(5) { !returned.empty? }
  sleep 0.1
  if returned.size != 1
    fail "mandatory unroutable publish: #{returned.size} returns"
  else
    ri, body = returned.pop
    if ri.reply_code != 312 || ri.reply_text != 'NO_ROUTE' || ri.routing_key != 'nowhere' ||
       body != 'lost'
      fail "basic.return: #{ri.reply_code} #{ri.reply_text} #{ri.routing_key} #{body}"
    else
      ok 'mandatory unroutable publish returned 312 NO_ROUTE'
    end
  end

  queues.each_value(&:delete)
  ex.each_value(&:delete)
  ch.close
  conn.close
rescue StandardError => e
  fail "#{e.class}: #{e.message}"
end

if $failures.empty?
  puts 'bunny: all checks passed'
  exit 0
end
puts "bunny: #{$failures.size} problem(s)"
exit 1
