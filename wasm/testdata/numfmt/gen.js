// Generates cases.tsv: number-formatting cases with the strings Node (V8) produces, the
// reference the guest's QuickJS must match byte for byte; and, with the argument "parse",
// parse.tsv: decimal strings and the number Node reads from them.
//
//   node wasm/testdata/numfmt/gen.js > wasm/testdata/numfmt/cases.tsv
//   node wasm/testdata/numfmt/gen.js parse > wasm/testdata/numfmt/parse.tsv
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

if (process.argv[2] === 'parse') {
  process.stdout.write(parseCases().join('\n') + '\n');
} else {
  process.stdout.write(out.join('\n') + '\n');
}

// parse.tsv: one case a line, input <TAB> expected. input is a JSON number (so it is also a
// JavaScript literal, and Number, parseFloat and JSON.parse all accept it); expected is
// String of the number Node reads, or "-0". Every case must read the same through a
// literal, Number(), parseFloat(), JSON.parse() and, for integers, parseInt(): a correctly
// rounded conversion (round to nearest, ties to even) of the exact decimal value.
function parseCases() {
  state = 0x5eed0000d1ce5eedn; // its own stream: cases.tsv stays as it was
  const lines = [];
  const seenIn = new Set();
  const show = x => (Object.is(x, -0) ? '-0' : String(x));
  function add(s) {
    if (seenIn.has(s)) return;
    seenIn.add(s);
    const x = Number(s);
    const same = [JSON.parse(s), parseFloat(s)];
    if (/^-?[0-9]+$/.test(s)) same.push(parseInt(s, 10));
    for (const y of same) {
      if (!Object.is(x, y)) throw new Error(`Node reads ${s} two ways`);
    }
    lines.push(`${s}\t${show(x)}`);
  }
  const digits = n => { let s = String(1 + rand(9)); while (s.length < n) s += rand(10); return s; };
  const sign = () => (rand(2) ? '' : '-');
  // value = D × 10^k for an integer string D, written as d.ddd e±N with trailing zeros cut
  function sci(D, k) {
    D = D.replace(/^0+/, '');
    if (D === '') return '0';
    const e = D.length - 1 + k;
    let frac = D.slice(1).replace(/0+$/, '');
    return D[0] + (frac ? '.' + frac : '') + 'e' + (e < 0 ? '-' : '+') + Math.abs(e);
  }
  // a positive finite double as m × 2^e, m and e exact
  function split(x) {
    const b = BigInt('0x' + bits(x));
    const exp = Number((b >> 52n) & 0x7ffn);
    const frac = b & 0xfffffffffffffn;
    return exp === 0 ? [frac, -1074] : [frac | (1n << 52n), exp - 1075];
  }
  // the exact decimal value of m × 2^e as [D, k]: value = D × 10^k
  function exact(m, e) {
    if (e >= 0) return [(m << BigInt(e)).toString(), 0];
    return [(m * 5n ** BigInt(-e)).toString(), e];
  }
  // The halfway point between x and the next double up, exactly, and just below and
  // above it; also cut to a few digit counts.
  function halfway(x) {
    const [m, e] = split(x);
    const [D, k] = exact(2n * m + 1n, e - 1);
    add(sci(D, k));
    for (const z of [3, 20]) {
      const big = BigInt(D) * 10n ** BigInt(z);
      add(sci((big - 1n).toString(), k - z));
      add(sci((big + 1n).toString(), k - z));
    }
    for (const n of [17, 18, 19, 20, 21, 25, 40]) {
      if (D.length > n) add(sci(D.slice(0, n), k + D.length - n));
    }
  }
  const positive = x => {
    for (;;) {
      const b = next64() & 0x7fffffffffffffffn;
      const y = fromBits(b);
      if (Number.isFinite(y) && y > 0) return y;
    }
  };

  // The cases that started it, and the edges of the range.
  for (const s of ['123456789012345680000', '123456789012345678901', '12345678901234567890',
    '18446744073709551615', '18446744073709551616', '18446744073709551617',
    '9007199254740992', '9007199254740993', '9007199254740994', '9007199254740995',
    '9007199254740993.0000000000000000001', '9007199254740992.9999999999999999999',
    '0', '-0', '0.0', '-0.0', '0e400', '1e-400', '-1e-400', '1e400', '-1e400', '1e310',
    '2.4703282292062327e-324', '2.4703282292062328e-324', '4.9406564584124654e-324',
    '5e-324', '7.4109846876186982e-324', '2.2250738585072011e-308',
    '2.2250738585072012e-308', '2.2250738585072014e-308', '2.225073858507201136057409796709131975934819546351645648e-308',
    '1.7976931348623157e308', '1.7976931348623158e308', '1.7976931348623159e308',
    '179769313486231580793728971405301e276', '179769313486231580793728971405302e276',
    '0.1', '0.2', '0.3', '0.30000000000000004', '1.00000000000000011102230246251565404236316680908203125',
    '1.00000000000000011102230246251565404236316680908203124',
    '1.00000000000000011102230246251565404236316680908203126',
    '100000000000000000000000', '1' + '0'.repeat(308), '1' + '0'.repeat(309),
    '0.' + '0'.repeat(322) + '5', '0.' + '0'.repeat(323) + '25', '1' + '0'.repeat(400) + 'e-400',
    '3.14159265358979323846264338327950288419716939937510', '2.718281828459045235360287471352',
    '8.98846567431158e307', '4.4501477170144023e-308', '4.4501477170144028e-308',
    '123e-2', '1E5', '1e+5', '1.5E-3', '0.000001', '1e-7', '1e21', '999999999999999999999',
  ]) add(s);
  // Powers of ten, and their neighbours written with many digits.
  for (let e = -330; e <= 310; e++) {
    add('1e' + e);
    add('9.99999999999999999999e' + e);
    add('1.00000000000000000001e' + e);
  }
  // 17 to 25 significant digits: integers, fractions and exponents.
  for (let t = 0; t < 1500; t++) {
    const n = 17 + rand(9);
    const D = digits(n);
    add(sign() + D);
    const dot = 1 + rand(n - 1);
    add(sign() + D.slice(0, dot) + '.' + D.slice(dot));
    add(sign() + D[0] + '.' + D.slice(1) + 'e' + (rand(640) - 330));
  }
  // Short and very long digit strings over the whole exponent range.
  for (let t = 0; t < 800; t++) {
    const n = 1 + (rand(4) ? rand(16) : rand(120));
    add(sign() + sci(digits(n), rand(660) - 340 - n));
  }
  // Node's shortest output and longer forms of random doubles read back.
  for (let t = 0; t < 1500; t++) {
    const x = randomDouble();
    add(String(x).replace(/^(-?\d+(\.\d+)?)e\+/, '$1e'));
    add(x.toExponential(16 + rand(5)));
    if (Math.abs(x) < 1e21) add(x.toFixed(rand(21)));
  }
  // Halfway cases: normal doubles of moderate magnitude, any magnitude, subnormals, and
  // the top of the range (halfway to 2^1024 reads as Infinity).
  for (let t = 0; t < 700; t++) halfway(Math.pow(2, rand(200) - 100) * (1 + rand(1e9) / 1e9));
  for (let t = 0; t < 120; t++) halfway(positive());
  for (let t = 0; t < 60; t++) halfway(fromBits(BigInt(1 + rand(2 ** 30)) * BigInt(1 + rand(2 ** 22))));
  for (const x of [5e-324, 1e-323, 2.225073858507201e-308, 2.2250738585072014e-308, 1.7976931348623157e308,
    1.7976931348623155e308, 9007199254740992, 1, 0.5, 1e23, 8.988465674311579e307]) halfway(x);
  return lines;
}
