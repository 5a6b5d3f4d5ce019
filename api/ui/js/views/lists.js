// Dream insights (GET /insights) and anchors (GET /anchors).

import {get, qs} from '../api.js';
import {h, fmtTime, fmtNum, bar, memoryText, snippet, memoryLink, sonaLink, empty} from '../dom.js';

export async function insightsView(ctx) {
  ctx.title('Insights');
  const {items} = await get('/insights' + qs({limit: 200}));
  if (!ctx.alive()) return;
  ctx.main.append(h('h1', {}, 'Dream insights'),
    h('p', {class: 'muted'}, 'What the heartbeat consolidated in dream mode, newest first.'),
    items.length ? h('ul', {class: 'insights', id: 'insights'}, items.map(i => h('li', {class: 'card'},
      h('p', {}, h('span', {class: 'badge cat-' + i.category}, i.category), ' ',
        bar(i.confidence, 1, 'confidence'), h('span', {class: 'num'}, ' confidence ' + fmtNum(i.confidence, 2)), ' ',
        h('span', {class: 'muted small'}, fmtTime(i.generated_at)), ' ',
        i.sona ? sonaLink(i.sona) : null, ' ', memoryLink(i.cid, 'memory')),
      h('p', {class: 'text'}, i.insight),
      h('p', {class: 'small'}, `${i.sources.length} sources: `, i.sources.slice(0, 12).map(s => [memoryLink(s), ' ']))))) :
      empty('No insights yet: they come from dream mode (after heartbeat.dream_idle, or POST /admin/heartbeat?dream=1).'));
}

export async function anchorsView(ctx) {
  ctx.title('Anchors');
  const {main} = ctx;
  const list = h('ol', {class: 'anchors', id: 'anchors'});
  const more = h('button', {type: 'button', class: 'secondary', hidden: true}, 'More');
  main.append(h('h1', {}, 'Anchors'), h('p', {class: 'muted'}, 'Milestones, decisions and incidents, in the order they were appended.'), list, more);
  let cursor = '';
  async function load() {
    const page = await get('/anchors' + qs({limit: 100, cursor}));
    if (!ctx.alive()) return;
    const mems = await Promise.all(page.items.map(a => get('/memory/' + a.cid).catch(() => null)));
    list.append(...page.items.map((a, i) => h('li', {class: 'anchor'},
      h('span', {class: 'badge cat-' + a.category}, a.category), ' ',
      h('span', {class: 'muted small'}, fmtTime(a.time)), ' ',
      sonaLink(a.sona), ' ', memoryLink(a.cid), ' ',
      mems[i] ? snippet(memoryText(mems[i]), 160) : '')));
    cursor = page.next_cursor || '';
    more.hidden = !cursor;
    if (!list.children.length) list.replaceWith(empty('No anchors yet.'));
  }
  more.addEventListener('click', () => load());
  await load();
}
