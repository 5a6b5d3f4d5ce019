// The shell: a hash router (#/…), the token dialog and the status line.
// Each view is an async function of a context that renders into <main>;
// a view left behind is told so (ctx.alive() turns false, its cleanups run).

import {ApiError} from './api.js';
import {h} from './dom.js';
import {status, errorBox, initTokenDialog} from './shell.js';
import {sonasView} from './views/sonas.js';
import {sonaView} from './views/sona.js';
import {memoryView} from './views/memory.js';
import {graphView} from './views/graph.js';
import {recallView} from './views/recall.js';
import {tiersView} from './views/tiers.js';
import {backboneView} from './views/backbone.js';
import {insightsView, anchorsView} from './views/lists.js';
import {metricsView} from './views/metrics.js';

const routes = [
  [/^\/?$/, 'sonas', sonasView],
  [/^\/sona\/([^/]+)$/, 'sonas', sonaView],
  [/^\/sona\/([^/]+)\/tiers$/, 'sonas', tiersView],
  [/^\/memory\/([^/]+)$/, 'sonas', memoryView],
  [/^\/graph\/([^/]+)$/, 'sonas', graphView],
  [/^\/recall$/, 'recall', recallView],
  [/^\/backbone$/, 'backbone', backboneView],
  [/^\/insights$/, 'insights', insightsView],
  [/^\/anchors$/, 'anchors', anchorsView],
  [/^\/metrics$/, 'metrics', metricsView],
];

const main = document.getElementById('main');
let current = null; // {cleanups, alive}
let renders = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query = ''] = raw.split('?');
  return {path: decodeURIComponent(path), query: new URLSearchParams(query)};
}

async function render() {
  if (current) {
    current.alive = false;
    current.cleanups.forEach(fn => fn());
  }
  const me = {cleanups: [], alive: true};
  current = me;
  const {path, query} = parseHash();
  let match = null;
  for (const [re, nav, view] of routes) {
    const m = re.exec(path);
    if (m) { match = {nav, view, params: m.slice(1)}; break; }
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (match && a.dataset.nav === match.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  status('');
  if (!match) {
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'No view for ', h('code', {}, path), '. ', h('a', {href: '#/'}, 'Back to the sonas')));
    return;
  }
  const ctx = {
    main, params: match.params, query,
    alive: () => me.alive,
    onCleanup: fn => me.cleanups.push(fn),
    title: t => { document.title = t + ' · Memoria explorer'; },
    status,
  };
  const hash = location.hash || '#/';
  main.setAttribute('aria-busy', 'true');
  main.dataset.route = '';
  main.dataset.renders = String(++renders);
  try {
    await match.view(ctx);
  } catch (e) {
    if (me.alive) {
      main.append(errorBox(e));
      if (!(e instanceof ApiError)) console.error(e); // a bug, not an answer of the server
    }
  } finally {
    if (me.alive) {
      main.setAttribute('aria-busy', 'false');
      main.dataset.route = hash; // the view of this route is complete
    }
  }
}

window.addEventListener('hashchange', render);
initTokenDialog(render);
render();
