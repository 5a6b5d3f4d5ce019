// A sona's MemoryOS tiers (GET /sona/{uuid}/tiers): STM pages, MTM
// segments by heat, and the persona.

import {get} from '../api.js';
import {h, fmtTime, fmtNum, bar, snippet, memoryLink, section, empty} from '../dom.js';

export async function tiersView(ctx) {
  const uuid = ctx.params[0];
  const [sona, t] = await Promise.all([get('/sona/' + uuid), get('/sona/' + uuid + '/tiers')]);
  if (!ctx.alive()) return;
  ctx.title(sona.name + ' tiers');
  const segs = [...t.mtm.segments].sort((a, b) => b.heat - a.heat);
  const maxHeat = Math.max(1, ...segs.map(s => s.heat));
  ctx.main.append(
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/'}, 'Sonas'), ' / ', h('a', {href: '#/sona/' + uuid}, sona.name), ' / tiers'),
    h('h1', {}, 'MemoryOS tiers of ', sona.name),
    section(`Short-term: ${t.stm.pages.length} pages` + (t.stm.pending.length ? ` (+${t.stm.pending.length} arriving)` : ''),
      t.stm.pages.length ? h('ol', {class: 'pages', id: 'stm-pages'}, t.stm.pages.map(page)) : empty('No pages yet: pages come from chats.')),
    section(`Mid-term: ${segs.length} segments` + (t.mtm.pending.length ? ` (+${t.mtm.pending.length} pages arriving)` : ''),
      segs.length ? h('table', {class: 'segments', id: 'mtm-segments'},
        h('thead', {}, h('tr', {}, ['segment', 'heat', 'visits', 'interactions', 'pages', 'last access', 'keywords and summary'].map(c => h('th', {scope: 'col'}, c)))),
        h('tbody', {}, segs.map(s => h('tr', {},
          h('td', {class: 'num'}, '#' + s.id),
          h('td', {}, bar(s.heat, maxHeat, 'heat'), ' ', h('span', {class: 'num'}, fmtNum(s.heat, 2))),
          h('td', {class: 'num'}, String(s.n_visit)),
          h('td', {class: 'num'}, String(s.l_interaction)),
          h('td', {class: 'num'}, String(s.page_count || s.pages.length)),
          h('td', {class: 'small'}, fmtTime(s.last_access)),
          h('td', {}, h('div', {}, (s.keywords || []).slice(0, 10).map(k => h('span', {class: 'badge label'}, k))),
            h('div', {class: 'small'}, snippet(s.summary, 240))))))) : empty('No segments yet: pages move here when the short-term memory is full.')),
    persona(t.lpm));
}

function page(p) {
  return h('li', {class: 'page'},
    h('div', {class: 'small muted'}, `page ${p.seq} · ${fmtTime(p.t)}` + (p.meta_chain && p.meta_chain.linked ? ' · continues the thread' : ''), ' ',
      memoryLink(p.q, 'input'), ' ', memoryLink(p.r, 'response')),
    h('p', {class: 'q'}, snippet(p.q_text, 300)),
    h('p', {class: 'r'}, snippet(p.r_text, 300)));
}

function persona(lpm) {
  const u = lpm.user, a = lpm.agent;
  const profile = obj => Object.keys(obj || {}).length
    ? h('dl', {class: 'facts'}, Object.entries(obj).map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))])) : empty('empty');
  const groups = {};
  for (const tr of u.traits) (groups[tr.group] = groups[tr.group] || []).push(tr);
  return section(`Long-term: the persona (${lpm.updates} updates)`,
    h('div', {class: 'grid2', id: 'persona'},
      h('div', {},
        h('h3', {}, 'User profile'), profile(u.profile),
        h('h3', {}, `Knowledge (${u.knowledge.length})`),
        u.knowledge.length ? h('ul', {}, u.knowledge.map(k => h('li', {}, k.text, ' ', h('span', {class: 'muted small'}, fmtTime(k.t))))) : empty('none yet'),
        h('h3', {}, `Traits (${u.traits.length} of 90 dimensions seen)`),
        u.traits.length ? Object.entries(groups).map(([g, list]) => h('div', {},
          h('h4', {}, g),
          h('table', {class: 'metrics'}, h('tbody', {}, list.sort((x, y) => y.level - x.level).map(tr =>
            h('tr', {title: tr.evidence}, h('th', {scope: 'row'}, tr.dimension), h('td', {}, bar(tr.level, 1, tr.dimension)), h('td', {class: 'num'}, fmtNum(tr.level, 2)))))))) : empty('none yet')),
      h('div', {},
        h('h3', {}, 'Agent profile'), profile(a.profile),
        h('h3', {}, `Agent traits (${a.traits.length})`),
        a.traits.length ? h('ul', {}, a.traits.map(x => h('li', {}, x.text, ' ', h('span', {class: 'muted small'}, fmtTime(x.t))))) : empty('none yet'))));
}
