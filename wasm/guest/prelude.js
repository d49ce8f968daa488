// The guest prelude, evaluated in every fresh context before the program.
//
// It adds the ES2022+ built-ins that QuickJS 2021 lacks and that model-written code uses
// (non-enumerable, named and sized like native built-ins), and its completion value is the
// setup function the shim calls with two native functions. Setup installs `console` and
// returns the `libos` object plus the shim's helpers; none of them is a global.
(function () {
  'use strict';
  'use strip'; // no debug info: smaller bytecode, faster to read per call

  const ObjectProto = Object.prototype;
  const ArrayProto = Array.prototype;
  const defineProperty = Object.defineProperty;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectKeys = Object.keys;
  const getOwnPropertySymbols = Object.getOwnPropertySymbols;
  const getOwnPropertyNames = Object.getOwnPropertyNames;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const apply = Reflect.apply;
  const hasOwnProperty = ObjectProto.hasOwnProperty;
  const objectToString = ObjectProto.toString;
  const arraySort = ArrayProto.sort;
  const arrayPush = ArrayProto.push;
  const arrayPop = ArrayProto.pop;
  const arrayJoin = ArrayProto.join;
  const arrayIncludes = ArrayProto.includes;
  const stringRepeat = String.prototype.repeat;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringReplace = String.prototype.replace;
  const stringIncludes = String.prototype.includes;
  const jsonStringify = JSON.stringify;
  const jsonParse = JSON.parse;
  const numberIsFinite = Number.isFinite;
  const mathTrunc = Math.trunc;
  const mathMin = Math.min;
  const mathMax = Math.max;
  const mathSqrt = Math.sqrt;
  const mathRound = Math.round;
  const mathFloor = Math.floor;
  const objectIs = Object.is;
  const weakMapGet = WeakMap.prototype.get;
  const weakMapSet = WeakMap.prototype.set;
  const Promise_ = Promise;
  const promiseResolve = (v) => apply(Promise_.resolve, Promise_, [v]);
  const promiseReject = (v) => apply(Promise_.reject, Promise_, [v]);
  const promiseThen = Promise_.prototype.then;
  const TypedArray = getPrototypeOf(Int8Array);
  const TypedArrayProto = TypedArray.prototype;
  const typedArrayLength = Object.getOwnPropertyDescriptor(TypedArrayProto, 'length').get;
  const typedArraySort = TypedArrayProto.sort;
  const NativeDate = Date;
  const dateToISOString = Date.prototype.toISOString;
  const dateGetTime = Date.prototype.getTime;
  const regexpToString = RegExp.prototype.toString;
  const errorToString = Error.prototype.toString;
  const mapForEach = Map.prototype.forEach;
  const mapSet = Map.prototype.set;
  const mapGet = Map.prototype.get;
  const mapHas = Map.prototype.has;
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get;
  const setForEach = Set.prototype.forEach;
  const setAdd = Set.prototype.add;
  const setSize = Object.getOwnPropertyDescriptor(Set.prototype, 'size').get;
  const MAX_LENGTH = 9007199254740991;

  // ---- built-ins ----

  function define(target, methods) {
    for (const name of getOwnPropertyNames(methods)) {
      if (apply(hasOwnProperty, target, [name])) continue; // never shadow a native one
      defineProperty(target, name, {
        value: methods[name], writable: true, enumerable: false, configurable: true,
      });
    }
  }

  function toIntegerOrInfinity(v) {
    const n = +v;
    if (n !== n || n === 0) return 0;
    return mathTrunc(n);
  }

  function toObject(v, what) {
    if (v === null || v === undefined) {
      throw new TypeError(what + ' called on null or undefined');
    }
    return Object(v);
  }

  function lengthOf(o) {
    const n = toIntegerOrInfinity(o.length);
    return n <= 0 ? 0 : mathMin(n, MAX_LENGTH);
  }

  function callable(f, what) {
    if (typeof f !== 'function') throw new TypeError(what + ': ' + typeof f + ' is not a function');
  }

  function relativeIndex(index, len) {
    const rel = toIntegerOrInfinity(index);
    return rel >= 0 ? rel : len + rel;
  }

  function validTypedArray(ta) {
    return apply(typedArrayLength, ta, []); // throws a TypeError for anything else
  }

  function arrayCreate(len) {
    if (len > 4294967295) throw new RangeError('Invalid array length');
    return new Array(len);
  }

  define(ArrayProto, {
    at(index) {
      const o = toObject(this, 'Array.prototype.at');
      const len = lengthOf(o);
      const k = relativeIndex(index, len);
      return k < 0 || k >= len ? undefined : o[k];
    },
    findLast(predicate) {
      const thisArg = arguments[1];
      const o = toObject(this, 'Array.prototype.findLast');
      const len = lengthOf(o);
      callable(predicate, 'Array.prototype.findLast');
      for (let k = len - 1; k >= 0; k--) {
        const v = o[k];
        if (apply(predicate, thisArg, [v, k, o])) return v;
      }
      return undefined;
    },
    findLastIndex(predicate) {
      const thisArg = arguments[1];
      const o = toObject(this, 'Array.prototype.findLastIndex');
      const len = lengthOf(o);
      callable(predicate, 'Array.prototype.findLastIndex');
      for (let k = len - 1; k >= 0; k--) {
        if (apply(predicate, thisArg, [o[k], k, o])) return k;
      }
      return -1;
    },
    toReversed() {
      const o = toObject(this, 'Array.prototype.toReversed');
      const len = lengthOf(o);
      const a = arrayCreate(len);
      for (let k = 0; k < len; k++) a[k] = o[len - 1 - k];
      return a;
    },
    toSorted(comparefn) {
      if (comparefn !== undefined) callable(comparefn, 'Array.prototype.toSorted');
      const o = toObject(this, 'Array.prototype.toSorted');
      const len = lengthOf(o);
      const a = arrayCreate(len);
      for (let k = 0; k < len; k++) a[k] = o[k];
      return apply(arraySort, a, [comparefn]);
    },
    with(index, value) {
      const o = toObject(this, 'Array.prototype.with');
      const len = lengthOf(o);
      const k = relativeIndex(index, len);
      if (k < 0 || k >= len) throw new RangeError('Invalid index : ' + index);
      const a = arrayCreate(len);
      for (let i = 0; i < len; i++) a[i] = i === k ? value : o[i];
      return a;
    },
  });

  define(String.prototype, {
    at(index) {
      if (this === null || this === undefined || typeof this === 'symbol') {
        throw new TypeError('String.prototype.at called on ' + (typeof this === 'symbol' ? 'a symbol' : this));
      }
      const s = String(this);
      const len = s.length;
      const k = relativeIndex(index, len);
      return k < 0 || k >= len ? undefined : s[k];
    },
  });

  define(TypedArrayProto, {
    at(index) {
      const len = validTypedArray(this);
      const k = relativeIndex(index, len);
      return k < 0 || k >= len ? undefined : this[k];
    },
    findLast(predicate) {
      const thisArg = arguments[1];
      const len = validTypedArray(this);
      callable(predicate, '%TypedArray%.prototype.findLast');
      for (let k = len - 1; k >= 0; k--) {
        const v = this[k];
        if (apply(predicate, thisArg, [v, k, this])) return v;
      }
      return undefined;
    },
    findLastIndex(predicate) {
      const thisArg = arguments[1];
      const len = validTypedArray(this);
      callable(predicate, '%TypedArray%.prototype.findLastIndex');
      for (let k = len - 1; k >= 0; k--) {
        if (apply(predicate, thisArg, [this[k], k, this])) return k;
      }
      return -1;
    },
    toReversed() {
      const len = validTypedArray(this);
      const a = new this.constructor(len);
      for (let k = 0; k < len; k++) a[k] = this[len - 1 - k];
      return a;
    },
    toSorted(comparefn) {
      if (comparefn !== undefined) callable(comparefn, '%TypedArray%.prototype.toSorted');
      const len = validTypedArray(this);
      const a = new this.constructor(len);
      for (let k = 0; k < len; k++) a[k] = this[k];
      return apply(typedArraySort, a, [comparefn]);
    },
    with(index, value) {
      const len = validTypedArray(this);
      const k = relativeIndex(index, len);
      const v = this instanceof BigInt64Array || this instanceof BigUint64Array ? BigInt(value) : +value;
      if (k < 0 || k >= validTypedArray(this)) throw new RangeError('Invalid typed array index');
      const a = new this.constructor(len);
      for (let i = 0; i < len; i++) a[i] = i === k ? v : this[i];
      return a;
    },
  });

  define(Object, {
    hasOwn(o, key) {
      return apply(hasOwnProperty, toObject(o, 'Object.hasOwn'), [key]);
    },
  });

  function dataCloneError(v) {
    const e = new Error(describeBrief(v) + ' could not be cloned.');
    e.name = 'DataCloneError';
    return e;
  }

  function clone(v, memo) {
    const t = typeof v;
    if (t === 'function' || t === 'symbol') throw dataCloneError(v);
    if (t !== 'object' || v === null) return v;
    if (apply(mapHas, memo, [v])) return apply(mapGet, memo, [v]);
    const tag = apply(objectToString, v, []);
    let out;
    if (isArray(v)) {
      out = arrayCreate(lengthOf(v));
      apply(mapSet, memo, [v, out]);
      for (const k of objectKeys(v)) out[k] = clone(v[k], memo);
      return out;
    }
    if (tag === '[object Date]') {
      out = new NativeDate(apply(dateGetTime, v, []));
    } else if (tag === '[object Object]' || tag === '[object Error]') {
      out = tag === '[object Error]' ? new Error(v.message) : {};
      if (tag === '[object Error]') {
        const name = v.name;
        if (name !== 'Error') defineProperty(out, 'name', { value: name, writable: true, configurable: true });
      }
      if (tag === '[object Object]' && getPrototypeOf(v) !== ObjectProto && getPrototypeOf(v) !== null &&
          typeof v.constructor === 'function' && v.constructor.prototype === getPrototypeOf(v) &&
          v.constructor !== Object) {
        // class instances clone as plain objects with their own enumerable data
      }
    } else if (tag === '[object Map]') {
      out = new Map();
      apply(mapSet, memo, [v, out]);
      apply(mapForEach, v, [(val, key) => apply(mapSet, out, [clone(key, memo), clone(val, memo)])]);
      return out;
    } else if (tag === '[object Set]') {
      out = new Set();
      apply(mapSet, memo, [v, out]);
      apply(setForEach, v, [(val) => apply(setAdd, out, [clone(val, memo)])]);
      return out;
    } else if (tag === '[object RegExp]') {
      out = new RegExp(v.source, v.flags);
    } else if (tag === '[object Boolean]' || tag === '[object Number]' || tag === '[object String]' ||
               tag === '[object BigInt]') {
      out = Object(v.valueOf());
    } else {
      throw dataCloneError(v);
    }
    apply(mapSet, memo, [v, out]);
    if (tag === '[object Object]') {
      for (const k of objectKeys(v)) out[k] = clone(v[k], memo);
    }
    return out;
  }

  define(globalThis, {
    structuredClone(value, options) {
      if (arguments.length === 0) throw new TypeError("structuredClone: 1 argument required, but only 0 present.");
      return clone(value, new Map());
    },
  });

  // ---- the clock ----

  // A program learns the time only through libos.syscall("clock.now", …), which checks
  // the clock:now capability and is audited. Date.now(), Date() and new Date() with no
  // argument would read an ambient clock instead; they throw, so that a program never
  // gets a made-up time without noticing. Every other use of Date (new Date(value),
  // Date.UTC, Date.parse, the prototype) is the native one. The shim reports an
  // AmbientClockError with the code ambient_clock.
  class AmbientClockError extends Error {}
  defineProperty(AmbientClockError.prototype, 'name', {
    value: 'AmbientClockError', writable: true, enumerable: false, configurable: true,
  });
  function noAmbientClock(what) {
    return new AmbientClockError(what + ' reads no clock in the sandbox: ask for the time with ' +
      'libos.syscall("clock.now", {"timezone": "UTC"}), which needs the clock:now capability');
  }
  const SandboxDate = new Proxy(NativeDate, {
    apply() { throw noAmbientClock('Date()'); },
    construct(target, args, newTarget) {
      if (args.length === 0) throw noAmbientClock('new Date()');
      return Reflect.construct(target, args, newTarget);
    },
  });
  defineProperty(NativeDate, 'now', {
    value: { now() { throw noAmbientClock('Date.now()'); } }.now,
    writable: true, enumerable: false, configurable: true,
  });
  defineProperty(NativeDate.prototype, 'constructor', {
    value: SandboxDate, writable: true, enumerable: false, configurable: true,
  });
  defineProperty(globalThis, 'Date', {
    value: SandboxDate, writable: true, enumerable: false, configurable: true,
  });

  function constructorName(v) {
    let o = v;
    while (o !== null && o !== undefined) {
      const d = Object.getOwnPropertyDescriptor(o, 'constructor');
      if (d !== undefined && typeof d.value === 'function' && d.value.name !== '') return d.value.name;
      o = getPrototypeOf(o);
    }
    return null;
  }

  // The console formatter (console.js) is loaded on first use.
  let formatter = null;
  let loadConsole = null;
  function fmt() {
    if (formatter === null) {
      formatter = loadConsole()({getPrototypeOf, objectKeys, getOwnPropertySymbols, isArray, apply, hasOwnProperty, objectToString, arrayPush, arrayJoin, arrayIncludes, stringRepeat, stringSlice, stringIndexOf, stringIncludes, jsonStringify, mathMin, mathMax, mathSqrt, mathRound, mathFloor, objectIs, dateToISOString, dateGetTime, regexpToString, errorToString, mapForEach, mapSize, setForEach, setSize, validTypedArray});
    }
    return formatter;
  }
  const inspect = (v) => fmt().inspect(v);
  const format = (args) => fmt().format(args);
  function describeBrief(v) {
    try {
      return typeof v === 'function' ? Function.prototype.toString.call(v) : inspect(v);
    } catch (e) {
      return 'value';
    }
  }

  // ---- the plain-JSON check, written in the same pass as the JSON text ----

  const identifierRe = /^[a-zA-Z_][a-zA-Z_0-9]*$/;

  function pathKey(path, key) {
    return identifierRe.test(key) || /^[$_a-zA-Z][$_a-zA-Z0-9]*$/.test(key)
      ? path + '.' + key : path + '[' + jsonStringify(key) + ']';
  }

  function kind(v) {
    if (v === undefined) return 'undefined';
    if (typeof v === 'function') return 'a function';
    if (typeof v === 'symbol') return 'a symbol';
    if (typeof v === 'bigint') return 'a BigInt';
    if (typeof v === 'number') return '' + v;
    const name = constructorName(v);
    return 'an instance of ' + (name === null ? 'an unknown class' : name);
  }

  // The first offender found by write: its message, and the keys and indexes that lead
  // to it, innermost first, added as write unwinds. The path is text only once there is
  // an offender: a value that is JSON costs no path strings.
  function offence(message) {
    return { keys: [], message };
  }

  function write(v, out, stack) {
    switch (typeof v) {
      case 'string': arrayPush.call(out, jsonStringify(v)); return null;
      case 'boolean': arrayPush.call(out, v ? 'true' : 'false'); return null;
      case 'number':
        if (!numberIsFinite(v)) return offence(v + ' is not a finite number');
        arrayPush.call(out, '' + v);
        return null;
      case 'object': break;
      default: return offence(kind(v) + ' is not JSON');
    }
    if (v === null) {
      arrayPush.call(out, 'null');
      return null;
    }
    if (apply(arrayIncludes, stack, [v])) return offence('a cycle is not JSON');
    const proto = getPrototypeOf(v);
    if (isArray(v)) {
      if (proto !== ArrayProto) return offence(kind(v) + ' is not JSON');
      arrayPush.call(stack, v);
      const len = v.length;
      arrayPush.call(out, '[');
      for (let i = 0; i < len; i++) {
        if (i > 0) arrayPush.call(out, ',');
        let err = null;
        if (!apply(hasOwnProperty, v, [i])) err = offence('a hole in a sparse array is not JSON');
        else err = write(v[i], out, stack);
        if (err !== null) {
          arrayPush.call(err.keys, i);
          return err;
        }
      }
      arrayPush.call(out, ']');
      apply(arrayPop, stack, []);
      return null;
    }
    if (proto !== ObjectProto && proto !== null) return offence(kind(v) + ' is not JSON');
    if (getOwnPropertySymbols(v).length > 0) return offence('a symbol-keyed property is not JSON');
    arrayPush.call(stack, v);
    const keys = objectKeys(v);
    arrayPush.call(out, '{');
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (i > 0) arrayPush.call(out, ',');
      arrayPush.call(out, jsonStringify(k), ':');
      const err = write(v[k], out, stack);
      if (err !== null) {
        arrayPush.call(err.keys, k);
        return err;
      }
    }
    arrayPush.call(out, '}');
    apply(arrayPop, stack, []);
    return null;
  }

  // JSON text of a plain-JSON value, or [path, message] for the first offender.
  function serialize(v) {
    const out = [];
    const err = write(v, out, []);
    if (err === null) return apply(arrayJoin, out, ['']);
    let path = '$';
    for (let i = err.keys.length - 1; i >= 0; i--) {
      const k = err.keys[i];
      path = typeof k === 'number' ? path + '[' + k + ']' : pathKey(path, k);
    }
    return [path, err.message];
  }

  function codedError(code, message) {
    const e = new Error(message);
    e.code = code;
    return e;
  }

  // The refusals the host sent back, each with the code it came with. A refusal the
  // program let escape is reported with that code (describe's fourth part), so that the
  // host knows it by identity, not by its text, whatever the program did to its .code.
  const refusals = new WeakMap();

  const MAX_FRAMES = 50;
  function trimStack(stack) {
    const lines = stack.split('\n');
    if (lines.length <= MAX_FRAMES + 1) return stack;
    const more = lines.length - MAX_FRAMES - 1;
    return apply(arrayJoin, lines.slice(0, MAX_FRAMES), ['\n']) + `\n    ... ${more} more frame${more > 1 ? 's' : ''}\n`;
  }

  // [name, message, stack, refusal code] of a thrown value; never throws. The code is
  // '' unless the value is a refusal the host sent back.
  function describe(e) {
    try {
      if (typeof e === 'object' && e !== null && apply(objectToString, e, []) === '[object Error]') {
        const name = e.name;
        const message = e.message;
        const stack = e.stack;
        const refused = apply(weakMapGet, refusals, [e]);
        return [
          name === undefined ? 'Error' : '' + name,
          message === undefined ? '' : '' + message,
          typeof stack === 'string' ? trimStack(stack) : '',
          typeof refused === 'string' ? refused : '',
        ];
      }
      return ['', 'Uncaught ' + inspect(e), ''];
    } catch (err) {
      return ['', 'Uncaught exception (it could not be described)', ''];
    }
  }

  // Awaits a thenable through the job queue; the shim drains the queue and reads state.
  function settle(v) {
    const rec = { state: 0, value: undefined };
    let then;
    if ((typeof v === 'object' && v !== null) || typeof v === 'function') then = v.then;
    if (typeof then !== 'function') {
      rec.state = 1;
      rec.value = v;
      return rec;
    }
    apply(promiseThen, promiseResolve(v), [
      (x) => { rec.state = 1; rec.value = x; },
      (e) => { rec.state = 2; rec.value = e; },
    ]);
    return rec;
  }

  return function setup(nativeLog, nativeSyscall, nativeLoadConsole) {
    loadConsole = nativeLoadConsole;
    const log = (level) => function () {
      nativeLog(level, format(arguments));
    };
    const console = {};
    define(console, {
      log: log(1), info: log(1), debug: log(0), warn: log(2), error: log(3), trace: log(3),
    });
    defineProperty(globalThis, 'console', {
      value: console, writable: true, enumerable: false, configurable: true,
    });

    const libos = freeze({
      syscall(name, args) {
        try {
          if (typeof name !== 'string') {
            throw codedError('syscall_args_invalid', 'libos.syscall: the name must be a string');
          }
          const r = serialize(args === undefined ? {} : args);
          if (typeof r !== 'string') {
            throw codedError('syscall_args_invalid', `libos.syscall: args at ${r[0]}: ${r[1]}`);
          }
          const resp = jsonParse(nativeSyscall(name, r));
          if (resp !== null && typeof resp === 'object' && resp.ok === true) return promiseResolve(resp.result);
          const err = resp !== null && typeof resp === 'object' && resp.error !== null &&
            typeof resp.error === 'object' ? resp.error : {};
          const code = typeof err.code === 'string' ? err.code : 'syscall_failed';
          const refusal = codedError(code,
            typeof err.message === 'string' ? err.message : 'libos.syscall: ' + name + ' failed');
          apply(weakMapSet, refusals, [refusal, code]);
          throw refusal;
        } catch (e) {
          return promiseReject(e);
        }
      },
    });
    return { libos, serialize, describe, settle };
  };
})();
