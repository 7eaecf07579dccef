/*
 * SPDX-License-Identifier: Apache-2.0
 * The web page's other pages, added to app.js's through window.Roost:
 *   #/exchanges                 exchanges
 *   #/exchanges/VHOST/NAME      an exchange: its bindings both ways, and
 *                               a form that publishes to it
 *   #/channels                  channels: prefetch, unacked, confirms
 *   #/admin                     users, vhosts, permissions, policies
 * Each reads RabbitMQ's JSON from the management API, as app.js does.
 */
'use strict';

(function () {
  const R = window.Roost;
  const {h, clear, get, api, items, table, cell, text, num, rate, yesno,
         enc, unavailable, msRate} = R;

  function exchangeHref(vhost, name) {
    return '#/exchanges/' + enc(vhost) + '/' + enc(name === '' ?
                                                   'amq.default' : name);
  }

  /* A page that lists one endpoint as a table: 'title', 'path', the
   * heads and a row maker. */
  function listPage(name, title, path, heads, row, empty) {
    return (view, r, current) => {
      const body = h('div');
      view.append(h('h1', {text: title}), body);
      return {
        name,
        async refresh() {
          const res = await get(path);
          if (!current())
            return;
          clear(body).append(!res ? unavailable('The list of ' +
                                                title.toLowerCase()) :
            table(heads, items(res).map(row), empty));
        },
      };
    };
  }

  R.pages.exchanges = listPage('exchanges', 'Exchanges', 'exchanges',
    ['Name', 'Vhost', 'Type', 'Features', 'Publish in#', 'Publish out#'],
    (x) => h('tr', {data: {exchange: x.name, vhost: x.vhost}},
      h('td', {class: 'wrap'}, h('a', {href: exchangeHref(x.vhost, x.name),
                                       text: x.name === '' ?
                                         '(AMQP default)' : x.name})),
      cell(text(x.vhost)),
      cell(text(x.type)),
      cell(['durable', 'auto_delete', 'internal'].filter((k) => x[k])
        .join(', ') || R.DASH),
      cell(rate(msRate(x, 'publish_in')), 'num'),
      cell(rate(msRate(x, 'publish_out')), 'num')),
    'No exchanges.');

  /* bindings 'list' seen from one end: 'far' is the other end's key */
  function bindingRows(list, far, farType) {
    return list.map((b) => {
      const other = b[far], kind = b[farType];
      const link = kind === 'queue' ? R.queueHref(b.vhost, other) :
        exchangeHref(b.vhost, other);
      return h('tr', {data: {binding: other}},
        cell(text(kind)),
        h('td', {class: 'wrap'}, other === '' ? '(default exchange)' :
          h('a', {href: link, text: other})),
        cell(text(b.routing_key), 'wrap'),
        cell(text(b.arguments && Object.keys(b.arguments).length ?
                  b.arguments : ''), 'wrap mono'));
    });
  }

  R.pages.exchange = (view, r, current) => {
    const name = r.exchange === 'amq.default' ? '' : r.exchange;
    const path = 'exchanges/' + enc(r.vhost) + '/' + enc(r.exchange);
    const details = h('div', {id: 'exchange-details'});
    const from = h('div', {id: 'exchange-bindings-source'});
    const to = h('div', {id: 'exchange-bindings-destination'});
    view.append(
      h('p', null, h('a', {href: '#/exchanges', text: '\u2039 Exchanges'})),
      h('h1', null, 'Exchange ', h('span', {class: 'mono', text: name === ''
                                           ? '(AMQP default)' : name}),
        h('span', {class: 'note', text: ' in vhost ' + r.vhost})),
      details, publishForm(path),
      h('h2', {text: 'Bindings from this exchange'}), from,
      h('h2', {text: 'Bindings to this exchange'}), to);
    return {
      name: 'exchange',
      async refresh() {
        const [x, s, d] = await Promise.all([
          get(path), get(path + '/bindings/source'),
          get(path + '/bindings/destination')]);
        if (!current())
          return;
        clear(details).append(!x ? h('p', {class: 'note', text: 'No ' +
          'exchange ' + r.exchange + ' in vhost ' + r.vhost + '.'}) :
          h('table', {class: 'kv'}, h('tbody', null,
            [['Type', text(x.data.type)],
             ['Features', ['durable', 'auto_delete', 'internal']
               .filter((k) => x.data[k]).join(', ') || R.DASH],
             ['Arguments', text(x.data.arguments &&
               Object.keys(x.data.arguments).length ? x.data.arguments : '')],
             ['Policy', text(x.data.policy)],
             ['Publish in', rate(msRate(x.data, 'publish_in'))],
             ['Publish out', rate(msRate(x.data, 'publish_out'))]]
              .map(([k, v]) => h('tr', null, h('th', {text: k}),
                                 h('td', {text: v}))))));
        const heads = ['To', 'Name', 'Routing key', 'Arguments'];
        clear(from).append(!s ? unavailable('Bindings') :
          table(heads, bindingRows(items(s), 'destination',
                                   'destination_type'),
                name === '' ? 'Every queue, by its name (the default ' +
                  'exchange binds them all).' : 'No bindings.'));
        clear(to).append(!d ? unavailable('Bindings') :
          table(['From', 'Name', 'Routing key', 'Arguments'],
                bindingRows(items(d), 'source', 'source_type'),
                'No bindings.'));
      },
    };
  };

  /* Publish one message (POST /api/exchanges/V/E/publish); the answer
   * says whether it was routed. */
  function publishForm(path) {
    const key = h('input', {type: 'text', id: 'publish-key',
                            'aria-label': 'routing key',
                            placeholder: 'routing key'});
    const body = h('textarea', {id: 'publish-payload', rows: 3,
                                'aria-label': 'payload',
                                placeholder: 'payload'});
    const persistent = h('input', {type: 'checkbox', id: 'publish-persistent',
                                   checked: true});
    const out = h('p', {id: 'publish-result', class: 'note'});
    const btn = h('button', {type: 'button', id: 'publish', text: 'Publish'});
    btn.addEventListener('click', async () => {
      btn.disabled = true;
      delete out.dataset.routed;
      try {
        const res = await api('POST', path + '/publish', {json: {
          routing_key: key.value, payload: body.value,
          payload_encoding: 'string',
          properties: persistent.checked ? {delivery_mode: 2} : {}}});
        if (res.status !== 200)
          throw R.refusal(res, 'Publish');
        const routed = !!(res.data && res.data.routed);
        out.dataset.routed = String(routed);
        out.textContent = routed ? 'Published, and routed to a queue.' :
          'Published, but no queue took it (not routed).';
      } catch (e) {
        out.textContent = e.message;
      } finally {
        btn.disabled = false;
      }
    });
    return h('section', {class: 'action wide'},
             h('h2', {text: 'Publish a message'}),
             h('div', {class: 'row'}, key,
               h('label', null, persistent, ' persistent'), btn),
             body, out);
  }

  R.pages.channels = listPage('channels', 'Channels', 'channels',
    ['Channel', 'User', 'Vhost', 'Mode', 'Prefetch#', 'Unacked#',
     'Unconfirmed#', 'Consumers#', 'State', 'Publish#', 'Deliver#'],
    (c) => h('tr', {data: {channel: c.name}},
      cell(text(c.name), 'wrap mono'),
      cell(text(c.user)),
      cell(text(c.vhost)),
      cell(c.confirm ? 'confirm' : c.transactional ? 'transactional' :
           R.DASH),
      cell(num(c.prefetch_count), 'num'),
      cell(num(c.messages_unacknowledged), 'num'),
      cell(num(c.messages_unconfirmed), 'num'),
      cell(num(c.consumer_count), 'num'),
      cell(text(c.state)),
      cell(rate(msRate(c, 'publish')), 'num'),
      cell(rate(msRate(c, 'deliver_get')), 'num')),
    'No channels.');

  /* Admin: four lists, each shown or 'not available' on its own (only
   * an administrator may read users and permissions). */
  R.pages.admin = (view, r, current) => {
    const parts = [
      ['admin-users', 'Users', 'users', ['Name', 'Tags', 'Password'],
       (u) => h('tr', {data: {user: u.name}},
         cell(text(u.name), 'wrap'),
         cell(Array.isArray(u.tags) ? u.tags.join(', ') || R.DASH :
              text(u.tags)),
         cell(u.password_hash ? 'set' : 'none (certificate only)'))],
      ['admin-vhosts', 'Virtual hosts', 'vhosts',
       ['Name', 'Description', 'Ready#', 'Unacked#', 'Tracing'],
       (v) => h('tr', {data: {vhost: v.name}},
         cell(text(v.name), 'wrap'),
         cell(text(v.description), 'wrap'),
         cell(num(v.messages_ready), 'num'),
         cell(num(v.messages_unacknowledged), 'num'),
         cell(yesno(v.tracing)))],
      ['admin-permissions', 'Permissions', 'permissions',
       ['User', 'Vhost', 'Configure', 'Write', 'Read'],
       (p) => h('tr', null,
         cell(text(p.user), 'wrap'), cell(text(p.vhost), 'wrap'),
         cell(text(p.configure), 'mono wrap'),
         cell(text(p.write), 'mono wrap'), cell(text(p.read), 'mono wrap'))],
      ['admin-policies', 'Policies', 'policies',
       ['Name', 'Vhost', 'Pattern', 'Apply to', 'Priority#', 'Definition'],
       (p) => h('tr', {data: {policy: p.name}},
         cell(text(p.name), 'wrap'), cell(text(p.vhost), 'wrap'),
         cell(text(p.pattern), 'mono wrap'), cell(text(p['apply-to'])),
         cell(num(p.priority), 'num'),
         cell(text(p.definition), 'mono wrap'))],
    ].map(([id, title, path, heads, row]) =>
      ({id, title, path, heads, row, el: h('div', {id})}));
    view.append(h('h1', {text: 'Admin'}),
                ...parts.flatMap((p) => [h('h2', {text: p.title}), p.el]));
    return {
      name: 'admin',
      async refresh() {
        const got = await Promise.all(parts.map((p) => get(p.path)));
        if (!current())
          return;
        parts.forEach((p, i) => clear(p.el).append(!got[i] ?
          unavailable(p.title) :
          table(p.heads, items(got[i]).map(p.row), 'None.')));
      },
    };
  };
})();
