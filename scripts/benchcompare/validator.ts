// The Deno side of `make bench-compare`: what a user would write to do libOS's job with
// Deno. It validates a candidate file (the JSON `libos validate` reads) with the same
// tape semantics as libOS: each test's syscalls are answered, in order, by its tape; a
// name or args mismatch rejects at that call and fails the test even if the program
// caught it; entries left over fail the test; the returned value must equal expected
// as JSON. What it does not do, and libOS does: the static checks on the AST (no
// ambient globals, no eval, no imports), the schema portability lint, exact number
// text (2^53+1), a fresh JavaScript context per test (tests here share one module
// instance), fuel, memory and time limits. So it does less work than libOS per
// validation; the comparison is generous to Deno.
//
//   deno run --allow-read validator.ts FILE          validate one file, print the report
//   deno run --allow-read --allow-write validator.ts --serve
//        read commands from stdin, one JSON object a line, answer one line each:
//        {"op":"validate","path":P}            → {"ok":bool,"ns":N}
//        {"op":"call","source":S,"args":A,"log":L?} → {"ok":bool,"value":V,"ns":N}
//           runs S's run(args) in a new Worker (fresh state per call, as a libOS JIT
//           call has); with log, appends the call and its result to L and fdatasyncs it
//           before answering, as libOS settles a call durably.
//        {"op":"calls","source":S,"args":A,"n":N,"concurrency":C,"log":L?} → {"ns":N}
//           N such calls, C at a time.
//        {"op":"cpu","source":S}               → {"ns":N} (run() in this isolate, no Worker)

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface TapeEntry { name: string; args?: Json; result?: Json; payload?: Json; ok?: boolean; error?: Json }
interface Test { args: Json; expected: Json; syscalls?: TapeEntry[] }
interface Candidate {
  name: string; description: string; source_code: string;
  input_schema: Json; output_schema: Json; tests: Test[];
}

function equal(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as Json[];
    return a.length === bb.length && a.every((x, i) => equal(x, bb[i]));
  }
  const ao = a as Record<string, Json>, bo = b as Record<string, Json>;
  const ka = Object.keys(ao), kb = Object.keys(bo);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(bo, k) && equal(ao[k], bo[k]));
}

// A small JSON Schema check (type, properties, required, additionalProperties, items,
// enum, bounds): enough for the test args/expected warnings libOS gives.
function schemaOK(s: any, v: Json): boolean {
  if (s === true || s === undefined) return true;
  if (s === false) return false;
  const typeOf = (x: Json) => x === null ? "null" : Array.isArray(x) ? "array" :
    typeof x === "number" ? (Number.isInteger(x) ? "integer" : "number") : typeof x;
  if (s.type !== undefined) {
    const ts: string[] = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(v);
    if (!ts.includes(t) && !(t === "integer" && ts.includes("number"))) return false;
  }
  if (s.enum && !s.enum.some((e: Json) => equal(e, v))) return false;
  if (typeof v === "string") {
    if (s.maxLength !== undefined && [...v].length > s.maxLength) return false;
    if (s.minLength !== undefined && [...v].length < s.minLength) return false;
  }
  if (typeof v === "number") {
    if (s.maximum !== undefined && v > s.maximum) return false;
    if (s.minimum !== undefined && v < s.minimum) return false;
  }
  if (Array.isArray(v)) {
    if (s.maxItems !== undefined && v.length > s.maxItems) return false;
    if (s.minItems !== undefined && v.length < s.minItems) return false;
    if (s.items !== undefined && !v.every((x) => schemaOK(s.items, x))) return false;
  } else if (v !== null && typeof v === "object") {
    for (const k of s.required ?? []) if (!Object.hasOwn(v, k)) return false;
    for (const [k, x] of Object.entries(v)) {
      if (s.properties && Object.hasOwn(s.properties, k)) {
        if (!schemaOK(s.properties[k], x)) return false;
      } else if (s.additionalProperties !== undefined && !schemaOK(s.additionalProperties, x)) return false;
    }
  }
  return true;
}

class Tape {
  i = 0;
  failure: string | null = null;
  constructor(private entries: TapeEntry[]) {}
  syscall(name: string, args: Json): Promise<Json> {
    if (this.failure) return Promise.reject(new Error(this.failure));
    const e = this.entries[this.i];
    let why = "";
    if (!e) why = `unexpected syscall ${name}: the tape has no entry left`;
    else if (e.name !== name) why = `syscall ${name} where the tape expects ${e.name}`;
    else if (e.args !== undefined && !equal(e.args, JSON.parse(JSON.stringify(args ?? null)))) why = `syscall ${name}: arguments differ from the tape's`;
    if (why) {
      this.failure = why;
      return Promise.reject(Object.assign(new Error(why), { code: "tape_mismatch" }));
    }
    this.i++;
    if (e!.ok === false) {
      const err = e!.error;
      const code = typeof err === "string" ? err : (err as any)?.code ?? "error";
      const message = typeof err === "string" ? err : (err as any)?.message ?? code;
      return Promise.reject(Object.assign(new Error(message), { code }));
    }
    return Promise.resolve(structuredClone(e!.result ?? e!.payload ?? null));
  }
  leftover(): number { return this.entries.length - this.i; }
}

let generation = 0;

// importSource transpiles and evaluates the TypeScript source as a new module (a unique
// comment makes every import a new module, as every libOS validation compiles anew).
async function importSource(src: string): Promise<any> {
  const text = `${src}\n// ${++generation}\n`;
  const url = "data:application/typescript;base64," + btoa(String.fromCharCode(...new TextEncoder().encode(text)));
  return await import(url);
}

export async function validate(text: string): Promise<{ ok: boolean; errors: string[]; warnings: string[]; tests: boolean[] }> {
  const errors: string[] = [], warnings: string[] = [], tests: boolean[] = [];
  const c = JSON.parse(text) as Candidate;
  if (typeof c.name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(c.name)) errors.push("bad name");
  if (typeof c.source_code !== "string") errors.push("no source");
  c.tests.forEach((t, i) => {
    if (!schemaOK(c.input_schema, t.args)) warnings.push(`test ${i}: args schema`);
    if (!schemaOK(c.output_schema, t.expected)) warnings.push(`test ${i}: expected schema`);
  });
  if (errors.length) return { ok: false, errors, warnings, tests };
  let mod: any;
  try {
    mod = await importSource(c.source_code);
  } catch (e) {
    return { ok: false, errors: [`compile: ${e}`], warnings, tests };
  }
  if (typeof mod.run !== "function") return { ok: false, errors: ["run is not a function"], warnings, tests };
  for (const [i, t] of c.tests.entries()) {
    const tape = new Tape(t.syscalls ?? []);
    let err = "";
    try {
      const v = await mod.run(structuredClone(t.args), { syscall: (n: string, a: Json) => tape.syscall(n, a) });
      const got = JSON.parse(JSON.stringify(v) ?? "null");
      if (tape.failure) err = tape.failure;
      else if (tape.leftover()) err = `${tape.leftover()} tape entries left over`;
      else if (!equal(t.expected, got)) err = "returned value differs from expected";
    } catch (e) {
      err = tape.failure ?? String(e);
    }
    tests.push(!err);
    if (err) errors.push(`test ${i}: ${err}`);
  }
  return { ok: errors.length === 0, errors, warnings, tests };
}

// The Worker every call gets: it imports the tool's module, runs it once, posts the
// result.
const workerSource = `
self.onmessage = async (ev) => {
  try {
    const mod = await import(ev.data.url);
    const v = await mod.run(ev.data.args, { syscall: () => Promise.reject(new Error("no syscalls")) });
    self.postMessage({ ok: true, value: JSON.parse(JSON.stringify(v) ?? "null") });
  } catch (e) {
    self.postMessage({ ok: false, value: String(e) });
  }
};`;
const workerURL = URL.createObjectURL(new Blob([workerSource], { type: "application/javascript" }));

function moduleURL(src: string): string {
  return "data:application/typescript;base64," + btoa(String.fromCharCode(...new TextEncoder().encode(src)));
}

let logFile: Deno.FsFile | null = null;
let logPath = "";
const enc = new TextEncoder();

async function oneCall(url: string, args: Json, log: string | undefined): Promise<{ ok: boolean; value: Json }> {
  const w = new Worker(workerURL, { type: "module" });
  const r = await new Promise<{ ok: boolean; value: Json }>((resolve) => {
    w.onmessage = (ev) => resolve(ev.data);
    w.onerror = (ev) => { ev.preventDefault(); resolve({ ok: false, value: String(ev.message) }); };
    w.postMessage({ url, args });
  });
  w.terminate();
  if (log) {
    if (logPath !== log) {
      logFile?.close();
      logFile = await Deno.open(log, { append: true, create: true });
      logPath = log;
    }
    await logFile!.write(enc.encode(JSON.stringify({ args, result: r }) + "\n"));
    await logFile!.syncData();
  }
  return r;
}

async function serve() {
  const out = Deno.stdout;
  const reply = async (v: unknown) => { await out.write(enc.encode(JSON.stringify(v) + "\n")); };
  let buf = "";
  const dec = new TextDecoder();
  for await (const chunk of Deno.stdin.readable) {
    buf += dec.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      const cmd = JSON.parse(line);
      switch (cmd.op) {
        case "validate": {
          const text = Deno.readTextFileSync(cmd.path);
          const t0 = performance.now();
          const r = await validate(text);
          const ns = Math.round((performance.now() - t0) * 1e6);
          await reply({ ok: r.ok, ns, errors: r.errors });
          break;
        }
        case "call": {
          const t0 = performance.now();
          const r = await oneCall(moduleURL(cmd.source), cmd.args, cmd.log);
          const ns = Math.round((performance.now() - t0) * 1e6);
          await reply({ ...r, ns });
          break;
        }
        case "calls": {
          const url = moduleURL(cmd.source);
          let next = 0, failed = 0;
          const t0 = performance.now();
          await Promise.all(Array.from({ length: cmd.concurrency }, async () => {
            while (next < cmd.n) {
              next++;
              const r = await oneCall(url, cmd.args, cmd.log);
              if (!r.ok) failed++;
            }
          }));
          const ns = Math.round((performance.now() - t0) * 1e6);
          await reply({ ok: failed === 0, ns });
          break;
        }
        case "cpu": {
          const mod = await import(moduleURL(cmd.source + `\n// ${++generation}\n`));
          const t0 = performance.now();
          const v = mod.run();
          const ns = Math.round((performance.now() - t0) * 1e6);
          await reply({ ok: true, ns, value: v });
          break;
        }
        default:
          await reply({ ok: false, error: `unknown op ${cmd.op}` });
      }
    }
  }
}

if (import.meta.main) {
  if (Deno.args[0] === "--serve") {
    await serve();
  } else {
    const r = await validate(Deno.readTextFileSync(Deno.args[0]));
    console.log(JSON.stringify(r));
    Deno.exit(r.ok ? 0 : 1);
  }
}
