// The backbone: its memories, the concepts pending consensus, and the
// conflicts, each with a form that resolves it (POST /conflicts/{id}/resolve,
// which needs an admin token).

import {get, post, qs} from '../api.js';
import {h, fmtTime, fmtNum, memoryText, snippet, memoryLink, section, empty} from '../dom.js';
import {errorBox} from '../shell.js';

export async function backboneView(ctx) {
  ctx.title('Backbone');
  const {main} = ctx;
  const conflictsEl = h('div', {id: 'conflicts'}, 'Loading…');
  const pendingEl = h('div', {id: 'pending'}, 'Loading…');
  const backboneEl = h('div', {id: 'backbone-list'}, 'Loading…');
  main.append(h('h1', {}, 'Backbone and consensus'),
    section('Conflicts', conflictsEl),
    section('Pending concepts', pendingEl),
    section('Backbone memories', backboneEl));

  async function loadConflicts() {
    const {items} = await get('/conflicts');
    if (!ctx.alive()) return;
    conflictsEl.replaceChildren(items.length ? h('ul', {class: 'conflicts'}, items.map(conflict)) : empty('No conflicts.'));
  }

  function conflict(c) {
    const id = 'resolve-' + c.conflict_id;
    const content = h('textarea', {id, name: 'content', rows: 3, required: true}, c.versions[0] ? c.versions[0].content : '');
    const agent = h('input', {id: id + '-agent', name: 'agent_id', type: 'text', autocomplete: 'off', placeholder: '(optional)'});
    const out = h('div', {'aria-live': 'polite'});
    const form = h('form', {class: 'resolve'},
      h('label', {for: id}, 'Resolution (written to the backbone)'), content,
      h('label', {for: id + '-agent'}, 'agent_id'), agent,
      h('button', {type: 'submit'}, 'Resolve'), out);
    form.addEventListener('submit', async e => {
      e.preventDefault();
      const btn = form.querySelector('button');
      btn.disabled = true;
      try {
        const r = await post(`/conflicts/${encodeURIComponent(c.conflict_id)}/resolve`, {content: content.value, agent_id: agent.value || undefined});
        ctx.status(`Conflict “${c.concept_key}” resolved: ${r.cid} is on the backbone.`, 'ok');
        await Promise.all([loadConflicts(), loadPending(), loadBackbone()]);
      } catch (err) {
        out.replaceChildren(errorBox(err));
        btn.disabled = false;
      }
    });
    return h('li', {class: 'conflict card', 'data-conflict': c.conflict_id},
      h('h3', {}, c.concept_key),
      h('p', {class: 'muted small'}, `signal ${fmtNum(c.signal)} (threshold ${fmtNum(c.threshold)}) · since ${fmtTime(c.created_at)} · id `, h('span', {class: 'mono'}, c.conflict_id)),
      versions(c.versions), form);
  }

  async function loadPending() {
    const {items} = await get('/backbone/pending');
    if (!ctx.alive()) return;
    pendingEl.replaceChildren(items.length ? h('ul', {}, items.map(p => h('li', {},
      h('strong', {}, p.concept_key), ' ', p.high_stakes ? h('span', {class: 'badge archived'}, 'high stakes') : null,
      p.conflict_id ? h('span', {class: 'badge bad'}, 'in conflict') : null,
      h('span', {class: 'muted small'}, ' since ' + fmtTime(p.created_at)), versions(p.versions)))) : empty('Nothing pending.'));
  }

  let cursor = '';
  async function loadBackbone(more) {
    if (!more) cursor = '';
    const page = await get('/backbone' + qs({limit: 50, cursor}));
    if (!ctx.alive()) return;
    const list = page.items.map(m => h('li', {}, memoryLink(m.cid), ' ', snippet(memoryText(m), 200),
      h('span', {class: 'muted small'}, ' ' + fmtTime(m.meta.created_at) + (m.meta.labels.concept_key ? ' · ' + m.meta.labels.concept_key : ''))));
    const ul = more ? backboneEl.querySelector('ul') : h('ul', {class: 'backbone'});
    ul.append(...list);
    backboneEl.replaceChildren(ul.children.length ? ul : empty('The backbone is empty.'));
    cursor = page.next_cursor || '';
    if (cursor) backboneEl.append(h('button', {type: 'button', class: 'secondary', onclick: () => loadBackbone(true).catch(e => backboneEl.append(errorBox(e)))}, 'More'));
  }

  const guard = (el, p) => p.catch(e => el.replaceChildren(errorBox(e)));
  await Promise.all([guard(conflictsEl, loadConflicts()), guard(pendingEl, loadPending()), guard(backboneEl, loadBackbone())]);
}

function versions(vs) {
  return h('ul', {class: 'versions'}, vs.map(v => h('li', {}, h('strong', {}, v.agent_id || '(no agent)'), ': ', v.content,
    h('span', {class: 'muted small'}, ' ' + fmtTime(v.at)))));
}
