/*
 * SPDX-License-Identifier: Apache-2.0
 * Roost's web page: one page, plain JavaScript, served by roostd from the
 * management listener (www/, built into roostd). Hash routes:
 *   #/                    overview: rates, queued messages, memory, alarms
 *   #/queues              queues: depth, oldest ready message, rates
 *   #/queues/VHOST/NAME   a queue: details, bindings, consumers, browse,
 *                         purge, replay of dead letters
 *   #/connections         connections (by the name the client gives
 *                         itself, with TLS details), and closing one
 *   #/exchanges, #/exchanges/VHOST/NAME, #/channels, #/admin: pages.js
 * charts.js draws the rate and depth history (uPlot, www/vendor/);
 * pages.js adds pages through window.Roost (the helpers below).
 * Everything it shows comes from the management API (RabbitMQ's JSON
 * shapes). The user's name and password stay in sessionStorage (this tab
 * only) and go out as an Authorization header on each request, with
 * credentials: 'omit' so that the browser adds nothing of its own (no
 * cookies, no remembered basic auth) and never pops up its own login
 * box. Text from the broker is only ever set as textContent, never
 * parsed as HTML. An endpoint that answers 404 (a roostd without it) is
 * shown as not available, and the rest of the page still works.
 */
'use strict';

(function () {
  const AUTH_KEY = 'roost.auth';
  const USER_KEY = 'roost.user';
  const REFRESH_MS = 5000;
  const BROWSE_COUNT = 50;
  const DASH = '\u2013';

  let page = null;        /* the page shown: {name, refresh()} */
  let seq = 0;            /* bumped at each navigation: late answers
                           * for an older page are dropped */
  let timer = null;

  /* ---- the DOM ---- */

  const $ = (id) => document.getElementById(id);

  /*
   * h('td', {class: 'num', text: '5'}, child...): an element. Attributes
   * 'text' (textContent), 'class', 'on<event>' (listeners), 'data'
   * (dataset entries), the rest as attributes. Children are nodes or
   * strings (text nodes); null and false are skipped.
   */
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false)
        continue;
      if (k === 'text')
        e.textContent = String(v);
      else if (k === 'class')
        e.className = v;
      else if (k === 'data')
        Object.assign(e.dataset, v);
      else if (k.startsWith('on'))
        e.addEventListener(k.slice(2), v);
      else
        e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false)
        continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(kid));
    }
    return e;
  }

  function clear(e) {
    while (e.firstChild)
      e.removeChild(e.firstChild);
    return e;
  }

  function flash(text, bad) {
    const f = $('flash');
    f.textContent = text;
    f.className = bad ? 'flash bad' : 'flash';
    f.hidden = !text;
  }

  /* ---- formatting ---- */

  function isNum(v) {
    return typeof v === 'number' && isFinite(v);
  }
  function num(v) {
    return isNum(v) ? v.toLocaleString('en-US') : DASH;
  }
  function rate(v) {
    if (!isNum(v))
      return DASH;
    return (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1)) + '/s';
  }
  function bytes(v) {
    if (!isNum(v))
      return DASH;
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
  function byteRate(details) {
    return details && isNum(details.rate) ? bytes(details.rate) + '/s' : DASH;
  }
  function duration(ms) {
    if (!isNum(ms) || ms < 0)
      return DASH;
    const s = ms / 1000;
    if (s < 1)
      return Math.round(ms) + ' ms';
    if (s < 60)
      return s.toFixed(s < 10 ? 1 : 0) + ' s';
    if (s < 3600)
      return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
    if (s < 86400)
      return Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) +
        ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor(s % 86400 / 3600) +
      ' h';
  }
  function when(ms) {
    if (!isNum(ms))
      return DASH;
    return new Date(ms).toISOString().replace('T', ' ').replace(/\..*/, '');
  }
  function yesno(v) {
    return v === true ? 'yes' : v === false ? 'no' : DASH;
  }
  function text(v) {
    if (v === undefined || v === null || v === '')
      return DASH;
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  /* message_stats.KIND_details.rate, if the broker gives it */
  function msRate(o, kind) {
    const ms = o && o.message_stats;
    const d = ms && ms[kind + '_details'];
    return d ? d.rate : undefined;
  }

  /*
   * How long the oldest ready message of queue 'q' has waited, in ms, or
   * undefined. RabbitMQ gives head_message_timestamp (the head message's
   * timestamp property, in seconds, when it has one); Roost may give its
   * own age of the head in the fields below.
   */
  function headAge(q) {
    for (const k of ['head_message_age_ms', 'oldest_message_age_ms',
                     'head_age_ms'])
      if (isNum(q[k]))
        return q[k] >= 0 ? q[k] : undefined;
    for (const k of ['head_message_age', 'oldest_message_age'])
      if (isNum(q[k]))
        return q[k] >= 0 ? q[k] * 1000 : undefined;
    if (isNum(q.head_message_timestamp))
      return Math.max(0, Date.now() - q.head_message_timestamp * 1000);
    return undefined;
  }

  /* ---- the API ---- */

  function b64(s) {
    let bin = '';
    for (const b of new TextEncoder().encode(s))
      bin += String.fromCharCode(b);
    return btoa(bin);
  }

  function enc(s) {
    return encodeURIComponent(s);
  }

  class HttpError extends Error {
    constructor(status, data) {
      super(data && data.reason ? text(data.reason) : 'HTTP ' + status);
      this.status = status;
      this.data = data;
    }
  }

  /*
   * fetch /api/PATH. Resolves to {status, data} (data: the JSON answer
   * or null); a 401 ends the session (back to the login form) unless
   * opts.login. Network failures reject.
   */
  async function api(method, path, opts) {
    opts = opts || {};
    const headers = Object.assign({}, opts.headers || {});
    const cred = opts.cred || sessionStorage.getItem(AUTH_KEY);
    if (cred)
      headers.Authorization = 'Basic ' + cred;
    let body;
    if (opts.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.json);
    }
    const res = await fetch('api/' + path, {
      method, headers, body, credentials: 'omit', cache: 'no-store',
      redirect: 'error',
    });
    let data = null;
    if ((res.headers.get('Content-Type') || '').includes('json'))
      data = await res.json().catch(() => null);
    /* The credentials themselves refused (RabbitMQ's not_authorized,
     * "Login failed"): the session is over. A user's tags or
     * permissions not enough for this one request (not_authorised, "Not
     * monitor user", ...) is only that request's refusal. */
    if (res.status === 401 && !opts.login &&
        (!data || data.error === 'not_authorized')) {
      logout((data && data.reason ? text(data.reason) + ': ' : '') +
             'log in again');
      throw new HttpError(401, data);
    }
    return {status: res.status, data};
  }

  /* GET PATH's JSON; undefined if the broker has no such endpoint
   * (404) or this user may not read it (401, 403), unless 'ok' says the
   * status is an answer. Other statuses throw. */
  async function get(path, ok) {
    const r = await api('GET', path);
    if (r.status === 200 || (ok && ok.includes(r.status)))
      return r;
    if (r.status === 404 || r.status === 401 || r.status === 403)
      return undefined;
    throw new HttpError(r.status, r.data);
  }

  /* A list from PATH: RabbitMQ's paginated shape ({items, ...}) or a
   * plain array. */
  function items(r) {
    if (!r)
      return undefined;
    return Array.isArray(r.data) ? r.data :
      (r.data && Array.isArray(r.data.items) ? r.data.items : []);
  }

  /* ---- login ---- */

  function showLogin(message) {
    $('nav').hidden = true;
    $('who').hidden = true;
    clear($('view'));
    $('login').hidden = false;
    const err = $('login-error');
    err.textContent = message || '';
    err.hidden = !message;
    $('login-user').focus();
  }

  function logout(message) {
    sessionStorage.removeItem(AUTH_KEY);
    sessionStorage.removeItem(USER_KEY);
    stopTimer();
    page = null;
    seq++;
    flash('');
    showLogin(message);
  }

  async function login(ev) {
    ev.preventDefault();
    const user = $('login-user').value;
    const cred = b64(user + ':' + $('login-pass').value);
    $('login-submit').disabled = true;
    try {
      const r = await api('GET', 'whoami', {cred, login: true});
      if (r.status !== 200) {
        showLogin(r.data && r.data.reason ? 'Refused: ' + text(r.data.reason)
                  : 'Refused (HTTP ' + r.status + ')');
        return;
      }
      sessionStorage.setItem(AUTH_KEY, cred);
      sessionStorage.setItem(USER_KEY, r.data && r.data.name || user);
      $('login-pass').value = '';
      start();
    } catch (e) {
      showLogin('Cannot reach the broker: ' + e.message);
    } finally {
      $('login-submit').disabled = false;
    }
  }

  function start() {
    $('login').hidden = true;
    $('nav').hidden = false;
    $('who').hidden = false;
    $('who-name').textContent = sessionStorage.getItem(USER_KEY) || '';
    navigate();
  }

  /* ---- routing and refreshing ---- */

  function stopTimer() {
    if (timer !== null)
      clearInterval(timer);
    timer = null;
  }

  function route() {
    const parts = (location.hash.replace(/^#\/?/, '') || '').split('/')
      .filter((p, i) => p !== '' || i > 0);
    let dec;
    try {
      dec = parts.map(decodeURIComponent);
    } catch (e) {
      dec = [];
    }
    if (dec[0] === 'queues' && dec.length === 3)
      return {name: 'queue', vhost: dec[1], queue: dec[2]};
    if (dec[0] === 'queues')
      return {name: 'queues'};
    if (dec[0] === 'exchanges' && dec.length === 3)
      return {name: 'exchange', vhost: dec[1], exchange: dec[2]};
    for (const n of ['connections', 'exchanges', 'channels', 'admin'])
      if (dec[0] === n)
        return {name: n};
    return {name: 'overview'};
  }

  function navigate() {
    if (!sessionStorage.getItem(AUTH_KEY)) {
      showLogin('');
      return;
    }
    stopTimer();
    if (page && page.leave)
      page.leave();
    const my = ++seq;
    const r = route();
    const section = {queue: 'queues', exchange: 'exchanges'}[r.name] ||
      r.name;
    for (const a of document.querySelectorAll('#nav a'))
      a.classList.toggle('current', a.dataset.nav === section);
    flash('');
    const view = clear($('view'));
    view.dataset.page = r.name;
    delete view.dataset.state;
    const make = pages[r.name] || pages.overview;
    page = make(view, r, () => my === seq);
    refresh();
    timer = setInterval(() => {
      if (!document.hidden)
        refresh();
    }, REFRESH_MS);
  }

  async function refresh() {
    const my = seq, p = page;
    if (!p)
      return;
    try {
      await p.refresh();
      if (my === seq) {
        $('view').dataset.state = 'ready';
        if ($('flash').classList.contains('bad'))
          flash('');
      }
    } catch (e) {
      if (my === seq && !(e instanceof HttpError && e.status === 401))
        flash('Could not load this page: ' + e.message, true);
    }
  }

  /* A section that shows 'Not available' when its endpoint is not there
   * (404), or its content. */
  function unavailable(what) {
    return h('p', {class: 'note', data: {unavailable: 'true'},
                   text: what + ': not available (this broker does not ' +
                   'have it, or this user may not see it).'});
  }

  function cell(v, cls, col) {
    return h('td', {class: cls, text: v, data: col ? {col} : null});
  }

  function table(heads, rows, empty) {
    const thead = h('thead', null, h('tr', null, heads.map((hd) =>
      h('th', {class: hd.endsWith('#') ? 'num' : null,
               text: hd.replace(/#$/, '')}))));
    const tbody = h('tbody', null, rows);
    if (rows.length === 0)
      tbody.append(h('tr', null, h('td', {colspan: heads.length,
                                           class: 'note', text: empty})));
    /* wide tables scroll sideways on a narrow screen, not the page */
    return h('div', {class: 'scroll'}, h('table', null, thead, tbody));
  }

  /* An answer that is not what was asked, as an Error to show. */
  function refusal(res, what) {
    return new Error(res.status === 404 && !(res.data && res.data.reason) ?
      what + ' is not available on this broker (404).' :
      'Refused: ' + text(res.data && res.data.reason ||
                         'HTTP ' + res.status));
  }

  /*
   * A button whose action a second click confirms: ID (the button),
   * ID-confirm, ID-result (what came of it; data-done true or false).
   * 'run' returns what to say, or throws.
   */
  function confirmed(id, label, yesText, run) {
    const btn = h('button', {type: 'button', id, class: 'danger',
                             text: label});
    const yes = h('button', {type: 'button', id: id + '-confirm',
                             class: 'danger confirm', hidden: true,
                             text: yesText});
    const no = h('button', {type: 'button', hidden: true, text: 'Cancel'});
    const out = h('p', {id: id + '-result', class: 'note'});
    const asking = (on) => {
      yes.hidden = no.hidden = !on;
      btn.hidden = on;
    };
    btn.addEventListener('click', () => asking(true));
    no.addEventListener('click', () => asking(false));
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      try {
        out.textContent = await run();
        out.dataset.done = 'true';
      } catch (e) {
        out.textContent = e.message;
        out.dataset.done = 'false';
      } finally {
        yes.disabled = false;
        asking(false);
      }
    });
    return {el: h('div', null, h('div', {class: 'row'}, btn, yes, no), out)};
  }

  /*
   * The history charts of a page: range buttons and two charts (rates,
   * depths). .query() is the history's query string for the range
   * chosen; .draw(stats, lengths) draws; .leave() lets go of them.
   * Choosing a range calls 'again' (the page's refresh).
   */
  function historyBox(prefix, again) {
    const C = window.RoostCharts;
    let range = sessionStorage.getItem('roost.range') || C.RANGES[0].id;
    const buttons = C.RANGES.map((x) => h('button', {
      type: 'button', text: x.label, data: {range: x.id},
      class: x.id === range ? 'current' : null,
      onclick: () => {
        range = x.id;
        sessionStorage.setItem('roost.range', range);
        for (const b of buttons)
          b.classList.toggle('current', b.dataset.range === range);
        again();
      }}));
    const charts = h('div', {class: 'charts'});
    const el = h('section', {class: 'history', id: prefix + '-history'},
                 h('div', {class: 'toolbar'},
                   h('span', {class: 'note grow', text: 'History'}),
                   h('span', {class: 'seg', role: 'group',
                              'aria-label': 'range'}, buttons)),
                 charts);
    let pair = null;
    return {
      el,
      query: () => C.query(range),
      draw(stats, lengths) {
        if (!pair)          /* once in the document: uPlot sizes to it */
          pair = new C.Pair(charts, prefix);
        pair.draw(C.series(stats, lengths, range));
        el.dataset.range = range;
      },
      leave() {
        if (pair)
          pair.destroy();
        pair = null;
      },
    };
  }

  function card(title, rows, extra) {
    return h('section', {class: 'card'}, h('h2', {text: title}),
             h('dl', null, rows.map(([k, v, id]) => [
               h('dt', {text: k}), h('dd', {text: v, id: id || null})])),
             extra || null);
  }

  /* ---- overview ---- */

  function overviewPage(view, r, current) {
    view.append(h('h1', {text: 'Overview'}));
    const hist = historyBox('overview', () => refresh());
    const body = h('div');
    view.append(hist.el, body);
    return {
      name: 'overview',
      leave: hist.leave,
      async refresh() {
        const [ov, nodes, alarms] = await Promise.all([
          get('overview?' + hist.query()), get('nodes'),
          get('health/checks/alarms', [503])]);
        if (!current())
          return;
        clear(body);
        if (!ov) {
          body.append(unavailable('The overview'));
          return;
        }
        const o = ov.data, qt = o.queue_totals || {},
          ot = o.object_totals || {};
        hist.draw(o.message_stats, qt);
        const node = nodes && Array.isArray(nodes.data) ? nodes.data[0] :
          undefined;
        const rates = o.message_stats ? null :
          h('p', {class: 'note', text: 'This broker reports no message ' +
                  'rates (rates_mode ' + text(o.rates_mode) + ').'});
        const cards = h('div', {class: 'cards'});
        cards.append(
          card('Message rates', [
            ['Publish', rate(msRate(o, 'publish')), 'rate-publish'],
            ['Deliver', rate(msRate(o, 'deliver_get')), 'rate-deliver'],
            ['Acknowledge', rate(msRate(o, 'ack')), 'rate-ack'],
            ['Redeliver', rate(msRate(o, 'redeliver'))],
            ['Dead-lettered', rate(msRate(o, 'dead_letter'))],
          ], rates),
          card('Queued messages', [
            ['Ready', num(qt.messages_ready), 'total-ready'],
            ['Unacknowledged', num(qt.messages_unacknowledged),
             'total-unacked'],
            ['Total', num(qt.messages), 'total-messages'],
          ]),
          card('Objects', [
            ['Connections', num(ot.connections)],
            ['Channels', num(ot.channels)],
            ['Queues', num(ot.queues), 'total-queues'],
            ['Consumers', num(ot.consumers)],
            ['Exchanges', num(ot.exchanges)],
          ]),
          memoryCard(node),
          alarmsCard(alarms, node),
          card('Broker', [
            ['Version', version(o), 'version'],
            ['Node', text(o.node || o.cluster_name)],
            ['Uptime', node ? duration(node.uptime) : DASH],
            ['Management', text(o.management_version)],
          ], o.roost_version ? h('p', {class: 'note', id: 'version-why',
            text: 'Roost announces the RabbitMQ version whose behaviour ' +
            'it follows: clients, rabbitmqadmin and monitoring check ' +
            'that version to decide what they may use.'}) : null));
        body.append(cards);
      },
    };
  }

  /*
   * "Roost 0.1.0, announces RabbitMQ 3.10.8": clients and tools branch
   * on the version the broker announces (docs/compatibility.md), so
   * Roost announces the RabbitMQ whose behaviour it follows, and names
   * its own version beside it.
   */
  function version(o) {
    const own = o.roost_version ? 'Roost ' + text(o.roost_version) + ', ' :
      '';
    return own + 'announces ' + text(o.product_name) + ' ' +
      text(o.product_version);
  }

  function memoryCard(node) {
    if (!node)
      return card('Memory', [['Used', DASH]],
                  h('p', {class: 'note', text: 'Not available (no ' +
                          '/api/nodes, or this user is not a monitor).'}));
    const meter = isNum(node.mem_used) && isNum(node.mem_limit) &&
      node.mem_limit > 0 ? h('meter', {min: 0, max: node.mem_limit,
                                       value: node.mem_used,
                                       high: node.mem_limit * 0.8}) : null;
    return card('Memory', [
      ['Used', bytes(node.mem_used), 'mem-used'],
      ['High watermark', bytes(node.mem_limit)],
      ['Disk free', bytes(node.disk_free)],
      ['Disk free limit', bytes(node.disk_free_limit)],
    ], meter);
  }

  function alarmsCard(alarms, node) {
    const list = [];
    if (alarms && alarms.status === 503 && alarms.data &&
        Array.isArray(alarms.data.alarms))
      for (const a of alarms.data.alarms)
        list.push(text(a.resource) + ' alarm on ' + text(a.node));
    if (node && node.mem_alarm && !list.some((s) => s.startsWith('memory')))
      list.push('memory alarm on ' + text(node.name));
    if (node && node.disk_free_alarm &&
        !list.some((s) => s.startsWith('disk')))
      list.push('disk alarm on ' + text(node.name));
    const known = alarms !== undefined || node !== undefined;
    const sec = h('section', {class: 'card', id: 'alarms'},
                  h('h2', {text: 'Alarms'}));
    if (!known)
      sec.append(h('p', {class: 'note', text: 'Not available.'}));
    else if (list.length === 0)
      sec.append(h('p', {class: 'ok', text: 'None: publishers are not ' +
                         'blocked.'}));
    else
      sec.append(h('ul', null, list.map((s) =>
        h('li', {class: 'alarm', text: s + ': publishers are blocked'}))));
    return sec;
  }

  /* ---- queues ---- */

  function queueHref(vhost, name) {
    return '#/queues/' + enc(vhost) + '/' + enc(name);
  }

  function queuesPage(view, r, current) {
    let pageNo = 1, filter = '';
    const info = h('span', {class: 'note grow'});
    const prev = h('button', {type: 'button', text: '\u2039 Previous',
                              onclick: () => { pageNo--; refresh(); }});
    const next = h('button', {type: 'button', text: 'Next \u203a',
                              onclick: () => { pageNo++; refresh(); }});
    const search = h('input', {type: 'search', id: 'queue-filter',
                               placeholder: 'Filter by name',
                               oninput: () => {
                                 filter = search.value;
                                 pageNo = 1;
                                 refresh();
                               }});
    /* the API's sort and sort_reverse: which queues back up first */
    const sortBy = h('select', {id: 'queue-sort', 'aria-label': 'sort',
                                onchange: () => { pageNo = 1; refresh(); }},
      [['name', 'By name'], ['messages', 'Most messages'],
       ['messages_ready', 'Most ready'],
       ['messages_unacknowledged', 'Most unacknowledged'],
       ['consumers', 'Most consumers']].map(([v, t]) =>
        h('option', {value: v, text: t})));
    const body = h('div');
    view.append(h('h1', {text: 'Queues'}),
                h('div', {class: 'toolbar'}, search, sortBy, info, prev,
                  next),
                body);
    return {
      name: 'queues',
      async refresh() {
        const q = 'queues?page=' + pageNo + '&page_size=100' +
          '&name=' + enc(filter) + '&use_regex=false&sort=' +
          enc(sortBy.value) +
          (sortBy.value === 'name' ? '' : '&sort_reverse=true');
        let res = await get(q, [400]);
        if (res && res.status === 400 && pageNo > 1) {
          pageNo = 1;       /* past the last page after deletions */
          return this.refresh();
        }
        if (res && res.status === 400)
          throw new HttpError(400, res.data);
        if (!current())
          return;
        clear(body);
        if (!res) {
          body.append(unavailable('The list of queues'));
          prev.disabled = next.disabled = true;
          return;
        }
        let list = items(res);
        const d = res.data;
        const paged = !Array.isArray(d);
        if (!paged && filter)     /* a broker that ignores name= */
          list = list.filter((x) => String(x.name).includes(filter));
        prev.disabled = !paged || pageNo <= 1;
        next.disabled = !paged || pageNo >= (d.page_count || 1);
        info.textContent = paged ?
          'Page ' + d.page + ' of ' + Math.max(1, d.page_count) + ', ' +
          num(d.filtered_count) + ' of ' + num(d.total_count) + ' queues' :
          num(list.length) + ' queues';
        body.append(table(
          ['Name', 'Vhost', 'Type', 'State', 'Ready#', 'Unacked#', 'Total#',
           'Consumers#', 'Oldest ready#', 'Publish#', 'Deliver#', 'Ack#'],
          list.map((x) => h('tr', {data: {queue: x.name, vhost: x.vhost}},
            h('td', {class: 'wrap name'},
              h('a', {href: queueHref(x.vhost, x.name), text: x.name})),
            cell(x.vhost),
            cell(text(x.type)),
            cell(text(x.state)),
            cell(num(x.messages_ready), 'num', 'ready'),
            cell(num(x.messages_unacknowledged), 'num', 'unacked'),
            cell(num(x.messages), 'num', 'messages'),
            cell(num(x.consumers), 'num', 'consumers'),
            cell(duration(headAge(x)), 'num', 'age'),
            cell(rate(msRate(x, 'publish')), 'num'),
            cell(rate(msRate(x, 'deliver_get')), 'num'),
            cell(rate(msRate(x, 'ack')), 'num'))),
          filter ? 'No queue matches.' : 'No queues.'));
      },
    };
  }

  /* ---- a queue ---- */

  function queuePage(view, r, current) {
    const path = 'queues/' + enc(r.vhost) + '/' + enc(r.queue);
    let offset = 0;
    const details = h('div', {id: 'queue-details'});
    const bindings = h('div', {id: 'queue-bindings'});
    const consumers = h('div', {id: 'queue-consumers'});
    const browse = h('div', {id: 'queue-browse'});
    const bprev = h('button', {type: 'button', text: '\u2039 Previous',
                               onclick: () => {
                                 offset = Math.max(0, offset - BROWSE_COUNT);
                                 loadBrowse();
                               }});
    const bnext = h('button', {type: 'button', text: 'Next \u203a',
                               onclick: () => {
                                 offset += BROWSE_COUNT;
                                 loadBrowse();
                               }});
    const binfo = h('span', {class: 'note grow'});

    async function loadBrowse() {
      const res = await get(path + '/browse?offset=' + offset + '&count=' +
                            BROWSE_COUNT, [400]).catch((e) => e);
      if (!current())
        return;
      clear(browse);
      if (res === undefined) {
        browse.append(unavailable('Browsing'));
        bprev.disabled = bnext.disabled = true;
        return;
      }
      if (res instanceof Error || res.status !== 200) {
        const why = res instanceof Error ? res.message :
          text(res.data && res.data.reason);
        browse.append(h('p', {class: 'error', text: 'Cannot browse: ' +
                              why}));
        return;
      }
      const list = items(res);
      bprev.disabled = offset === 0;
      bnext.disabled = list.length < BROWSE_COUNT;
      binfo.textContent = list.length === 0 ? '' : 'Messages ' +
        (offset + 1) + '\u2013' + (offset + list.length) +
        ' (a peek: nothing is delivered or changed)';
      browse.append(table(
        ['Position#', 'Exchange', 'Routing key', 'Redelivered',
         'Deliveries#', 'Properties', 'Payload', 'Bytes#'],
        list.map((m) => h('tr', {data: {position: m.position}},
          cell(num(m.position), 'num'),
          cell(m.exchange === '' ? '(default)' : text(m.exchange), 'wrap'),
          cell(text(m.routing_key), 'wrap'),
          cell(yesno(m.redelivered)),
          cell(num(m.delivery_count), 'num'),
          cell(propsSummary(m.properties), 'wrap mono'),
          cell(payloadText(m), 'payload mono'),
          cell(num(m.payload_bytes), 'num'))),
        offset === 0 ? 'The queue has no ready messages.' :
          'No messages past this point.'));
    }

    /* purge and delete: a second click confirms */
    const purge = confirmed('purge', 'Purge', 'Yes, delete the ready ' +
                            'messages', async () => {
      const res = await api('DELETE', path + '/contents');
      if (res.status === 204 || res.status === 200) {
        offset = 0;
        await Promise.all([refresh(), loadBrowse()]);
        return 'Purged.';
      }
      throw refusal(res, 'Purge');
    });
    const del = confirmed('delete', 'Delete', 'Yes, delete the queue and ' +
                          'its messages', async () => {
      const res = await api('DELETE', path);
      if (res.status === 204 || res.status === 200) {
        location.hash = '#/queues';
        flash('Deleted queue ' + r.queue + ' in vhost ' + r.vhost + '.');
        return 'Deleted.';
      }
      throw refusal(res, 'Delete');
    });

    /* replay dead letters, with progress */
    const rateIn = h('input', {type: 'number', id: 'replay-rate', min: 0,
                               value: 100});
    const cancelBtn = h('button', {type: 'button', id: 'replay-cancel',
                                   text: 'Cancel', hidden: true});
    let replayId = null;
    cancelBtn.addEventListener('click', async () => {
      if (replayId !== null)
        await api('DELETE', 'replays/' + enc(replayId)).catch(() => null);
    });
    const replayBtn = h('button', {type: 'button', id: 'replay',
                                   text: 'Replay dead letters'});
    const progress = h('progress', {id: 'replay-progress', max: 1, value: 0,
                                    hidden: true});
    const replayOut = h('p', {id: 'replay-result', class: 'note'});
    replayBtn.addEventListener('click', async () => {
      const n = Number(rateIn.value);
      if (!(n >= 0) || rateIn.value === '') {
        replayOut.textContent = 'The rate is messages per second (0: as ' +
          'fast as the broker goes).';
        return;
      }
      delete replayOut.dataset.done;
      replayBtn.disabled = true;
      try {
        const res = await api('POST', path + '/replay', {json: {rate: n}});
        if (res.status === 404) {
          replayOut.textContent = 'Replay is not available on this broker ' +
            '(404).';
        } else if (res.status !== 201 && res.status !== 200) {
          replayOut.textContent = 'Refused: ' +
            text(res.data && res.data.reason || 'HTTP ' + res.status);
        } else if (res.data && res.data.id !== undefined) {
          await followReplay(res.data.id);
        } else {
          replayOut.textContent = 'Started.';
        }
      } catch (e) {
        replayOut.textContent = 'Failed: ' + e.message;
      } finally {
        replayBtn.disabled = false;
      }
    });

    async function followReplay(id) {
      progress.hidden = false;
      replayId = id;
      cancelBtn.hidden = false;
      try {
        await pollReplay(id);
      } finally {
        cancelBtn.hidden = true;
        replayId = null;
      }
    }

    async function pollReplay(id) {
      for (;;) {
        const res = await api('GET', 'replays/' + enc(id));
        if (!current())
          return;
        if (res.status !== 200) {
          replayOut.textContent = 'Replay ' + id + ': ' +
            (res.status === 404 ? 'no progress reported' :
             text(res.data && res.data.reason || 'HTTP ' + res.status));
          return;
        }
        const s = res.data || {};
        const total = isNum(s.total) ? s.total : 0;
        const moved = isNum(s.moved) ? s.moved : 0;
        progress.max = Math.max(1, total);
        progress.value = Math.min(moved, progress.max);
        replayOut.textContent = 'Replay ' + id + ': ' + text(s.state) +
          ', ' + num(moved) + ' of ' + num(total) + ' moved' +
          (s.skipped ? ', ' + num(s.skipped) + ' skipped' : '') +
          (s.error ? ' (' + text(s.error) + ')' : '');
        replayOut.dataset.state = text(s.state);
        if (!/^(running|pending|queued|starting|started)$/.test(s.state)) {
          replayOut.dataset.done = 'true';
          refresh();
          loadBrowse();
          return;
        }
        await new Promise((ok) => setTimeout(ok, 500));
      }
    }

    const hist = historyBox('queue', () => refresh());
    const getBox = getForm(path);
    const replayBox = h('section', {class: 'action', id: 'replay-box',
                                    hidden: true},
          h('h2', {text: 'Replay dead letters'}),
          h('div', {class: 'row'},
            h('label', null, 'Messages per second ', rateIn), replayBtn,
            cancelBtn),
          h('p', {class: 'note', text: 'Moves the ready messages back to ' +
                  'the exchange and routing key they died from (their ' +
                  'x-death), in order, at this rate; messages without ' +
                  'x-death stay.'}),
          progress, replayOut);
    view.append(
      h('p', null, h('a', {href: '#/queues', text: '\u2039 Queues'})),
      h('h1', null, 'Queue ', h('span', {class: 'mono', text: r.queue}),
        h('span', {class: 'note', text: ' in vhost ' + r.vhost})),
      details, hist.el,
      h('div', {class: 'actions'},
        h('section', {class: 'action'}, h('h2', {text: 'Purge'}),
          purge.el),
        h('section', {class: 'action'}, h('h2', {text: 'Delete'}),
          del.el),
        replayBox, getBox),
      h('h2', {text: 'Bindings'}), bindings,
      h('h2', {text: 'Consumers'}), consumers,
      h('h2', {text: 'Messages'}),
      h('div', {class: 'toolbar'}, binfo,
        h('button', {type: 'button', text: 'Refresh',
                     onclick: () => loadBrowse()}), bprev, bnext),
      browse);
    loadBrowse();

    return {
      name: 'queue',
      leave: hist.leave,
      async refresh() {
        const [q, b, c, dl] = await Promise.all([
          get(path + '?' + hist.query()), get(path + '/bindings'),
          get('consumers/' + enc(r.vhost)),
          get(path + '/dead-letters?count=1')]);
        if (!current())
          return;
        clear(details);
        if (!q) {
          details.append(h('p', {class: 'note', text: 'No queue ' +
                                 r.queue + ' in vhost ' + r.vhost +
                                 ' (or this broker has no /api/queues).'}));
        } else {
          details.append(queueDetails(q.data));
          if (q.data.stream)
            details.append(streamNames(q.data));
          hist.draw(q.data.message_stats, q.data);
        }
        /* the replay box only where there are dead letters to replay,
         * and while a replay it started runs */
        replayBox.hidden = replayId === null && !(dl && items(dl).length);
        clear(bindings).append(!b ? unavailable('Bindings') : table(
          ['From exchange', 'Routing key', 'Arguments'],
          items(b).map((x) => h('tr', null,
            cell(x.source === '' ? '(default exchange)' : x.source, 'wrap'),
            cell(text(x.routing_key), 'wrap'),
            cell(text(x.arguments && Object.keys(x.arguments).length ?
                      x.arguments : ''), 'wrap mono'))),
          'No bindings.'));
        const mine = c ? items(c).filter((x) => x.queue &&
          x.queue.name === r.queue && x.queue.vhost === r.vhost) : [];
        /* a stream's consumers read at an offset, each with its lag */
        const log = mine.some((x) => isNum(x.offset));
        clear(consumers).append(!c ? unavailable('Consumers') : table(
          ['Consumer tag', 'Channel', 'Ack required', 'Prefetch#',
           'Exclusive', 'Active'].concat(log ? ['Offset#', 'Lag#'] : []),
          mine.map((x) => h('tr', null,
            cell(text(x.consumer_tag), 'wrap mono'),
            cell(text(x.channel_details && x.channel_details.name), 'wrap'),
            cell(yesno(x.ack_required)),
            cell(num(x.prefetch_count), 'num'),
            cell(yesno(x.exclusive)),
            cell(yesno(x.active)),
            ...(log ? [cell(num(x.offset), 'num'),
                       cell(num(x.lag), 'num')] : []))),
          'No consumers.'));
      },
    };
  }

  /* Get messages (POST /api/queues/V/Q/get): they are delivered, and
   * acknowledged or requeued as the mode says. */
  function getForm(path) {
    const count = h('input', {type: 'number', id: 'get-count', min: 1,
                              value: 1, 'aria-label': 'count'});
    const mode = h('select', {id: 'get-mode', 'aria-label': 'ack mode'},
      [['ack_requeue_true', 'Requeue them'],
       ['ack_requeue_false', 'Acknowledge them (removed)'],
       ['reject_requeue_true', 'Reject, requeue'],
       ['reject_requeue_false', 'Reject, no requeue (dead-letter)']]
        .map(([v, t]) => h('option', {value: v, text: t})));
    const out = h('div', {id: 'get-result'});
    const btn = h('button', {type: 'button', id: 'get', text: 'Get'});
    btn.addEventListener('click', async () => {
      btn.disabled = true;
      clear(out);
      try {
        const res = await api('POST', path + '/get', {json: {
          count: Number(count.value) || 1, ackmode: mode.value,
          encoding: 'auto', truncate: 50000}});
        if (res.status !== 200)
          throw refusal(res, 'Get');
        const list = Array.isArray(res.data) ? res.data : [];
        out.append(table(['Exchange', 'Routing key', 'Redelivered',
                          'Properties', 'Payload'],
          list.map((m) => h('tr', {data: {got: 'true'}},
            cell(m.exchange === '' ? '(default)' : text(m.exchange), 'wrap'),
            cell(text(m.routing_key), 'wrap'),
            cell(yesno(m.redelivered)),
            cell(propsSummary(m.properties), 'wrap mono'),
            cell(payloadText(m), 'payload mono'))),
          'The queue had no ready message.'));
        out.dataset.done = 'true';
      } catch (e) {
        out.append(h('p', {class: 'error', text: e.message}));
        out.dataset.done = 'false';
      } finally {
        btn.disabled = false;
        refresh();
      }
    });
    return h('section', {class: 'action wide'}, h('h2', {text: 'Get ' +
                                                          'messages'}),
             h('div', {class: 'row'}, h('label', null, 'Count ', count),
               mode, btn), out);
  }

  /* {reason: n} as "expired 2, rejected 1", or none */
  function reasons(o) {
    const list = o && typeof o === 'object' ?
      Object.entries(o).filter(([, n]) => isNum(n) && n > 0) : [];
    return list.length ? list.map(([k, n]) => k + ' ' + num(n)).join(', ') :
      'none';
  }

  /* A stream's own rows: its range, append times, size, retention
   * (a policy's value wins over the argument, as for streams) and what
   * retention let go. */
  function streamRows(q, row) {
    const s = q.stream;
    const args = q.arguments || {};
    const pol = q.effective_policy_definition || {};
    const age = pol['max-age'] || args['x-max-age'];
    const len = isNum(pol['max-length-bytes']) ? pol['max-length-bytes'] :
      args['x-max-length-bytes'];
    const keep = [age ? 'max age ' + age : null,
                  isNum(len) ? 'max ' + bytes(len) : null].filter((x) => x);
    return [
      row('Offsets', isNum(s.last_offset) ? num(s.first_offset) + ' \u2013 ' +
          num(s.last_offset) : 'none yet (next ' + num(s.next_offset) + ')',
          'q-stream-range'),
      row('Appended', isNum(s.first_timestamp) ? when(s.first_timestamp) +
          ' \u2013 ' + when(s.last_timestamp) : DASH, 'q-stream-times'),
      row('Stream size', bytes(s.bytes), 'q-stream-bytes'),
      row('Retention', keep.join(', ') || 'none (kept until deleted)',
          'q-stream-retention'),
      row('Let go by retention', num(s.retention_dropped), 'q-stream-dropped'),
    ];
  }

  /* A stream's consumer names and how far behind each is. */
  function streamNames(q) {
    return h('div', {id: 'q-stream-names'}, h('h3', {text: 'Consumer names'}),
      table(['Name', 'Committed offset#', 'Lag#', 'Attached#', 'Last moved'],
        (q.consumer_offsets || []).map((n) => h('tr', {data: {name: n.name}},
          cell(text(n.name), 'wrap mono'),
          cell(num(n.offset), 'num'),
          cell(num(n.lag), 'num'),
          cell(num(n.consumers), 'num'),
          cell(when(n.updated_at)))),
        'No consumer names (x-stream-consumer-name).'));
  }

  function queueDetails(q) {
    const row = (k, v, id) => h('tr', null, h('th', {text: k}),
                                h('td', {text: v, id: id || null}));
    const args = q.arguments && Object.keys(q.arguments).length ?
      q.arguments : '';
    const eff = q.effective_policy_definition &&
      Object.keys(q.effective_policy_definition).length ?
      q.effective_policy_definition : '';
    return h('table', {class: 'kv'}, h('tbody', null,
      row('Type', text(q.type)),
      row('State', text(q.state)),
      row('Features', ['durable', 'auto_delete', 'exclusive']
        .filter((k) => q[k]).join(', ') || DASH),
      row('Arguments', text(args)),
      row('Policy', text(q.policy) + (q.operator_policy ?
        ' (operator policy ' + text(q.operator_policy) + ')' : '')),
      row('Effective policy', text(eff), 'q-policy'),
      row('Ready', num(q.messages_ready), 'q-ready'),
      row('Unacknowledged', num(q.messages_unacknowledged), 'q-unacked'),
      row('Total', num(q.messages), 'q-messages'),
      ...(q.stream ? streamRows(q, row) : []),
      row('Oldest ready message (lag)', duration(headAge(q)), 'q-age'),
      row('Waiting (delayed or backing off)', num(q.messages_waiting),
          'q-waiting'),
      row('Dead-lettered, by reason', reasons(q.dead_lettered), 'q-dead'),
      row('Dropped, by reason', reasons(q.dropped), 'q-dropped'),
      row('Consumers', num(q.consumers)),
      row('Consumer utilisation', isNum(q.consumer_utilisation) ?
        Math.round(q.consumer_utilisation * 100) + '%' : DASH),
      row('Memory', bytes(q.memory)),
      row('Rates', 'publish ' + rate(msRate(q, 'publish')) + ', deliver ' +
        rate(msRate(q, 'deliver_get')) + ', ack ' +
        rate(msRate(q, 'ack')) + ', redeliver ' +
        rate(msRate(q, 'redeliver')) + ', dead-letter ' +
        rate(msRate(q, 'dead_letter'))),
      row('Node', text(q.node))));
  }

  function propsSummary(p) {
    if (!p || typeof p !== 'object')
      return DASH;
    const out = [];
    for (const k of ['message_id', 'correlation_id', 'content_type',
                     'delivery_mode', 'priority', 'expiration'])
      if (p[k] !== undefined && p[k] !== null)
        out.push(k + '=' + text(p[k]));
    const hd = p.headers || {};
    if (Array.isArray(hd['x-death']) && hd['x-death'].length) {
      const d = hd['x-death'][0];
      out.push('x-death: ' + text(d.reason) + ' from ' + text(d.queue) +
               ' (' + text(d.count) + 'x)');
    }
    const others = Object.keys(hd).filter((k) => k !== 'x-death');
    if (others.length)
      out.push('headers: ' + others.join(', '));
    return out.length ? out.join('\n') : DASH;
  }

  function payloadText(m) {
    const max = 300;
    let s = text(m.payload);
    if (m.payload_encoding && m.payload_encoding !== 'string')
      s = '(' + m.payload_encoding + ') ' + s;
    return s.length > max ? s.slice(0, max) + '\u2026' : s;
  }

  /* ---- connections ---- */

  /* "TLSv1.3 TLS_AES_256_GCM_SHA384, client CN=app", or no */
  function tlsText(c) {
    if (!c.ssl)
      return 'no';
    const parts = [text(c.ssl_protocol)];
    if (c.ssl_cipher)
      parts.push(text(c.ssl_cipher));
    if (c.peer_cert_subject)
      parts.push('client ' + text(c.peer_cert_subject));
    return parts.join(' ');
  }

  function connectionsPage(view, r, current) {
    const body = h('div');
    view.append(h('h1', {text: 'Connections'}), body);

    function closeButton(name) {
      const btn = h('button', {type: 'button', class: 'danger',
                               text: 'Close', data: {close: name}});
      const reason = h('input', {type: 'text', value: 'Closed from the web ' +
                                 'page', size: 24, hidden: true,
                                 'aria-label': 'reason',
                                 data: {closeReason: name}});
      const yes = h('button', {type: 'button', class: 'danger confirm',
                               text: 'Close it', hidden: true,
                               data: {closeConfirm: name}});
      const no = h('button', {type: 'button', text: 'Cancel', hidden: true});
      const wrap = h('span', {class: 'row'}, btn, reason, yes, no);
      const toggle = (on) => {
        reason.hidden = yes.hidden = no.hidden = !on;
        btn.hidden = on;
        /* a connection being closed is not redrawn under the user */
        wrap.dataset.busy = on ? 'true' : '';
      };
      btn.addEventListener('click', () => toggle(true));
      no.addEventListener('click', () => toggle(false));
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        try {
          const res = await api('DELETE', 'connections/' + enc(name),
                                {headers: {'X-Reason': reason.value}});
          if (res.status === 204 || res.status === 200)
            flash('Closed connection ' + name + '.');
          else
            flash('Could not close ' + name + ': ' +
                  (res.status === 404 ? 'no such connection, or this ' +
                   'broker cannot close connections (404)' :
                   text(res.data && res.data.reason ||
                        'HTTP ' + res.status)), true);
        } catch (e) {
          flash('Could not close ' + name + ': ' + e.message, true);
        } finally {
          toggle(false);
          yes.disabled = false;
          refresh();
        }
      });
      return wrap;
    }

    return {
      name: 'connections',
      async refresh() {
        if (body.querySelector('[data-busy="true"]'))
          return;
        const res = await get('connections');
        if (!current())
          return;
        clear(body);
        if (!res) {
          body.append(unavailable('The list of connections'));
          return;
        }
        const list = items(res);
        body.append(table(
          ['Name', 'User', 'Vhost', 'Client', 'Protocol', 'TLS', 'State',
           'Channels#', 'Connected at', 'Received#', 'Sent#', ''],
          list.map((c) => {
            const cp = c.client_properties || {};
            /* the name the client gives itself first (RabbitMQ's
             * user_provided_name, from connection_name), then the
             * broker's (what closing it needs) */
            const given = c.user_provided_name || cp.connection_name;
            return h('tr', {data: {connection: c.name}},
              h('td', {class: 'wrap'},
                given ? h('div', {class: 'given', text: text(given)}) : null,
                h('div', {class: given ? 'mono note' : 'mono',
                          text: text(c.name)})),
              cell(text(c.user)),
              cell(text(c.vhost)),
              cell(cp.product ? text(cp.product) + ' ' + text(cp.version) :
                   DASH, 'wrap'),
              cell(text(c.protocol)),
              cell(tlsText(c), 'wrap tls'),
              cell(text(c.state)),
              cell(num(c.channels), 'num'),
              cell(when(c.connected_at)),
              cell(byteRate(c.recv_oct_details), 'num'),
              cell(byteRate(c.send_oct_details), 'num'),
              h('td', null, closeButton(c.name)));
          }),
          'No connections.'));
      },
    };
  }

  /* ---- the pages, and what pages.js uses to add its own ---- */

  const pages = {overview: overviewPage, queues: queuesPage,
                 queue: queuePage, connections: connectionsPage};
  window.Roost = {
    pages, h, clear, flash, api, get, items, table, cell, card, confirmed,
    refusal, unavailable, propsSummary, payloadText, queueHref, enc, text,
    num, rate, bytes, yesno, when, msRate, isNum, HttpError, refresh,
    DASH,
  };

  /* ---- start ---- */

  document.addEventListener('DOMContentLoaded', () => {
    $('login').addEventListener('submit', login);
    $('logout').addEventListener('click', () => logout(''));
    window.addEventListener('hashchange', navigate);
    if (sessionStorage.getItem(AUTH_KEY))
      start();
    else
      showLogin('');
  });
})();
