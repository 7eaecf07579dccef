/*
 * SPDX-License-Identifier: Apache-2.0
 * The web page's history charts: message rates and queued messages over
 * the last 10 minutes, hour or 8 hours, from the samples the management
 * API gives with ?msg_rates_age=&msg_rates_incr=&lengths_age=&lengths_incr=
 * (RabbitMQ's shape: KIND_details.samples, [{sample, timestamp}], newest
 * first; a rate's samples are running counts, a depth's are depths).
 * Drawn by uPlot (www/vendor/, MIT), not by hand.
 *
 *   RoostCharts.RANGES                   the ranges offered
 *   RoostCharts.query(range)             the query string for one
 *   RoostCharts.series(stats, lengths, range)  {x, rates, depths, span}
 *   RoostCharts.Pair(el)                 two charts in 'el'; .draw(s)
 *
 * Each chart's element keeps its uPlot as el.uplot, so that a test (and
 * a curious operator's console) can read back what was drawn.
 */
'use strict';

(function () {
  /* age and step in seconds; the broker rounds the step up to its own */
  const RANGES = [
    {id: '10m', label: '10 min', age: 600, incr: 5},
    {id: '1h', label: '1 hour', age: 3600, incr: 60},
    {id: '8h', label: '8 hours', age: 28800, incr: 600},
  ];

  /* message_stats keys, their labels and colours */
  const RATES = [
    ['publish', 'Publish', '#1f6feb'],
    ['deliver_get', 'Deliver', '#067647'],
    ['ack', 'Ack', '#7a5af8'],
    ['redeliver', 'Redeliver', '#b54708'],
    ['dead_letter', 'Dead-lettered', '#b42318'],
  ];
  const DEPTHS = [
    ['messages_ready', 'Ready', '#1f6feb'],
    ['messages_unacknowledged', 'Unacknowledged', '#b54708'],
  ];

  function query(range) {
    const r = RANGES.find((x) => x.id === range) || RANGES[0];
    return 'lengths_age=' + r.age + '&lengths_incr=' + r.incr +
      '&msg_rates_age=' + r.age + '&msg_rates_incr=' + r.incr;
  }

  /* samples of 'details', oldest first, as [[t_ms, v], ...] */
  function samples(details) {
    const s = details && Array.isArray(details.samples) ? details.samples : [];
    return s.filter((p) => typeof p.sample === 'number' &&
                    typeof p.timestamp === 'number')
      .map((p) => [p.timestamp, p.sample]).sort((a, b) => a[0] - b[0]);
  }

  /*
   * The series to draw from 'stats' (message_stats) and 'lengths' (the
   * object holding messages_ready_details: queue_totals or the queue):
   * x in seconds (uPlot's time scale), a rate per step between two
   * samples (placed at the later one), a depth as sampled; span: the
   * range's window, ending now (or at the newest sample, if the
   * broker's clock is ahead), so that a single sample sits at its time
   * instead of uPlot stretching the axis around it.
   */
  function series(stats, lengths, range) {
    const times = new Set();
    const rs = RATES.map(([k]) => samples(stats && stats[k + '_details']));
    const ds = DEPTHS.map(([k]) => samples(lengths && lengths[k + '_details']));
    for (const s of rs.concat(ds))
      for (const [t] of s)
        times.add(t);
    const x = [...times].sort((a, b) => a - b);
    const at = (s) => new Map(s);
    const rates = rs.map((s) => {
      const m = at(s);
      return x.map((t, i) => {
        if (i === 0 || !m.has(t) || !m.has(x[i - 1]))
          return null;
        const dt = (t - x[i - 1]) / 1000;
        const dv = m.get(t) - m.get(x[i - 1]);
        return dt > 0 && dv >= 0 ? dv / dt : null;
      });
    });
    const depths = ds.map((s) => {
      const m = at(s);
      return x.map((t) => m.has(t) ? m.get(t) : null);
    });
    const r = RANGES.find((y) => y.id === range) || RANGES[0];
    const end = Math.max(Date.now(), x.length ? x[x.length - 1] : 0) / 1000;
    return {x: x.map((t) => t / 1000), rates, depths,
            span: [end - r.age, end]};
  }

  function fmtRate(u, v) {
    return v === null || v === undefined ? '\u2013' :
      (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1)) + '/s';
  }
  function fmtCount(u, v) {
    return v === null || v === undefined ? '\u2013' :
      Math.round(v).toLocaleString('en-US');
  }

  /* One uPlot chart in a fresh element under 'parent'. */
  function chart(parent, id, title, defs, fmt, span) {
    const el = document.createElement('div');
    el.className = 'chart';
    el.id = id;
    parent.append(el);
    const width = () => Math.max(240, Math.floor(el.clientWidth ||
                                                  parent.clientWidth || 600));
    const opts = {
      title, width: width(), height: 180,
      series: [{}].concat(defs.map(([, label, stroke]) => ({
        label, stroke, width: 1.5, value: fmt, spanGaps: false,
      }))),
      axes: [{space: 80}, {values: (u, vals) => vals.map((v) => fmt(u, v)),
                  size: 64}],
      scales: {
        x: {time: true, range: (u, min, max) => span() || [min, max]},
        y: {range: (u, min, max) => [0, Math.max(1, max * 1.1)]},
      },
      legend: {live: true},
    };
    const empty = [[]].concat(defs.map(() => []));
    const u = new uPlot(opts, empty, el);
    el.uplot = u;
    return {el, u, resize() { u.setSize({width: width(), height: 180}); }};
  }

  /* Two charts, rates and depths, in 'parent'. */
  class Pair {
    constructor(parent, prefix) {
      this.span = null;
      const span = () => this.span;
      this.rates = chart(parent, prefix + '-rates', 'Message rates', RATES,
                         fmtRate, span);
      this.depths = chart(parent, prefix + '-depths', 'Queued messages',
                          DEPTHS, fmtCount, span);
      this.onresize = () => {
        this.rates.resize();
        this.depths.resize();
      };
      window.addEventListener('resize', this.onresize);
    }
    draw(s) {
      this.span = s.span;
      this.rates.u.setData([s.x].concat(s.rates));
      this.depths.u.setData([s.x].concat(s.depths));
      this.rates.el.dataset.points = String(s.x.length);
      this.depths.el.dataset.points = String(s.x.length);
    }
    destroy() {
      window.removeEventListener('resize', this.onresize);
      this.rates.u.destroy();
      this.depths.u.destroy();
    }
  }

  window.RoostCharts = {RANGES, RATES, DEPTHS, query, series, Pair};
})();
