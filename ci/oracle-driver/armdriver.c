// armdriver: ggml's CPU kernels as one aarch64 build of ggml compiled them, through ggml's
// public API only. ci/oracle cross-builds ggml (libggml.a, libggml-cpu.a, libggml-base.a)
// per aarch64 tier and links this file statically against each; the binary runs under
// qemu-aarch64 (QEMU_CPU chooses the CPU model, and with it which instructions are legal)
// or natively on an aarch64 host. The tiercheck harness (harness/oracle/src/arm.rs) runs it
// as a subprocess.
//
// Usage (all data files are raw little-endian; "row bytes" means ggml_row_size(type, k)):
//
//   armdriver info
//       Prints one line: "neon=N dotprod=N i8mm=N sve=N sve_cnt=BYTES fma=N fp16_va=N llamafile=N",
//       the features this ggml-cpu build was compiled for (ggml_cpu_has_*).
//
//   armdriver traits <type id>
//       Prints one line: "type=<name> vec_dot_type=<id> nrows=<n> from_float=<0|1>
//       vec_dot=<0|1> quantize=<0|1>" from ggml_get_type_traits_cpu (nrows: weight rows one
//       vec_dot call handles; 2 for the i8mm (smmla) kernels).
//
//   armdriver from_float <type id> <k> <in.f32> <out.bin>
//       in.f32 holds R rows of k f32 (R >= 0, read from the file size); every row goes
//       through ggml_get_type_traits_cpu(type)->from_float (the activation quantizer when
//       type is a vec_dot_type: q8_0 = 8, q8_1 = 9, q8_K = 15). out.bin: R rows of row bytes.
//
//   armdriver quantize <type id> <nrows> <k> <in.f32> <out.bin>
//       ggml_quantize_chunk(type, in, out, 0, nrows, k, NULL): ggml-base's reference
//       quantizer, no importance matrix. in.f32 holds exactly nrows * k f32.
//
//   armdriver vec_dot <weight type id> <k> <nrc 1|2> <x.bin> <y.bin> <out.f32>
//       N cases (N >= 0, from the file sizes). Case c uses, contiguously:
//         x.bin: nrc weight rows of k values of the type (nrc * row bytes);
//         y.bin: nrc activation rows of k values of the type's vec_dot_type.
//       nrc = 1: vec_dot(k, &s, 0, x, 0, y, 0, 1), out gets 1 f32 per case.
//       nrc = 2 (only for types whose traits have nrows >= 2, i.e. the i8mm build's q4_0,
//       q8_0, q4_K, q6_K): vec_dot(k, s, bs = 2, x, bx = weight row bytes, y, by =
//       activation row bytes, 2), the 2x2 tile ggml's matmul computes; out gets 4 f32 per
//       case, s[0..4] as ggml wrote them: s[j * bs + i] = weight row i . activation row j,
//       i.e. [x0.y0, x1.y0, x0.y1, x1.y1] (ggml's matmul passes bs = the destination's
//       row stride, so s[j * bs + i] is output column i of activation row j).
//
//   armdriver mulmat <plain|repack> <type id> <k> <n> <m> <threads> <w.bin> <x.f32> <out.f32>
//       One ggml_mul_mat node on the CPU backend, as ci/oracle-driver/mulmat.c (the x86
//       driver) runs it: w.bin holds n rows of k values of the type (plain block layout),
//       x.f32 m rows of k f32; out.f32 gets m rows of n f32 (row i = W times activation row
//       i). "repack" places W in the CPU_REPACK extra buffer type (ggml repacks it when it
//       is stored). Prints one line: "repacked=<0|1> buft=<name>[ layout=<name>]", the
//       layout (e.g. q4_K_8x4) taken from ggml's debug log "repack tensor W with ...".
//
//   armdriver batch <requests.txt>
//       Runs many requests in one process (each qemu start costs tens of milliseconds).
//       Every non-empty line not starting with '#' is one request: the arguments of one of
//       the modes above, separated by spaces or tabs (no quoting; paths without blanks).
//       For each request one line goes to stdout: "<line number> <exit code> <text>", where
//       text is the request's own stdout line on success (empty for modes that print none)
//       and its error message otherwise. A failed request does not stop the batch; the
//       batch itself exits 0 once every line was answered (2 when the file is unreadable).
//
// Exit codes: 0 ok; 1 ggml failure; 2 usage or input error; 3 (mulmat repack) this build has
// no repack layout for the type at this n; 4 the type has no such operation in this build
// (no from_float / vec_dot / quantizer, or nrc = 2 where the kernel does one row per call).
//
// TIERCHECK_MULMAT_VERBOSE=1 forwards all of ggml's log to stderr (warnings and errors
// always are).

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

enum {
    EXIT_OK          = 0,
    EXIT_GGML        = 1,
    EXIT_USAGE       = 2,
    EXIT_NO_REPACK   = 3,
    EXIT_UNSUPPORTED = 4,
};

// Upper bounds that keep every size computation far from overflow.
#define MAX_DIM     (INT64_C(1) << 24)
#define MAX_BYTES   (INT64_C(1) << 34)
#define MAX_THREADS 1024
#define MAX_ARGS    16

static const char * g_prog = "armdriver";

// Batch mode collects the message of a failed request and the report line of a successful
// one instead of printing them.
static bool g_batch         = false;
static char g_message[1024] = "";
static char g_report[256]   = "";

static void usage(void) {
    static const char * const modes[] = {
        "info",
        "traits <type id>",
        "from_float <type id> <k> <in.f32> <out.bin>",
        "quantize <type id> <nrows> <k> <in.f32> <out.bin>",
        "vec_dot <weight type id> <k> <nrc 1|2> <x.bin> <y.bin> <out.f32>",
        "mulmat <plain|repack> <type id> <k> <n> <m> <threads> <w.bin> <x.f32> <out.f32>",
        "batch <requests.txt>",
    };
    fprintf(stderr, "usage:\n");
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        fprintf(stderr, "  %s %s\n", g_prog, modes[i]);
    }
    fprintf(stderr,
            "exit codes: 0 ok, 1 ggml failure, 2 usage/input error, 3 no repack layout, 4 unsupported\n"
            "(the comment at the top of armdriver.c documents every mode)\n");
}

__attribute__((format(printf, 2, 3))) static int fail(int code, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (g_batch) {
        vsnprintf(g_message, sizeof(g_message), fmt, ap);
    } else {
        fprintf(stderr, "%s: ", g_prog);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
    return code;
}

__attribute__((format(printf, 1, 2))) static void report(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_report, sizeof(g_report), fmt, ap);
    va_end(ap);
    if (!g_batch) {
        printf("%s\n", g_report);
    }
}

// Parses a whole decimal integer in [lo, hi].
static bool parse_int(const char * s, int64_t lo, int64_t hi, int64_t * out) {
    if (s == NULL || *s == '\0') {
        return false;
    }
    errno = 0;
    char *    end = NULL;
    long long v   = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = (int64_t) v;
    return true;
}

// A zeroed buffer of at least `bytes` bytes, 64-byte aligned (so no kernel sees a
// misaligned block), never NULL for a successful call.
static void * alloc_aligned(int64_t bytes) {
    size_t size = (size_t) (bytes > 0 ? bytes : 1);
    size        = (size + 63) / 64 * 64;
    void * p    = aligned_alloc(64, size);
    if (p != NULL) {
        memset(p, 0, size);
    }
    return p;
}

// Reads the whole file `path` into a new aligned buffer. With `want` >= 0 the file must
// have exactly that size; otherwise any size up to MAX_BYTES, reported in *size.
static int read_file(const char * path, const char * what, int64_t want, void ** out, int64_t * size) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        return fail(EXIT_USAGE, "cannot open %s file %s: %s", what, path, strerror(errno));
    }
    if (fseeko(f, 0, SEEK_END) != 0) {
        fclose(f);
        return fail(EXIT_USAGE, "cannot seek in %s file %s: %s", what, path, strerror(errno));
    }
    off_t got = ftello(f);
    if (got < 0 || (want >= 0 && (int64_t) got != want) || (int64_t) got > MAX_BYTES) {
        fclose(f);
        if (want >= 0) {
            return fail(EXIT_USAGE, "%s file %s has %lld bytes, expected %" PRId64, what, path, (long long) got,
                        want);
        }
        return fail(EXIT_USAGE, "%s file %s has %lld bytes (limit %" PRId64 ")", what, path, (long long) got,
                    MAX_BYTES);
    }
    rewind(f);
    void * buf = alloc_aligned(got);
    if (buf == NULL) {
        fclose(f);
        return fail(EXIT_GGML, "out of memory reading %s", path);
    }
    if (got > 0 && fread(buf, 1, (size_t) got, f) != (size_t) got) {
        free(buf);
        fclose(f);
        return fail(EXIT_USAGE, "short read from %s file %s", what, path);
    }
    fclose(f);
    *out = buf;
    if (size != NULL) {
        *size = (int64_t) got;
    }
    return EXIT_OK;
}

static int write_file(const char * path, const void * data, int64_t bytes) {
    FILE * f = fopen(path, "wb");
    if (f == NULL) {
        return fail(EXIT_USAGE, "cannot create output file %s: %s", path, strerror(errno));
    }
    bool ok = bytes == 0 || fwrite(data, 1, (size_t) bytes, f) == (size_t) bytes;
    if (fclose(f) != 0 || !ok) {
        return fail(EXIT_USAGE, "writing output file %s failed", path);
    }
    return EXIT_OK;
}

// ggml log: warnings and errors go to stderr, everything with TIERCHECK_MULMAT_VERBOSE=1.
// The repack debug message ("repack tensor W with q4_K_8x4") gives the layout name.
static bool                g_verbose     = false;
static char                g_layout[64]  = "";
static enum ggml_log_level g_last_level  = GGML_LOG_LEVEL_NONE;

static void log_cb(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level != GGML_LOG_LEVEL_CONT) {
        g_last_level = level;
    }
    const char * with = strstr(text, "repack tensor W with ");
    if (with != NULL) {
        with += strlen("repack tensor W with ");
        size_t len = strcspn(with, " \r\n");
        if (len >= sizeof(g_layout)) {
            len = sizeof(g_layout) - 1;
        }
        memcpy(g_layout, with, len);
        g_layout[len] = '\0';
    }
    if (g_verbose || g_last_level >= GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

// The type named by a type id argument: in range and in use (a nonzero block size).
static int parse_type(const char * s, enum ggml_type * out) {
    int64_t id;
    if (!parse_int(s, 0, GGML_TYPE_COUNT - 1, &id)) {
        return fail(EXIT_USAGE, "type id '%s' is not a ggml type (0..%d)", s, GGML_TYPE_COUNT - 1);
    }
    const struct ggml_type_traits * t = ggml_get_type_traits((enum ggml_type) id);
    if (t->blck_size <= 0 || t->type_size == 0) {
        return fail(EXIT_USAGE, "ggml type id %" PRId64 " (%s) is not in use", id, t->type_name ? t->type_name : "?");
    }
    *out = (enum ggml_type) id;
    return EXIT_OK;
}

// k in 1..MAX_DIM and a whole number of the type's blocks.
static int parse_k(const char * s, enum ggml_type type, int64_t * k) {
    if (!parse_int(s, 1, MAX_DIM, k)) {
        return fail(EXIT_USAGE, "k must be an integer in 1..%" PRId64 ", not '%s'", MAX_DIM, s);
    }
    const int64_t blck = ggml_blck_size(type);
    if (*k % blck != 0) {
        return fail(EXIT_USAGE, "k = %" PRId64 " is not a multiple of %s's block size %" PRId64, *k,
                    ggml_type_name(type), blck);
    }
    return EXIT_OK;
}

// The types ggml_quantize_chunk handles without an importance matrix (its switch; any other
// type reaches an assert there).
static bool quantize_chunk_supports(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16:
        case GGML_TYPE_Q1_0:
        case GGML_TYPE_Q2_0:
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K:
        case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0:
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS:
            return !ggml_quantize_requires_imatrix(type);
        default:
            return false;
    }
}

// The IQ quantizers' grid searches abort on NaN or infinity.
static int check_finite(enum ggml_type type, const float * x, int64_t n) {
    if (strncmp(ggml_type_name(type), "iq", 2) != 0) {
        return EXIT_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            return fail(EXIT_USAGE, "value %" PRId64 " is not finite; ggml's %s quantizer aborts on it", i,
                        ggml_type_name(type));
        }
    }
    return EXIT_OK;
}

static int mode_info(int argc, char ** argv) {
    (void) argv;
    if (argc != 1) {
        return fail(EXIT_USAGE, "info takes no arguments");
    }
    report("neon=%d dotprod=%d i8mm=%d sve=%d sve_cnt=%d fma=%d fp16_va=%d llamafile=%d",
           ggml_cpu_has_neon(), ggml_cpu_has_dotprod(), ggml_cpu_has_matmul_int8(), ggml_cpu_has_sve(),
           ggml_cpu_get_sve_cnt(), ggml_cpu_has_arm_fma(), ggml_cpu_has_fp16_va(),
           ggml_cpu_has_llamafile());
    return EXIT_OK;
}

static int mode_traits(int argc, char ** argv) {
    if (argc != 2) {
        return fail(EXIT_USAGE, "traits takes 1 argument (type id), got %d", argc - 1);
    }
    enum ggml_type type;
    int            rc = parse_type(argv[1], &type);
    if (rc != EXIT_OK) {
        return rc;
    }
    const struct ggml_type_traits_cpu * t = ggml_get_type_traits_cpu(type);
    report("type=%s vec_dot_type=%d nrows=%" PRId64 " from_float=%d vec_dot=%d quantize=%d", ggml_type_name(type),
           (int) t->vec_dot_type, t->nrows, t->from_float != NULL, t->vec_dot != NULL,
           quantize_chunk_supports(type));
    return EXIT_OK;
}

static int mode_from_float(int argc, char ** argv) {
    if (argc != 5) {
        return fail(EXIT_USAGE, "from_float takes 4 arguments (type k in out), got %d", argc - 1);
    }
    enum ggml_type type;
    int64_t        k;
    int            rc = parse_type(argv[1], &type);
    if (rc == EXIT_OK) {
        rc = parse_k(argv[2], type, &k);
    }
    if (rc != EXIT_OK) {
        return rc;
    }
    ggml_from_float_t from_float = ggml_get_type_traits_cpu(type)->from_float;
    if (from_float == NULL) {
        return fail(EXIT_UNSUPPORTED, "ggml-cpu has no from_float for %s", ggml_type_name(type));
    }
    void *  in = NULL;
    int64_t in_bytes;
    rc = read_file(argv[3], "input", -1, &in, &in_bytes);
    if (rc != EXIT_OK) {
        return rc;
    }
    const int64_t in_row = k * (int64_t) sizeof(float);
    if (in_bytes % in_row != 0) {
        free(in);
        return fail(EXIT_USAGE, "input file %s has %" PRId64 " bytes, not a whole number of %" PRId64 "-value rows",
                    argv[3], in_bytes, k);
    }
    const int64_t rows    = in_bytes / in_row;
    const int64_t out_row = (int64_t) ggml_row_size(type, k);
    rc                    = check_finite(type, in, rows * k);
    void * out            = rc == EXIT_OK ? alloc_aligned(rows * out_row) : NULL;
    if (rc == EXIT_OK && out == NULL) {
        rc = fail(EXIT_GGML, "out of memory for the output");
    }
    if (rc == EXIT_OK) {
        ggml_quantize_init(type);  // the IQ grids; a no-op for the other types
        for (int64_t r = 0; r < rows; r++) {
            from_float((const float *) in + r * k, (char *) out + r * out_row, k);
        }
        rc = write_file(argv[4], out, rows * out_row);
    }
    free(in);
    free(out);
    return rc;
}

static int mode_quantize(int argc, char ** argv) {
    if (argc != 6) {
        return fail(EXIT_USAGE, "quantize takes 5 arguments (type nrows k in out), got %d", argc - 1);
    }
    enum ggml_type type;
    int64_t        nrows, k;
    int            rc = parse_type(argv[1], &type);
    if (rc != EXIT_OK) {
        return rc;
    }
    if (!parse_int(argv[2], 0, MAX_DIM, &nrows)) {
        return fail(EXIT_USAGE, "nrows must be an integer in 0..%" PRId64 ", not '%s'", MAX_DIM, argv[2]);
    }
    rc = parse_k(argv[3], type, &k);
    if (rc != EXIT_OK) {
        return rc;
    }
    if (!quantize_chunk_supports(type)) {
        return fail(EXIT_UNSUPPORTED, "ggml_quantize_chunk cannot quantize to %s without an importance matrix",
                    ggml_type_name(type));
    }
    const int64_t in_bytes  = nrows * k * (int64_t) sizeof(float);
    const int64_t out_bytes = nrows * (int64_t) ggml_row_size(type, k);
    if (in_bytes > MAX_BYTES || out_bytes > MAX_BYTES) {
        return fail(EXIT_USAGE, "problem too large (%" PRId64 " input bytes, limit %" PRId64 ")", in_bytes, MAX_BYTES);
    }
    void * in = NULL;
    rc        = read_file(argv[4], "input", in_bytes, &in, NULL);
    if (rc != EXIT_OK) {
        return rc;
    }
    rc        = check_finite(type, in, nrows * k);
    void * out = rc == EXIT_OK ? alloc_aligned(out_bytes) : NULL;
    if (rc == EXIT_OK && out == NULL) {
        rc = fail(EXIT_GGML, "out of memory for the output");
    }
    if (rc == EXIT_OK && nrows > 0) {
        size_t written = ggml_quantize_chunk(type, in, out, 0, nrows, k, NULL);
        if ((int64_t) written != out_bytes) {
            rc = fail(EXIT_GGML, "ggml_quantize_chunk wrote %zu bytes, expected %" PRId64, written, out_bytes);
        }
    }
    if (rc == EXIT_OK) {
        rc = write_file(argv[5], out, out_bytes);
    }
    free(in);
    free(out);
    return rc;
}

static int mode_vec_dot(int argc, char ** argv) {
    if (argc != 7) {
        return fail(EXIT_USAGE, "vec_dot takes 6 arguments (type k nrc x y out), got %d", argc - 1);
    }
    enum ggml_type type;
    int64_t        k, nrc;
    int            rc = parse_type(argv[1], &type);
    if (rc == EXIT_OK) {
        rc = parse_k(argv[2], type, &k);
    }
    if (rc != EXIT_OK) {
        return rc;
    }
    if (!parse_int(argv[3], 1, 2, &nrc)) {
        return fail(EXIT_USAGE, "nrc must be 1 or 2, not '%s'", argv[3]);
    }
    const struct ggml_type_traits_cpu * t = ggml_get_type_traits_cpu(type);
    if (t->vec_dot == NULL) {
        return fail(EXIT_UNSUPPORTED, "ggml-cpu has no vec_dot for %s", ggml_type_name(type));
    }
    if (nrc > t->nrows) {
        return fail(EXIT_UNSUPPORTED, "vec_dot of %s in this build handles %" PRId64 " row(s) per call, not %" PRId64,
                    ggml_type_name(type), t->nrows, nrc);
    }
    const enum ggml_type vdt = t->vec_dot_type;
    if (k % ggml_blck_size(vdt) != 0) {
        return fail(EXIT_USAGE, "k = %" PRId64 " is not a multiple of %s's block size %" PRId64, k,
                    ggml_type_name(vdt), ggml_blck_size(vdt));
    }
    const int64_t bx = (int64_t) ggml_row_size(type, k);
    const int64_t by = (int64_t) ggml_row_size(vdt, k);
    void *        x  = NULL;
    void *        y  = NULL;
    int64_t       x_bytes, y_bytes;
    rc = read_file(argv[4], "weight rows", -1, &x, &x_bytes);
    if (rc != EXIT_OK) {
        return rc;
    }
    rc = read_file(argv[5], "activation rows", -1, &y, &y_bytes);
    if (rc != EXIT_OK) {
        free(x);
        return rc;
    }
    const int64_t n_cases = x_bytes / (nrc * bx);
    if (x_bytes % (nrc * bx) != 0) {
        rc = fail(EXIT_USAGE, "weight file %s has %" PRId64 " bytes, not a whole number of cases of %" PRId64
                              " %s rows of %" PRId64 " bytes",
                  argv[4], x_bytes, nrc, ggml_type_name(type), bx);
    } else if (y_bytes != n_cases * nrc * by) {
        rc = fail(EXIT_USAGE, "activation file %s has %" PRId64 " bytes, expected %" PRId64 " (%" PRId64
                              " cases of %" PRId64 " %s rows of %" PRId64 " bytes)",
                  argv[5], y_bytes, n_cases * nrc * by, n_cases, nrc, ggml_type_name(vdt), by);
    }
    const int64_t per_case = nrc * nrc;
    float *       out      = rc == EXIT_OK ? alloc_aligned(n_cases * per_case * (int64_t) sizeof(float)) : NULL;
    if (rc == EXIT_OK && out == NULL) {
        rc = fail(EXIT_GGML, "out of memory for the output");
    }
    if (rc == EXIT_OK) {
        for (int64_t c = 0; c < n_cases; c++) {
            const char * xc = (const char *) x + c * nrc * bx;
            const char * yc = (const char *) y + c * nrc * by;
            float *      s  = out + c * per_case;
            if (nrc == 1) {
                t->vec_dot((int) k, s, 0, xc, 0, yc, 0, 1);
            } else {
                t->vec_dot((int) k, s, 2, xc, (size_t) bx, yc, (size_t) by, 2);
            }
        }
        rc = write_file(argv[6], out, n_cases * per_case * (int64_t) sizeof(float));
    }
    free(x);
    free(y);
    free(out);
    return rc;
}

// The CPU_REPACK extra buffer type of the CPU device, or NULL.
static ggml_backend_buffer_type_t repack_buft(ggml_backend_reg_t reg, ggml_backend_dev_t dev) {
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t * extra = get_extra ? get_extra(dev) : NULL;
    for (; extra != NULL && *extra != NULL; extra++) {
        if (strcmp(ggml_backend_buft_name(*extra), "CPU_REPACK") == 0) {
            return *extra;
        }
    }
    return NULL;
}

// Everything one mulmat request allocates, released by mulmat_free.
struct mulmat_state {
    void *                wdata;
    void *                xdata;
    float *               out;
    ggml_backend_t        backend;
    struct ggml_context * ctx_w;
    struct ggml_context * ctx_a;
    ggml_backend_buffer_t w_buf;
    ggml_backend_buffer_t a_buf;
};

static void mulmat_free(struct mulmat_state * st) {
    if (st->w_buf) {
        ggml_backend_buffer_free(st->w_buf);
    }
    if (st->a_buf) {
        ggml_backend_buffer_free(st->a_buf);
    }
    if (st->ctx_w) {
        ggml_free(st->ctx_w);
    }
    if (st->ctx_a) {
        ggml_free(st->ctx_a);
    }
    if (st->backend) {
        ggml_backend_free(st->backend);
    }
    free(st->wdata);
    free(st->xdata);
    free(st->out);
}

static int mulmat_run(int argc, char ** argv, struct mulmat_state * st) {
    if (argc != 10) {
        return fail(EXIT_USAGE, "mulmat takes 9 arguments (mode type k n m threads w x out), got %d", argc - 1);
    }
    bool repack;
    if (strcmp(argv[1], "plain") == 0) {
        repack = false;
    } else if (strcmp(argv[1], "repack") == 0) {
        repack = true;
    } else {
        return fail(EXIT_USAGE, "mode must be plain or repack, not '%s'", argv[1]);
    }
    enum ggml_type type;
    int64_t        k, n, m, threads;
    int            rc = parse_type(argv[2], &type);
    if (rc == EXIT_OK) {
        rc = parse_k(argv[3], type, &k);
    }
    if (rc != EXIT_OK) {
        return rc;
    }
    if (!parse_int(argv[4], 1, MAX_DIM, &n) || !parse_int(argv[5], 1, MAX_DIM, &m)) {
        return fail(EXIT_USAGE, "n and m must be integers in 1..%" PRId64 " (got '%s' '%s')", MAX_DIM, argv[4],
                    argv[5]);
    }
    if (!parse_int(argv[6], 1, MAX_THREADS, &threads)) {
        return fail(EXIT_USAGE, "threads must be an integer in 1..%d, not '%s'", MAX_THREADS, argv[6]);
    }
    const char * type_name = ggml_type_name(type);

    const struct ggml_type_traits_cpu * cpu_traits = ggml_get_type_traits_cpu(type);
    if (cpu_traits->vec_dot == NULL ||
        (cpu_traits->vec_dot_type != GGML_TYPE_F32 &&
         ggml_get_type_traits_cpu(cpu_traits->vec_dot_type)->from_float == NULL)) {
        return fail(EXIT_UNSUPPORTED, "ggml's CPU backend has no matmul for weights of type %s", type_name);
    }

    const int64_t weight_bytes = (int64_t) ggml_row_size(type, k) * n;
    const int64_t act_bytes    = m * k * (int64_t) sizeof(float);
    const int64_t out_bytes    = m * n * (int64_t) sizeof(float);
    if (weight_bytes > MAX_BYTES || act_bytes > MAX_BYTES || out_bytes > MAX_BYTES) {
        return fail(EXIT_USAGE, "problem too large (weights %" PRId64 ", activations %" PRId64 ", output %" PRId64
                                " bytes; limit %" PRId64 ")",
                    weight_bytes, act_bytes, out_bytes, MAX_BYTES);
    }
    rc = read_file(argv[7], "weights", weight_bytes, &st->wdata, NULL);
    if (rc == EXIT_OK) {
        rc = read_file(argv[8], "activations", act_bytes, &st->xdata, NULL);
    }
    if (rc != EXIT_OK) {
        return rc;
    }

    // The CPU backend, as llama.cpp reaches it.
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_t dev = reg ? ggml_backend_reg_dev_get(reg, 0) : NULL;
    if (dev == NULL) {
        return fail(EXIT_GGML, "ggml has no CPU device");
    }
    st->backend = ggml_backend_dev_init(dev, NULL);
    if (st->backend == NULL) {
        return fail(EXIT_GGML, "ggml_backend_dev_init failed for the CPU device");
    }
    ggml_backend_buffer_type_t cpu_buft = ggml_backend_cpu_buffer_type();
    ggml_backend_buffer_type_t w_buft   = cpu_buft;
    if (repack) {
        w_buft = repack_buft(reg, dev);
        if (w_buft == NULL) {
            return fail(EXIT_NO_REPACK, "no repack layout: this ggml build has no CPU_REPACK buffer type");
        }
        if (!ggml_backend_dev_supports_buft(dev, w_buft)) {
            return fail(EXIT_GGML, "the CPU device does not accept its own CPU_REPACK buffer type");
        }
    }

    // W (ne0 = k, ne1 = n) alone in one context; X (ne0 = k, ne1 = m), Y and the graph in another.
    struct ggml_init_params wp = {
        /*.mem_size   =*/ggml_tensor_overhead(),
        /*.mem_buffer =*/NULL,
        /*.no_alloc   =*/true,
    };
    struct ggml_init_params ap = {
        /*.mem_size   =*/2 * ggml_tensor_overhead() + ggml_graph_overhead(),
        /*.mem_buffer =*/NULL,
        /*.no_alloc   =*/true,
    };
    st->ctx_w = ggml_init(wp);
    st->ctx_a = ggml_init(ap);
    if (st->ctx_w == NULL || st->ctx_a == NULL) {
        return fail(EXIT_GGML, "ggml_init failed");
    }
    struct ggml_tensor * W = ggml_new_tensor_2d(st->ctx_w, type, k, n);
    ggml_set_name(W, "W");
    struct ggml_tensor * X = ggml_new_tensor_2d(st->ctx_a, GGML_TYPE_F32, k, m);
    ggml_set_name(X, "X");
    struct ggml_tensor * Y = ggml_mul_mat(st->ctx_a, W, X);
    ggml_set_name(Y, "Y");

    // Would ggml run this node with W in w_buft? The same question llama.cpp asks before it
    // places a weight in an extra buffer type: a zero-size (dummy) buffer of that type stands
    // in for W's buffer while the device answers.
    {
        ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(w_buft, 0);
        W->buffer                   = dummy;
        bool supported              = ggml_backend_dev_supports_op(dev, Y);
        W->buffer                   = NULL;
        ggml_backend_buffer_free(dummy);
        if (!supported) {
            if (repack) {
                return fail(EXIT_NO_REPACK,
                            "no repack layout for %s with n = %" PRId64 " in this build (CPU_REPACK does not "
                            "support this mul_mat)",
                            type_name, n);
            }
            return fail(EXIT_GGML, "the CPU device does not support mul_mat with %s weights", type_name);
        }
    }

    st->w_buf = ggml_backend_alloc_ctx_tensors_from_buft(st->ctx_w, w_buft);
    st->a_buf = ggml_backend_alloc_ctx_tensors_from_buft(st->ctx_a, cpu_buft);
    if (st->w_buf == NULL || st->a_buf == NULL) {
        return fail(EXIT_GGML, "allocating the tensors failed");
    }
    ggml_backend_buffer_set_usage(st->w_buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    if (repack && W->extra == NULL) {
        // Cannot happen after supports_op said yes; storing the weight would crash.
        return fail(EXIT_NO_REPACK, "no repack layout for %s with n = %" PRId64 " (tensor has no repack traits)",
                    type_name, n);
    }

    g_layout[0] = '\0';
    ggml_backend_tensor_set(W, st->wdata, 0, (size_t) weight_bytes);  // repack mode: repacks here
    ggml_backend_tensor_set(X, st->xdata, 0, (size_t) act_bytes);

    struct ggml_cgraph * graph = ggml_new_graph(st->ctx_a);
    ggml_build_forward_expand(graph, Y);
    ggml_backend_cpu_set_n_threads(st->backend, (int) threads);
    enum ggml_status status = ggml_backend_graph_compute(st->backend, graph);
    if (status != GGML_STATUS_SUCCESS) {
        return fail(EXIT_GGML, "ggml_backend_graph_compute failed: %s", ggml_status_to_string(status));
    }
    if ((int64_t) ggml_nbytes(Y) != out_bytes || Y->ne[0] != n || Y->ne[1] != m) {
        return fail(EXIT_GGML, "result tensor is %" PRId64 "x%" PRId64 ", expected %" PRId64 "x%" PRId64, Y->ne[0],
                    Y->ne[1], n, m);
    }
    st->out = alloc_aligned(out_bytes);
    if (st->out == NULL) {
        return fail(EXIT_GGML, "out of memory for the output");
    }
    ggml_backend_tensor_get(Y, st->out, 0, (size_t) out_bytes);
    rc = write_file(argv[9], st->out, out_bytes);
    if (rc != EXIT_OK) {
        return rc;
    }

    const bool repacked = W->extra != NULL;
    if (repacked && g_layout[0] != '\0') {
        report("repacked=1 buft=%s layout=%s", ggml_backend_buft_name(w_buft), g_layout);
    } else {
        report("repacked=%d buft=%s", repacked ? 1 : 0, ggml_backend_buft_name(w_buft));
    }
    return EXIT_OK;
}

static int mode_mulmat(int argc, char ** argv) {
    struct mulmat_state st;
    memset(&st, 0, sizeof(st));
    int rc = mulmat_run(argc, argv, &st);
    mulmat_free(&st);
    return rc;
}

static int mode_batch(int argc, char ** argv);

// Runs one request; argv[0] is the mode.
static int dispatch(int argc, char ** argv, bool allow_batch) {
    if (argc < 1) {
        return fail(EXIT_USAGE, "no mode given");
    }
    g_message[0] = '\0';
    g_report[0]  = '\0';
    const char * mode = argv[0];
    if (strcmp(mode, "info") == 0) {
        return mode_info(argc, argv);
    }
    if (strcmp(mode, "traits") == 0) {
        return mode_traits(argc, argv);
    }
    if (strcmp(mode, "from_float") == 0) {
        return mode_from_float(argc, argv);
    }
    if (strcmp(mode, "quantize") == 0) {
        return mode_quantize(argc, argv);
    }
    if (strcmp(mode, "vec_dot") == 0) {
        return mode_vec_dot(argc, argv);
    }
    if (strcmp(mode, "mulmat") == 0) {
        return mode_mulmat(argc, argv);
    }
    if (allow_batch && strcmp(mode, "batch") == 0) {
        return mode_batch(argc, argv);
    }
    if (!g_batch) {
        usage();
    }
    return fail(EXIT_USAGE, "unknown mode '%s'", mode);
}

// Replaces line breaks and tabs so that one answer stays one line.
static void one_line(char * s) {
    for (; *s; s++) {
        if (*s == '\n' || *s == '\r' || *s == '\t') {
            *s = ' ';
        }
    }
}

static int mode_batch(int argc, char ** argv) {
    if (argc != 2) {
        return fail(EXIT_USAGE, "batch takes 1 argument (requests file), got %d", argc - 1);
    }
    FILE * f = fopen(argv[1], "r");
    if (f == NULL) {
        return fail(EXIT_USAGE, "cannot open requests file %s: %s", argv[1], strerror(errno));
    }
    g_batch     = true;
    char * line = NULL;
    size_t cap  = 0;
    long   lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        char * args[MAX_ARGS + 1];
        int    n   = 0;
        bool   too_many = false;
        for (char * tok = strtok(line, " \t\r\n"); tok != NULL; tok = strtok(NULL, " \t\r\n")) {
            if (n == MAX_ARGS) {
                too_many = true;
                break;
            }
            args[n++] = tok;
        }
        if (n == 0 || args[0][0] == '#') {
            continue;
        }
        args[n] = NULL;
        int rc  = too_many ? fail(EXIT_USAGE, "more than %d arguments", MAX_ARGS) : dispatch(n, args, false);
        char * text = rc == EXIT_OK ? g_report : g_message;
        one_line(text);
        printf("%ld %d %s\n", lineno, rc, text);
        fflush(stdout);
    }
    bool read_error = ferror(f) != 0;
    free(line);
    fclose(f);
    g_batch = false;
    if (read_error) {
        return fail(EXIT_USAGE, "reading requests file %s failed", argv[1]);
    }
    return EXIT_OK;
}

int main(int argc, char ** argv) {
    if (argc > 0 && argv[0] != NULL) {
        const char * slash = strrchr(argv[0], '/');
        g_prog             = slash ? slash + 1 : argv[0];
    }
    if (argc < 2) {
        usage();
        return fail(EXIT_USAGE, "no mode given");
    }
    const char * v = getenv("TIERCHECK_MULMAT_VERBOSE");
    g_verbose      = v != NULL && strcmp(v, "1") == 0;
    ggml_log_set(log_cb, NULL);
    ggml_cpu_init();
    return dispatch(argc - 1, argv + 1, true);
}
