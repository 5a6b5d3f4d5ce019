// Just enough of the Prometheus text format for the metrics view: samples
// as {name, labels, value}; comments and timestamps are skipped.

export function parseProm(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    out.push({name: m[1], labels: m[3] ? parseLabels(m[3]) : {}, value: parseFloat(m[4])});
  }
  return out;
}

function parseLabels(s) {
  const labels = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  let m;
  while ((m = re.exec(s))) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  return labels;
}

// sum adds the samples named name whose labels match every entry of where
// (a string, or a function of the label value).
export function sum(samples, name, where = {}) {
  let total = 0;
  for (const x of samples) {
    if (x.name !== name) continue;
    let ok = true;
    for (const [k, v] of Object.entries(where)) {
      const got = x.labels[k];
      if (typeof v === 'function' ? !v(got) : got !== v) { ok = false; break; }
    }
    if (ok) total += x.value;
  }
  return total;
}

// buckets returns a histogram's cumulative buckets [{le, count}] (le as a
// number, +Inf last) summed over the series matching where.
export function buckets(samples, name, where = {}) {
  const byLe = new Map();
  for (const x of samples) {
    if (x.name !== name + '_bucket') continue;
    if (!Object.entries(where).every(([k, v]) => x.labels[k] === v)) continue;
    const le = x.labels.le === '+Inf' ? Infinity : parseFloat(x.labels.le);
    byLe.set(le, (byLe.get(le) || 0) + x.value);
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({le, count}));
}

// quantile estimates the q-quantile from the difference of two bucket
// snapshots (linear within a bucket, as Prometheus' histogram_quantile).
export function quantile(q, now, before) {
  const prev = new Map((before || []).map(b => [b.le, b.count]));
  const d = now.map(b => ({le: b.le, count: b.count - (prev.get(b.le) || 0)}));
  const total = d.length ? d[d.length - 1].count : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const b of d) {
    if (b.count >= rank) {
      if (b.le === Infinity) return lower;
      return lower + (b.le - lower) * ((rank - below) / Math.max(b.count - below, 1e-12));
    }
    lower = b.le;
    below = b.count;
  }
  return lower;
}
