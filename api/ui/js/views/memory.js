// One memory: its content, metadata, edges (its supports), associations
// and co-access partners, its EUMAS evaluation, and its raw block re-hashed
// here against the CID.

import {get, request, qs} from '../api.js';
import {h, fmtTime, fmtNum, bar, memoryText, memorySpeaker, snippet, kindBadge, sonaLink, section, empty} from '../dom.js';
import {errorBox} from '../shell.js';
import {verifyBlock, hex} from '../cid.js';

export async function memoryView(ctx) {
  const cid = ctx.params[0];
  const m = await get('/memory/' + encodeURIComponent(cid));
  if (!ctx.alive()) return;
  ctx.title('Memory ' + cid.slice(-8));
  const meta = m.meta || {};
  const {main} = ctx;
  const verify = h('div', {id: 'verify', class: 'verify', 'aria-live': 'polite'}, 'Fetching the raw block…');
  const links = h('div', {}, 'Loading…');
  // Co-access is learnt per agent: the memory's own agent by default.
  const coAgent = h('input', {id: 'coaccess-agent', type: 'text', value: meta.agent_id || '', autocomplete: 'off', placeholder: '(default agent)'});
  const coAgentForm = h('form', {class: 'toolbar'}, h('label', {for: 'coaccess-agent'}, 'Co-access of agent'), coAgent,
    h('button', {type: 'submit', class: 'secondary'}, 'Show'));
  coAgentForm.addEventListener('submit', e => {
    e.preventDefault();
    loadLinks(cid, coAgent.value, links).catch(err => links.replaceChildren(errorBox(err)));
  });
  const evaluation = h('div', {}, 'Loading…');
  const sonaLinks = (meta.sonas || []).slice(0, 20).map(sonaLink);

  main.append(
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/'}, 'Sonas'), ' / ',
      sonaLinks.length ? sonaLink(meta.sonas[0]) : 'memory', ' / ', h('span', {class: 'mono'}, cid.slice(0, 12) + '…')),
    h('h1', {}, kindBadge(m.data.kind), ' ', memorySpeaker(m) || 'Memory'),
    h('p', {class: 'actions'},
      h('a', {class: 'button', href: '#/graph/' + cid}, 'Graph around this memory')),
    content(m),
    section('Metadata', h('dl', {class: 'facts'},
      fact('CID', h('span', {class: 'mono break', id: 'memory-cid'}, cid)),
      fact('timestamp', fmtTime(m.timestamp)),
      fact('kind', meta.kind || '—'),
      fact('sonas', sonaLinks.length ? h('span', {class: 'list'}, sonaLinks, meta.sonas.length > 20 ? `and ${meta.sonas.length - 20} more` : null) : '—'),
      fact('agent_id', meta.agent_id || '—'),
      'importance' in meta ? fact('importance', h('span', {}, bar(meta.importance, 1, 'importance'), ' ', fmtNum(meta.importance))) : null,
      'access_count' in meta ? fact('access count', String(meta.access_count)) : null,
      fact('created', fmtTime(meta.created_at)),
      meta.expires_at ? fact('expires', fmtTime(meta.expires_at)) : null,
      fact('flags', [meta.backbone && 'backbone', meta.archived && 'archived'].filter(Boolean).join(', ') || '—'),
      fact('labels', Object.keys(meta.labels || {}).length
        ? Object.entries(meta.labels).map(([k, v]) => h('span', {class: 'badge label'}, `${k}=${v}`)) : '—'),
      meta.insight ? fact('insight', `${meta.insight.category} (confidence ${fmtNum(meta.insight.confidence, 2)})`) : null)),
    section(`Edges (${m.edges.length}): what this memory rests on`, edgeList(m.edges)),
    section('Associations and co-access', coAgentForm, links),
    section('Evaluation (EUMAS)', evaluation),
    section('Raw block', verify));

  // The rest loads side by side; each part shows its own error.
  await Promise.all([
    loadLinks(cid, coAgent.value, links).catch(e => links.replaceChildren(errorBox(e))),
    loadEvaluation(cid, evaluation).catch(e => evaluation.replaceChildren(errorBox(e))),
    verifyRaw(cid, verify).catch(e => verify.replaceChildren(errorBox(e))),
    fillSnippets(main),
  ]);
}

function fact(name, value) {
  return [h('dt', {}, name), h('dd', {}, value)];
}

function content(m) {
  const d = m.data;
  if (d.kind === 'self') {
    return section('Response', ...(d.parts || []).map(p =>
      h('div', {class: 'part'}, h('p', {class: 'text'}, p.content), p.model ? h('p', {class: 'muted small'}, 'model: ' + p.model) : null)),
    d.stop_reason ? h('p', {class: 'muted small'}, 'stop reason: ' + d.stop_reason) : null);
  }
  if (d.kind === 'file') {
    const fileCID = d.content && d.content['/'];
    const out = h('div', {});
    const btn = h('button', {type: 'button', onclick: async () => {
      try {
        const resp = await request('GET', '/file/' + m.cid, {raw: true});
        const url = URL.createObjectURL(await resp.blob());
        out.append(h('p', {}, h('a', {href: url, download: d.name || fileCID}, 'Save ' + (d.name || 'the file'))));
        btn.disabled = true;
      } catch (e) { out.append(errorBox(e)); }
    }}, 'Fetch the file');
    return section('File', h('dl', {class: 'facts'},
      fact('name', d.name || '—'), fact('type', d.mimeType || '—'), fact('content', h('span', {class: 'mono break'}, fileCID))), btn, out);
  }
  return section(d.kind === 'other' ? 'Input' : 'Text', h('p', {class: 'text'}, memoryText(m)));
}

function edgeList(edges) {
  if (!edges.length) return empty('No edges: nothing was recalled into it or named at insert.');
  const max = Math.max(...edges.map(e => e.weight), 1e-9);
  return h('ul', {class: 'edges'}, edges.map(e => linkRow(e.target['/'], e.weight, max, 'edge')));
}

function linkRow(target, strength, max, type) {
  return h('li', {class: 'link-row'},
    h('span', {class: 'badge link-' + type}, type),
    bar(strength, max, type + ' weight'), h('span', {class: 'num'}, fmtNum(strength)),
    h('a', {href: '#/memory/' + target, class: 'mono edge-link', 'data-target': target, title: target}, target.slice(0, 14) + '…'),
    h('span', {class: 'snippet muted', 'data-snippet': target}, ''));
}

async function loadLinks(cid, agent, el) {
  const l = await get('/memory/' + cid + '/links' + qs({agent_id: agent}));
  const rows = [...l.associations.map(a => ({...a, kind: a.type})), ...l.coaccess.map(a => ({...a, kind: 'coaccess'}))];
  if (!rows.length) { el.replaceChildren(empty('No associations or co-access partners.')); return; }
  const max = Math.max(...rows.map(r => r.strength), 1e-9);
  el.replaceChildren(h('ul', {class: 'edges'}, rows.map(r => linkRow(r.target['/'], r.strength, max, r.kind))));
  await fillSnippets(el);
}

// fillSnippets shows the text of each linked memory (at most 40).
async function fillSnippets(root) {
  const cells = [...root.querySelectorAll('[data-snippet]:empty')].slice(0, 40);
  await Promise.all(cells.map(async cell => {
    try {
      const m = await get('/memory/' + cell.dataset.snippet);
      cell.textContent = snippet((memorySpeaker(m) ? memorySpeaker(m) + ': ' : '') + memoryText(m), 90);
    } catch (e) {
      cell.textContent = `(${e.status || ''} ${e.code || e.message})`;
    }
  }));
}

async function loadEvaluation(cid, el) {
  let ev;
  try {
    ev = await get('/memory/' + cid + '/evaluation');
  } catch (e) {
    if (e.status === 404) { el.replaceChildren(empty('Not evaluated yet (the evaluator works behind the writes).')); return; }
    throw e;
  }
  const parts = ev.archetypes.map(a => h('div', {class: 'archetype'},
    h('h3', {}, a.archetype, ' ', h('span', {class: 'muted small'}, `priority ${fmtNum(a.priority.score, 2)}, decay rate ${fmtNum(a.priority.decay_rate, 2)}`)),
    h('table', {class: 'metrics'},
      h('tbody', {}, Object.entries(a.metrics).sort((x, y) => y[1] - x[1]).map(([k, v]) =>
        h('tr', {}, h('th', {scope: 'row'}, k.replace(/_/g, ' ')), h('td', {}, bar(v, 1, k)), h('td', {class: 'num'}, fmtNum(v, 2)),
          h('td', {class: 'muted small'}, (a.justifications || {})[k] || ''))))),
    a.priority_justification ? h('p', {class: 'muted small'}, a.priority_justification) : null,
    a.annotations && a.annotations.spoken ? h('p', {class: 'small'}, a.annotations.spoken) : null));
  const failures = ev.failures.map(f => h('p', {class: 'error'}, `${f.archetype}: ${f.error}`));
  el.replaceChildren(h('p', {class: 'muted small'}, `evaluated ${fmtTime(ev.evaluated_at)} by ${ev.evaluator}`), ...parts, ...failures);
}

// verifyRaw fetches the exact block from the trustless gateway and
// re-hashes it against the CID's multihash.
async function verifyRaw(cid, el) {
  const resp = await request('GET', '/ipfs/' + cid, {accept: 'application/vnd.ipld.raw', raw: true});
  const block = await resp.arrayBuffer();
  const r = await verifyBlock(cid, block);
  const bytes = new Uint8Array(block);
  el.dataset.result = r.ok ? 'verified' : 'mismatch';
  el.replaceChildren(
    h('p', {class: r.ok ? 'ok' : 'bad', id: 'verify-result'},
      r.ok ? '✓ verified: ' : '✗ mismatch: ',
      r.ok ? `the ${bytes.length}-byte ${r.codec} block hashes (${r.algorithm}, by ${r.by}) to the CID's digest`
        : `the ${bytes.length} bytes received do not hash (${r.algorithm}, by ${r.by}) to the CID's digest: they are not the block the CID names`),
    h('dl', {class: 'facts'},
      fact('CID digest', h('span', {class: 'mono break'}, r.expected)),
      fact('block digest', h('span', {class: 'mono break'}, r.actual))),
    h('details', {}, h('summary', {}, `First ${Math.min(256, bytes.length)} bytes (hex)`),
      h('pre', {class: 'hex'}, hex(bytes.slice(0, 256)).replace(/(.{64})/g, '$1\n'))));
}
