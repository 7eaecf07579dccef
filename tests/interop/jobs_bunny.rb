#!/usr/bin/ruby
# SPDX-License-Identifier: Apache-2.0
# Bunny (Ruby) job queue where a worker dies, against 127.0.0.1:PORT.
# A producer publishes N transient jobs to a durable queue with publisher
# confirms (all acked, none nacked, the queue then holds N) and one
# mandatory job to an unroutable key (basic.return, then its confirm is an
# ack). A persistent publish to another durable queue is acked once it is
# on disk, by Roost and RabbitMQ alike, and enqueued. A
# forked worker (prefetch 50, manual acks) acks the first M jobs, holds the
# next ones unacked and is SIGKILLed; its unacked jobs are requeued. A
# second worker then acks the rest: every id is acked exactly once, the
# dead worker's unacked jobs come back first, in their order, with
# redelivered=true, then the never-delivered ones in order with
# redelivered=false, and the queue ends empty.
# Usage: ruby jobs_bunny.rb PORT
require 'bunny'
require 'set'

N = 2000          # jobs
M = 100           # jobs the first worker acks before it stops acking
PREFETCH = 50
$failures = []
def fail(msg) puts "FAIL: #{msg}"; $stdout.flush; $failures << msg end
def ok(msg) puts "ok: #{msg}"; $stdout.flush end

def wait_for(timeout = 10)
  deadline = Time.now + timeout
  sleep 0.01 until yield || Time.now > deadline
  yield
end

def job_id(body)
  m = /\Ajob:(\d+)\z/.match(body)
  m && Integer(m[1])
end

def connect(port)
  c = Bunny.new(host: '127.0.0.1', port: port, user: 'guest', password: 'guest',
                automatically_recover: false, connection_timeout: 10,
                logger: Logger.new(nil))
  c.start
  c
end

# Shorten a list of ids for a message: "100..149 (50)".
def ids(list)
  return '[]' if list.empty?
  s = list.first(8).join(',')
  s += ",...,#{list.last}" if list.size > 8
  "[#{s}] (#{list.size})"
end

port = Integer(ARGV[0] || '', exception: false)
abort 'usage: jobs_bunny.rb PORT' unless port && ARGV.size == 1
pfx = "interop.jobs-bunny.#{Process.pid}.#{Time.now.to_i}"
qname = "#{pfx}.jobs"
pname = "#{pfx}.persistent"
conn = nil

# --- the first worker: forked now, before the parent connects, so that it
# shares no connection with the parent. It waits for "go QUEUE", consumes
# with prefetch PREFETCH and manual acks, acks the first M deliveries, then
# acks nothing more. It reports on the pipe: "d ID REDELIVERED" for every
# delivery, "a ID" after every ack, "held K" once it holds K = PREFETCH
# unacked jobs, "error TEXT" if something goes wrong. The parent kills it.
go_r, go_w = IO.pipe
rep_r, rep_w = IO.pipe
worker_pid = fork do
  go_w.close
  rep_r.close
  rep_w.sync = true
  begin
    line = go_r.gets
    exit!(0) unless line && line.start_with?('go ')
    wq = line.split(' ', 2)[1].chomp
    wconn = connect(port)
    wch = wconn.create_channel
    wch.prefetch(PREFETCH)
    lock = Mutex.new
    delivered = 0
    unacked = 0
    held_reported = false
    wch.queue(wq, passive: true).subscribe(manual_ack: true, block: false) do |di, _p, body|
      lock.synchronize do
        delivered += 1
        rep_w.puts "d #{job_id(body) || body.inspect} #{di.redelivered? ? 1 : 0}"
        if delivered <= M
          wch.ack(di.delivery_tag)
          rep_w.puts "a #{job_id(body)}"
        else
          unacked += 1
          if unacked >= PREFETCH && !held_reported
            held_reported = true
            rep_w.puts "held #{unacked}"
          end
        end
      end
    end
    sleep 30 # the parent kills us long before this
    rep_w.puts 'error worker 1 was not killed within 30 s'
  rescue StandardError => e
    rep_w.puts "error #{e.class}: #{e.message}"
  end
  exit!(0)
end
go_r.close
rep_w.close

begin
  conn = connect(port)
  sp = conn.server_properties
  roost = sp.key?('roost_version')
  ok "connected to #{sp['product']} #{sp['version']}" +
     (roost ? " (Roost #{sp['roost_version']})" : '')
  ch = conn.create_channel
  q = ch.queue(qname, durable: true, auto_delete: false, exclusive: false)
  fail "queue #{qname} declared with #{q.message_count} messages" unless q.message_count == 0

  # --- 1. the producer: N transient jobs with publisher confirms ---------
  events = Queue.new # confirms and returns, in the order the client saw them
  ch.confirm_select(->(tag, _multiple, nack) { events << [nack ? :nack : :ack, tag] })
  dx = ch.default_exchange
  dx.on_return { |ri, _props, body| events << [:return, ri.reply_code, ri.reply_text, ri.exchange, ri.routing_key, body] }
  N.times do |i|
    dx.publish("job:#{i}", routing_key: qname, persistent: false, message_id: "job-#{i}")
  end
  all_acked = ch.wait_for_confirms
  acked = Set.new
  nacked = Set.new
  extra = []
  until events.empty?
    e = events.pop
    case e[0]
    when :ack then acked << e[1]
    when :nack then nacked << e[1]
    else extra << e
    end
  end
  if all_acked && ch.nacked_set.empty? && nacked.empty? && ch.unconfirmed_set.empty? &&
     acked == Set.new(1..N) && extra.empty?
    ok "#{N} transient jobs to a durable queue: all confirmed with basic.ack, no nacks"
  else
    fail "confirms of #{N} jobs: wait_for_confirms=#{all_acked}, nacked_set #{ids(ch.nacked_set.to_a.sort)}, " \
         "acked #{acked.size} tags, nacked #{ids(nacked.to_a.sort)}, " \
         "unconfirmed #{ids(ch.unconfirmed_set.to_a.sort)}, other events #{extra.first(3)}"
  end
  st = ch.queue_declare(qname, passive: true)
  if st.message_count == N
    ok "after the confirms the queue holds #{N} jobs"
  else
    fail "after the confirms the queue holds #{st.message_count} jobs, expected #{N}"
  end

  # A mandatory publish to an unroutable key: basic.return, then basic.ack.
  nowhere = "#{pfx}.nowhere"
  dx.publish('lost job', routing_key: nowhere, mandatory: true, persistent: false)
  tag = N + 1
  all_acked = ch.wait_for_confirms
  wait_for(2) { !events.empty? }
  seen = []
  seen << events.pop until events.empty?
  want_ret = [:return, 312, 'NO_ROUTE', '', nowhere, 'lost job']
  if seen == [want_ret, [:ack, tag]] && all_acked
    ok 'mandatory unroutable publish: basic.return 312 NO_ROUTE, then its confirm is an ack'
  else
    fail "mandatory unroutable publish in confirm mode: saw #{seen.inspect} " \
         "(wait_for_confirms=#{all_acked}), expected #{[want_ret, [:ack, tag]].inspect}"
  end

  # --- 2. a persistent publish to a durable queue, on its own channel ----
  pch = conn.create_channel
  pch.queue(pname, durable: true, auto_delete: false, exclusive: false)
  pch.confirm_select
  pch.default_exchange.publish('persistent job', routing_key: pname, persistent: true)
  p_acked = pch.wait_for_confirms
  p_nacked = pch.nacked_set.to_a
  p_count = pch.queue_declare(pname, passive: true).message_count
  who = roost ? 'Roost' : 'RabbitMQ'
  if p_acked && p_nacked.empty? && p_count == 1
    ok "#{who}: persistent publish to a durable queue is acked and enqueued"
  else
    fail "#{who}: persistent publish to a durable queue: acked=#{p_acked}, nacked #{p_nacked}, " \
         "queue holds #{p_count}; expected an ack and 1"
  end
  pch.queue_delete(pname)
  pch.close

  # --- 3. the first worker: acks M, holds PREFETCH, is killed ------------
  go_w.puts "go #{qname}"
  go_w.close
  w1_deliveries = [] # [id, redelivered]
  w1_acked = []
  w1_errors = []
  held = nil
  handle = lambda do |line|
    case line
    when /\Ad (\d+) ([01])\z/ then w1_deliveries << [Integer($1), $2 == '1']
    when /\Aa (\d+)\z/ then w1_acked << Integer($1)
    when /\Aheld (\d+)\z/ then held = Integer($1)
    else w1_errors << line
    end
  end
  buf = +''
  read_until = lambda do |deadline, &stop|
    until stop.call || Time.now > deadline
      r, = IO.select([rep_r], nil, nil, [deadline - Time.now, 0.01].max)
      next unless r
      begin
        buf << rep_r.read_nonblock(65_536)
      rescue EOFError
        return :eof
      end
      while (i = buf.index("\n"))
        handle.call(buf.slice!(0..i).chomp)
      end
    end
    nil
  end
  eof = read_until.call(Time.now + 15) { held || !w1_errors.empty? }
  unless held
    raise "worker 1 never reported holding #{PREFETCH} unacked jobs " \
          "(#{w1_deliveries.size} deliveries, #{w1_acked.size} acks, #{w1_errors.first(3)}#{eof ? ', exited' : ''})"
  end
  # It keeps receiving for a moment (nothing more may come: prefetch).
  read_until.call(Time.now + 0.3) { false }
  Process.kill(:KILL, worker_pid)
  _, status = Process.wait2(worker_pid)
  worker_pid = nil
  read_until.call(Time.now + 5) { false } # the rest of the pipe, to EOF
  fail "worker 1 was not killed by SIGKILL: #{status.inspect}" unless status.termsig == 9
  w1_errors.each { |e| fail "worker 1: #{e}" }
  w1_ids = w1_deliveries.map(&:first)
  w1_held = w1_ids - w1_acked
  if w1_ids != (0...w1_ids.size).to_a || w1_deliveries.any? { |_, r| r }
    fail "worker 1 deliveries: #{ids(w1_ids)}, redelivered #{ids(w1_deliveries.select { |_, r| r }.map(&:first))}; " \
         'expected 0, 1, 2, ... in order, none redelivered'
  end
  if w1_acked != (0...M).to_a || w1_held.size != PREFETCH
    fail "worker 1 acked #{ids(w1_acked)} and held #{ids(w1_held)} unacked; expected the first #{M} " \
         "acked and #{PREFETCH} (the prefetch) held"
  else
    ok "worker 1 (prefetch #{PREFETCH}) got jobs #{ids(w1_ids)} in order, acked #{M}, " \
       "held #{w1_held.size} unacked, killed with SIGKILL"
  end

  # The broker notices the dead connection and requeues what it held.
  want_ready = N - w1_acked.uniq.size
  st = nil
  wait_for(10) do
    st = ch.queue_declare(qname, passive: true)
    st.message_count == want_ready && st.consumer_count == 0
  end
  if st.message_count == want_ready && st.consumer_count == 0
    ok "after the kill: #{want_ready} jobs ready, 0 consumers (the #{w1_held.size} unacked were requeued)"
  else
    fail "10 s after the kill: #{st.message_count} jobs ready and #{st.consumer_count} consumers, " \
         "expected #{want_ready} and 0"
  end

  # --- 4. the second worker consumes everything left ---------------------
  conn2 = connect(port)
  ch2 = conn2.create_channel
  ch2.prefetch(PREFETCH)
  w2 = [] # [id, redelivered] in delivery order
  w2_acked = Set.new
  lock = Mutex.new
  consumer = ch2.queue(qname, passive: true).subscribe(manual_ack: true, block: false) do |di, _p, body|
    lock.synchronize do
      id = job_id(body)
      w2 << [id || body, di.redelivered?]
      ch2.ack(di.delivery_tag)
      w2_acked << id
    end
  end
  want_all = Set.new(0...N)
  wait_for(20) { lock.synchronize { (w2_acked | w1_acked).superset?(want_all) } }
  sleep 0.2 # anything extra would show up now
  consumer.cancel
  w2 = lock.synchronize { w2.dup }
  w2_ids = w2.map(&:first)

  union = Set.new(w1_acked) | Set.new(w2_ids)
  if union == want_all && w1_acked.size + w2_ids.size == N
    ok "every job id 0..#{N - 1} acked exactly once over both workers"
  else
    fail "acked ids over both workers: #{union.size} distinct of #{N}, missing " \
         "#{ids((want_all - union).to_a.sort)}, #{w1_acked.size}+#{w2_ids.size} acks, " \
         "unexpected #{ids((union - want_all).to_a.sort_by(&:to_s))}"
  end
  # Delivered more than once: only with redelivered=true on the later delivery.
  seen_ids = Set.new(w1_ids)
  bad_dups = []
  w2.each do |id, red|
    bad_dups << id if seen_ids.include?(id) && !red
    seen_ids << id
  end
  fail "delivered again without redelivered=true: #{ids(bad_dups)}" unless bad_dups.empty?
  redelivered = w2.select { |_, r| r }.map(&:first)
  fresh = w2.reject { |_, r| r }.map(&:first)
  never = (0...N).to_a - w1_ids
  if redelivered.to_set != w1_held.to_set
    fail "redelivered to worker 2: #{ids(redelivered)}; the dead worker held #{ids(w1_held)}"
  elsif w2_ids != w1_held + never
    k = w2_ids.each_index.find { |j| w2_ids[j] != (w1_held + never)[j] }
    fail "worker 2 order: at #{k} got #{w2[k].inspect}, expected #{(w1_held + never)[k]}; " \
         "want the #{w1_held.size} requeued (in order) then #{never.size} never delivered (in order)"
  elsif fresh != never
    fail "worker 2: never-delivered jobs #{ids(fresh)}, expected #{ids(never)}"
  else
    ok "worker 2 got the #{w1_held.size} requeued jobs first, in order, redelivered=true, " \
       "then the #{never.size} never-delivered in order, redelivered=false"
  end

  st = ch.queue_declare(qname, passive: true)
  if st.message_count == 0 && st.consumer_count == 0
    ok 'the job queue is empty at the end (passive declare: 0 messages, 0 consumers)'
  else
    fail "at the end the job queue has #{st.message_count} messages, #{st.consumer_count} consumers"
  end

  ch2.close
  conn2.close
  ch.queue_delete(qname)
  ch.close
  conn.close
rescue StandardError => e
  fail "#{e.class}: #{e.message}"
ensure
  if worker_pid
    begin
      Process.kill(:KILL, worker_pid)
      Process.wait(worker_pid)
    rescue StandardError
      nil
    end
  end
  # After a failure: delete what we created (the success path did already).
  if conn && conn.open?
    begin
      c = conn.create_channel
      [qname, pname].each { |n| c.queue_delete(n) }
      conn.close
    rescue StandardError
      nil
    end
  end
end

if $failures.empty?
  puts 'jobs-bunny: all checks passed'
  exit 0
end
puts "jobs-bunny: #{$failures.size} problem(s)"
exit 1
