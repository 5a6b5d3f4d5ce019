// The memory DAG around a memory, drawn as SVG in layers: the memory in
// the first column, what it links to in the next, and so on. Clicking (or
// Enter on) a node expands it with its own edges, associations and
// co-access partners.

import {get} from '../api.js';
import {h, s, memoryText, memorySpeaker, snippet, fmtNum, kindBadge, shortCID} from '../dom.js';
import {errorBox} from '../shell.js';

const W = 220, H = 46, GAP_X = 280, GAP_Y = 60, PAD = 24;
const MAX_ASSOC = 8, MAX_COACCESS = 6, MAX_EDGES = 16;
// Symmetric link types are drawn once per pair.
const SYMMETRIC = new Set(['similar', 'sequential', 'coaccess', 'related', 'causal']);
const TYPES = ['edge', 'causal', 'sequential', 'related', 'similar', 'coaccess'];

export async function graphView(ctx) {
  const root = ctx.params[0];
  ctx.title('Graph ' + root.slice(-8));
  const {main} = ctx;
  const nodes = new Map(); // cid → {cid, layer, memory, expanded, error}
  const links = new Map(); // key → {from, to, type, weight}
  const show = Object.fromEntries(TYPES.map(t => [t, true]));
  let selected = root;

  const svgBox = h('div', {class: 'graph-box'});
  const panel = h('aside', {class: 'graph-panel card', 'aria-live': 'polite'});
  const counts = h('span', {class: 'muted'});
  const toggles = TYPES.map(t => h('label', {class: 'toggle'},
    h('input', {type: 'checkbox', checked: true, onchange: e => { show[t] = e.target.checked; draw(); }}),
    h('span', {class: 'swatch link-' + t}), t));
  main.append(
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/memory/' + root}, 'Memory'), ' / graph'),
    h('h1', {}, 'Graph around ', h('span', {class: 'mono'}, shortCID(root))),
    h('p', {class: 'muted'}, 'Click or press Enter on a memory to expand it. Edges point from a memory to what it rests on; associations and co-access are undirected.'),
    h('div', {class: 'toolbar'}, ...toggles, counts),
    h('div', {class: 'graph-layout'}, svgBox, panel));

  function addNode(cid, layer) {
    if (!nodes.has(cid)) nodes.set(cid, {cid, layer, memory: null, expanded: false});
    return nodes.get(cid);
  }
  function addLink(from, to, type, weight) {
    const key = SYMMETRIC.has(type) && from > to ? `${to}|${from}|${type}` : `${from}|${to}|${type}`;
    if (!links.has(key)) links.set(key, {from, to, type, weight});
  }

  async function load(n) {
    if (n.memory || n.error) return;
    try { n.memory = await get('/memory/' + n.cid); } catch (e) { n.error = e; }
  }

  async function expand(cid) {
    const n = nodes.get(cid);
    if (n.expanded) return;
    n.expanded = true;
    await load(n);
    if (!n.memory) return;
    const next = n.layer + 1;
    for (const e of n.memory.edges.slice(0, MAX_EDGES)) {
      addNode(e.target['/'], next);
      addLink(cid, e.target['/'], 'edge', e.weight);
    }
    try {
      const l = await get('/memory/' + cid + '/links');
      for (const a of l.associations.slice(0, MAX_ASSOC)) {
        addNode(a.target['/'], next);
        addLink(cid, a.target['/'], a.type, a.strength);
      }
      for (const a of l.coaccess.slice(0, MAX_COACCESS)) {
        addNode(a.target['/'], next);
        addLink(cid, a.target['/'], 'coaccess', a.strength);
      }
    } catch (e) {
      n.linkError = e;
    }
    await Promise.all([...nodes.values()].map(load));
  }

  function layout() {
    const cols = new Map();
    for (const n of nodes.values()) {
      if (!cols.has(n.layer)) cols.set(n.layer, []);
      const col = cols.get(n.layer);
      n.x = PAD + n.layer * GAP_X;
      n.y = PAD + col.length * GAP_Y;
      col.push(n);
    }
    const layers = Math.max(...cols.keys()) + 1;
    const rows = Math.max(...[...cols.values()].map(c => c.length));
    return {width: PAD * 2 + (layers - 1) * GAP_X + W + 60, height: PAD * 2 + (rows - 1) * GAP_Y + H};
  }

  function path(a, b) {
    const ya = a.y + H / 2, yb = b.y + H / 2;
    if (b.x > a.x) {
      const x1 = a.x + W, x2 = b.x, mx = (x1 + x2) / 2;
      return `M${x1},${ya} C${mx},${ya} ${mx},${yb} ${x2},${yb}`;
    }
    if (b.x < a.x) {
      const x1 = a.x, x2 = b.x + W, mx = (x1 + x2) / 2;
      return `M${x1},${ya} C${mx},${ya} ${mx},${yb} ${x2},${yb}`;
    }
    const x = a.x + W, bulge = x + 40 + Math.min(60, Math.abs(yb - ya) / 4);
    return `M${x},${ya} C${bulge},${ya} ${bulge},${yb} ${x},${yb}`;
  }

  function draw() {
    const {width, height} = layout();
    const svg = s('svg', {class: 'graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-label': 'Memory graph'},
      s('defs', {}, TYPES.map(t => s('marker', {id: 'arrow-' + t, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse'},
        s('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrow link-' + t})))));
    let shown = 0;
    for (const l of links.values()) {
      if (!show[l.type]) continue;
      shown++;
      const a = nodes.get(l.from), b = nodes.get(l.to);
      svg.append(s('path', {d: path(a, b), class: 'glink link-' + l.type, 'marker-end': l.type === 'edge' ? `url(#arrow-edge)` : null,
        'stroke-width': (1 + 3 * Math.min(1, l.weight)).toFixed(2)},
      s('title', {}, `${l.type} ${fmtNum(l.weight)}`)));
    }
    for (const n of nodes.values()) {
      const m = n.memory;
      const label = m ? snippet((memorySpeaker(m) ? memorySpeaker(m) + ': ' : '') + memoryText(m), 28) : n.error ? `(${n.error.status} ${n.error.code})` : shortCID(n.cid);
      const g = s('g', {class: `gnode ${m ? 'kind-' + m.data.kind : 'unknown'} ${n.cid === selected ? 'selected' : ''} ${n.expanded ? 'expanded' : ''}`,
        transform: `translate(${n.x},${n.y})`, tabindex: 0, role: 'button', 'data-cid': n.cid,
        'aria-label': `${m ? m.data.kind : 'memory'} ${label}${n.expanded ? ' (expanded)' : ''}`},
      s('rect', {width: W, height: H, rx: 6}),
      s('text', {x: 10, y: 18, class: 'gl1'}, m ? `${m.data.kind} · ${shortCID(n.cid)}` : shortCID(n.cid)),
      s('text', {x: 10, y: 35, class: 'gl2'}, label),
      s('title', {}, m ? memoryText(m).slice(0, 400) : n.cid));
      const activate = () => select(n.cid);
      g.addEventListener('click', activate);
      g.addEventListener('keydown', e => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); activate(); } });
      svg.append(g);
    }
    counts.textContent = `${nodes.size} memories, ${shown} links shown`;
    svgBox.replaceChildren(svg);
    drawPanel();
  }

  function drawPanel() {
    const n = nodes.get(selected);
    const m = n && n.memory;
    if (!m) { panel.replaceChildren(n && n.error ? errorBox(n.error) : h('p', {}, '…')); return; }
    const around = [...links.values()].filter(l => l.from === n.cid || l.to === n.cid);
    panel.replaceChildren(
      h('h2', {}, kindBadge(m.data.kind), ' ', memorySpeaker(m) || 'Memory'),
      h('p', {class: 'text'}, snippet(memoryText(m), 600)),
      h('p', {class: 'mono small break'}, n.cid),
      h('p', {class: 'actions'},
        h('a', {class: 'button', href: '#/memory/' + n.cid, id: 'graph-open'}, 'Open memory'),
        n.cid !== root ? h('a', {class: 'button secondary', href: '#/graph/' + n.cid}, 'Center here') : null),
      h('p', {class: 'muted small'}, `${around.length} links drawn` + (n.linkError ? `; associations unavailable: ${n.linkError.describe()}` : '')));
  }

  async function select(cid) {
    selected = cid;
    draw();
    await expand(cid);
    if (!ctx.alive()) return;
    draw();
    const g = svgBox.querySelector(`[data-cid="${cid}"]`);
    if (g) g.focus();
  }

  addNode(root, 0);
  await expand(root);
  if (!ctx.alive()) return;
  draw();
}
