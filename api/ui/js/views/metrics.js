// Live metrics: GET /metrics polled (admin scope when the server has
// tokens), a few series turned into rates and drawn as small charts.

import {request} from '../api.js';
import {h, s, fmtNum} from '../dom.js';
import {errorBox} from '../shell.js';
import {parseProm, sum, buckets, quantile} from '../prom.js';

const KEEP = 90; // samples per chart

export async function metricsView(ctx) {
  ctx.title('Metrics');
  const {main, query} = ctx;
  const every = Math.max(250, Number(query.get('every')) || 2000);
  const gauges = h('dl', {class: 'facts', id: 'gauges'});
  const charts = {
    writes: chart('Memories written per second', '/s'),
    requests: chart('HTTP requests per second', '/s'),
    recall: chart('Recall latency (mean and p95 over the interval)', 'ms', ['mean', 'p95']),
  };
  const err = h('div', {});
  main.append(h('h1', {}, 'Metrics'),
    h('p', {class: 'muted'}, `GET /metrics every ${every / 1000} s; rates are over each interval.`),
    err, gauges, h('div', {class: 'charts'}, Object.values(charts).map(c => c.el)));

  let prev = null;
  async function poll() {
    let text;
    try {
      const resp = await request('GET', '/metrics', {raw: true});
      text = await resp.text();
      err.replaceChildren();
    } catch (e) {
      err.replaceChildren(errorBox(e));
      return e.status !== 401 && e.status !== 403; // a token problem stops the polling
    }
    if (!ctx.alive()) return false;
    const x = parseProm(text);
    const now = {
      t: performance.now() / 1000,
      memories: sum(x, 'memoria_memories'),
      requests: sum(x, 'memoria_http_requests_total'),
      recallSum: sum(x, 'memoria_recall_duration_seconds_sum'),
      recallCount: sum(x, 'memoria_recall_duration_seconds_count'),
      recallBuckets: buckets(x, 'memoria_recall_duration_seconds'),
    };
    gauges.replaceChildren(
      h('dt', {}, 'sonas'), h('dd', {}, fmtNum(sum(x, 'memoria_sonas'))),
      h('dt', {}, 'memories'), h('dd', {}, fmtNum(now.memories)),
      h('dt', {}, 'vector index'), h('dd', {}, fmtNum(sum(x, 'memoria_index_entries', {index: 'vector'}))),
      h('dt', {}, 'text index'), h('dd', {}, fmtNum(sum(x, 'memoria_index_entries', {index: 'text'}))),
      h('dt', {}, 'recalls'), h('dd', {}, fmtNum(now.recallCount)));
    if (prev) {
      const dt = Math.max(1e-3, now.t - prev.t);
      charts.writes.push([Math.max(0, now.memories - prev.memories) / dt]);
      charts.requests.push([Math.max(0, now.requests - prev.requests) / dt]);
      const n = now.recallCount - prev.recallCount;
      const mean = n > 0 ? 1000 * (now.recallSum - prev.recallSum) / n : null;
      const p95 = n > 0 ? quantile(0.95, now.recallBuckets, prev.recallBuckets) : null;
      charts.recall.push([mean, p95 === null ? null : 1000 * p95]);
    }
    prev = now;
    return true;
  }

  let timer = 0;
  ctx.onCleanup(() => clearTimeout(timer));
  const loop = async () => {
    if (await poll() && ctx.alive()) timer = setTimeout(loop, every);
  };
  await loop();
}

// chart is a small line chart of the last KEEP samples of one or more series.
function chart(title, unit, series = ['value']) {
  const data = [];
  const svgBox = h('div', {class: 'chart-box'});
  const last = h('p', {class: 'num chart-last'}, '…');
  const el = h('figure', {class: 'chart card'}, h('figcaption', {}, title), svgBox, last);
  const Wd = 320, Ht = 110;
  function draw() {
    const vals = data.flat().filter(v => v !== null);
    const max = Math.max(1e-9, ...vals) * 1.1;
    // Newest at the right edge, older samples to the left.
    const x = i => Wd - 4 - ((data.length - 1 - i) * (Wd - 8)) / (KEEP - 1);
    const y = v => Ht - (Ht * v) / max;
    const svg = s('svg', {viewBox: `0 0 ${Wd} ${Ht + 14}`, class: 'spark', role: 'img', 'aria-label': `${title}: latest ${last.textContent}`},
      s('line', {x1: 0, y1: Ht, x2: Wd, y2: Ht, class: 'axis'}),
      s('text', {x: 2, y: 10, class: 'tick'}, `${fmtNum(max, 1)} ${unit}`),
      s('text', {x: 2, y: Ht + 12, class: 'tick'}, `0 · ${data.length} samples, newest right`));
    series.forEach((_, k) => {
      const pts = data.map((d, i) => (d[k] === null ? null : `${x(i).toFixed(1)},${y(d[k]).toFixed(1)}`)).filter(Boolean);
      if (pts.length) svg.append(s('polyline', {points: pts.join(' '), class: `line line-${k}`}));
      const lastPt = pts[pts.length - 1];
      if (lastPt) svg.append(s('circle', {cx: lastPt.split(',')[0], cy: lastPt.split(',')[1], r: 2.5, class: `dot line-${k}`}));
    });
    svgBox.replaceChildren(svg);
  }
  draw();
  return {
    el,
    push(values) {
      data.push(values);
      if (data.length > KEEP) data.shift();
      last.replaceChildren(...series.flatMap((name, k) => [k ? ' · ' : '',
        series.length > 1 ? h('span', {class: `swatch series-${k}`}) : '', series.length > 1 ? ` ${name} ` : '',
        values[k] === null ? '—' : fmtNum(values[k], 2) + ' ' + unit]));
      draw();
    },
  };
}
