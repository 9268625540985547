// mulmat: runs one ggml_mul_mat node on ggml's CPU backend, through ggml's public API only,
// with the weight either in the default CPU buffer ("plain") or in the CPU extra buffer
// type CPU_REPACK ("repack", where ggml rewrites the weight into an interleaved layout when
// it is stored and then runs the repacked gemv/gemm kernels).
//
// Built per CPU tier by ci/oracle against that tier's libraries; the tiercheck harness
// (harness/oracle/src/mulmat.rs) runs it as a subprocess.
//
// Usage: mulmat <plain|repack> <ggml type id> <k> <n> <m> <threads> <weights.bin> <acts.bin> <out.bin>
//
//   weights.bin  n rows of k values of the type, in ggml's plain block layout
//                (exactly n * ggml_row_size(type, k) bytes)
//   acts.bin     m rows of k little-endian f32 (exactly m * k * 4 bytes)
//   out.bin      written: m rows of n f32, row i = weights times activation row i
//                (the memory order of the result tensor, ne0 = n, ne1 = m)
//
// On success prints one line to stdout:
//   repacked=<0|1> buft=<buffer type of the weight>[ layout=<repack layout>]
// where layout (e.g. q4_K_8x8) comes from ggml's debug log of the repack.
//
// Exit codes: 0 ok; 1 ggml failure; 2 usage or input error; 3 (repack mode) this build has
// no repack layout for the type at this n, so ggml would not place the weight in CPU_REPACK.
//
// Set TIERCHECK_MULMAT_VERBOSE=1 to forward all of ggml's log to stderr (warnings and errors
// always are).

#include <errno.h>
#include <inttypes.h>
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
    EXIT_OK = 0,
    EXIT_GGML = 1,
    EXIT_USAGE = 2,
    EXIT_NO_REPACK = 3,
};

// Upper bounds that keep every size computation far from overflow.
#define MAX_DIM     (INT64_C(1) << 24)
#define MAX_BYTES   (INT64_C(1) << 34)
#define MAX_THREADS 1024

static const char * g_prog = "mulmat";

static void usage(void) {
    fprintf(stderr,
            "usage: %s <plain|repack> <ggml type id> <k> <n> <m> <threads> <weights.bin> <acts.bin> "
            "<out.bin>\n"
            "  weights.bin: n rows of k values in ggml's plain block layout\n"
            "  acts.bin:    m*k little-endian f32\n"
            "  out.bin:     written, m*n f32 (row i = activation row i)\n"
            "exit codes: 0 ok, 1 ggml failure, 2 usage/input error, 3 no repack layout for this type\n",
            g_prog);
}

__attribute__((format(printf, 2, 3))) static int fail(int code, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
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

// Reads exactly `want` bytes from `path` into a new buffer (the file must be that size).
static int read_exact(const char * path, const char * what, int64_t want, void ** out) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        return fail(EXIT_USAGE, "cannot open %s file %s: %s", what, path, strerror(errno));
    }
    if (fseeko(f, 0, SEEK_END) != 0) {
        fclose(f);
        return fail(EXIT_USAGE, "cannot seek in %s file %s: %s", what, path, strerror(errno));
    }
    off_t size = ftello(f);
    if (size < 0 || (int64_t) size != want) {
        fclose(f);
        return fail(EXIT_USAGE, "%s file %s has %lld bytes, expected %" PRId64, what, path, (long long) size,
                    want);
    }
    rewind(f);
    void * buf = malloc(want > 0 ? (size_t) want : 1);
    if (buf == NULL) {
        fclose(f);
        return fail(EXIT_GGML, "out of memory reading %s", path);
    }
    if (want > 0 && fread(buf, 1, (size_t) want, f) != (size_t) want) {
        free(buf);
        fclose(f);
        return fail(EXIT_USAGE, "short read from %s file %s", what, path);
    }
    fclose(f);
    *out = buf;
    return EXIT_OK;
}

// ggml log: warnings and errors go to stderr, everything with TIERCHECK_MULMAT_VERBOSE=1.
// The repack debug message ("repack tensor W with q4_K_8x8") gives the layout name.
static bool g_verbose  = false;
static char g_layout[64] = "";
static enum ggml_log_level g_last_level = GGML_LOG_LEVEL_NONE;

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

int main(int argc, char ** argv) {
    if (argc > 0 && argv[0] != NULL) {
        const char * slash = strrchr(argv[0], '/');
        g_prog             = slash ? slash + 1 : argv[0];
    }
    if (argc != 10) {
        usage();
        return fail(EXIT_USAGE, "expected 9 arguments, got %d", argc - 1);
    }
    const char * v = getenv("TIERCHECK_MULMAT_VERBOSE");
    g_verbose      = v != NULL && strcmp(v, "1") == 0;
    ggml_log_set(log_cb, NULL);

    bool repack;
    if (strcmp(argv[1], "plain") == 0) {
        repack = false;
    } else if (strcmp(argv[1], "repack") == 0) {
        repack = true;
    } else {
        usage();
        return fail(EXIT_USAGE, "mode must be plain or repack, not '%s'", argv[1]);
    }
    int64_t type_id, k, n, m, threads;
    if (!parse_int(argv[2], 0, GGML_TYPE_COUNT - 1, &type_id)) {
        return fail(EXIT_USAGE, "type id '%s' is not a ggml type (0..%d)", argv[2], GGML_TYPE_COUNT - 1);
    }
    if (!parse_int(argv[3], 1, MAX_DIM, &k) || !parse_int(argv[4], 1, MAX_DIM, &n) ||
        !parse_int(argv[5], 1, MAX_DIM, &m)) {
        return fail(EXIT_USAGE, "k, n and m must be integers in 1..%" PRId64 " (got '%s' '%s' '%s')", MAX_DIM,
                    argv[3], argv[4], argv[5]);
    }
    if (!parse_int(argv[6], 1, MAX_THREADS, &threads)) {
        return fail(EXIT_USAGE, "threads must be an integer in 1..%d, not '%s'", MAX_THREADS, argv[6]);
    }
    const char * weights_path = argv[7];
    const char * acts_path    = argv[8];
    const char * out_path     = argv[9];

    const enum ggml_type            type   = (enum ggml_type) type_id;
    const struct ggml_type_traits * traits = ggml_get_type_traits(type);
    if (traits->blck_size <= 0 || traits->type_size == 0) {
        return fail(EXIT_USAGE, "ggml type id %" PRId64 " (%s) is not in use", type_id,
                    traits->type_name ? traits->type_name : "?");
    }
    if (k % traits->blck_size != 0) {
        return fail(EXIT_USAGE, "k = %" PRId64 " is not a multiple of %s's block size %" PRId64, k,
                    traits->type_name, traits->blck_size);
    }
    ggml_cpu_init();
    const struct ggml_type_traits_cpu * cpu_traits = ggml_get_type_traits_cpu(type);
    if (cpu_traits->vec_dot == NULL ||
        (cpu_traits->vec_dot_type != GGML_TYPE_F32 &&
         ggml_get_type_traits_cpu(cpu_traits->vec_dot_type)->from_float == NULL)) {
        return fail(EXIT_USAGE, "ggml's CPU backend has no matmul for weights of type %s", traits->type_name);
    }

    const int64_t row_bytes    = (int64_t) ggml_row_size(type, k);
    const int64_t weight_bytes = row_bytes * n;  // < 2^24 * 2^24 * small: no overflow
    const int64_t act_bytes    = m * k * (int64_t) sizeof(float);
    const int64_t out_bytes    = m * n * (int64_t) sizeof(float);
    if (weight_bytes > MAX_BYTES || act_bytes > MAX_BYTES || out_bytes > MAX_BYTES) {
        return fail(EXIT_USAGE, "problem too large (weights %" PRId64 ", activations %" PRId64 ", output %" PRId64
                                " bytes; limit %" PRId64 ")",
                    weight_bytes, act_bytes, out_bytes, MAX_BYTES);
    }
    void * wdata = NULL;
    void * xdata = NULL;
    int    rc    = read_exact(weights_path, "weights", weight_bytes, &wdata);
    if (rc != EXIT_OK) {
        return rc;
    }
    rc = read_exact(acts_path, "activations", act_bytes, &xdata);
    if (rc != EXIT_OK) {
        free(wdata);
        return rc;
    }

    // The CPU backend, as llama.cpp reaches it.
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_t dev = reg ? ggml_backend_reg_dev_get(reg, 0) : NULL;
    if (dev == NULL) {
        return fail(EXIT_GGML, "ggml has no CPU device");
    }
    ggml_backend_t backend = ggml_backend_dev_init(dev, NULL);
    if (backend == NULL) {
        return fail(EXIT_GGML, "ggml_backend_dev_init failed for the CPU device");
    }
    ggml_backend_buffer_type_t cpu_buft = ggml_backend_cpu_buffer_type();
    ggml_backend_buffer_type_t w_buft   = cpu_buft;
    if (repack) {
        ggml_backend_dev_get_extra_bufts_t get_extra =
            (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg,
                                                                                    "ggml_backend_dev_get_extra_bufts");
        ggml_backend_buffer_type_t * extra = get_extra ? get_extra(dev) : NULL;
        w_buft                             = NULL;
        for (; extra != NULL && *extra != NULL; extra++) {
            if (strcmp(ggml_backend_buft_name(*extra), "CPU_REPACK") == 0) {
                w_buft = *extra;
                break;
            }
        }
        if (w_buft == NULL) {
            ggml_backend_free(backend);
            return fail(EXIT_NO_REPACK, "no repack layout: this ggml build has no CPU_REPACK buffer type");
        }
        if (!ggml_backend_dev_supports_buft(dev, w_buft)) {
            ggml_backend_free(backend);
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
    struct ggml_context * ctx_w = ggml_init(wp);
    struct ggml_context * ctx_a = ggml_init(ap);
    if (ctx_w == NULL || ctx_a == NULL) {
        return fail(EXIT_GGML, "ggml_init failed");
    }
    struct ggml_tensor * W = ggml_new_tensor_2d(ctx_w, type, k, n);
    ggml_set_name(W, "W");
    struct ggml_tensor * X = ggml_new_tensor_2d(ctx_a, GGML_TYPE_F32, k, m);
    ggml_set_name(X, "X");
    struct ggml_tensor * Y = ggml_mul_mat(ctx_a, W, X);
    ggml_set_name(Y, "Y");

    // Would ggml run this node with W in w_buft? The same question llama.cpp asks before
    // it places a weight in an extra buffer type: a zero-size (dummy) buffer of that type
    // stands in for W's buffer while the device answers.
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
                            traits->type_name, n);
            }
            return fail(EXIT_GGML, "the CPU device does not support mul_mat with %s weights",
                        traits->type_name);
        }
    }

    ggml_backend_buffer_t w_buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, w_buft);
    ggml_backend_buffer_t a_buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx_a, cpu_buft);
    if (w_buf == NULL || a_buf == NULL) {
        return fail(EXIT_GGML, "allocating the tensors failed");
    }
    ggml_backend_buffer_set_usage(w_buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    if (repack && W->extra == NULL) {
        // Cannot happen after supports_op said yes; storing the weight would crash.
        return fail(EXIT_NO_REPACK, "no repack layout for %s with n = %" PRId64 " (tensor has no repack traits)",
                    traits->type_name, n);
    }

    ggml_backend_tensor_set(W, wdata, 0, (size_t) weight_bytes);  // repack mode: repacks here
    ggml_backend_tensor_set(X, xdata, 0, (size_t) act_bytes);
    free(wdata);
    free(xdata);

    struct ggml_cgraph * graph = ggml_new_graph(ctx_a);
    ggml_build_forward_expand(graph, Y);
    ggml_backend_cpu_set_n_threads(backend, (int) threads);
    enum ggml_status status = ggml_backend_graph_compute(backend, graph);
    if (status != GGML_STATUS_SUCCESS) {
        return fail(EXIT_GGML, "ggml_backend_graph_compute failed: %s", ggml_status_to_string(status));
    }

    float * out = malloc((size_t) out_bytes);
    if (out == NULL) {
        return fail(EXIT_GGML, "out of memory for the output");
    }
    if ((int64_t) ggml_nbytes(Y) != out_bytes || Y->ne[0] != n || Y->ne[1] != m) {
        return fail(EXIT_GGML, "result tensor is %" PRId64 "x%" PRId64 ", expected %" PRId64 "x%" PRId64, Y->ne[0],
                    Y->ne[1], n, m);
    }
    ggml_backend_tensor_get(Y, out, 0, (size_t) out_bytes);
    FILE * f = fopen(out_path, "wb");
    if (f == NULL) {
        return fail(EXIT_USAGE, "cannot create output file %s: %s", out_path, strerror(errno));
    }
    if (fwrite(out, 1, (size_t) out_bytes, f) != (size_t) out_bytes || fclose(f) != 0) {
        return fail(EXIT_USAGE, "writing output file %s failed", out_path);
    }
    free(out);

    const bool repacked = W->extra != NULL;
    printf("repacked=%d buft=%s", repacked ? 1 : 0, ggml_backend_buft_name(w_buft));
    if (repacked && g_layout[0] != '\0') {
        printf(" layout=%s", g_layout);
    }
    printf("\n");

    ggml_backend_buffer_free(w_buf);
    ggml_backend_buffer_free(a_buf);
    ggml_free(ctx_w);
    ggml_free(ctx_a);
    ggml_backend_free(backend);
    return EXIT_OK;
}
