/*
 * qjs-bench: the QuickJS core of the guest (same sources, same patch), compiled natively.
 * Benchmarks only: it reports how much slower the wasm guest is than native code.
 * Never part of the product.
 *
 * usage: qjs-bench [-n N] (-e SCRIPT | FILE)
 *   Compiles the global script once, then evaluates it N times (default 1) in one
 *   context, and prints on stdout:
 *     runs=N ns_per_run=<median> min_ns=<fastest> result=<last completion value>
 *   Exit status 1 on an exception (printed on stderr), 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "quickjs.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static char *read_file(const char *path, size_t *plen)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(len + 1);
    if (!buf || fread(buf, 1, len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[len] = '\0';
    *plen = len;
    return buf;
}

static void print_exception(JSContext *ctx)
{
    JSValue e = JS_GetException(ctx);
    const char *s = JS_ToCString(ctx, e);
    JSValue stack = JS_GetPropertyStr(ctx, e, "stack");
    const char *st = JS_IsString(stack) ? JS_ToCString(ctx, stack) : NULL;
    fprintf(stderr, "qjs-bench: %s\n%s", s ? s : "exception", st ? st : "");
    JS_FreeCString(ctx, s);
    if (st)
        JS_FreeCString(ctx, st);
    JS_FreeValue(ctx, stack);
    JS_FreeValue(ctx, e);
}

int main(int argc, char **argv)
{
    const char *code = NULL, *file = NULL;
    char *src;
    size_t len;
    long n = 1;
    int i;
    JSRuntime *rt;
    JSContext *ctx;
    JSValue fn, v = JS_UNDEFINED;
    int64_t *times;
    const char *res;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc)
            code = argv[++i];
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            goto usage;
    }
    if ((!code && !file) || (code && file) || n < 1)
        goto usage;
    if (code) {
        src = strdup(code);
        len = strlen(code);
    } else {
        src = read_file(file, &len);
        if (!src) {
            fprintf(stderr, "qjs-bench: cannot read %s\n", file);
            return 2;
        }
    }

    rt = JS_NewRuntime();
    ctx = JS_NewContextRaw(rt);
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
    JS_SetRandomSeed(ctx, 1);

    fn = JS_CompileScript(ctx, src, len, file ? file : "<cmdline>");
    free(src);
    if (JS_IsException(fn)) {
        print_exception(ctx);
        return 1;
    }
    times = calloc(n, sizeof(*times));
    for (i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        JS_FreeValue(ctx, v);
        v = JS_EvalFunction(ctx, JS_DupValue(ctx, fn));
        times[i] = now_ns() - t0;
        if (JS_IsException(v)) {
            print_exception(ctx);
            return 1;
        }
    }
    qsort(times, n, sizeof(*times), cmp_i64);
    res = JS_ToCString(ctx, v);
    printf("runs=%ld ns_per_run=%lld min_ns=%lld result=%s\n", n,
           (long long)times[n / 2], (long long)times[0], res ? res : "?");
    JS_FreeCString(ctx, res);
    JS_FreeValue(ctx, v);
    JS_FreeValue(ctx, fn);
    free(times);
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
    return 0;

usage:
    fprintf(stderr, "usage: qjs-bench [-n N] (-e SCRIPT | FILE)\n");
    return 2;
}
