/*
 * The guest side of the libos sandbox ABI (see ABI.md).
 *
 * libos_prepare() builds, once per module, the state every call starts from: a JSRuntime
 * and JSContext with no eval intrinsic, no module loader, the prelude, console and libos
 * installed. The host snapshots the memory that holds it and restores that snapshot after
 * every call (ABI.md, "The snapshot"), so no JavaScript state survives between calls
 * without a runtime being built per call. One libos_run() call seeds Math.random from
 * the host, evaluates the program, calls and awaits run(args, libos), and checks the
 * result to be plain JSON and serialises it.
 *
 * The shim also replaces the few libc functions that would otherwise pull in WASI imports
 * (clock, stdio), so that the module imports nothing but "libos".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <sys/time.h>
#include <malloc.h>

#include "quickjs.h"
#include "cutils.h"
#include "prelude.h"

#define IMPORT(name) __attribute__((import_module("libos"), import_name(#name)))
#define EXPORT(name) __attribute__((export_name(#name)))

IMPORT(now_ms) double libos_now_ms(void);
IMPORT(poll) int32_t libos_poll(void);
IMPORT(syscall) int32_t libos_syscall(const char *name, int32_t name_len,
                                      const char *args, int32_t args_len);
IMPORT(syscall_take) void libos_syscall_take(char *ptr);
IMPORT(log) void libos_log(int32_t level, const char *ptr, int32_t len);

enum {
    STATUS_OK = 0,
    STATUS_ERROR = 1,
};

/* Bounds on what an error report carries, so that a huge thrown message cannot
   crowd out the result limits of the host. */
#define MAX_MESSAGE 4096
#define MAX_STACK 8192

/* The shadow stack is 1 MiB (build.sh); keep a margin below it for the C frames
   that run after QuickJS's own check (printf, the regexp compiler, ...). */
#define STACK_LIMIT_MAX (1024 * 1024 - 128 * 1024)
#define STACK_LIMIT_MIN (32 * 1024)
#define STACK_LIMIT_DEFAULT (512 * 1024)

static char *out_buf;
static size_t out_len;

/* Latched for the whole call once the host said stop: an interrupt must not be
   turned into a normal result by code that runs after it (a promise rejection
   handler, a finally block in a job). */
static int interrupted;

/* Set when an allocation was refused during the call (QuickJS's graceful limit, or the
   wasm memory could not grow). A call that then fails in any way failed for lack of
   memory, even when QuickJS could not build the error (it throws null) or a promise
   could not be settled. */
static int oom_hit;


/* ---- libc replacements: no WASI imports ---- */

/* The edge of the time range a Date can hold (±10^8 days), in milliseconds. */
#define MAX_DATE_MS 8.64e15

int gettimeofday(struct timeval *tv, void *tz)
{
    double ms = libos_now_ms();
    int64_t us;
    (void)tz;
    /* The host holds its clock to the Date range; the guest holds it there too, so that
       a clock outside it (or NaN) can never reach the double → int64 conversion, which
       would trap or saturate to a date no Date can hold. NaN reads as the epoch. */
    if (ms != ms)
        ms = 0;
    else if (ms > MAX_DATE_MS)
        ms = MAX_DATE_MS;
    else if (ms < -MAX_DATE_MS)
        ms = -MAX_DATE_MS;
    us = (int64_t)(ms * 1000.0);
    if (tv) {
        tv->tv_sec = us / 1000000;
        tv->tv_usec = us % 1000000;
        if (tv->tv_usec < 0) {
            tv->tv_usec += 1000000;
            tv->tv_sec--;
        }
    }
    return 0;
}

/* QuickJS prints only from debugging helpers (JS_Dump*, DUMP_* switches); in the guest
   that text goes to the error log level so that nothing needs fd_write. */
static void log_text(int level, const char *s, size_t len)
{
    if (len > 0)
        libos_log(level, s, (int32_t)len);
}

/* Not vfprintf: libc's snprintf() is built on it. */
static int log_vprintf(const char *fmt, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n > 0)
        log_text(3, buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    return n;
}

int fprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    int n;
    (void)f;
    va_start(ap, fmt);
    n = log_vprintf(fmt, ap);
    va_end(ap);
    return n;
}

int printf(const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = log_vprintf(fmt, ap);
    va_end(ap);
    return n;
}

int fputs(const char *s, FILE *f)
{
    (void)f;
    log_text(3, s, strlen(s));
    return 0;
}

int puts(const char *s)
{
    log_text(3, s, strlen(s));
    return 0;
}

int fputc(int c, FILE *f)
{
    char ch = (char)c;
    (void)f;
    log_text(3, &ch, 1);
    return c;
}

int putchar(int c)
{
    return fputc(c, NULL);
}

int putc(int c, FILE *f)
{
    return fputc(c, f);
}

int fflush(FILE *f)
{
    (void)f;
    return 0;
}

void __assert_fail(const char *expr, const char *file, int line, const char *func)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "assertion failed: %s (%s:%d %s)", expr, file, line, func);
    log_text(3, buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    __builtin_trap();
}

void abort(void)
{
    __builtin_trap();
}

/* The allocator's sbrk, with the break kept in memory rather than read from the memory's
   size: when the host restores its snapshot into a memory that an earlier call grew, the
   break goes back to where it was and the pages past it are used again instead of the
   memory growing further (wasm memory never shrinks). */
#define WASM_PAGE 65536
static uintptr_t heap_break;

/* The break, set from the memory's size before the snapshot is taken, so that the
   snapshot holds it: a restored allocator then hands out again the pages an earlier call
   grew, instead of growing the memory from wherever it ended. */
static uintptr_t current_break(void)
{
    if (heap_break == 0)
        heap_break = (uintptr_t)__builtin_wasm_memory_size(0) * WASM_PAGE;
    return heap_break;
}

void *sbrk(intptr_t increment)
{
    uintptr_t size = (uintptr_t)__builtin_wasm_memory_size(0) * WASM_PAGE;
    uintptr_t old;

    old = current_break();
    if (increment < 0 || (uintptr_t)increment > UINTPTR_MAX - old)
        return (void *)-1;
    if (old + (uintptr_t)increment > size) {
        uintptr_t need = old + (uintptr_t)increment - size;
        if (__builtin_wasm_memory_grow(0, (need + WASM_PAGE - 1) / WASM_PAGE) == (size_t)-1)
            return (void *)-1;
    }
    heap_break = old + (uintptr_t)increment;
    return (void *)old;
}

/* wasi-libc's memcpy, memmove and memset are byte and word loops; built with
   -mbulk-memory these are the single memory.copy and memory.fill instructions, which the
   runtime executes as one native copy. Strings, arrays and the allocator move their
   blocks through them. */
void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    return __builtin_memcpy(dst, src, n);
}

void *memmove(void *dst, const void *src, size_t n)
{
    return __builtin_memmove(dst, src, n);
}

void *memset(void *dst, int c, size_t n)
{
    return __builtin_memset(dst, c, n);
}

/* Phase timestamps for profiling a call (build with GUEST_CFLAGS=-DLIBOS_PROFILE): one
   debug log line "prof <phase> <µs>" per phase, read from the host clock. Compiled out
   of the product. */
#ifdef LIBOS_PROFILE
static void prof(const char *phase)
{
    char buf[96];
    struct timeval tv;
    int n;
    gettimeofday(&tv, NULL);
    n = snprintf(buf, sizeof(buf), "prof %s %lld", phase, (long long)tv.tv_sec * 1000000 + tv.tv_usec);
    libos_log(0, buf, n);
}
#define PROF(phase) prof(phase)
#else
#define PROF(phase) ((void)0)
#endif

/* ---- output buffer ---- */

static const char oom_error[] =
    "{\"code\":\"out_of_memory\",\"message\":\"guest: no memory left for the output\"}";

static int set_output(const char *s, size_t len)
{
    char *p = realloc(out_buf, len + 1);
    if (!p) {
        /* the static text needs no allocation */
        free(out_buf);
        out_buf = NULL;
        out_len = 0;
        return -1;
    }
    memcpy(p, s, len);
    p[len] = '\0';
    out_buf = p;
    out_len = len;
    return 0;
}

EXPORT(libos_out_ptr) int32_t libos_out_ptr(void)
{
    return out_buf ? (int32_t)(uintptr_t)out_buf : (int32_t)(uintptr_t)oom_error;
}

EXPORT(libos_out_len) int32_t libos_out_len(void)
{
    return out_buf ? (int32_t)out_len : (int32_t)(sizeof(oom_error) - 1);
}

EXPORT(libos_alloc) int32_t libos_alloc(int32_t size)
{
    if (size < 0)
        return 0;
    return (int32_t)(uintptr_t)malloc(size > 0 ? (size_t)size : 1);
}

EXPORT(libos_free) void libos_free(int32_t ptr)
{
    free((void *)(uintptr_t)ptr);
}

/* Length of the longest prefix of s[0:len] of at most max bytes that does not cut
   a UTF-8 sequence. */
static size_t utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    len = max;
    while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
        len--;
    return len;
}

static void json_put_string(DynBuf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;
    dbuf_putc(b, '"');
    for (i = 0; i < len; i++) {
        unsigned char c = s[i];
        switch (c) {
        case '"': dbuf_putstr(b, "\\\""); break;
        case '\\': dbuf_putstr(b, "\\\\"); break;
        case '\n': dbuf_putstr(b, "\\n"); break;
        case '\r': dbuf_putstr(b, "\\r"); break;
        case '\t': dbuf_putstr(b, "\\t"); break;
        default:
            if (c < 0x20) {
                dbuf_putstr(b, "\\u00");
                dbuf_putc(b, hex[c >> 4]);
                dbuf_putc(b, hex[c & 15]);
            } else {
                dbuf_putc(b, c);
            }
        }
    }
    dbuf_putc(b, '"');
}

static void *libc_realloc(void *opaque, void *ptr, size_t size)
{
    (void)opaque;
    return realloc(ptr, size);
}

/* Writes {"code","message","path"?,"stack"?,"refusal"?} as the output and returns
   STATUS_ERROR. refusal is the code of a refused syscall the program let escape, or
   NULL. */
static int set_error(const char *code, const char *msg, size_t msg_len,
                     const char *path, size_t path_len,
                     const char *stack, size_t stack_len,
                     const char *refusal, size_t refusal_len)
{
    DynBuf b;
    dbuf_init2(&b, NULL, libc_realloc);
    dbuf_putstr(&b, "{\"code\":");
    json_put_string(&b, code, strlen(code));
    dbuf_putstr(&b, ",\"message\":");
    json_put_string(&b, msg, utf8_prefix(msg, msg_len, MAX_MESSAGE));
    if (path) {
        dbuf_putstr(&b, ",\"path\":");
        json_put_string(&b, path, utf8_prefix(path, path_len, MAX_MESSAGE));
    }
    if (stack && stack_len > 0) {
        dbuf_putstr(&b, ",\"stack\":");
        json_put_string(&b, stack, utf8_prefix(stack, stack_len, MAX_STACK));
    }
    if (refusal && refusal_len > 0) {
        dbuf_putstr(&b, ",\"refusal\":");
        json_put_string(&b, refusal, utf8_prefix(refusal, refusal_len, MAX_MESSAGE));
    }
    dbuf_putc(&b, '}');
    if (b.error || set_output((const char *)b.buf, b.size) < 0) {
        free(out_buf);
        out_buf = NULL;
    }
    dbuf_free(&b);
    return STATUS_ERROR;
}

/* Whether the error output already carries this code. */
static int output_has_code(const char *code)
{
    char want[64];
    snprintf(want, sizeof(want), "{\"code\":\"%s\"", code);
    return out_buf && strncmp(out_buf, want, strlen(want)) == 0;
}

static int fail(const char *code, const char *msg)
{
    return set_error(code, msg, strlen(msg), NULL, 0, NULL, 0, NULL, 0);
}

/* ---- the interrupt handler and the native functions given to the prelude ---- */

static int interrupt_handler(JSRuntime *rt, void *opaque)
{
    (void)rt;
    (void)opaque;
    if (!interrupted && libos_poll() != 0)
        interrupted = 1;
    return interrupted;
}

/* nativeLog(level, text) */
static JSValue native_log(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    int32_t level;
    size_t len;
    const char *s;

    (void)this_val;
    if (argc < 2 || JS_ToInt32(ctx, &level, argv[0]) < 0)
        return JS_EXCEPTION;
    s = JS_ToCStringLen(ctx, &len, argv[1]);
    if (!s)
        return JS_EXCEPTION;
    libos_log(level, s, (int32_t)len);
    JS_FreeCString(ctx, s);
    return JS_UNDEFINED;
}

/* nativeSyscall(name, argsJSON) -> responseJSON. The prelude checks and parses;
   here only text crosses. */
static JSValue native_syscall(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    const char *name, *args;
    size_t name_len, args_len;
    int32_t n;
    char *buf;
    JSValue ret;

    (void)this_val;
    if (interrupted)
        return JS_ThrowInterrupted(ctx);
    if (argc < 2)
        return JS_ThrowTypeError(ctx, "syscall: two arguments expected");
    name = JS_ToCStringLen(ctx, &name_len, argv[0]);
    if (!name)
        return JS_EXCEPTION;
    args = JS_ToCStringLen(ctx, &args_len, argv[1]);
    if (!args) {
        JS_FreeCString(ctx, name);
        return JS_EXCEPTION;
    }
    n = libos_syscall(name, (int32_t)name_len, args, (int32_t)args_len);
    JS_FreeCString(ctx, name);
    JS_FreeCString(ctx, args);
    if (n < 0) {
        interrupted = 1;
        return JS_ThrowInterrupted(ctx);
    }
    buf = js_malloc(ctx, (size_t)n + 1);
    if (!buf)
        return JS_EXCEPTION;
    libos_syscall_take(buf);
    buf[n] = '\0';
    ret = JS_NewStringLen(ctx, buf, (size_t)n);
    js_free(ctx, buf);
    return ret;
}

/* ---- the runtime's allocator: QuickJS's default, plus oom_hit and polls ---- */

#define MALLOC_OVERHEAD 8

/* A memory bomb spends its time allocating (growing the memory, faulting in, zeroing and
   copying big blocks), which runs too little bytecode to reach the interpreter's poll
   often: a loop that allocates 8 MiB a turn polls once in 10000 turns. So the allocator
   polls too, once per POLL_ALLOC_BYTES requested. A stop is latched, and the interpreter
   is asked to poll at its next step, where the uncatchable interrupt is thrown. Until then
   a large allocation fails (sparing the copy that would fill it), a small one goes on: the
   interrupt error itself must still be allocated, or the program could catch what
   unwinds instead. */
#define POLL_ALLOC_BYTES (1u << 20)
#define LARGE_ALLOC (64u << 10)
static size_t alloc_since_poll;
static JSContext *current_ctx;

/* Whether this allocation of size bytes must fail because the call was stopped. */
static int alloc_stopped(size_t size)
{
    alloc_since_poll += size;
    if (alloc_since_poll >= POLL_ALLOC_BYTES) {
        alloc_since_poll = 0;
        if (!interrupted && libos_poll() != 0)
            interrupted = 1;
    }
    if (!interrupted)
        return 0;
    if (current_ctx)
        JS_RequestInterrupt(current_ctx);
    return size >= LARGE_ALLOC;
}

static void *rt_malloc(JSMallocState *s, size_t size)
{
    void *p;
    if (alloc_stopped(size))
        return NULL;
    if (s->malloc_size + size > s->malloc_limit) {
        oom_hit = 1;
        return NULL;
    }
    p = malloc(size);
    if (!p) {
        oom_hit = 1;
        return NULL;
    }
    s->malloc_count++;
    s->malloc_size += malloc_usable_size(p) + MALLOC_OVERHEAD;
    return p;
}

static void rt_free(JSMallocState *s, void *p)
{
    if (!p)
        return;
    s->malloc_count--;
    s->malloc_size -= malloc_usable_size(p) + MALLOC_OVERHEAD;
    free(p);
}

static void *rt_realloc(JSMallocState *s, void *p, size_t size)
{
    size_t old;
    if (!p)
        return size ? rt_malloc(s, size) : NULL;
    old = malloc_usable_size(p);
    if (size == 0) {
        rt_free(s, p);
        return NULL;
    }
    if (size > old && alloc_stopped(size - old))
        return NULL;
    if (s->malloc_size + size - old > s->malloc_limit) {
        oom_hit = 1;
        return NULL;
    }
    p = realloc(p, size);
    if (!p) {
        oom_hit = 1;
        return NULL;
    }
    s->malloc_size += malloc_usable_size(p) - old;
    return p;
}

static size_t rt_usable_size(const void *p)
{
    return malloc_usable_size((void *)p);
}

static const JSMallocFunctions rt_malloc_funcs = {
    rt_malloc, rt_free, rt_realloc, rt_usable_size,
};

/* ---- one call ---- */

/* The intrinsics of a context, without eval: JS_CompileScript() compiles our own
   scripts, and eval(), the Function constructors and their async and generator
   variants fail with a TypeError. */
static JSContext *new_context(JSRuntime *rt, uint64_t seed)
{
    JSContext *ctx = JS_NewContextRaw(rt);
    JSValue global;
    JSAtom atom;

    if (!ctx)
        return NULL;
    JS_AddIntrinsicBaseObjects(ctx);
    JS_AddIntrinsicDate(ctx);
    JS_AddIntrinsicStringNormalize(ctx);
    JS_AddIntrinsicRegExpCompiler(ctx);
    JS_AddIntrinsicRegExp(ctx);
    JS_AddIntrinsicJSON(ctx);
    JS_AddIntrinsicProxy(ctx);
    JS_AddIntrinsicMapSet(ctx);
    JS_AddIntrinsicTypedArrays(ctx);
    JS_AddIntrinsicPromise(ctx);
    JS_AddIntrinsicBigInt(ctx);
    JS_SetRandomSeed(ctx, seed);

    /* eval would only throw; remove the name so that its absence is plain */
    global = JS_GetGlobalObject(ctx);
    atom = JS_NewAtom(ctx, "eval");
    JS_DeleteProperty(ctx, global, atom, 0);
    JS_FreeAtom(ctx, atom);
    JS_FreeValue(ctx, global);
    return ctx;
}

/* The prelude and the console formatter are compiled once and kept as bytecode; a
   runtime that is built (libos_prepare, or a call made without the host's restore) reads
   the bytecode, which is cheaper than parsing. */
typedef struct {
    const char *name;
    const char *src;
    size_t len;
    uint8_t *bc;
    size_t bc_len;
} Script;

static Script prelude_script = { "prelude.js", prelude_js, sizeof(prelude_js) - 1, NULL, 0 };
static Script console_script = { "console.js", console_js, sizeof(console_js) - 1, NULL, 0 };

static JSValue eval_script(JSContext *ctx, Script *sc)
{
    JSValue fn;

    if (!sc->bc) {
        uint8_t *bc;
        size_t len;
        fn = JS_CompileScript(ctx, sc->src, sc->len, sc->name);
        if (JS_IsException(fn))
            return fn;
        bc = JS_WriteObject(ctx, &len, fn, JS_WRITE_OBJ_BYTECODE);
        if (bc) {
            sc->bc = malloc(len);
            if (sc->bc) {
                memcpy(sc->bc, bc, len);
                sc->bc_len = len;
            }
            js_free(ctx, bc);
        }
    } else {
        fn = JS_ReadObject(ctx, sc->bc, sc->bc_len, JS_READ_OBJ_BYTECODE);
        if (JS_IsException(fn))
            return fn;
    }
    return JS_EvalFunction(ctx, fn);
}

/* nativeLoadConsole() -> the completion value of console.js */
static JSValue native_load_console(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    (void)argc;
    (void)argv;
    return eval_script(ctx, &console_script);
}

typedef struct {
    JSContext *ctx;
    JSRuntime *rt;
    size_t mem_limit;
    JSValue libos;     /* the object handed to run() */
    JSValue serialize; /* value -> JSON text, or [path, message] when not plain JSON */
    JSValue describe;  /* thrown value -> [name, message, stack, refusal code] */
    JSValue settle;    /* value -> {state: 0 pending | 1 fulfilled | 2 rejected, value} */
} Call;

static int interrupted_error(void)
{
    return fail("interrupted", "guest: interrupted by the host");
}

static int streq(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* Reports the thrown value 'exc' (freed here). default_code is js_error, or
   syntax_error while compiling; the limits of QuickJS map to their own codes. */
static int fail_exception(Call *c, JSValue exc, const char *default_code)
{
    JSContext *ctx = c->ctx;
    JSValue d, parts[4];
    const char *s[4] = { NULL, NULL, NULL, NULL };
    size_t len[4] = { 0, 0, 0, 0 };
    const char *code = default_code;
    DynBuf msg;
    int i, ret;

    if (interrupted) {
        JS_FreeValue(ctx, exc);
        return interrupted_error();
    }
    /* room to describe an out-of-memory error; wazero's page limit stays the hard cap */
    if (c->mem_limit)
        JS_SetMemoryLimit(c->rt, c->mem_limit + (1 << 20));
    d = JS_Call(ctx, c->describe, JS_UNDEFINED, 1, (JSValueConst *)&exc);
    JS_FreeValue(ctx, exc);
    if (JS_IsException(d)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        if (interrupted)
            return interrupted_error();
        return fail(default_code, "guest: the thrown value could not be described");
    }
    for (i = 0; i < 4; i++) {
        parts[i] = JS_GetPropertyUint32(ctx, d, i);
        s[i] = JS_IsString(parts[i]) ? JS_ToCStringLen(ctx, &len[i], parts[i]) : NULL;
        if (!s[i]) {
            s[i] = "";
            len[i] = 0;
        }
    }
    JS_FreeValue(ctx, d);
    if (streq(s[0], len[0], "InternalError") && streq(s[1], len[1], "out of memory"))
        code = "out_of_memory";
    else if (streq(s[0], len[0], "RangeError") &&
             streq(s[1], len[1], "Maximum call stack size exceeded"))
        code = "stack_overflow";
    else if (streq(s[0], len[0], "AmbientClockError"))
        code = "ambient_clock"; /* the prelude's refusal of Date.now() and new Date() */
    else if (strcmp(default_code, "syntax_error") == 0 && !streq(s[0], len[0], "SyntaxError"))
        code = "js_error";

    dbuf_init2(&msg, NULL, libc_realloc);
    if (len[0] > 0) {
        dbuf_put(&msg, (const uint8_t *)s[0], len[0]);
        dbuf_putstr(&msg, ": ");
    }
    dbuf_put(&msg, (const uint8_t *)s[1], len[1]);
    ret = set_error(code, msg.error ? "" : (const char *)msg.buf, msg.error ? 0 : msg.size,
                    NULL, 0, s[2], len[2], s[3], len[3]);
    dbuf_free(&msg);
    for (i = 0; i < 4; i++) {
        if (len[i] > 0 || JS_IsString(parts[i]))
            JS_FreeCString(ctx, s[i]);
        JS_FreeValue(ctx, parts[i]);
    }
    return ret;
}

static int fail_pending(Call *c, const char *default_code)
{
    return fail_exception(c, JS_GetException(c->ctx), default_code);
}

/* A NUL-terminated copy: QuickJS's parsers read one byte past the input. */
static char *copy_input(const char *p, int32_t len)
{
    char *s;
    if (len < 0)
        return NULL;
    s = malloc((size_t)len + 1);
    if (!s)
        return NULL;
    memcpy(s, p, (size_t)len);
    s[len] = '\0';
    return s;
}

/* Runs every pending job; returns 0, or STATUS_ERROR with the output set. */
static int drain_jobs(Call *c)
{
    JSContext *job_ctx;
    int r;

    for (;;) {
        if (interrupted)
            return interrupted_error();
        r = JS_ExecutePendingJob(c->rt, &job_ctx);
        if (r == 0)
            return 0;
        if (r < 0)
            return fail_pending(c, "js_error");
    }
}

/* Compiles the program, a global script named tool.js, into *fn; 0, or STATUS_ERROR
   with the output set. */
static int compile_program(Call *c, const char *src, int32_t src_len, JSValue *fn)
{
    char *text = copy_input(src, src_len);
    if (!text)
        return fail("out_of_memory", "guest: no memory for the program");
    *fn = JS_CompileScript(c->ctx, text, (size_t)src_len, "tool.js");
    free(text);
    if (JS_IsException(*fn))
        return fail_pending(c, "syntax_error");
    return 0;
}

/* Runs the program: src is its JavaScript text, or with bytecode set the bytecode that
   libos_compile made of that text (never bytes from anywhere else: JS_ReadObject trusts
   what it reads). */
static int call_program(Call *c, const char *src, int32_t src_len, int bytecode,
                        const char *args, int32_t args_len)
{
    JSContext *ctx = c->ctx;
    JSValue v, run, argv[2], rec, state, result;
    char *text;
    int32_t st;
    int ret;

    /* the program: a global script that defines run */
    if (bytecode) {
        v = JS_ReadObject(ctx, (const uint8_t *)src, (size_t)src_len, JS_READ_OBJ_BYTECODE);
        if (JS_IsException(v))
            return fail_pending(c, "js_error");
    } else {
        ret = compile_program(c, src, src_len, &v);
        if (ret != 0)
            return ret;
    }
    PROF("compile");
    v = JS_EvalFunction(ctx, v);
    if (JS_IsException(v))
        return fail_pending(c, "js_error");
    JS_FreeValue(ctx, v);
    if (interrupted)
        return interrupted_error();
    PROF("eval");

    run = JS_GetGlobalBinding(ctx, "run");
    if (JS_IsException(run))
        return fail_pending(c, "js_error");
    if (!JS_IsFunction(ctx, run)) {
        JS_FreeValue(ctx, run);
        return fail("run_missing", "guest: the program defines no function run");
    }

    text = copy_input(args, args_len);
    if (!text) {
        JS_FreeValue(ctx, run);
        return fail("out_of_memory", "guest: no memory for the arguments");
    }
    argv[0] = JS_ParseJSON(ctx, text, (size_t)args_len, "args");
    free(text);
    if (JS_IsException(argv[0]) || !JS_IsObject(argv[0]) || JS_IsArray(ctx, argv[0])) {
        if (JS_IsException(argv[0]))
            JS_FreeValue(ctx, JS_GetException(ctx));
        JS_FreeValue(ctx, argv[0]);
        JS_FreeValue(ctx, run);
        if (interrupted)
            return interrupted_error();
        return fail("args_invalid", "guest: args must be a JSON object");
    }
    argv[1] = c->libos;
    PROF("args");
    v = JS_Call(ctx, run, JS_UNDEFINED, 2, (JSValueConst *)argv);
    PROF("run");
    JS_FreeValue(ctx, argv[0]);
    JS_FreeValue(ctx, run);
    if (JS_IsException(v))
        return fail_pending(c, "js_error");

    /* await a thenable, and run whatever work the program left queued */
    rec = JS_Call(ctx, c->settle, JS_UNDEFINED, 1, (JSValueConst *)&v);
    JS_FreeValue(ctx, v);
    if (JS_IsException(rec))
        return fail_pending(c, "js_error");
    ret = drain_jobs(c);
    if (ret != 0) {
        JS_FreeValue(ctx, rec);
        return ret;
    }
    state = JS_GetPropertyStr(ctx, rec, "state");
    result = JS_GetPropertyStr(ctx, rec, "value");
    JS_FreeValue(ctx, rec);
    ret = JS_ToInt32(ctx, &st, state);
    JS_FreeValue(ctx, state);
    if (ret < 0 || JS_IsException(result)) {
        JS_FreeValue(ctx, result);
        return fail_pending(c, "js_error");
    }
    if (st == 0) {
        JS_FreeValue(ctx, result);
        return fail("unsettled", "guest: run returned a promise that never settled");
    }
    if (st == 2)
        return fail_exception(c, result, "js_error");

    PROF("settle");
    /* plain JSON only, checked and written in one pass */
    v = JS_Call(ctx, c->serialize, JS_UNDEFINED, 1, (JSValueConst *)&result);
    JS_FreeValue(ctx, result);
    if (JS_IsException(v))
        return fail_pending(c, "js_error");
    if (interrupted) {
        JS_FreeValue(ctx, v);
        return interrupted_error();
    }
    if (JS_IsString(v)) {
        size_t len;
        const char *s = JS_ToCStringLen(ctx, &len, v);
        JS_FreeValue(ctx, v);
        if (!s)
            return fail_pending(c, "js_error");
        ret = set_output(s, len) < 0 ? STATUS_ERROR : STATUS_OK;
        JS_FreeCString(ctx, s);
        if (ret != STATUS_OK)
            return fail("out_of_memory", "guest: no memory left for the output");
        return STATUS_OK;
    } else {
        JSValue p = JS_GetPropertyUint32(ctx, v, 0), m = JS_GetPropertyUint32(ctx, v, 1);
        size_t plen = 0, mlen = 0;
        const char *ps = JS_ToCStringLen(ctx, &plen, p);
        const char *ms = JS_ToCStringLen(ctx, &mlen, m);
        ret = set_error("not_json", ms ? ms : "not plain JSON", ms ? mlen : 14,
                        ps ? ps : "$", ps ? plen : 1, NULL, 0, NULL, 0);
        JS_FreeCString(ctx, ps);
        JS_FreeCString(ctx, ms);
        JS_FreeValue(ctx, p);
        JS_FreeValue(ctx, m);
        JS_FreeValue(ctx, v);
        return ret;
    }
}

/* A failure before the prelude's helpers exist: the prelude itself failed. */
static int fail_pending_raw(JSContext *ctx)
{
    JSValue exc = JS_GetException(ctx);
    const char *s;
    size_t len;
    int ret;

    if (interrupted) {
        JS_FreeValue(ctx, exc);
        return interrupted_error();
    }
    s = JS_ToCStringLen(ctx, &len, exc);
    JS_FreeValue(ctx, exc);
    if (!s) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return fail("out_of_memory", "guest: the prelude could not be installed");
    }
    if (streq(s, len, "InternalError: out of memory"))
        ret = fail("out_of_memory", "guest: the prelude could not be installed: out of memory");
    else
        ret = set_error("guest_error", s, len, NULL, 0, NULL, 0, NULL, 0);
    JS_FreeCString(ctx, s);
    return ret;
}

/* ---- the prepared state ---- */

/* The runtime, the context with the prelude installed and the prelude's helpers: what
   every call starts from. libos_prepare() builds it; the host snapshots the memory right
   after and restores the snapshot after every call (ABI.md), so each call starts from this
   state as it was built, with nothing of an earlier call in it. */
static struct {
    int ready;   /* built */
    int used;    /* a call ran on it since it was built: never run another */
    JSRuntime *rt;
    JSContext *ctx;
    JSValue libos, serialize, describe, settle;
} state;

/* The script's bytecode is made once, here, so that a call which loads console pays
   only for reading it. */
static int precompile(JSContext *ctx, Script *sc)
{
    JSValue fn;
    uint8_t *bc;
    size_t len;

    if (sc->bc)
        return 0;
    fn = JS_CompileScript(ctx, sc->src, sc->len, sc->name);
    if (JS_IsException(fn))
        return -1;
    bc = JS_WriteObject(ctx, &len, fn, JS_WRITE_OBJ_BYTECODE);
    JS_FreeValue(ctx, fn);
    if (!bc)
        return -1;
    sc->bc = malloc(len);
    if (sc->bc) {
        memcpy(sc->bc, bc, len);
        sc->bc_len = len;
    }
    js_free(ctx, bc);
    return sc->bc ? 0 : -1;
}

static void free_state(void)
{
    JSContext *ctx = state.ctx;
    if (ctx) {
        JS_FreeValue(ctx, state.libos);
        JS_FreeValue(ctx, state.serialize);
        JS_FreeValue(ctx, state.describe);
        JS_FreeValue(ctx, state.settle);
        JS_FreeContext(ctx);
    }
    if (state.rt)
        JS_FreeRuntime(state.rt);
    memset(&state, 0, sizeof(state));
}

/* Builds the state; 0, or STATUS_ERROR with the output set. */
static int prepare(void)
{
    JSRuntime *rt;
    JSContext *ctx;
    JSValue setup, internals, natives[3];

    memset(&state, 0, sizeof(state));
    rt = JS_NewRuntime2(&rt_malloc_funcs, NULL);
    if (!rt)
        return fail("out_of_memory", "guest: no memory for a runtime");
    JS_SetInterruptHandler(rt, interrupt_handler, NULL);
    state.rt = rt;
    ctx = new_context(rt, 0);
    if (!ctx) {
        free_state();
        return fail("out_of_memory", "guest: no memory for a context");
    }
    state.ctx = ctx;
    PROF("context");
    setup = eval_script(ctx, &prelude_script);
    if (JS_IsException(setup))
        goto fail;
    PROF("prelude_eval");
    natives[0] = JS_NewCFunction(ctx, native_log, "log", 2);
    natives[1] = JS_NewCFunction(ctx, native_syscall, "syscall", 2);
    natives[2] = JS_NewCFunction(ctx, native_load_console, "loadConsole", 0);
    internals = JS_Call(ctx, setup, JS_UNDEFINED, 3, (JSValueConst *)natives);
    JS_FreeValue(ctx, setup);
    JS_FreeValue(ctx, natives[0]);
    JS_FreeValue(ctx, natives[1]);
    JS_FreeValue(ctx, natives[2]);
    if (JS_IsException(internals))
        goto fail;
    state.libos = JS_GetPropertyStr(ctx, internals, "libos");
    state.serialize = JS_GetPropertyStr(ctx, internals, "serialize");
    state.describe = JS_GetPropertyStr(ctx, internals, "describe");
    state.settle = JS_GetPropertyStr(ctx, internals, "settle");
    JS_FreeValue(ctx, internals);
    if (!JS_IsFunction(ctx, state.serialize) || !JS_IsFunction(ctx, state.describe) ||
        !JS_IsFunction(ctx, state.settle) || !JS_IsObject(state.libos)) {
        free_state();
        return fail("guest_error", "guest: the prelude is incomplete");
    }
    if (precompile(ctx, &console_script) < 0)
        goto fail;
    /* Start every call with the garbage of building collected. */
    JS_RunGC(rt);
    PROF("prelude_setup");
    state.ready = 1;
    return 0;
fail:
    {
        int ret = fail_pending_raw(ctx);
        free_state();
        return ret;
    }
}

/* The region of memory that holds the state, for the host's snapshot, starts at the end
   of the shadow stack (the stack is first in memory and empty between calls). */
extern unsigned char __global_base;

EXPORT(libos_prepare) int32_t libos_prepare(void)
{
    interrupted = 0;
    oom_hit = 0;
    if (state.ready && !state.used)
        return (int32_t)(uintptr_t)&__global_base;
    if (state.ready)
        free_state();
    if (prepare() != 0)
        return -1;
    current_break();
    return (int32_t)(uintptr_t)&__global_base;
}

/* The end of the memory the allocator has been given: everything a call could have
   written above the snapshot lies below it (ABI.md, "The snapshot"). */
EXPORT(libos_break) int32_t libos_break(void)
{
    return (int32_t)current_break();
}

/* libos_run's flags */
#define RUN_RESTORE 1  /* the host restores its snapshot before the next call */
#define RUN_BYTECODE 2 /* src is what libos_compile wrote, not JavaScript text */

/* Takes the prepared state for one call (libos_run or libos_compile) under its limits;
   0, or STATUS_ERROR with the output set. */
static int begin_call(Call *c, int32_t mem_limit, int32_t stack_limit, int64_t seed)
{
    size_t stack;

    interrupted = 0;
    oom_hit = 0;
    alloc_since_poll = 0;
    if (state.used)
        /* the host promised a restore and did not make it: never run on a used state */
        return fail("guest_error", "guest: the state of an earlier call was not restored");
    if (!state.ready && prepare() != 0)
        return STATUS_ERROR;
    state.used = 1;

    memset(c, 0, sizeof(*c));
    c->rt = state.rt;
    c->ctx = state.ctx;
    c->libos = state.libos;
    c->serialize = state.serialize;
    c->describe = state.describe;
    c->settle = state.settle;
    c->mem_limit = mem_limit > 0 ? (size_t)mem_limit : 0;
    JS_SetMemoryLimit(c->rt, c->mem_limit ? c->mem_limit : (size_t)-1);
    stack = stack_limit > 0 ? (size_t)stack_limit : STACK_LIMIT_DEFAULT;
    if (stack > STACK_LIMIT_MAX)
        stack = STACK_LIMIT_MAX;
    if (stack < STACK_LIMIT_MIN)
        stack = STACK_LIMIT_MIN;
    /* the stack's top is where this call's frames begin, not where prepare's did */
    JS_UpdateStackTop(c->rt);
    JS_SetMaxStackSize(c->rt, stack);
    JS_SetRandomSeed(c->ctx, (uint64_t)seed);
    current_ctx = c->ctx;
    return 0;
}

/* A failure of a call that hit its memory limit is reported as out of memory, whatever
   shape it took on the way out. */
static int end_call(int ret)
{
    current_ctx = NULL;
    if (ret != STATUS_OK && oom_hit && !interrupted &&
        (output_has_code("js_error") || output_has_code("unsettled") || output_has_code("guest_error")))
        ret = fail("out_of_memory", "guest: out of memory (the memory limit was reached)");
    return ret;
}

/* libos_compile compiles src as the program libos_run would run and writes its bytecode,
   with the source text of its functions (Function.prototype.toString), as the output.
   It runs no JavaScript; the host restores its snapshot after it, as after a call. */
EXPORT(libos_compile) int32_t libos_compile(const char *src, int32_t src_len,
                                            int32_t mem_limit, int32_t stack_limit)
{
    Call c;
    JSValue v;
    uint8_t *bc;
    size_t len;
    int ret;

    ret = begin_call(&c, mem_limit, stack_limit, 0);
    if (ret != 0)
        return ret;
    ret = compile_program(&c, src, src_len, &v);
    if (ret != 0)
        return end_call(ret);
    if (interrupted) {
        JS_FreeValue(c.ctx, v);
        return end_call(interrupted_error());
    }
    bc = JS_WriteObject(c.ctx, &len, v, JS_WRITE_OBJ_BYTECODE | JS_WRITE_OBJ_SOURCE);
    JS_FreeValue(c.ctx, v);
    if (!bc)
        return end_call(fail_pending(&c, "syntax_error"));
    ret = set_output((const char *)bc, len) < 0 ? STATUS_ERROR : STATUS_OK;
    js_free(c.ctx, bc);
    if (ret != STATUS_OK)
        return end_call(fail("out_of_memory", "guest: no memory left for the output"));
    return end_call(STATUS_OK);
}

EXPORT(libos_run) int32_t libos_run(const char *src, int32_t src_len,
                                    const char *args, int32_t args_len,
                                    int32_t mem_limit, int32_t stack_limit, int64_t seed,
                                    int32_t flags)
{
    Call c;
    int ret;

    PROF("start");
    ret = begin_call(&c, mem_limit, stack_limit, seed);
    if (ret != 0)
        return ret;
    ret = end_call(call_program(&c, src, src_len, (flags & RUN_BYTECODE) != 0, args, args_len));
    PROF("serialize");
    /* Restored by the host, or the instance of an interrupted call, which is never used
       again: freeing what the call built, possibly gigabytes of objects, would only
       delay the answer. */
    if ((flags & RUN_RESTORE) || interrupted)
        return ret;
    free_state();
    PROF("free");
    return ret;
}
