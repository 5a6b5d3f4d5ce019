// Memoria's MCP harness: the official TypeScript SDK's client against
// `memoria mcp` (stdio) and `memoria serve` (streamable HTTP at /mcp).
// The Go test cmd/memoria/mcp_node_test.go builds the binary, starts the
// server and runs this; by hand:
//
//   MEMORIA_BIN=./memoria MEMORIA_STDIO_DATA=$(mktemp -d) \
//   MEMORIA_HTTP_URL=http://127.0.0.1:7777/mcp MEMORIA_TOKEN=... node harness.mjs
//
// MEMORIA_RELAY_SERVER=127.0.0.1:7777 (with MEMORIA_BIN) also runs the
// suite over stdio through `memoria mcp --server`, relayed to that server.
// Any of them may be left out by leaving its variable unset. Exits
// non-zero with the failed assertion on stderr.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const TOOLS = ["chat", "create_sona", "forget", "insert", "list_sonas", "query", "recall"];
const TEMPLATES = {
  "ipfs://{cid}": "application/vnd.ipld.raw",
  "memoria://memory/{cid}": "application/json",
  "memoria://file/{cid}": undefined, // the file's own type
  "memoria://sona/{uuid}": "application/json",
};

// cidDigest decodes a base32 CIDv1 (b…) into its codec and sha2-256 digest.
function cidDigest(cid) {
  assert.equal(cid[0], "b", `CID ${cid} is not base32 multibase`);
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0, value = 0;
  const out = [];
  for (const ch of cid.slice(1)) {
    value = (value << 5) | alphabet.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const bytes = Buffer.from(out);
  let i = 0;
  const varint = () => {
    let n = 0, shift = 0, b;
    do { b = bytes[i++]; n |= (b & 0x7f) << shift; shift += 7; } while (b & 0x80);
    return n;
  };
  assert.equal(varint(), 1, "CID version");
  const codec = varint();
  assert.equal(varint(), 0x12, "multihash is sha2-256");
  assert.equal(varint(), 32, "digest length");
  return { codec, digest: bytes.subarray(i, i + 32) };
}

// cidOf is the base32 CIDv1 (sha2-256) of bytes under a codec.
function cidOf(codec, bytes) {
  const digest = createHash("sha256").update(bytes).digest();
  const raw = Buffer.concat([Buffer.from([0x01, codec, 0x12, 0x20]), digest]);
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0, value = 0, out = "b";
  for (const byte of raw) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name} returned no structured content`);
  return res.structuredContent;
}

async function callError(client, name, args, want) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name}(${JSON.stringify(args)}) should fail: ${JSON.stringify(res)}`);
  const text = res.content.map((c) => c.text).join(" ");
  assert.match(text, want, `${name} error message`);
}

async function readOne(client, uri) {
  const res = await client.readResource({ uri });
  assert.equal(res.contents.length, 1, `${uri}: one content`);
  assert.equal(res.contents[0].uri, uri);
  return res.contents[0];
}

async function wantNotFound(client, uri) {
  await assert.rejects(client.readResource({ uri }), (err) => {
    assert.match(String(err.message), /not found/i, `${uri}: ${err.message}`);
    assert.equal(err.code, -32602, `${uri}: resource-not-found code`);
    return true;
  });
}

async function suite(label, client) {
  const log = (m) => console.error(`[${label}] ${m}`);

  // Tools and their schemas.
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", `${t.name} input schema`);
    assert.equal(t.outputSchema?.type, "object", `${t.name} output schema`);
    assert.ok(t.description, `${t.name} description`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual([...byName.recall.inputSchema.required].sort(), ["query", "sona"]);
  assert.deepEqual([...byName.chat.inputSchema.required].sort(), ["content", "sona"]);
  assert.deepEqual(byName.create_sona.inputSchema.required, ["name"]);
  assert.ok(byName.recall.outputSchema.properties.memories, "recall output has memories");
  for (const t of tools) {
    assert.equal(t.annotations?.title, t.title, `${t.name} annotations`);
    assert.equal(t.annotations.readOnlyHint, ["list_sonas", "query", "recall"].includes(t.name), `${t.name} readOnlyHint`);
  }
  assert.deepEqual(byName.recall.inputSchema.properties.scope.enum, ["self", "sona"]);
  assert.equal(byName.insert.inputSchema.properties.file.type, "object", "one type, not [null, object]");
  log(`tools: ${TOOLS.join(", ")}`);

  // Resource templates with their MIME types.
  const { resourceTemplates } = await client.listResourceTemplates();
  const templates = Object.fromEntries(resourceTemplates.map((t) => [t.uriTemplate, t.mimeType]));
  assert.deepEqual(templates, TEMPLATES);
  log("resource templates ok");

  // Start from nothing: create a sona and find it.
  const sonaName = `harness-${label}`;
  const sona = await call(client, "create_sona", { name: sonaName });
  assert.match(sona.uuid, /^[0-9a-f-]{36}$/);
  assert.equal(sona.name, sonaName);
  assert.equal(sona.length, 0);
  const listed = await call(client, "list_sonas", { name: sonaName });
  assert.deepEqual(listed.sonas.map((s) => s.uuid), [sona.uuid]);

  // Insert: by uuid and by name.
  const fact = await call(client, "insert", {
    sona: sona.uuid, content: "The launch codename is Bluebird and it ships on Friday.", kind: "fact",
  });
  assert.match(fact.cid, /^b/);
  assert.equal(fact.seq, 0);
  assert.equal(fact.deduplicated, false);
  const other = await call(client, "insert", {
    sona: sonaName, content: "Dana prefers tea over coffee in the mornings.", name: "Dana",
    edges: [{ target: fact.cid, weight: 0.5 }],
  });
  assert.equal(other.seq, 1);
  const file = await call(client, "insert", {
    sona: sona.uuid, file: { base64: Buffer.from("hello from a file\n").toString("base64"), mime_type: "text/plain", name: "hello.txt" },
  });
  assert.equal(file.seq, 2);
  log(`inserted ${fact.cid}, ${other.cid}, ${file.cid}`);

  // Recall finds the fact.
  const recalled = await call(client, "recall", { sona: sona.uuid, query: "What is the launch codename?", scope: "sona" });
  const hit = recalled.memories.find((m) => m.cid === fact.cid);
  assert.ok(hit, `recall returned ${JSON.stringify(recalled.memories.map((m) => m.cid))}`);
  assert.match(hit.text, /Bluebird/);
  assert.equal(hit.kind, "text");
  assert.equal(hit.uri, `memoria://memory/${fact.cid}`);
  assert.ok(hit.score > 0);

  // Query answers and stores nothing; chat answers and stores both turns.
  const q = await call(client, "query", { sona: sona.uuid, content: "What is the launch codename?" });
  assert.ok(q.response.length > 0);
  assert.ok(q.recalled.some((r) => r.cid === fact.cid), "query recalled the fact");
  let sonaDoc = JSON.parse((await readOne(client, `memoria://sona/${sona.uuid}`)).text);
  assert.equal(sonaDoc.length, 3, "query stored nothing");
  const chat = await call(client, "chat", { sona: sona.uuid, content: "Remind me: what is the launch codename?", name: "user" });
  assert.ok(chat.response.length > 0);
  assert.match(chat.input_cid, /^b/);
  assert.match(chat.response_cid, /^b/);
  assert.ok(chat.recalled.some((r) => r.cid === fact.cid), "chat recalled the fact");
  log(`chat: ${chat.response.slice(0, 60)}…`);

  // Resources of each kind.
  const sonaRes = await readOne(client, `memoria://sona/${sona.uuid}`);
  assert.equal(sonaRes.mimeType, "application/json");
  sonaDoc = JSON.parse(sonaRes.text);
  assert.equal(sonaDoc.uuid, sona.uuid);
  assert.equal(sonaDoc.length, 5, "chat stored input and response");

  const memRes = await readOne(client, `memoria://memory/${chat.response_cid}`);
  assert.equal(memRes.mimeType, "application/json");
  const mem = JSON.parse(memRes.text);
  assert.equal(mem.cid, chat.response_cid);
  assert.equal(mem.data.kind, "self");
  assert.ok(mem.edges.some((e) => e.target["/"] === fact.cid), "the response's edges point at what it recalled");
  assert.ok(mem.meta.sonas.includes(sona.uuid));

  const block = await readOne(client, `ipfs://${fact.cid}`);
  assert.equal(block.mimeType, "application/vnd.ipld.raw");
  const raw = Buffer.from(block.blob, "base64");
  const { codec, digest } = cidDigest(fact.cid);
  assert.equal(codec, 0x71, "a memory is dag-cbor");
  assert.deepEqual(createHash("sha256").update(raw).digest(), Buffer.from(digest), "the block hashes to its CID");

  const fileRes = await readOne(client, `memoria://file/${file.cid}`);
  assert.equal(fileRes.mimeType, "text/plain");
  assert.equal(fileRes.text, "hello from a file\n");
  log("resources ok");

  // Prompts: recall_and_answer recalls on the server.
  const { prompts } = await client.listPrompts();
  assert.deepEqual(prompts.map((p) => p.name).sort(), ["recall_and_answer", "remember"]);
  const prompt = await client.getPrompt({ name: "recall_and_answer", arguments: { sona: sona.uuid, question: "What is the launch codename?" } });
  assert.equal(prompt.messages.length, 1);
  assert.match(prompt.messages[0].content.text, /Bluebird/);
  assert.ok(prompt.messages[0].content.text.includes(fact.cid), "the prompt names the memory's CID");
  await assert.rejects(client.getPrompt({ name: "recall_and_answer", arguments: { sona: sona.uuid } }), /question is required/);
  log("prompts ok");

  // Errors are tool errors with a clear message, not crashes.
  await callError(client, "recall", { sona: "00000000-0000-4000-8000-000000000000", query: "x" }, /not_found/);
  await callError(client, "recall", { sona: sona.uuid, query: "x", k: 1000000 }, /k must be within/);
  await callError(client, "recall", { sona: sona.uuid, query: "   " }, /query must not be empty/);
  await callError(client, "recall", { sona: sona.uuid }, /query/);
  await callError(client, "chat", { sona: sona.uuid, content: "hi", scope: "everything" }, /scope/);
  await callError(client, "insert", { sona: sona.uuid, content: "x", edges: [{ target: "nope", weight: 1 }] }, /malformed CID/);
  await callError(client, "create_sona", { name: "" }, /name/);
  await wantNotFound(client, `memoria://sona/00000000-0000-4000-8000-000000000000`);
  assert.equal(cidOf(0x71, raw), fact.cid, "cidOf agrees with the server");
  await wantNotFound(client, `memoria://memory/${cidOf(0x71, Buffer.from("no such memory"))}`);
  await wantNotFound(client, `memoria://file/${cidOf(0x55, Buffer.from("no such file"))}`);
  await wantNotFound(client, `ipfs://${cidOf(0x55, Buffer.from("no such block"))}`);
  // The server is still fine after all that.
  await call(client, "list_sonas", {});
  log("errors ok");
}

async function run(label, transport) {
  const client = new Client({ name: "memoria-mcptest", version: "0.0.0" });
  await client.connect(transport);
  try {
    const info = client.getServerVersion();
    assert.equal(info.name, "memoria");
    await suite(label, client);
  } finally {
    await client.close();
  }
  console.error(`[${label}] PASS`);
}

const env = process.env;
let ran = 0;
if (env.MEMORIA_BIN && env.MEMORIA_STDIO_DATA) {
  await run("stdio", new StdioClientTransport({
    command: env.MEMORIA_BIN,
    args: ["mcp", "--data", env.MEMORIA_STDIO_DATA],
    env: { ...Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith("MEMORIA_"))), MEMORIA_LOG_LEVEL: "warn" },
    stderr: "inherit",
  }));
  ran++;
}
if (env.MEMORIA_BIN && env.MEMORIA_RELAY_SERVER) {
  // `memoria mcp --server`: stdio relayed to a running server's /mcp.
  await run("relay", new StdioClientTransport({
    command: env.MEMORIA_BIN,
    args: ["mcp", "--server", env.MEMORIA_RELAY_SERVER],
    env: {
      ...Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith("MEMORIA_"))),
      MEMORIA_LOG_LEVEL: "warn",
      ...(env.MEMORIA_TOKEN ? { MEMORIA_TOKEN: env.MEMORIA_TOKEN } : {}),
    },
    stderr: "inherit",
  }));
  ran++;
}
if (env.MEMORIA_HTTP_URL) {
  const headers = env.MEMORIA_TOKEN ? { Authorization: `Bearer ${env.MEMORIA_TOKEN}` } : {};
  if (env.MEMORIA_TOKEN) {
    // Without the token, or with a wrong one, the server refuses (401).
    for (const h of [{}, { Authorization: "Bearer not-the-token" }]) {
      const c = new Client({ name: "memoria-mcptest", version: "0.0.0" });
      await assert.rejects(
        c.connect(new StreamableHTTPClientTransport(new URL(env.MEMORIA_HTTP_URL), { requestInit: { headers: h } })),
        (err) => /401|unauthorized/i.test(String(err?.message ?? err)),
      );
    }
    console.error("[http] refused without a valid token");
  }
  await run("http", new StreamableHTTPClientTransport(new URL(env.MEMORIA_HTTP_URL), { requestInit: { headers } }));
  ran++;
}
if (ran === 0) {
  console.error("harness: set MEMORIA_BIN and MEMORIA_STDIO_DATA (stdio), MEMORIA_BIN and MEMORIA_RELAY_SERVER (stdio relayed) and/or MEMORIA_HTTP_URL (streamable HTTP)");
  process.exit(2);
}
