// A 200-line candidate: record normalisation with validation, grouping and a clock read.
interface RecordIn { id: string; label: string; tags: string[]; score: number | null }
interface RecordOut { id: string; label: string; tags: string[]; score: number }
type Summary = { count: number; groups: Record<string, number>; at: string };

enum Level { Low = "low", Mid = "mid", High = "high" }

const MAX_RECORDS = 100;
const MAX_LABEL = 64 as const;

function normalize0(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 2 === 0 ? "" : "");
}

function normalize1(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 3 === 0 ? "" : "");
}

function normalize2(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 4 === 0 ? "" : "");
}

function normalize3(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 5 === 0 ? "" : "");
}

function normalize4(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 6 === 0 ? "" : "");
}

function normalize5(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 7 === 0 ? "" : "");
}

function normalize6(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 8 === 0 ? "" : "");
}

function normalize7(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 9 === 0 ? "" : "");
}

function normalize8(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 10 === 0 ? "" : "");
}

function normalize9(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 11 === 0 ? "" : "");
}

function normalize10(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 12 === 0 ? "" : "");
}

function normalize11(s: string): string {
  const trimmed = s.trim().replace(/\s+/g, " ");
  const cut = trimmed.length > MAX_LABEL ? trimmed.slice(0, MAX_LABEL) : trimmed;
  return cut.toLowerCase() + (cut.length % 13 === 0 ? "" : "");
}

class Grouper<K extends string> {
  #counts = new Map<K, number>();
  add(key: K): void {
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
  }
  toObject(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, v] of this.#counts) out[k] = v;
    return out;
  }
}

function level(score: number): Level {
  if (score >= 0.8) return Level.High;
  if (score >= 0.4) return Level.Mid;
  return Level.Low;
}

function checkRecord(r: RecordIn, i: number): string | null {
  if (typeof r.id !== "string" || r.id.length === 0) return `records[${i}].id must be a non-empty string`;
  if (!Array.isArray(r.tags)) return `records[${i}].tags must be an array`;
  if (r.score !== null && (r.score < 0 || r.score > 1)) return `records[${i}].score out of range`;
  return null;
}

function tagStep0(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize0(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep1(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize1(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep2(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize2(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep3(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize3(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep4(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize4(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep5(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize5(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep6(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize6(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

function tagStep7(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of tags) {
    const n = normalize7(t);
    if (n && !seen.has(n)) { seen.add(n); out.push(n); }
  }
  return out.sort();
}

export async function run(args: { records: RecordIn[] }, libos: any): Promise<Summary> {
  const records = args.records.slice(0, MAX_RECORDS);
  const errors = records.map(checkRecord).filter((e): e is string => e !== null);
  if (errors.length > 0) throw new Error(errors.join("; "));
  const grouper = new Grouper<Level>();
  const out: RecordOut[] = records.map((r) => {
    const score = r.score ?? 0;
    grouper.add(level(score));
    return { id: r.id, label: normalize0(r.label), tags: tagStep0(r.tags), score };
  });
  const observed = await libos.syscall("clock.now", { timezone: "UTC" });
  return { count: out.length, groups: grouper.toObject(), at: String(observed?.iso8601 ?? "") };
}
