// Drives 'libos serve' with the official MCP TypeScript SDK client: a client we did
// not write checks the wire format.
//
//   node client.mjs stdio LIBOS_BINARY STORE_DIR PROJECTION
//   node client.mjs http URL PROJECTION
//
// It lists tools, calls echo, authors the clock tool of the jit-authoring Skill
// (propose, validate, register), waits for notifications/tools/list_changed, calls the
// tool in the projection served, and checks the error shapes. It prints one line per
// check and exits non-zero at the first failure.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
let transport, projection;
if (mode === "stdio") {
  const [bin, store, proj] = rest;
  transport = new StdioClientTransport({ command: bin, args: ["serve", "--data", store, "--projection", proj], stderr: "inherit" });
  projection = proj;
} else if (mode === "http") {
  const [url, proj] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url));
  projection = proj;
} else {
  console.error("usage: node client.mjs stdio BIN STORE PROJECTION | http URL PROJECTION");
  process.exit(2);
}

function check(cond, what, detail) {
  if (!cond) {
    console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

const text = (r) => r.content.length === 1 && r.content[0].type === "text" ? r.content[0].text : undefined;

const client = new Client({ name: "libos-ts-client", version: "1.0.0" });
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
await client.connect(transport);

const caps = client.getServerCapabilities();
check(caps?.tools?.listChanged === true, "the server announces tools with listChanged");

let { tools } = await client.listTools();
const names = () => tools.map((t) => t.name).sort();
check(names().includes("echo") && names().includes("propose_jit_tool"), "tools/list has echo and the JIT lifecycle tools", names());
check(names().includes("run_jit_tool") === (projection === "multiplexed"), "run_jit_tool is listed only in the multiplexed projection", names());

// Echo: structuredContent and text content carry the same canonical value; the exact
// number survives in the text (JavaScript numbers cannot hold 2^53+1 themselves).
let r = await client.callTool({ name: "echo", arguments: { s: "café", b: [true, null], nested: { action: "kept" } } });
check(!r.isError && r.structuredContent?.nested?.action === "kept" && r.structuredContent.s === "café", "echo returns structuredContent", r);
check(text(r) === '{"b":[true,null],"nested":{"action":"kept"},"s":"café"}', "echo's text content is the canonical JSON (keys sorted, compact)", text(r));
check(JSON.stringify(JSON.parse(text(r))) === JSON.stringify(r.structuredContent), "text and structuredContent are the same value", r);
r = await client.callTool({ name: "echo", arguments: { action: "other", n: 1 } });
check(text(r) === '{"n":1}', "the reserved top-level action is removed", text(r));

// Tool errors are isError results with the typed code.
r = await client.callTool({ name: "no_such_tool", arguments: {} });
check(r.isError === true && text(r).startsWith("unknown_tool: ") && r._meta?.["libos/error"]?.code === "unknown_tool", "an unknown tool is an isError result with its code", r);

// Protocol-frame failures are JSON-RPC errors.
try {
  await client.callTool({ name: "echo", arguments: [1, 2] });
  check(false, "non-object arguments are a JSON-RPC error");
} catch (e) {
  check(e instanceof McpError && e.code === -32602 && e.data?.code === "protocol_frame", "non-object arguments are a JSON-RPC invalid-params error with code protocol_frame", { code: e.code, data: e.data, message: e.message });
}

// Author the clock tool.
const candidate = JSON.parse(readFileSync(new URL("../candidates/good_clock_now.json", import.meta.url), "utf8"));
r = await client.callTool({ name: "propose_jit_tool", arguments: candidate });
const cid = r.structuredContent?.candidate_id;
check(!r.isError && /^tcand_[0-9a-f]{32}$/.test(cid), "propose_jit_tool returns a candidate_id", r);
r = await client.callTool({ name: "validate_jit_tool", arguments: { candidate_id: cid } });
check(!r.isError && r.structuredContent.ok === true, "validate_jit_tool: ok", r);
const before = changed;
r = await client.callTool({ name: "register_jit_tool", arguments: { candidate_id: cid } });
check(!r.isError && r.structuredContent.name === "clock_now" && r.structuredContent.scope === "ephemeral_process" && /^tool_/.test(r.structuredContent.tool_id), "register_jit_tool returns tool_id, name, scope", r);
for (let i = 0; i < 100 && changed === before; i++) await new Promise((ok) => setTimeout(ok, 50));
check(changed > before, "notifications/tools/list_changed arrives after registration");

({ tools } = await client.listTools());
if (projection === "direct") {
  const t = tools.find((t) => t.name === "clock_now");
  check(t && t.inputSchema.properties.timezone.maxLength === 64 && t.inputSchema.additionalProperties === false, "direct: clock_now is listed with its stored input schema", t);
  r = await client.callTool({ name: "clock_now", arguments: { timezone: "UTC" } });
} else {
  check(!names().includes("clock_now"), "multiplexed: the JIT name stays hidden", names());
  r = await client.callTool({ name: "clock_now", arguments: { timezone: "UTC" } });
  check(r.isError === true && text(r).startsWith("unknown_tool: "), "multiplexed: a direct call to the JIT name is rejected", r);
  r = await client.callTool({ name: "run_jit_tool", arguments: { tool_name: "clock_now", arguments: { timezone: "UTC" } } });
}
check(!r.isError && r.structuredContent.timezone === "UTC" && /^\d{4}-\d\d-\d\dT/.test(r.structuredContent.iso8601), `${projection}: clock_now runs with the real clock`, r);

// A schema-invalid call is rejected before execution, as a tool error (the SDK would
// throw if the error carried structuredContent that fails the output schema).
r = projection === "direct"
  ? await client.callTool({ name: "clock_now", arguments: { timezone: 5 } })
  : await client.callTool({ name: "run_jit_tool", arguments: { tool_name: "clock_now", arguments: { timezone: 5 } } });
check(r.isError === true && text(r).startsWith("schema_invalid: ") && r._meta?.["libos/error"]?.code === "schema_invalid", "a schema-invalid call is an isError result with code schema_invalid", r);

// Resources, templates and prompts: the image's Skills everywhere; under the multiplexed
// projection nothing listed or read names the JIT tool.
const { resources } = await client.listResources();
check(resources.some((x) => x.uri === "skill://jit-authoring/SKILL.md" && x.mimeType === "text/markdown"), "resources/list has the Skills as skill://NAME/SKILL.md", resources);
check(resources.some((x) => /^libos:\/\/process\/pid_[0-9a-f]+\/events$/.test(x.uri)) === (projection === "direct"), "the audit log is a resource in the direct projection only", resources);
const seen = [JSON.stringify(resources)];
for (const x of resources) seen.push(JSON.stringify(await client.readResource({ uri: x.uri })));
seen.push(JSON.stringify(await client.listResourceTemplates()));
const { prompts } = await client.listPrompts();
check(prompts.some((p) => p.name === "jit-authoring"), "every Skill is a prompt", prompts);
seen.push(JSON.stringify(prompts));
for (const p of prompts) seen.push(JSON.stringify(await client.getPrompt({ name: p.name })));
const all = seen.join("\n");
if (projection === "direct") {
  check(all.includes("clock_now"), "direct: the audit log and the candidates name the registered tool");
} else {
  check(!all.includes("clock_now") && !all.includes("Return the current time in a named IANA time zone"), "multiplexed: no listing or read names the JIT tool");
}

await client.close();
console.log("PASS");
