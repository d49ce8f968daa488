// Gives the served process, through the JIT tool lifecycle a client has
// (propose_jit_tool, validate_jit_tool, register_jit_tool over MCP, 2026-07-28), the
// tools some conformance scenarios call by name. Nothing of them is in the server:
// each is an ordinary JIT tool of this process, validated by its tests, and the
// image's approvals.jit_tools makes every call of it wait for an approval, which the
// server asks of the suite (it declares elicitation) with an input_required result.
// Usage: node setup.mjs URL
const [url] = process.argv.slice(2);
const meta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'libos-conformance-setup', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
let id = 1;
async function call(name, args) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2026-07-28',
      'Mcp-Method': 'tools/call',
      'Mcp-Name': name,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args, _meta: meta } }),
  });
  let text = await res.text();
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    text = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).pop() ?? '';
  }
  const msg = JSON.parse(text);
  if (msg.error || msg.result?.isError) {
    throw new Error(`${name}: ${JSON.stringify(msg.error ?? msg.result.content)}`);
  }
  return msg.result.structuredContent;
}

const done = {
  type: 'object',
  properties: { done: { type: 'boolean' } },
  required: ['done'],
  additionalProperties: false,
};
const noArgs = { type: 'object', properties: {}, required: [], additionalProperties: false };
// What an approved call of these tools does: report that it ran. Their point is the
// approval in front of them.
const approvedSource = 'export function run(args: {}, libos: any) {\n  return { done: true };\n}\n';
const approved = (name) => ({
  name,
  description: 'Reports that it ran; every call first needs an approval of that call (approvals.jit_tools).',
  source_code: approvedSource,
  input_schema: noArgs,
  output_schema: done,
  tests: [{ args: {}, expected: { done: true }, syscalls: [] }],
});

const schema2020 = 'https://json-schema.org/draft/2020-12/schema';
const tools = [
  {
    // The schema of the suite's json-schema-2020-12 scenario: $schema, $defs with an
    // $anchor, $ref, allOf/anyOf, if/then/else, additionalProperties false.
    name: 'json_schema_2020_12_tool',
    description: 'Says how to reach a contact: by phone or by email, as the arguments give it.',
    source_code:
      'export function run(args: any, libos: any) {\n' +
      '  const by = args.contactMethod ?? (args.phone !== undefined ? "phone" : "email");\n' +
      '  return { reach: by === "phone" ? String(args.phone) : String(args.email) };\n' +
      '}\n',
    input_schema: {
      $schema: schema2020,
      type: 'object',
      $defs: {
        address: {
          $anchor: 'addressDef',
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' },
      },
      allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
      if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
      then: { required: ['phone'] },
      else: { required: ['email'] },
      additionalProperties: false,
    },
    output_schema: {
      type: 'object',
      properties: { reach: { type: 'string' } },
      required: ['reach'],
      additionalProperties: false,
    },
    tests: [
      { args: { name: 'Ada', contactMethod: 'phone', phone: '+44 20 0000' }, expected: { reach: '+44 20 0000' }, syscalls: [] },
      { args: { email: 'ada@example.org' }, expected: { reach: 'ada@example.org' }, syscalls: [] },
    ],
  },
  {
    // A parameter mirrored into an HTTP header (x-mcp-header, SEP-2243), so that an
    // intermediary can route on it without reading the body; the server checks that
    // the header and the argument agree.
    name: 'route_hint',
    description: 'Names the region a request is for; the region travels as the Mcp-Param-Region header too.',
    source_code: 'export function run(args: { region: string }, libos: any) {\n  return { region: args.region };\n}\n',
    input_schema: {
      type: 'object',
      properties: { region: { type: 'string', maxLength: 64, 'x-mcp-header': 'Region' } },
      required: ['region'],
      additionalProperties: false,
    },
    output_schema: {
      type: 'object',
      properties: { region: { type: 'string' } },
      required: ['region'],
      additionalProperties: false,
    },
    tests: [{ args: { region: 'eu-west' }, expected: { region: 'eu-west' }, syscalls: [] }],
  },
  approved('test_input_required_result_elicitation'),
  approved('test_input_required_result_request_state'),
  approved('test_input_required_result_multi_round'),
  approved('test_input_required_result_tampered_state'),
];

for (const t of tools) {
  const { candidate_id } = await call('propose_jit_tool', t);
  const report = await call('validate_jit_tool', { candidate_id });
  if (!report.ok) throw new Error(`${t.name}: validation failed: ${JSON.stringify(report)}`);
  await call('register_jit_tool', { candidate_id });
}
console.log(`conformance setup: registered ${tools.map((t) => t.name).join(', ')}`);
