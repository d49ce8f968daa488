// Summarises one run of @modelcontextprotocol/conformance (its -o directory and its log):
// one line per scenario and a closing line "N passed, N failed, N not applicable".
// A failed check counts as not applicable only when not-applicable.tsv lists it (a check
// that needs the suite's own fixtures by name); every other failed check fails its
// scenario. A warning (a SHOULD the server does not meet) is named on its scenario's
// line. Scenarios the suite does not score because they are new or pending in it
// (added-after-release, pending: json-schema-2020-12, http-header-validation, ...) are
// requirements of the revision all the same and count here; only extensions the
// server does not declare (the tasks extension) are listed apart, unscored.
import fs from 'node:fs';
import path from 'node:path';

// With a fifth argument "all", extension scenarios count as well (the Skills
// extension's, run by name).
const [outDir, logFile, naFile, label, scoreAll] = process.argv.slice(2);
const na = new Map();
for (const line of fs.readFileSync(naFile, 'utf8').split('\n')) {
  if (!line || line.startsWith('#')) continue;
  const [scenario, check, reason] = line.split('\t');
  if (!scenario || !check || !reason?.trim()) {
    console.error(`${naFile}: a line without a scenario, a check and a reason: ${JSON.stringify(line)}`);
    process.exit(2);
  }
  na.set(`${scenario}\t${check}`, reason);
}
const reasonFor = (scenario, check) => na.get(`${scenario}\t${check}`) ?? na.get(`${scenario}\t*`);
const unscored = new Set();
for (const m of fs.readFileSync(logFile, 'utf8').matchAll(/^\s+[✓✗] (\S+) \((extension)\)$/gm)) {
  unscored.add(m[1]);
}
const byScenario = new Map();
for (const dir of fs.readdirSync(outDir).sort()) {
  const m = dir.match(/^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/);
  if (!m) continue;
  byScenario.set(m[1], JSON.parse(fs.readFileSync(path.join(outDir, dir, 'checks.json'), 'utf8')));
}
if (byScenario.size === 0) {
  // The suite ran nothing (it could not start, or could not reach the server).
  console.log(`${label}: no scenario ran\n` + fs.readFileSync(logFile, 'utf8').slice(-2000));
  process.exit(1);
}
let passed = 0, failed = 0, notApplicable = 0;
const skippedLines = [];
for (const [scenario, checks] of byScenario) {
  const bad = checks.filter((c) => c.status === 'FAILURE');
  const open = bad.filter((c) => !reasonFor(scenario, c.id));
  const excused = bad.filter((c) => reasonFor(scenario, c.id));
  const ok = checks.filter((c) => c.status === 'SUCCESS').length;
  let verdict, note = '';
  if (open.length > 0) {
    verdict = 'FAIL';
    note = open.map((c) => `${c.id}: ${(c.errorMessage ?? '').slice(0, 160)}`).join('; ');
  } else if (excused.length > 0 && excused.length >= checks.filter((c) => c.id !== 'wire-schema-valid').length) {
    verdict = 'N/A ';
    note = reasonFor(scenario, excused[0].id);
  } else {
    verdict = 'PASS';
    if (excused.length > 0) note = `${excused.length} check(s) not applicable: ` + excused.map((c) => `${c.id} (${reasonFor(scenario, c.id)})`).join(', ');
  }
  const warned = checks.filter((c) => c.status === 'WARNING');
  if (warned.length > 0) {
    note += (note ? '; ' : '') + `${warned.length} warning(s): ` + warned.map((c) => `${c.id}: ${(c.errorMessage ?? '').slice(0, 120)}`).join('; ');
  }
  const line = `${label} ${verdict} ${scenario} (${ok}/${checks.length} checks)${note ? ' — ' + note : ''}`;
  if (unscored.has(scenario) && scoreAll !== 'all') {
    skippedLines.push(line + ' [extension: not scored]');
    continue;
  }
  console.log(line);
  if (verdict === 'FAIL') failed++;
  else if (verdict === 'PASS') passed++;
  else notApplicable++;
}
for (const line of skippedLines) console.log(line);
console.log(`${label}: ${passed} passed, ${failed} failed, ${notApplicable} not applicable`);
process.exit(failed > 0 ? 1 : 0);
