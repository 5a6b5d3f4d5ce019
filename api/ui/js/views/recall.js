// The recall playground: POST /sona/{uuid}/recall with "explain": true,
// the hits in rank order, then what co-access and expansion reached from
// them by score, each score drawn as the stacked contributions it adds up
// from; an as_of slider over the sona's chain travels back in time.

import {get, post, qs} from '../api.js';
import {h, fmtNum, fmtTime, memoryText, memorySpeaker, snippet, kindBadge, memoryLink, empty} from '../dom.js';
import {errorBox} from '../shell.js';

// The explain contributions, in drawing order.
const PARTS = ['dense', 'bm25', 'affinity', 'metric', 'recency', 'importance', 'sona_similarity', 'path'];

export async function recallView(ctx) {
  ctx.title('Recall');
  const {main, query} = ctx;
  const sonas = await allSonas();
  if (!ctx.alive()) return;
  const pick = query.get('sona') || (sonas[0] && sonas[0].uuid) || '';
  const field = (id, label, input, hint) => h('div', {class: 'field'}, h('label', {for: id}, label), input, hint ? h('span', {class: 'muted small'}, hint) : null);

  const sonaSel = h('select', {id: 'recall-sona', required: true},
    sonas.map(s => h('option', {value: s.uuid, selected: s.uuid === pick}, `${s.name} (${s.length})`)));
  const q = h('input', {id: 'recall-query', type: 'text', required: true, value: query.get('q') || '', placeholder: 'what should the sona remember?'});
  const scope = h('select', {id: 'recall-scope'}, h('option', {value: ''}, 'server default'),
    h('option', {value: 'self'}, 'self (every sona)'), h('option', {value: 'sona'}, 'sona (this sona and the backbone)'));
  const k = h('input', {id: 'recall-k', type: 'number', min: 1, max: 100, value: '10'});
  const budget = h('input', {id: 'recall-budget', type: 'number', min: 0, max: 100000, step: 100, value: '4000'});
  const agent = h('input', {id: 'recall-agent', type: 'text', placeholder: '(default)', autocomplete: 'off'});
  const hidden = h('input', {id: 'recall-hidden', type: 'checkbox'});
  const asOf = h('input', {id: 'recall-asof', type: 'range', min: 0, max: 0, value: 0, step: 1});
  const asOfLabel = h('output', {for: 'recall-asof', id: 'recall-asof-label'}, 'now');
  const results = h('div', {id: 'recall-results', 'aria-live': 'polite'});
  const form = h('form', {class: 'recall-form card'},
    field('recall-sona', 'Sona', sonaSel),
    field('recall-query', 'Query', q),
    h('div', {class: 'row'},
      field('recall-scope', 'Scope', scope),
      field('recall-k', 'k', k),
      field('recall-budget', 'Budget (characters)', budget),
      field('recall-agent', 'agent_id', agent)),
    h('div', {class: 'field'}, h('label', {for: 'recall-asof'}, 'As of (time travel over the chain)'), asOf, asOfLabel),
    h('div', {class: 'row'}, h('label', {class: 'toggle'}, hidden, 'include archived and expired'),
      h('button', {type: 'submit', id: 'recall-run'}, 'Recall')));
  main.append(h('h1', {}, 'Recall playground'), form, results);
  if (!sonas.length) { results.append(empty('No sonas to recall from.')); return; }

  // The slider runs over the chosen sona's ACT seqs; its right end is now.
  let length = 0;
  function setSona(s) {
    length = s ? s.length : 0;
    asOf.max = String(length);
    asOf.value = String(length);
    showAsOf();
  }
  let labelTimer = 0;
  function showAsOf() {
    const v = Number(asOf.value);
    if (v >= length) { asOfLabel.textContent = 'now (no as_of)'; return; }
    asOfLabel.textContent = `seq ${v}`;
    clearTimeout(labelTimer);
    labelTimer = setTimeout(async () => { // the time of that step, once the slider rests
      try {
        const page = await get('/memories/list' + qs({sona: sonaSel.value, cursor: v, limit: 1}));
        if (Number(asOf.value) === v && page.items[0]) asOfLabel.textContent = `seq ${v} · ${fmtTime(page.items[0].timestamp || page.items[0].meta.created_at)}`;
      } catch { /* the label stays the seq */ }
    }, 250);
  }
  ctx.onCleanup(() => clearTimeout(labelTimer));
  sonaSel.addEventListener('change', () => setSona(sonas.find(s => s.uuid === sonaSel.value)));
  asOf.addEventListener('input', showAsOf);
  setSona(sonas.find(s => s.uuid === sonaSel.value));
  if (query.has('as_of')) { asOf.value = query.get('as_of'); showAsOf(); }

  form.addEventListener('submit', async e => {
    e.preventDefault();
    const body = {query: q.value, explain: true, k: Number(k.value) || 0, budget_chars: Number(budget.value) || 0};
    if (scope.value) body.scope = scope.value;
    if (agent.value) body.agent_id = agent.value;
    if (hidden.checked) body.include_hidden = true;
    if (Number(asOf.value) < length) body.as_of = Number(asOf.value);
    results.replaceChildren(h('p', {class: 'muted'}, 'Recalling…'));
    const t0 = performance.now();
    try {
      const r = await post(`/sona/${sonaSel.value}/recall`, body);
      if (!ctx.alive()) return;
      renderResults(results, r.memories, body, performance.now() - t0);
    } catch (err) {
      results.replaceChildren(errorBox(err));
    }
  });
  if (q.value) form.requestSubmit();
}

async function allSonas() {
  let out = [], cursor = null;
  do {
    const page = await get('/sonas/list' + qs({limit: 1000, cursor}));
    out = out.concat(page.items);
    cursor = page.next_cursor;
  } while (cursor && out.length < 5000);
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

function renderResults(el, memories, body, ms) {
  if (!memories.length) {
    el.replaceChildren(empty('Nothing recalled' + (body.as_of !== undefined ? ` as of seq ${body.as_of}` : '') + '.'));
    return;
  }
  const all = memories.map((m, topo) => ({...m, topo}));
  const hits = all.filter(m => m.rank).sort((a, b) => a.rank - b.rank);
  const more = all.filter(m => !m.rank).sort((a, b) => b.score - a.score);
  const max = Math.max(...all.map(r => r.score), 1e-9);
  const legend = h('p', {class: 'legend'}, PARTS.map(p => h('span', {class: 'legend-item'}, h('span', {class: 'swatch part-' + p}), p.replace('_', ' '))));
  el.replaceChildren(
    h('p', {class: 'muted'}, `${hits.length} hits and ${more.length} more in ${ms.toFixed(0)} ms` + (body.as_of !== undefined ? `, as of seq ${body.as_of}` : '') +
      '. The hits in rank order, then what they lead to by score; “topo” is the position in the topologically sorted context the model would get.'),
    legend,
    h('ol', {class: 'results hits'}, hits.map(r => resultItem(r, '#' + r.rank, max))),
    ...(more.length ? [h('h2', {}, 'Reached from the hits'), h('ol', {class: 'results more'}, more.map(r => resultItem(r, '+', max)))] : []));
}

function resultItem(r, rank, max) {
  const x = r.explain || {};
  const c = x.contributions || {};
  const total = PARTS.reduce((acc, p) => acc + Math.max(0, c[p] || 0), 0);
  const width = 100 * (r.score / max);
  const segs = PARTS.filter(p => (c[p] || 0) > 0).map(p => h('span', {
    class: 'seg part-' + p, style: {width: (total > 0 ? (100 * c[p] / total) : 0).toFixed(2) + '%'},
    title: `${p}: ${fmtNum(c[p])}`}));
  return h('li', {class: 'result', 'data-cid': r.cid, 'data-via': r.via},
    h('div', {class: 'result-head'},
      h('span', {class: 'rank'}, rank),
      h('span', {class: 'num score'}, fmtNum(r.score)),
      h('span', {class: 'badge via-' + r.via}, r.via),
      kindBadge(r.memory.data.kind),
      h('strong', {}, memorySpeaker(r.memory)),
      memoryLink(r.cid),
      h('span', {class: 'muted small'}, 'topo ' + (r.topo + 1)),
      r.collapsed && r.collapsed.length ? h('span', {class: 'muted small', title: r.collapsed.join('\n')}, `+${r.collapsed.length} alike`) : null),
    h('div', {class: 'stack', role: 'img', style: {width: width.toFixed(1) + '%'},
      'aria-label': 'score parts: ' + PARTS.filter(p => c[p]).map(p => `${p} ${fmtNum(c[p])}`).join(', ')}, segs),
    h('p', {class: 'text'}, snippet(memoryText(r.memory), 300)),
    h('details', {}, h('summary', {}, 'Explain'),
      h('table', {class: 'explain'}, h('tbody', {},
        row('evidence', `dense ${fmtNum(x.dense)} (rank ${x.dense_rank || '—'}) · bm25 ${fmtNum(x.bm25)} (rank ${x.bm25_rank || '—'}) · affinity ${fmtNum(x.affinity)} (rank ${x.affinity_rank || '—'}) · metric ${fmtNum(x.metric)} (rank ${x.metric_rank || '—'})`),
        row('fused relevance', fmtNum(x.relevance)),
        row('kind weight', fmtNum(x.kind_weight)),
        row('recency', fmtNum(x.recency)),
        row('importance', fmtNum(x.importance)),
        row('sona similarity', fmtNum(x.sona_similarity)),
        row('prior unit', fmtNum(x.prior_unit)),
        row('co-access', fmtNum(x.coaccess)),
        row('contributions', PARTS.map(p => `${p} ${fmtNum(c[p] || 0)}`).join(' + ') + ` = ${fmtNum(r.score)}`)))));
}

function row(k, v) {
  return h('tr', {}, h('th', {scope: 'row'}, k), h('td', {}, v));
}
