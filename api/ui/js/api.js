// The REST client: same origin, the bearer token from this tab's session
// storage, every error turned into an ApiError carrying the server's
// {"error":{"code","message"}}.

const TOKEN_KEY = 'memoria.token';

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, code, message, path) {
    super(message);
    this.status = status;
    this.code = code;
    this.path = path;
  }
  // describe is one readable line for the user.
  describe() {
    const what = {
      401: 'Not authenticated',
      403: 'Forbidden',
      404: 'Not found',
      0: 'No answer',
    }[this.status] || `Error ${this.status}`;
    return `${what} (${this.status || 'network'} ${this.code}): ${this.message}`;
  }
}

// listeners of authentication failures (the shell opens the token dialog).
const authListeners = [];
export function onAuthError(fn) { authListeners.push(fn); }

export async function request(method, path, {body, accept, raw} = {}) {
  const headers = {};
  const token = getToken();
  if (token) headers['Authorization'] = 'Bearer ' + token;
  if (accept) headers['Accept'] = accept;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, {method, headers, body: payload, credentials: 'omit', cache: 'no-store'});
  } catch (e) {
    throw new ApiError(0, 'network', `the server did not answer: ${e.message}`, path);
  }
  if (!resp.ok) {
    let code = 'http_' + resp.status, message = resp.statusText || 'request failed';
    try {
      const j = await resp.json();
      if (j && j.error) ({code, message} = j.error);
    } catch { /* not JSON */ }
    const err = new ApiError(resp.status, code, message, path);
    if (resp.status === 401) authListeners.forEach(fn => fn(err));
    throw err;
  }
  if (raw) return resp;
  return resp.json();
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body) => request('POST', path, {body});

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') u.set(k, v);
  }
  const q = u.toString();
  return q ? '?' + q : '';
}

// sonaName resolves a sona's uuid to its name once per page (names never
// change); a sona the token may not read keeps its uuid.
const names = new Map();
export function sonaName(uuid) {
  if (!names.has(uuid)) names.set(uuid, get('/sona/' + encodeURIComponent(uuid)).then(s => s.name, () => null));
  return names.get(uuid);
}
