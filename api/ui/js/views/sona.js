// A sona's ACT chain as a timeline, newest first, paged through
// GET /memories/list?sona=&cursor= (the cursor is an ACT seq).

import {get, qs} from '../api.js';
import {h, fmtTime, memoryText, memorySpeaker, snippet, kindBadge, shortCID, empty} from '../dom.js';

const PAGE = 50;

export async function sonaView(ctx) {
  const uuid = ctx.params[0];
  const sona = await get('/sona/' + encodeURIComponent(uuid));
  if (!ctx.alive()) return;
  ctx.title(sona.name);
  const {main} = ctx;
  const pageSize = Math.max(1, Math.min(1000, parseInt(ctx.query.get('limit'), 10) || PAGE));
  const lastStart = Math.max(0, sona.length - pageSize);
  let from = ctx.query.has('from') ? Math.max(0, parseInt(ctx.query.get('from'), 10) || 0) : lastStart;

  const timeline = h('ol', {class: 'timeline', 'aria-label': 'ACT chain, newest first'});
  const range = h('span', {class: 'muted'});
  const btn = (label, fn) => h('button', {type: 'button', class: 'secondary', onclick: fn}, label);
  const newest = btn('Newest', () => go(lastStart));
  const newer = btn('Newer', () => go(Math.min(lastStart, from + pageSize)));
  const older = btn('Older', () => go(Math.max(0, from - pageSize)));
  const oldest = btn('Oldest', () => go(0));

  main.append(
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/'}, 'Sonas'), ' / ', sona.name),
    h('h1', {}, sona.name),
    h('dl', {class: 'facts'},
      h('dt', {}, 'uuid'), h('dd', {class: 'mono'}, sona.uuid),
      h('dt', {}, 'chain length'), h('dd', {}, String(sona.length)),
      h('dt', {}, 'created'), h('dd', {}, fmtTime(sona.created_at)),
      h('dt', {}, 'head ACT'), h('dd', {class: 'mono', title: sona.head || ''}, sona.head ? shortCID(sona.head) : '—')),
    h('p', {class: 'actions'},
      h('a', {class: 'button', href: `#/sona/${sona.uuid}/tiers`}, 'MemoryOS tiers'),
      h('a', {class: 'button', href: '#/recall' + qs({sona: sona.uuid})}, 'Recall in this sona')),
    h('h2', {}, 'ACT chain'),
    h('div', {class: 'toolbar pager'}, newest, newer, range, older, oldest),
    timeline);

  function go(start) {
    location.hash = `#/sona/${sona.uuid}` + qs({from: start, limit: pageSize === PAGE ? '' : pageSize});
  }

  if (!sona.length) {
    timeline.replaceWith(empty('This chain is empty.'));
    range.textContent = '';
    return;
  }
  const page = await get('/memories/list' + qs({sona: sona.uuid, cursor: from, limit: pageSize}));
  if (!ctx.alive()) return;
  const last = from + page.items.length - 1;
  range.textContent = `seq ${from}–${last} of ${sona.length}`;
  newer.disabled = newest.disabled = last >= sona.length - 1;
  older.disabled = oldest.disabled = from === 0;
  const items = page.items.map((m, i) => ({m, seq: from + i})).reverse();
  timeline.append(...items.map(({m, seq}) => timelineItem(m, seq)));
}

function timelineItem(m, seq) {
  const meta = m.meta || {};
  const kind = m.data.kind;
  return h('li', {class: 'tl-item tl-' + kind},
    h('a', {href: '#/memory/' + m.cid, class: 'tl-link', 'data-cid': m.cid},
      h('span', {class: 'tl-seq', 'aria-label': 'seq ' + seq}, '#' + seq),
      h('span', {class: 'tl-body'},
        h('span', {class: 'tl-head'},
          kindBadge(kind), meta.kind ? kindBadge(meta.kind, 'xkind') : null,
          meta.backbone ? h('span', {class: 'badge backbone'}, 'backbone') : null,
          meta.archived ? h('span', {class: 'badge archived'}, 'archived') : null,
          h('strong', {}, memorySpeaker(m)),
          h('span', {class: 'muted small'}, fmtTime(m.timestamp || meta.created_at)),
          m.edges.length ? h('span', {class: 'muted small'}, `${m.edges.length} edge${m.edges.length > 1 ? 's' : ''}`) : null),
        h('span', {class: 'tl-text'}, snippet(memoryText(m), 220)))));
}
