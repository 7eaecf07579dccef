# SPDX-License-Identifier: Apache-2.0
"""Permission matrix: the same AMQP operations, as the same users, with one
line of output per case, so that the answers of the reference RabbitMQ
(tests/integration/perm_matrix.expected) and of roostd can be compared.

Users, vhosts pm-a and pm-b and permissions come from a RabbitMQ
definitions document (--print-definitions): a full user, one with no
permissions in pm-a, configure-only, write-only, read-only, all-empty
("" is ^$), anchored prefixes, unanchored patterns, mixed patterns, PCRE
syntax (a lookahead, \\d) and the default exchange as "amq.default".
The full user creates the objects the cases need (per vhost: exchanges
<c>.x of each type, fanout exchanges <c>.src, queues <c>.q for the name
classes c below) and, around each case, whatever that case consumes or
leaves behind, so that cases do not depend on each other.

Each case runs on a fresh channel (a fresh connection for connection.open
and after anything that closed the connection) and prints
    <user>@<vhost> <operation> <arguments>: ok
    <user>@<vhost> <operation> <arguments>: <reply-code> <reply-text>
with server-named queues as amq.gen-X.  A connection closed by the server
in a case other than connection.open gets " [connection]" appended; a
case with no answer within 5 s prints "timeout".

Usage:
  perm_matrix.py --print-definitions           the definitions JSON
  perm_matrix.py --port P [--host H]           run the matrix (users exist)
  perm_matrix.py --port P --setup-http HP [--cleanup]
      first (re)load the definitions through the management API on HP
      (guest/guest; vhosts pm-a and pm-b are deleted first), then run;
      --cleanup deletes the pm-* vhosts and users afterwards.
Exit status: 0 when the matrix ran (whatever the answers), 2 on a setup
failure.
"""
import argparse
import ast
import base64
import hashlib
import json
import os
import re
import signal
import sys
import urllib.error
import urllib.parse
import urllib.request

import pika

PASSWORD = 'pm-password'
VHOSTS = ['pm-a', 'pm-b']
FULL = ('.*', '.*', '.*')

# user -> {vhost: (configure, write, read)}
USERS = [
    ('pm-full', {'pm-a': FULL, 'pm-b': FULL}),
    ('pm-nopa', {'pm-b': ('^odd\\.', '.*', '^app\\.')}),
    ('pm-conf', {'pm-a': ('.*', '', '')}),
    ('pm-write', {'pm-a': ('', '.*', '')}),
    ('pm-read', {'pm-a': ('', '', '.*')}),
    ('pm-empty', {'pm-a': ('', '', '')}),
    ('pm-prefix', {'pm-a': ('^app\\.', '^app\\.', '^app\\.'),
                   'pm-b': ('^odd\\.', '^odd\\.', '^odd\\.')}),
    ('pm-unanch', {'pm-a': ('app', 'app', 'app')}),
    ('pm-mixed', {'pm-a': ('^(app|myapp)\\.', '^(odd|app)\\.',
                           '^(myapp|odd)\\.')}),
    # PCRE: a negative lookahead (no such thing in POSIX EREs) and \d (a
    # digit in PCRE, a literal "d" for glibc's regcomp).
    ('pm-pcre', {'pm-a': ('^(?!secret).*', '\\d', '^(?!secret)')}),
    # The default exchange is checked as "amq.default".
    ('pm-amq', {'pm-a': ('', '^amq\\.default$', '^amq\\.')}),
]

# Name classes: which patterns match them tells the users apart.
CLASSES = ['app', 'myapp', 'odd', 'secret', 'n1']
XTYPES = {'app': 'direct', 'myapp': 'fanout', 'odd': 'topic',
          'secret': 'headers', 'n1': 'topic'}
MISSING = ['app.missing', 'odd.missing']
PAIRS = [(a, b) for a in CLASSES for b in CLASSES]
KEY = 'pm'
TIMEOUT = 5


def password_hash(password):
    salt = os.urandom(4)
    digest = hashlib.sha256(salt + password.encode()).digest()
    return base64.b64encode(salt + digest).decode()


def definitions():
    perms = []
    for user, vhosts in USERS:
        for vhost in VHOSTS:
            if vhost in vhosts:
                c, w, r = vhosts[vhost]
                perms.append({'user': user, 'vhost': vhost, 'configure': c,
                              'write': w, 'read': r})
    return {
        'rabbit_version': '3.10.8',
        'rabbitmq_version': '3.10.8',
        'users': [{'name': user, 'password_hash': password_hash(PASSWORD),
                   'hashing_algorithm': 'rabbit_password_hashing_sha256',
                   'tags': ''} for user, _ in USERS],
        'vhosts': [{'name': v} for v in VHOSTS],
        'permissions': perms,
        'topic_permissions': [],
        'parameters': [],
        'global_parameters': [],
        'policies': [],
        'queues': [],
        'exchanges': [],
        'bindings': [],
    }


# ---- management API (reference only) ----

def http(port, method, path, body=None):
    req = urllib.request.Request(
        'http://127.0.0.1:%d/api/%s' % (port, path), method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={'content-type': 'application/json',
                 'authorization': 'Basic ' +
                 base64.b64encode(b'guest:guest').decode()})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        if method == 'DELETE' and e.code == 404:
            return 404
        raise


def http_cleanup(port):
    for v in VHOSTS:
        http(port, 'DELETE', 'vhosts/' + urllib.parse.quote(v, safe=''))
    for user, _ in USERS:
        http(port, 'DELETE', 'users/' + urllib.parse.quote(user, safe=''))


def http_setup(port):
    http_cleanup(port)
    http(port, 'POST', 'definitions', definitions())


# ---- AMQP plumbing ----

class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


signal.signal(signal.SIGALRM, _alarm)


def connect(host, port, user, vhost):
    params = pika.ConnectionParameters(
        host, port, vhost, pika.PlainCredentials(user, PASSWORD),
        connection_attempts=1, socket_timeout=TIMEOUT,
        stack_timeout=TIMEOUT, heartbeat=0)
    return pika.BlockingConnection(params)


def norm(text):
    return re.sub(r'amq\.gen-[A-Za-z0-9_-]+', 'amq.gen-X', str(text))


def show(name):
    return name if name else '""'


class Session:
    """A user's connection to a vhost, reopened when something closed it."""

    def __init__(self, host, port, user, vhost):
        self.host, self.port, self.user, self.vhost = host, port, user, vhost
        self.conn = None

    def channel(self):
        if self.conn is None or not self.conn.is_open:
            self.conn = connect(self.host, self.port, self.user, self.vhost)
        return self.conn.channel()

    def drop(self):
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                signal.alarm(1)
                conn.close()
            except BaseException:
                pass
            finally:
                signal.alarm(0)


def outcome(session, fn):
    """Run fn(channel) on a fresh channel; the case's answer."""
    signal.alarm(TIMEOUT)
    try:
        ch = session.channel()
        try:
            fn(ch)
        finally:
            if ch.is_open:
                ch.close()
        return 'ok'
    except pika.exceptions.ChannelClosedByBroker as e:
        return '%d %s' % (e.reply_code, norm(e.reply_text))
    except pika.exceptions.ConnectionClosedByBroker as e:
        session.drop()
        return '%d %s [connection]' % (e.reply_code, norm(e.reply_text))
    except Timeout:
        session.drop()
        return 'timeout'
    except pika.exceptions.AMQPError as e:
        session.drop()
        return 'error %s: %s' % (type(e).__name__, norm(e))
    finally:
        signal.alarm(0)


def open_outcome(host, port, user, vhost):
    signal.alarm(TIMEOUT)
    conn = None
    try:
        conn = connect(host, port, user, vhost)
        return 'ok'
    except pika.exceptions.ConnectionClosedByBroker as e:
        return '%d %s' % (e.reply_code, e.reply_text)
    except pika.exceptions.AMQPConnectionError as e:
        # pika turns a connection.close in answer to connection.open into
        # ProbableAccessDeniedError("ConnectionClosedByBroker: (530) 'text'").
        m = re.match(r"ConnectionClosedByBroker: \((\d+)\) (.*)$",
                     str(e.args[0]) if e.args else '', re.S)
        if m:
            return '%s %s' % (m.group(1), ast.literal_eval(m.group(2)))
        return 'error %s: %s' % (type(e).__name__, e)
    except Timeout:
        return 'timeout'
    finally:
        signal.alarm(0)
        if conn is not None and conn.is_open:
            conn.close()


# ---- the cases ----

def exists_ok(admin, fn):
    """An admin action around a case; None when it worked."""
    r = outcome(admin, fn)
    return None if r == 'ok' else r


def x_declare(name, xtype='direct', passive=False, args=None):
    return lambda ch: ch.exchange_declare(name, xtype, passive=passive,
                                          durable=True, arguments=args)


def q_declare(name, passive=False, args=None):
    return lambda ch: ch.queue_declare(name, passive=passive, durable=True,
                                       arguments=args)


def x_delete(name):
    return lambda ch: ch.exchange_delete(name)


def q_delete(name):
    return lambda ch: ch.queue_delete(name)


def publish(name):
    def fn(ch):
        ch.confirm_delivery()
        ch.basic_publish(name, 'pm.none', b'pm')
    return fn


def consume(name):
    def fn(ch):
        tag = ch.basic_consume(name, lambda *a: None)
        ch.basic_cancel(tag)
    return fn


def cases():
    """(operation and arguments, before, the operation, after): before and
    after are admin actions (lists of fn(channel))."""
    out = []

    def add(label, op, before=(), after=()):
        out.append((label, list(before), op, list(after)))

    for c in CLASSES:
        add('exchange.declare x=%s.new' % c, x_declare(c + '.new'),
            after=[x_delete(c + '.new')])
    # Refused for everybody (the configure check comes first); an amq.*
    # exchange cannot be deleted either.
    add('exchange.declare x=amq.pm', x_declare('amq.pm'))
    add('exchange.declare x=""', x_declare(''))
    for c in CLASSES:
        add('exchange.declare-existing x=%s.x type=%s' % (c, XTYPES[c]),
            x_declare(c + '.x', XTYPES[c]))
    for c in CLASSES:
        add('exchange.declare-passive x=%s.x' % c,
            x_declare(c + '.x', passive=True))
    for m in MISSING:
        add('exchange.declare-passive x=%s' % m, x_declare(m, passive=True))
    for c in CLASSES:
        add('exchange.delete x=%s.delx' % c, x_delete(c + '.delx'),
            before=[x_declare(c + '.delx')], after=[x_delete(c + '.delx')])
    add('exchange.delete x=""', x_delete(''))
    for a, b in PAIRS:
        add('exchange.declare-ae x=%s.newae ae=%s.x' % (a, b),
            x_declare(a + '.newae', args={'alternate-exchange': b + '.x'}),
            after=[x_delete(a + '.newae')])
    for a, b in PAIRS:
        dest, src = a + '.x', b + '.src'
        add('exchange.bind dest=%s src=%s' % (dest, src),
            lambda ch, d=dest, s=src: ch.exchange_bind(d, s, KEY),
            after=[lambda ch, d=dest, s=src: ch.exchange_unbind(d, s, KEY)])
    for a, b in PAIRS:
        dest, src = a + '.x', b + '.src'
        unbind = lambda ch, d=dest, s=src: ch.exchange_unbind(d, s, KEY)
        add('exchange.unbind dest=%s src=%s' % (dest, src), unbind,
            before=[lambda ch, d=dest, s=src: ch.exchange_bind(d, s, KEY)],
            after=[unbind])
    for c in CLASSES:
        add('queue.declare q=%s.newq' % c, q_declare(c + '.newq'),
            after=[q_delete(c + '.newq')])
    add('queue.declare q=amq.pm', q_declare('amq.pm'),
        after=[q_delete('amq.pm')])
    server_named = []

    def declare_server_named(ch):
        server_named.append(ch.queue_declare('', exclusive=False,
                                             durable=False).method.queue)

    def delete_server_named(ch):
        while server_named:
            ch.queue_delete(server_named.pop())
    add('queue.declare q="" (server-named)', declare_server_named,
        after=[delete_server_named])
    for c in CLASSES:
        add('queue.declare-existing q=%s.q' % c, q_declare(c + '.q'))
    for c in CLASSES:
        add('queue.declare-passive q=%s.q' % c, q_declare(c + '.q', True))
    for m in MISSING:
        add('queue.declare-passive q=%s' % m, q_declare(m, True))
    for a, b in PAIRS + [('app', ''), ('odd', '')]:
        dlx = b + '.x' if b else ''
        add('queue.declare-dlx q=%s.dlxq dlx=%s' % (a, show(dlx)),
            q_declare(a + '.dlxq', args={'x-dead-letter-exchange': dlx}),
            after=[q_delete(a + '.dlxq')])
    for a, b in PAIRS + [('app', ''), ('odd', '')]:
        q, x = a + '.q', b + '.x' if b else ''
        add('queue.bind q=%s x=%s' % (q, show(x)),
            lambda ch, q=q, x=x: ch.queue_bind(q, x, KEY),
            after=[lambda ch, q=q, x=x: ch.queue_unbind(q, x, KEY)] if x
            else [])
    for a, b in PAIRS:
        q, x = a + '.q', b + '.x'
        unbind = lambda ch, q=q, x=x: ch.queue_unbind(q, x, KEY)
        add('queue.unbind q=%s x=%s' % (q, x), unbind,
            before=[lambda ch, q=q, x=x: ch.queue_bind(q, x, KEY)],
            after=[unbind])
    for c in CLASSES:
        add('queue.purge q=%s.q' % c, lambda ch, q=c + '.q': ch.queue_purge(q))
    for c in CLASSES:
        add('queue.delete q=%s.delq' % c, q_delete(c + '.delq'),
            before=[q_declare(c + '.delq')], after=[q_delete(c + '.delq')])
    for x in [c + '.x' for c in CLASSES] + ['', 'amq.default', 'amq.direct'] \
            + MISSING:
        add('basic.publish x=%s' % show(x), publish(x))
    for q in [c + '.q' for c in CLASSES] + MISSING:
        add('basic.consume q=%s' % q, consume(q))
    for q in [c + '.q' for c in CLASSES] + MISSING:
        add('basic.get q=%s' % q,
            lambda ch, q=q: ch.basic_get(q, auto_ack=True))
    return out


def setup_objects(admin):
    """The objects every vhost starts with, made by the full user."""
    for c in CLASSES:
        for fn in (x_declare(c + '.x', XTYPES[c]),
                   x_declare(c + '.src', 'fanout'), q_declare(c + '.q')):
            r = exists_ok(admin, fn)
            if r is not None:
                return r
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--print-definitions', action='store_true')
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--port', type=int)
    ap.add_argument('--setup-http', type=int, metavar='HTTP_PORT')
    ap.add_argument('--cleanup', action='store_true')
    opts = ap.parse_args()
    if opts.print_definitions:
        json.dump(definitions(), sys.stdout, indent=2)
        sys.stdout.write('\n')
        return 0
    if opts.port is None:
        ap.error('--port is needed')
    if opts.cleanup and opts.setup_http is None:
        ap.error('--cleanup goes with --setup-http')
    if opts.setup_http is not None:
        http_setup(opts.setup_http)
    try:
        return run(opts.host, opts.port)
    finally:
        if opts.cleanup:
            http_cleanup(opts.setup_http)


def run(host, port):
    admins = {}
    for vhost in VHOSTS:
        admins[vhost] = Session(host, port, 'pm-full', vhost)
        r = setup_objects(admins[vhost])
        if r is not None:
            print('setup@%s: %s' % (vhost, r), flush=True)
            return 2
    matrix = cases()
    for user, perms in USERS:
        for vhost in VHOSTS + ['pm-none']:
            print('%s@%s connection.open: %s' %
                  (user, vhost, open_outcome(host, port, user, vhost)),
                  flush=True)
        for vhost in VHOSTS:
            if vhost not in perms:
                continue
            session = Session(host, port, user, vhost)
            admin = admins[vhost]
            for label, before, op, after in matrix:
                cid = '%s@%s %s' % (user, vhost, label)
                for fn in before:
                    r = exists_ok(admin, fn)
                    if r is not None:
                        print('%s (before): %s' % (cid, r))
                print('%s: %s' % (cid, outcome(session, op)), flush=True)
                for fn in after:
                    r = exists_ok(admin, fn)
                    if r is not None:
                        print('%s (after): %s' % (cid, r))
            session.drop()
    for admin in admins.values():
        admin.drop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
