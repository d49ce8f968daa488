// A full JIT session of the official MCP TypeScript SDK client (v2,
// @modelcontextprotocol/client) against 'libos serve' with the image
// testdata/images/jit-session.yaml, on one protocol revision:
//
//   node session.mjs REVISION http URL
//   node session.mjs REVISION stdio LIBOS_BINARY STORE_DIR IMAGE
//
// REVISION is 2025-11-25 (initialize, a session) or 2026-07-28 (stateless:
// server/discover, subscriptions/listen, input_required). The session authors the
// clock tool of the jit-authoring Skill, waits for notifications/tools/list_changed
// and calls the new tool; calls echo, which needs an approval, and answers the
// server's question through its elicitation handler (2025-11-25: elicitation/create
// during the call; 2026-07-28: an input_required result, answered in the retry);
// registers a counting tool, starts a very long call of it, cancels the call once the
// audit log shows it running, and waits for the log to settle it as canceled. It
// prints one line per check, then "pid PID" and PASS; the caller checks the approval
// record and the log's hash chain with the libos CLI.
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [revision, mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  const [bin, store, image] = rest;
  transport = new StdioClientTransport({ command: bin, args: ["serve", "--data", store, "--image", image], stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else {
  console.error("usage: node session.mjs REVISION http URL | REVISION stdio BIN STORE IMAGE");
  process.exit(2);
}
if (revision !== "2025-11-25" && revision !== "2026-07-28") {
  console.error(`unknown revision ${revision}`);
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
const text = (r) => r.content.length === 1 && r.content[0].type === "text" ? r.content[0].text : undefined;

let changed = 0;
const asked = [];
const client = new Client({ name: "libos-ts-session", version: "2.4.0" }, {
  capabilities: { elicitation: { form: {} } },
  // 2026-07-28 is pinned (server/discover, no initialize); without this option the
  // client speaks the 2025 revisions and initializes.
  ...(revision === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {}),
  // On 2025-11-25 the notification arrives on the session; on 2026-07-28 the client
  // opens subscriptions/listen for it.
  listChanged: { tools: { autoRefresh: false, onChanged: () => { changed++; } } },
});
client.setRequestHandler("elicitation/create", async (req) => {
  asked.push(req.params);
  return { action: "accept", content: { approve: true, reason: "checked in the TypeScript client" } };
});
await client.connect(transport);
check(client.getNegotiatedProtocolVersion() === revision, `the session speaks ${revision}`, client.getNegotiatedProtocolVersion());

// 1. Register, list_changed, call the new tool.
const call = async (name, args, options) => {
  const r = await client.callTool({ name, arguments: args }, options);
  check(!r.isError, `${name} succeeds`, r);
  return r.structuredContent;
};
const author = async (candidate) => {
  const { candidate_id } = await call("propose_jit_tool", candidate);
  const v = await call("validate_jit_tool", { candidate_id });
  check(v.ok === true, `validate_jit_tool ${candidate.name}: ok`, v);
  return call("register_jit_tool", { candidate_id });
};
const clock = JSON.parse(readFileSync(new URL("../candidates/good_clock_now.json", import.meta.url), "utf8"));
await author(clock);
for (let i = 0; i < 200 && changed === 0; i++) await sleep(50);
check(changed > 0, "notifications/tools/list_changed arrives after the registration");
const { tools } = await client.listTools();
check(tools.some((t) => t.name === "clock_now"), "tools/list has the new tool", tools.map((t) => t.name));
const now = await call("clock_now", { timezone: "UTC" });
check(now.timezone === "UTC" && /^\d{4}-\d\d-\d\dT/.test(now.iso8601), "the new tool runs", now);

// 2. A call that needs an approval, answered through the client's elicitation.
const echoed = await client.callTool({ name: "echo", arguments: { x: 1 } });
check(!echoed.isError && text(echoed) === '{"x":1}', "the approved call of echo runs", echoed);
check(asked.length === 1, "the client was asked once", asked.length);
const msg = asked[0].message;
check(msg.includes("echo") && msg.includes('{"x":1}') && msg.includes("exactly these arguments"), "the elicitation shows the tool, the exact arguments and what the approval covers", msg);
check(/Tool definition SHA-256: [0-9a-f]{64}/.test(msg), "the elicitation shows the tool definition's hash", msg);

// 3. A long call, cancelled by the client once the audit log shows it running.
await author({
  name: "spin",
  description: "Count to n.",
  source_code: "export function run(args: { n: number }, libos: any) {\n  let i = 0;\n  while (i < args.n) { i++; }\n  return { counted: i };\n}\n",
  input_schema: { type: "object", properties: { n: { type: "integer", minimum: 0 } }, required: ["n"], additionalProperties: false },
  output_schema: { type: "object", properties: { counted: { type: "integer" } }, required: ["counted"], additionalProperties: false },
  tests: [{ args: { n: 2 }, expected: { counted: 2 }, syscalls: [] }],
});
const { resources } = await client.listResources();
const log = resources.find((r) => /^libos:\/\/process\/pid_[0-9a-f]+\/events$/.test(r.uri));
check(log !== undefined, "the audit log is a resource", resources.map((r) => r.uri));
const pid = log.uri.split("/")[3];
// The whole log, page after page (resources/read of the page URI, then its next).
const events = async () => {
  const all = [];
  for (let uri = log.uri; uri;) {
    const page = JSON.parse((await client.readResource({ uri })).contents[0].text);
    if (page.verified !== true) check(false, "the audit log's hash chain verifies", page.verification);
    all.push(...page.events);
    uri = page.next;
  }
  return all;
};
const abort = new AbortController();
const pending = client.callTool({ name: "spin", arguments: { n: 2 ** 52 } }, { signal: abort.signal, timeout: 120000 })
  .then((r) => ({ r }), (e) => ({ e }));
let callID;
for (let i = 0; i < 600 && callID === undefined; i++) {
  callID = (await events()).find((e) => e.type === "tool_called" && e.data?.tool === "spin")?.call_id;
  if (callID === undefined) await sleep(50);
}
check(callID !== undefined, "the long call runs (tool_called is in the log)");
abort.abort("the user stopped it");
const outcome = await pending;
check(outcome.e !== undefined, "the cancelled call ends without a result", outcome.r);
let settled;
for (let i = 0; i < 600 && settled === undefined; i++) {
  settled = (await events()).find((e) => e.call_id === callID && e.type !== "tool_called");
  if (settled === undefined) await sleep(50);
}
check(settled?.type === "tool_failed" && settled.data?.code === "canceled", "the log settles the cancelled call as canceled", settled);

await client.close();
console.log(`pid ${pid}`);
console.log("PASS");
