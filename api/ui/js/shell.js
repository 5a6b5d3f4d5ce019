// The parts of the shell the views share: the status line, error boxes
// and the token dialog.

import {getToken, setToken, onAuthError} from './api.js';
import {h} from './dom.js';

const statusEl = document.getElementById('status');

export function status(text, kind = 'info') {
  statusEl.textContent = text;
  statusEl.dataset.kind = kind;
}

// errorBox renders an API (or any) error for the user, with the way out
// for the ones a token fixes.
export function errorBox(e) {
  const text = e && e.describe ? e.describe() : String(e && e.message || e);
  const box = h('div', {class: 'error', role: 'alert', 'data-status': e && e.status}, h('strong', {}, text));
  if (e && e.status === 401) {
    box.append(h('p', {}, 'This server needs a bearer token. ',
      h('button', {type: 'button', onclick: () => openTokenDialog('')}, 'Enter a token')));
  } else if (e && e.status === 403) {
    box.append(h('p', {}, 'The token in use may not do this: it lacks the scope, or it is limited to other sonas. ',
      h('button', {type: 'button', onclick: () => openTokenDialog('')}, 'Use another token')));
  }
  return box;
}

// The token dialog.
const dialog = document.getElementById('token-dialog');
const tokenInput = document.getElementById('token-input');
const tokenReason = document.getElementById('token-reason');
const tokenButton = document.getElementById('token-button');

export function openTokenDialog(reason) {
  if (dialog.open) return;
  tokenReason.textContent = reason || '';
  tokenInput.value = getToken();
  dialog.showModal();
  tokenInput.focus();
}

function showTokenState() {
  tokenButton.textContent = getToken() ? 'Token ✓' : 'Token';
  tokenButton.setAttribute('aria-label', getToken() ? 'Bearer token (one is set)' : 'Bearer token (none set)');
}

// initTokenDialog wires the dialog; rerender runs after the token changed.
export function initTokenDialog(rerender) {
  dialog.addEventListener('close', () => {
    const v = dialog.returnValue;
    if (v === 'save') setToken(tokenInput.value.trim());
    else if (v === 'clear') setToken('');
    else return;
    showTokenState();
    rerender();
  });
  tokenButton.addEventListener('click', () => openTokenDialog(''));
  onAuthError(err => openTokenDialog(`The server answered 401 ${err.code}: ${err.message}`));
  showTokenState();
}

