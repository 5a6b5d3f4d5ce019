// The sonas: searchable by name, sized by chain length, with each one's
// last activity (the time of its last memory, read as rows come into view).

import {get, qs} from '../api.js';
import {h, bar, ago, fmtTime, empty} from '../dom.js';
import {errorBox} from '../shell.js';

const PAGE = 500;

export async function sonasView(ctx) {
  ctx.title('Sonas');
  const {main} = ctx;
  const search = h('input', {id: 'sona-search', type: 'search', placeholder: 'name contains…', autocomplete: 'off'});
  const sort = h('select', {id: 'sona-sort'},
    h('option', {value: 'length'}, 'longest chain first'),
    h('option', {value: 'name'}, 'name'),
    h('option', {value: 'created'}, 'newest first'));
  const list = h('div', {class: 'sona-list'});
  const more = h('button', {type: 'button', class: 'secondary', hidden: true}, 'Load more sonas');
  const count = h('p', {class: 'muted'});
  main.append(
    h('h1', {}, 'Sonas'),
    h('div', {class: 'toolbar'},
      h('label', {for: 'sona-search'}, 'Search'), search,
      h('label', {for: 'sona-sort'}, 'Sort'), sort),
    count, list, more);

  let sonas = [], next = null;
  const seen = new Map(); // last_memory cid → timestamp
  const observer = new IntersectionObserver(entries => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      observer.unobserve(e.target);
      fillActivity(e.target);
    }
  });
  ctx.onCleanup(() => observer.disconnect());

  async function fillActivity(row) {
    const cid = row.dataset.last;
    const cell = row.querySelector('.activity');
    if (!cid) { cell.textContent = 'no memories yet'; return; }
    try {
      if (!seen.has(cid)) {
        const m = await get('/memory/' + cid);
        seen.set(cid, (m.meta && m.meta.created_at) || m.timestamp || 0);
      }
      const t = seen.get(cid);
      cell.textContent = 'last active ' + ago(t);
      cell.title = fmtTime(t);
    } catch (e) {
      cell.textContent = 'last memory unreadable (' + e.status + ')';
    }
  }

  async function load() {
    const page = await get('/sonas/list' + qs({limit: PAGE, cursor: next}));
    if (!ctx.alive()) return;
    sonas = sonas.concat(page.items);
    next = page.next_cursor;
    more.hidden = !next;
    draw();
  }

  async function exact(name) {
    // Beyond the loaded pages: ask the server for that exact name.
    const page = await get('/sonas/list' + qs({name, limit: 50}));
    for (const s of page.items) if (!sonas.some(x => x.uuid === s.uuid)) sonas.push(s);
  }

  function draw() {
    const q = search.value.trim().toLowerCase();
    let shown = sonas.filter(s => !q || s.name.toLowerCase().includes(q) || s.uuid.startsWith(q));
    const by = {
      length: (a, b) => b.length - a.length || a.name.localeCompare(b.name),
      name: (a, b) => a.name.localeCompare(b.name),
      created: (a, b) => b.created_at - a.created_at,
    }[sort.value];
    shown.sort(by);
    const max = Math.max(1, ...sonas.map(s => s.length));
    count.textContent = `${shown.length} of ${sonas.length}${next ? '+' : ''} sonas` + (q ? ` matching “${search.value.trim()}”` : '');
    observer.disconnect(); // the rows are drawn anew
    list.replaceChildren();
    if (!shown.length) {
      list.append(empty(sonas.length ? 'No sona matches.' : 'No sonas yet: chat or insert to make one.'));
      return;
    }
    const table = h('table', {class: 'sonas'},
      h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Name'), h('th', {scope: 'col'}, 'Chain length'),
        h('th', {scope: 'col'}, 'Activity'), h('th', {scope: 'col'}, 'Created'))),
      h('tbody', {}, shown.slice(0, 300).map(s => {
        const row = h('tr', {'data-last': s.last_memory || '', 'data-uuid': s.uuid},
          h('td', {}, h('a', {href: '#/sona/' + s.uuid, class: 'sona-link'}, s.name),
            h('div', {class: 'mono muted small'}, s.uuid)),
          h('td', {class: 'len'}, bar(s.length, max, 'chain length'), h('span', {class: 'num'}, String(s.length))),
          h('td', {class: 'activity muted'}, '…'),
          h('td', {class: 'muted', title: fmtTime(s.created_at)}, ago(s.created_at)));
        observer.observe(row);
        return row;
      })));
    list.append(table);
    if (shown.length > 300) list.append(empty(`Showing 300 of ${shown.length}: narrow the search.`));
  }

  search.addEventListener('input', draw);
  search.addEventListener('keydown', async e => {
    if (e.key !== 'Enter' || !search.value.trim()) return;
    try { await exact(search.value.trim()); draw(); } catch (err) { list.prepend(errorBox(err)); }
  });
  sort.addEventListener('change', draw);
  more.addEventListener('click', () => load().catch(err => list.prepend(errorBox(err))));
  await load();
}
