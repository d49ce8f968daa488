// The console formatter of the guest: Node's util.format and util.inspect with their
// defaults (depth 2, breakLength 80, compact 3, arrays grouped in columns). It is compiled
// only when a call first logs or throws a non-Error, so that calls which do not log do not
// pay for it. Its completion value is a function of the primordials the prelude captured.
(function (P) {
  'use strict';
  const {getPrototypeOf, objectKeys, getOwnPropertySymbols, isArray, apply, hasOwnProperty, objectToString, arrayPush, arrayJoin, arrayIncludes, stringRepeat, stringSlice, stringIndexOf, stringIncludes, jsonStringify, mathMin, mathMax, mathSqrt, mathRound, mathFloor, objectIs, dateToISOString, dateGetTime, regexpToString, errorToString, mapForEach, mapSize, setForEach, setSize, validTypedArray} = P;

  // ---- a Node-like formatter for console.* (util.inspect with its defaults) ----

  const kObjectType = 0;
  const kArrayExtrasType = 1;
  const maxArrayLength = 100;
  const maxStringLength = 10000;
  const MAX_LINE = 64 * 1024;
  const identifierRe = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
  const strEscapeRe = /[\x00-\x1f\x27\x5c\x7f-\x9f]/;
  const meta = [
    '\\x00', '\\x01', '\\x02', '\\x03', '\\x04', '\\x05', '\\x06', '\\x07',
    '\\b', '\\t', '\\n', '\\x0B', '\\f', '\\r', '\\x0E', '\\x0F',
    '\\x10', '\\x11', '\\x12', '\\x13', '\\x14', '\\x15', '\\x16', '\\x17',
    '\\x18', '\\x19', '\\x1A', '\\x1B', '\\x1C', '\\x1D', '\\x1E', '\\x1F',
  ];

  function strEscape(str) {
    let quote = "'";
    if (apply(stringIncludes, str, ["'"])) {
      if (!apply(stringIncludes, str, ['"'])) quote = '"';
      else if (!apply(stringIncludes, str, ['`']) && !apply(stringIncludes, str, ['${'])) quote = '`';
    }
    let out = '';
    for (let i = 0; i < str.length; i++) {
      const c = str.charCodeAt(i);
      const ch = str[i];
      if (ch === quote || c === 0x5c) out += '\\' + ch;
      else if (c < 0x20) out += meta[c];
      else if (c === 0x7f || (c >= 0x80 && c <= 0x9f)) out += '\\x' + c.toString(16).toUpperCase().padStart(2, '0');
      else out += ch;
    }
    return quote + out + quote;
  }

  function formatPrimitive(v, ctx) {
    switch (typeof v) {
      case 'string': {
        let trailer = '';
        if (v.length > maxStringLength) {
          const remaining = v.length - maxStringLength;
          v = apply(stringSlice, v, [0, maxStringLength]);
          trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
        }
        if (ctx.compact !== true && v.length > 16 && v.length > ctx.breakLength - ctx.indentationLvl - 4) {
          // Node splits long strings on new lines into several quoted parts
          const parts = [];
          const re = /(?<=\n)/;
          for (const line of v.split(re)) arrayPush.call(parts, strEscape(line));
          return apply(arrayJoin, parts, [` +\n${' '.repeat(ctx.indentationLvl + 2)}`]) + trailer;
        }
        return strEscape(v) + trailer;
      }
      case 'number': return objectIs(v, -0) ? '-0' : '' + v;
      case 'bigint': return v + 'n';
      case 'boolean': return '' + v;
      case 'undefined': return 'undefined';
      case 'symbol': return v.toString();
    }
    return '' + v;
  }

  function constructorName(v) {
    let o = v;
    while (o !== null && o !== undefined) {
      const d = Object.getOwnPropertyDescriptor(o, 'constructor');
      if (d !== undefined && typeof d.value === 'function' && d.value.name !== '') return d.value.name;
      o = getPrototypeOf(o);
    }
    return null;
  }

  function formatKey(key) {
    if (typeof key === 'symbol') return '[' + key.toString() + ']';
    if (identifierRe.test(key)) return key;
    return strEscape(key);
  }

  function formatValue(ctx, v, recurseTimes) {
    if ((typeof v !== 'object' || v === null) && typeof v !== 'function') {
      return v === null ? 'null' : formatPrimitive(v, ctx);
    }
    if (apply(arrayIncludes, ctx.seen, [v])) {
      ctx.circular = true;
      return '[Circular *1]';
    }
    return formatRaw(ctx, v, recurseTimes);
  }

  function formatProperty(ctx, v, recurseTimes, key, type) {
    let str;
    const desc = Object.getOwnPropertyDescriptor(v, key) || { value: v[key], enumerable: true };
    if (desc.value !== undefined || !('get' in desc)) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? '[Getter/Setter]' : '[Getter]';
    } else {
      str = desc.set !== undefined ? '[Setter]' : 'undefined';
    }
    if (type === kArrayExtrasType) return str;
    return `${formatKey(key)}: ${str}`;
  }

  function formatArray(ctx, v, recurseTimes) {
    const valLen = v.length;
    const len = mathMin(maxArrayLength, valLen);
    const remaining = valLen - len;
    const output = [];
    let holes = 0;
    for (let i = 0; i < len; i++) {
      if (!apply(hasOwnProperty, v, [i])) {
        holes++;
        continue;
      }
      if (holes > 0) {
        arrayPush.call(output, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
        holes = 0;
      }
      arrayPush.call(output, formatProperty(ctx, v, recurseTimes, i, kArrayExtrasType));
    }
    if (holes > 0) arrayPush.call(output, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
    if (remaining > 0) arrayPush.call(output, `... ${remaining} more item${remaining > 1 ? 's' : ''}`);
    return output;
  }

  function formatRaw(ctx, v, recurseTimes) {
    const tag = apply(objectToString, v, []);
    const name = constructorName(v);
    let keys = objectKeys(v);
    for (const s of getOwnPropertySymbols(v)) {
      if (Object.getOwnPropertyDescriptor(v, s).enumerable) arrayPush.call(keys, s);
    }
    let base = '';
    let braces;
    let extrasType = kObjectType;
    let formatter = null;
    const prefix = (fallback, size) => {
      if (name === null) return `[${fallback}${size}: null prototype] `;
      return `${name}${size} `;
    };

    if (isArray(v)) {
      keys = keys.filter((k) => typeof k === 'symbol' || '' + (k >>> 0) !== k);
      braces = [name === 'Array' ? '[' : `${prefix('Array', `(${v.length})`)}[`, ']'];
      extrasType = kArrayExtrasType;
      if (v.length === 0 && keys.length === 0) return `${braces[0]}]`;
      formatter = formatArray;
    } else if (typeof v === 'function') {
      const fname = v.name ? `: ${v.name}` : ' (anonymous)';
      base = /^class\b/.test(Function.prototype.toString.call(v)) ? `[class ${v.name || '(anonymous)'}]` : `[Function${fname}]`;
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (tag === '[object RegExp]') {
      base = apply(regexpToString, v, []);
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (tag === '[object Date]') {
      const t = apply(dateGetTime, v, []);
      base = t === t ? apply(dateToISOString, v, []) : 'Invalid Date';
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (tag === '[object Error]') {
      base = typeof v.stack === 'string' && v.stack !== '' ? `${apply(errorToString, v, [])}\n${v.stack.replace(/\n$/, '')}` : `[${apply(errorToString, v, [])}]`;
      keys = keys.filter((k) => k !== 'stack' && k !== 'message');
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (tag === '[object Map]') {
      braces = [`${prefix('Map', `(${apply(mapSize, v, [])})`)}{`, '}'];
      if (apply(mapSize, v, []) === 0 && keys.length === 0) return `${braces[0]}}`;
      formatter = (ctx, v, recurseTimes) => {
        const out = [];
        ctx.indentationLvl += 2;
        apply(mapForEach, v, [(val, k) => {
          arrayPush.call(out, `${formatValue(ctx, k, recurseTimes)} => ${formatValue(ctx, val, recurseTimes)}`);
        }]);
        ctx.indentationLvl -= 2;
        return out;
      };
    } else if (tag === '[object Set]') {
      braces = [`${prefix('Set', `(${apply(setSize, v, [])})`)}{`, '}'];
      if (apply(setSize, v, []) === 0 && keys.length === 0) return `${braces[0]}}`;
      formatter = (ctx, v, recurseTimes) => {
        const out = [];
        ctx.indentationLvl += 2;
        apply(setForEach, v, [(val) => { arrayPush.call(out, formatValue(ctx, val, recurseTimes)); }]);
        ctx.indentationLvl -= 2;
        return out;
      };
    } else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      const len = validTypedArray(v);
      braces = [`${prefix('TypedArray', `(${len})`)}[`, ']'];
      extrasType = kArrayExtrasType;
      if (len === 0 && keys.length === 0) return `${braces[0]}]`;
      keys = keys.filter((k) => typeof k === 'symbol' || '' + (k >>> 0) !== k);
      formatter = (ctx, v) => {
        const out = [];
        const n = mathMin(maxArrayLength, len);
        for (let i = 0; i < n; i++) arrayPush.call(out, formatPrimitive(v[i], ctx));
        if (len > n) arrayPush.call(out, `... ${len - n} more item${len - n > 1 ? 's' : ''}`);
        return out;
      };
    } else if (tag === '[object Promise]') {
      braces = [`${prefix('Promise', '')}{`, '}'];
      formatter = () => ['<unknown>'];
    } else {
      if (name === 'Object') {
        if (tag === '[object Arguments]') braces = ['[Arguments] [', ']'];
        else braces = ['{', '}'];
      } else if (name === null) {
        braces = ['[Object: null prototype] {', '}'];
      } else {
        braces = [`${name} {`, '}'];
      }
      if (keys.length === 0) return `${braces[0]}}`;
    }

    if (recurseTimes > ctx.depth) {
      return `[${name === null ? 'Object: null prototype' : (isArray(v) ? 'Array' : name)}]`;
    }
    recurseTimes += 1;
    arrayPush.call(ctx.seen, v);
    ctx.currentDepth = recurseTimes;
    let output = formatter !== null ? formatter(ctx, v, recurseTimes) : [];
    for (let i = 0; i < keys.length; i++) {
      arrayPush.call(output, formatProperty(ctx, v, recurseTimes, keys[i], kObjectType));
    }
    ctx.seen.pop();
    return reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, v);
  }

  function groupArrayElements(ctx, output, value) {
    let totalLength = 0;
    let maxLength = 0;
    let i = 0;
    let outputLength = output.length;
    if (value !== undefined && maxArrayLength < value.length && outputLength > 0) outputLength--;
    const separatorSpace = 2;
    const dataLen = new Array(outputLength);
    for (; i < outputLength; i++) {
      const len = output[i].length;
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const approxCharHeights = 2.5;
      const averageBias = mathSqrt(actualMax - totalLength / output.length);
      const biasedMax = mathMax(actualMax - 3 - averageBias, 1);
      const columns = mathMin(
        mathRound(mathSqrt(approxCharHeights * biasedMax * outputLength) / biasedMax),
        mathFloor((ctx.breakLength - ctx.indentationLvl) / actualMax),
        ctx.compact * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let i = 0; i < columns; i++) {
        let lineLength = 0;
        for (let j = i; j < output.length; j += columns) {
          if (dataLen[j] > lineLength) lineLength = dataLen[j];
        }
        arrayPush.call(maxLineLength, lineLength + separatorSpace);
      }
      let padStart = true;
      if (value !== undefined) {
        for (let i = 0; i < output.length; i++) {
          if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') {
            padStart = false;
            break;
          }
        }
      }
      for (let i = 0; i < outputLength; i += columns) {
        const max = mathMin(i + columns, outputLength);
        let str = '';
        let j = i;
        for (; j < max - 1; j++) {
          const padding = maxLineLength[j - i];
          str += padStart ? `${output[j]}, `.padStart(padding, ' ') : `${output[j]}, `.padEnd(padding, ' ');
        }
        if (padStart) {
          str += output[j].padStart(maxLineLength[j - i] - separatorSpace, ' ');
        } else {
          str += output[j];
        }
        arrayPush.call(tmp, str);
      }
      if (outputLength < output.length) arrayPush.call(tmp, output[outputLength]);
      output = tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > ctx.breakLength) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > ctx.breakLength) return false;
    }
    return base === '' || !apply(stringIncludes, base, ['\n']);
  }

  function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value) {
    const entries = output.length;
    if (extrasType === kArrayExtrasType && entries > 6) {
      output = groupArrayElements(ctx, output, value);
    }
    if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = apply(arrayJoin, output, [', ']);
        if (!apply(stringIncludes, joined, ['\n'])) {
          return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${apply(stringRepeat, ' ', [ctx.indentationLvl])}`;
    return `${base ? `${base} ` : ''}${braces[0]}${indentation}  ${apply(arrayJoin, output, [`,${indentation}  `])}${indentation}${braces[1]}`;
  }

  function inspect(v) {
    const ctx = {
      seen: [], indentationLvl: 0, currentDepth: 0, depth: 2, breakLength: 80, compact: 3,
      circular: false,
    };
    const s = formatValue(ctx, v, 0);
    return ctx.circular && typeof v === 'object' && v !== null ? '<ref *1> ' + s : s;
  }

  // util.format: a first string argument may hold %s %d %i %f %j %o %O %c %%. A line longer
  // than MAX_LINE shows its first MAX_LINE characters and an ellipsis, so the work stops
  // where the line does: the format is cut to what can still show (below), searched for '%'
  // natively, and each piece is cut before it is joined. The line is always the whole
  // format's line, cut; what lies past the cut is never formatted. The pieces are joined
  // once, at the end: joining as they come would copy the line once for each piece.
  function format(args) {
    const full = MAX_LINE + 1; // a line this long is cut, whatever follows
    const parts = [];
    let n = 0; // the length of the pieces so far
    const put = (s) => {
      if (s.length > full) s = apply(stringSlice, s, [0, full]);
      apply(arrayPush, parts, [s]);
      n += s.length;
    };
    let a = 0;
    if (typeof args[0] === 'string') {
      // Each character of the format gives one of the line, but '%%' gives one for two and
      // a directive that takes an argument at least none for two: so the first n characters
      // give at least n/2 - 2*args.length, and characters past this bound can only show
      // past the cut.
      const bound = 2 * full + 4 * args.length + 4;
      const f = args[0].length > bound ? apply(stringSlice, args[0], [0, bound]) : args[0];
      a = 1;
      let last = 0;
      let i = apply(stringIndexOf, f, ['%', 0]);
      while (i >= 0 && i < f.length - 1 && n < full) {
        const c = f[i + 1];
        let next = i + 1;
        if (c === '%') {
          put(apply(stringSlice, f, [last, i]));
          put('%');
          last = next = i + 2;
        } else if (a < args.length) {
          let rep;
          let known = true;
          const arg = args[a];
          switch (c) {
            case 's':
              rep = typeof arg === 'string' ? arg
                : typeof arg === 'bigint' ? arg + 'n'
                : typeof arg === 'object' && arg !== null ? inspect(arg)
                : formatPrimitive(arg, { compact: 3, indentationLvl: 0, breakLength: Infinity });
              break;
            case 'd': case 'i': {
              if (typeof arg === 'bigint') rep = arg + 'n';
              else if (typeof arg === 'symbol' || (typeof arg === 'object' && arg !== null)) rep = 'NaN';
              else {
                const n = c === 'i' ? parseInt(arg) : Number(arg);
                rep = objectIs(n, -0) ? '-0' : '' + n;
              }
              break;
            }
            case 'f': rep = typeof arg === 'symbol' ? 'NaN' : '' + parseFloat(arg); break;
            case 'j':
              try { rep = jsonStringify(arg); } catch (e) { rep = '[Circular]'; }
              break;
            case 'o': case 'O': rep = inspect(arg); break;
            case 'c': rep = ''; break;
            default: known = false;
          }
          if (known) {
            put(apply(stringSlice, f, [last, i]));
            put('' + rep);
            last = next = i + 2;
            a++;
          }
        }
        i = apply(stringIndexOf, f, ['%', next]);
      }
      if (n < full) put(apply(stringSlice, f, [last]));
    }
    for (; a < args.length && n < full; a++) {
      const v = args[a];
      if (n > 0 || a > 0) put(' ');
      put(typeof v === 'string' ? v : inspect(v));
    }
    let str = apply(arrayJoin, parts, ['']);
    if (str.length > MAX_LINE) str = apply(stringSlice, str, [0, MAX_LINE]) + '…';
    return str;
  }

  return { format, inspect };
})
