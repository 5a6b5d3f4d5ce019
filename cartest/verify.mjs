// verify.mjs FILE.car…: reads each CAR memoria wrote with independent
// JavaScript IPLD libraries (@ipld/car, @ipld/dag-cbor, multiformats), as a
// client that trusts nothing would: every block is re-hashed against its
// CID, every DAG-CBOR block decoded for its links. Prints one JSON line a
// file: {file, version, roots, blocks, unique, missing, unordered}, where
// missing counts the links no block of the CAR answers (identity CIDs
// excepted: their bytes are inside them) and unordered the blocks that
// come before anything that links to them (roots excepted). Exits non-zero
// on a CAR it cannot read or a block that does not verify.
import fs from 'node:fs'
import { CarBlockIterator } from '@ipld/car/iterator'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { identity } from 'multiformats/hashes/identity'
import { equals } from 'multiformats/bytes'

const hashers = new Map([[sha256.code, sha256], [identity.code, identity]])

// links returns the CIDs in a decoded DAG-CBOR value.
function links (value, out = []) {
  const stack = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    const c = CID.asCID(v)
    if (c) {
      out.push(c)
    } else if (Array.isArray(v)) {
      stack.push(...v)
    } else if (v !== null && typeof v === 'object' && !(v instanceof Uint8Array)) {
      stack.push(...Object.values(v))
    }
  }
  return out
}

async function verify (file) {
  const car = await CarBlockIterator.fromIterable(fs.createReadStream(file))
  const roots = (await car.getRoots()).map(String)
  const seen = new Set()
  const linked = new Set(roots)
  let blocks = 0
  let unordered = 0
  for await (const { cid, bytes } of car) {
    const hasher = hashers.get(cid.multihash.code)
    if (!hasher) throw new Error(`${file}: block ${blocks} (${cid}): unknown multihash 0x${cid.multihash.code.toString(16)}`)
    const digest = await hasher.digest(bytes)
    if (!equals(digest.bytes, cid.multihash.bytes)) throw new Error(`${file}: block ${blocks} (${cid}) does not hash to its CID`)
    const key = cid.toString()
    if (!linked.has(key)) unordered++
    seen.add(key)
    if (cid.code === dagCbor.code) {
      for (const l of links(dagCbor.decode(bytes))) linked.add(l.toString())
    }
    blocks++
  }
  const missing = [...linked].filter(c => !seen.has(c) && CID.parse(c).multihash.code !== identity.code)
  return { file, version: car.version, roots, blocks, unique: seen.size, missing: missing.length, unordered }
}

for (const file of process.argv.slice(2)) {
  console.log(JSON.stringify(await verify(file)))
}
