// Small DOM helpers. Text from the server is only ever set as text
// (textContent, attributes), never parsed as HTML.

import {sonaName} from './api.js';

const SVG = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k in el && !(el instanceof SVGElement) && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h('div', {class: 'x'}, 'text', child…) builds an HTML element.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s('rect', {x: 1}) builds an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

export function shortCID(cid) {
  return cid && cid.length > 20 ? cid.slice(0, 10) + '…' + cid.slice(-6) : cid || '';
}

export function fmtTime(unix) {
  if (!unix) return '—';
  const d = new Date(unix * 1000);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return '—';
  if (Number.isInteger(x)) return String(x);
  return Number(x).toFixed(digits);
}

export function ago(unix, now = Date.now() / 1000) {
  if (!unix) return '—';
  const d = Math.round(now - unix);
  if (d < 0) return 'in the future';
  if (d < 60) return d + ' s ago';
  if (d < 3600) return Math.round(d / 60) + ' min ago';
  if (d < 86400) return Math.round(d / 3600) + ' h ago';
  return Math.round(d / 86400) + ' d ago';
}

// memoryText is a memory's readable text, whatever its kind.
export function memoryText(m) {
  const d = (m && m.data) || {};
  switch (d.kind) {
    case 'self': return (d.parts || []).map(p => p.content).join('\n');
    case 'other': case 'text': return d.content || '';
    case 'file': return `[file ${d.name || ''} ${d.mimeType || ''}]`.replace(/\s+/g, ' ');
  }
  return '';
}

export function memorySpeaker(m) {
  const d = (m && m.data) || {};
  return d.name || (d.kind === 'text' ? '' : d.kind || '');
}

export function snippet(text, n = 140) {
  text = (text || '').replace(/\s+/g, ' ').trim();
  return text.length > n ? text.slice(0, n - 1) + '…' : text;
}

// bar is a horizontal bar for a value in 0..max.
export function bar(value, max = 1, label = '') {
  const pct = max > 0 ? Math.max(0, Math.min(1, value / max)) * 100 : 0;
  return h('span', {class: 'bar', role: 'img', 'aria-label': `${label} ${fmtNum(value)}`.trim(), title: fmtNum(value)},
    h('span', {class: 'bar-fill', style: {width: pct.toFixed(1) + '%'}}));
}

export function kindBadge(kind, extra = '') {
  return h('span', {class: `badge kind-${kind || 'none'} ${extra}`.trim()}, kind || '?');
}

export function memoryLink(cid, text) {
  return h('a', {href: '#/memory/' + cid, class: 'mono', title: cid}, text || shortCID(cid));
}

export function section(title, ...children) {
  return h('section', {class: 'card'}, h('h2', {}, title), ...children);
}

export function empty(text) {
  return h('p', {class: 'muted empty'}, text);
}

// sonaLink links to a sona, showing its name once known.
export function sonaLink(uuid) {
  const a = h('a', {href: '#/sona/' + uuid, 'data-sona': uuid, title: uuid}, uuid.slice(0, 8) + '…');
  sonaName(uuid).then(name => { if (name) a.textContent = name; });
  return a;
}
