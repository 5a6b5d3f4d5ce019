// CIDs in the browser: decode a CIDv1 string (base32 or base58btc
// multibase) or a CIDv0, and check a block's bytes against its multihash
// with SubtleCrypto — the trustless gateway's promise, kept by the reader.

const B32 = 'abcdefghijklmnopqrstuvwxyz234567';
const B58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

function base32(s) {
  const out = [];
  let bits = 0, value = 0;
  for (const ch of s.toLowerCase()) {
    const i = B32.indexOf(ch);
    if (i < 0) throw new Error(`not base32: ${JSON.stringify(ch)}`);
    value = (value << 5) | i;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Uint8Array.from(out);
}

function base58(s) {
  let n = 0n;
  for (const ch of s) {
    const i = B58.indexOf(ch);
    if (i < 0) throw new Error(`not base58: ${JSON.stringify(ch)}`);
    n = n * 58n + BigInt(i);
  }
  const out = [];
  while (n > 0n) { out.unshift(Number(n % 256n)); n /= 256n; }
  for (const ch of s) { if (ch !== '1') break; out.unshift(0); }
  return Uint8Array.from(out);
}

function varint(bytes, pos) {
  let x = 0, shift = 0;
  for (;;) {
    if (pos >= bytes.length) throw new Error('truncated varint');
    const b = bytes[pos++];
    x += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) return [x, pos];
    shift += 7;
    if (shift > 49) throw new Error('varint too long');
  }
}

export const CODECS = {0x55: 'raw', 0x70: 'dag-pb', 0x71: 'dag-cbor', 0x0129: 'dag-json'};
export const HASHES = {0x00: 'identity', 0x12: 'sha2-256'};

// parseCID returns {version, codec, hashCode, digest}.
export function parseCID(str) {
  let bytes;
  if (str.length === 46 && str.startsWith('Qm')) {
    bytes = base58(str);
    return {version: 0, codec: 0x70, ...multihash(bytes, 0)};
  }
  switch (str[0]) {
    case 'b': bytes = base32(str.slice(1)); break;
    case 'z': bytes = base58(str.slice(1)); break;
    default: throw new Error(`unsupported multibase prefix ${JSON.stringify(str[0])}`);
  }
  let [version, pos] = varint(bytes, 0);
  if (version !== 1) throw new Error(`CID version ${version}`);
  let codec;
  [codec, pos] = varint(bytes, pos);
  return {version, codec, ...multihash(bytes, pos)};
}

function multihash(bytes, pos) {
  let hashCode, len;
  [hashCode, pos] = varint(bytes, pos);
  [len, pos] = varint(bytes, pos);
  const digest = bytes.slice(pos, pos + len);
  if (digest.length !== len || pos + len !== bytes.length) throw new Error('malformed multihash');
  return {hashCode, digest};
}

export function hex(bytes) {
  return Array.from(bytes, b => b.toString(16).padStart(2, '0')).join('');
}

// sha256 is SubtleCrypto's SHA-256 where the page is a secure context
// (https, localhost, 127.0.0.1), else a plain implementation (FIPS 180-4):
// browsers hide crypto.subtle from http pages of other hosts.
export async function sha256(block) {
  if (globalThis.crypto && crypto.subtle) {
    return {digest: new Uint8Array(await crypto.subtle.digest('SHA-256', block)), by: 'SubtleCrypto'};
  }
  return {digest: sha256js(new Uint8Array(block)), by: 'JavaScript (no SubtleCrypto on this insecure origin)'};
}

const K = Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);

export function sha256js(data) {
  const H = Uint32Array.from([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const padded = new Uint8Array(Math.ceil((data.length + 9) / 64) * 64);
  padded.set(data);
  padded[data.length] = 0x80;
  const bits = data.length * 8;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bits / 2 ** 32));
  view.setUint32(padded.length - 4, bits >>> 0);
  const W = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) W[i] = view.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(W[i - 15], 7) ^ rotr(W[i - 15], 18) ^ (W[i - 15] >>> 3);
      const s1 = rotr(W[i - 2], 17) ^ rotr(W[i - 2], 19) ^ (W[i - 2] >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = H;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += hh;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  H.forEach((x, i) => ov.setUint32(i * 4, x));
  return out;
}

// verifyBlock hashes block as the CID says and compares the digests:
// {ok, algorithm, codec, expected, actual (hex), by}.
export async function verifyBlock(cidStr, block) {
  const c = parseCID(cidStr);
  let actual, by = '';
  switch (c.hashCode) {
    case 0x12: ({digest: actual, by} = await sha256(block)); break;
    case 0x00: actual = new Uint8Array(block); break;
    default: throw new Error(`cannot verify hash function 0x${c.hashCode.toString(16)}`);
  }
  const expected = hex(c.digest), got = hex(actual);
  return {ok: expected === got, algorithm: HASHES[c.hashCode], codec: CODECS[c.codec] || '0x' + c.codec.toString(16), expected, actual: got, by};
}
