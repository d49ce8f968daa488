// Generates cases.tsv: number-formatting cases with the strings Node (V8) produces, the
// reference the guest's QuickJS must match byte for byte.
//
//   node wasm/testdata/numfmt/gen.js > wasm/testdata/numfmt/cases.tsv
//
// One case a line: method <TAB> IEEE-754 bits of x (16 hex digits) <TAB> argument <TAB>
// expected. method is toFixed, toPrecision, toExponential, toString (argument "-": no
// argument) or String. The generator is deterministic (a fixed-seed PRNG), so a re-run
// gives the same file on the same Node major version.
'use strict';

let state = 0x9e3779b97f4a7c15n;
function next64() { // splitmix64
  state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return z ^ (z >> 31n);
}
function rand(n) { return Number(next64() % BigInt(n)); }
const buf = new DataView(new ArrayBuffer(8));
function bits(x) { buf.setFloat64(0, x); return buf.getBigUint64(0).toString(16).padStart(16, '0'); }
function fromBits(b) { buf.setBigUint64(0, b); return buf.getFloat64(0); }

const out = [];
const seen = new Set();
function add(method, x, arg) {
  const key = method + bits(x) + arg;
  if (seen.has(key)) return;
  seen.add(key);
  let s;
  if (method === 'String') s = String(x);
  else if (arg === '-') s = x[method]();
  else s = x[method](arg);
  out.push(`${method}\t${bits(x)}\t${arg}\t${s}`);
}

// Exact ties: dyadic rationals i / 2^j end in a 5 at digit j, so toFixed(j - 1) and the
// matching toPrecision/toExponential digit counts round a tie.
for (let j = 1; j <= 12; j++) {
  for (let t = 0; t < 60; t++) {
    const i = 2 * rand(1 << 20) + 1;
    const x = i / 2 ** j;
    for (const sign of [1, -1]) {
      const v = sign * x;
      add('toFixed', v, j - 1);
      const intDigits = Math.max(1, Math.floor(Math.log10(Math.abs(v))) + 1);
      const sig = intDigits + j - 1;
      if (sig >= 1 && sig <= 100) add('toPrecision', v, sig);
      if (sig - 1 >= 0 && sig - 1 <= 100) add('toExponential', v, sig - 1);
    }
  }
}
// Small ties everyone gets wrong with round-half-even.
for (const v of [0.5, 1.5, 2.5, 3.5, 4.5, 10.5, 0.25, 0.75, 0.125, 0.375, 0.625, 0.875, 1.25,
  2.25, 1.0625, 8.5, 9.5, 99.5, 999.5, 0.0625, 1024.5, 4503599627370495.5]) {
  for (const s of [1, -1]) {
    for (let d = 0; d <= 20; d++) add('toFixed', s * v, d);
    for (let p = 1; p <= 21; p++) add('toPrecision', s * v, p);
    for (let e = 0; e <= 20; e++) add('toExponential', s * v, e);
  }
}
// Integers ending in 5: ties for toPrecision/toExponential of fewer digits.
for (let t = 0; t < 400; t++) {
  const n = (rand(1e9) * 10 + 5) * (t % 2 ? 1 : 10 ** rand(6));
  const digits = String(n).length;
  for (let p = 1; p < digits && p <= 21; p++) add('toPrecision', n, p);
  add('toExponential', n, rand(Math.min(digits, 21)));
}
// Random doubles over the whole range, and decimal-looking numbers.
function randomDouble() {
  switch (rand(6)) {
    case 0: { // any finite bit pattern
      let x;
      do { x = fromBits(next64()); } while (!Number.isFinite(x));
      return x;
    }
    case 1: return (rand(1e12) / 10 ** rand(12)) * (rand(2) ? 1 : -1);
    case 2: return rand(1e6) / 1000;
    case 3: return Math.pow(10, rand(600) - 300) * (1 + rand(1000) / 1000);
    case 4: return fromBits(BigInt(rand(1 << 30)) * BigInt(rand(1 << 22) + 1)); // subnormals and tiny
    default: return (rand(2 ** 31) * 2 ** 22 + rand(2 ** 22)) * 2 ** (rand(100) - 50);
  }
}
for (let t = 0; t < 1600; t++) {
  const x = randomDouble();
  add('toFixed', x, rand(21));
  add('toPrecision', x, 1 + rand(21));
  add('toExponential', x, rand(21));
  add('toString', x, '-');
  add('String', x, '-');
}
// Every digit count for a fixed set of values.
const fixedSet = [0, -0, 1, -1, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, Math.PI, Math.E, 123.456, 1e-7,
  1.005, 1.45, 8.345, 1e20, 9.999999999999999e20, 1e21, 1.7976931348623157e308, 5e-324,
  2.2250738585072014e-308, 9007199254740993, 0.000001, 1e-6, 123456789.123456789, 0.5e-10];
for (const x of fixedSet) {
  for (let d = 0; d <= 20; d++) add('toFixed', x, d);
  for (let d = 21; d <= 100; d += 13) add('toFixed', x, d);
  for (let p = 1; p <= 21; p++) add('toPrecision', x, p);
  for (let p = 22; p <= 100; p += 13) add('toPrecision', x, p);
  for (let e = 0; e <= 20; e++) add('toExponential', x, e);
  for (let e = 21; e <= 100; e += 13) add('toExponential', x, e);
  add('toString', x, '-');
  add('String', x, '-');
  add('toExponential', x, '-');
}
// Shortest round trip: powers of ten and their neighbours, large and small exponents.
for (let e = -325; e <= 308; e++) {
  const x = Number('1e' + e);
  add('String', x, '-');
  add('String', fromBits(BigInt('0x' + bits(x)) + 1n), '-');
  add('String', -fromBits(BigInt('0x' + bits(x)) - 1n), '-');
}
for (let t = 0; t < 4000; t++) add('String', randomDouble(), '-');

process.stdout.write(out.join('\n') + '\n');
