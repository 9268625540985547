// llamataps: the llama.cpp oracle for a build that Python cannot load in process (the
// aarch64 builds, which run under qemu-aarch64). It does what tools/capture (tiercheck-capture) does
// with ctypes on the haswell build, through the same llama.h: load a GGUF model on the
// CPU (repack on or off), evaluate teacher-forced ids token by token (`decode`) or as one
// batch (`prompt`), then greedy single-token steps, with a cb_eval callback that copies
// out the per-layer taps; and it writes what it saw as a dump that tiercheck-capture
// (--dump-from) turns into a trace with the same checks as its in-process path.
//
//   llamataps MODEL.gguf decode|prompt IDS THREADS REPACK(0|1) STEPS OUT.dump
//             [KV FA [CTX BATCH UBATCH LOGITS [STATE_IN STATE_OUT]]]
//   llamataps info
//
// Context as tiercheck-capture sets it (its threads in a threadpool that sleeps between
// graphs instead of spinning: the same values, far less time under qemu): one sequence,
// n_ctx CTX (default 512), n_batch BATCH and n_ubatch UBATCH (default 512 each;
// llama.cpp caps n_batch at n_ctx and n_ubatch at n_batch), K and V cache of type KV (f32 or f16; default f32), flash
// attention FA (0 or 1; default 0). In prompt mode the ids go to llama_decode in batches
// of n_batch, as llama-server submits a prompt; LOGITS `all` (default) asks for every
// row's logits, `last` for the prompt's last row only (llama-cli's and llama-server's
// way: llama.cpp then prunes the last layer to that row). Greedy steps always ask for
// their one row. STATE_IN (or `-`) names a sequence state file
// (llama_state_seq_save_file's format) loaded into the sequence before the ids, which
// then continue after its cells; STATE_OUT (or `-`) is where the sequence's state is
// saved after the last step (written to STATE_OUT.tmp and renamed). IDS may be `@FILE`:
// the comma-separated ids read from FILE (a long prompt exceeds one argument's limit).
// LLAMATAPS_NUMA (environment: distribute, isolate or numactl) runs llama_numa_init with
// that strategy first, as llama-cli's --numa does; ggml is NUMA-aware only where it
// finds more than one node (recorded in the dump). Tap selection, the
// llama.cpp node names and the "last node of a name wins" rule are the script's (the
// lists are passed by the script in TAPS_LAYER and TAPS_GLOBAL, so the two cannot drift
// apart; `-` in both captures no tap).
//
// Dump format (little-endian), a sequence of records, each a one-byte tag:
//   'I' u32 n_layer, u32 n_embd, u32 n_vocab, str desc
//   'N' u32 numa                                                    LLAMATAPS_NUMA was set:
//                                                                   ggml_is_numa() after it
//   'P' u32 cells, u32 tokens                                       STATE_IN was loaded:
//                                                                   its cells and tokens
//   'S' u32 step, u32 n, n x (i32 id, i32 pos), i32 emitted       one step (the prompt
//                                                                   step may be several
//                                                                   llama_decode calls)
//   'T' str tap, str op, 4 x i64 ne, u32 count, count x f32         one captured tap
//   'L' u32 rows, u32 n_vocab, rows*n_vocab x f32                   the output rows' logits
//                                                                   of one llama_decode
//   'K' u32 n_kv                                                    a kq-L width seen
//   'R' str tensor, str layout                                      a repacked weight
//   'G' str line                                                    a log line (level >= WARN)
//   'E'                                                             end: the run succeeded
// where str = u32 length + bytes. The file is written to OUT.tmp and renamed at the end.
//
// Exit codes: 0 success, 1 llama.cpp failed (message on stderr), 2 usage.

#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "llama.h"

#define MAX_CTX 32768
#define MAX_WANT 64

static FILE *g_out;
static bool g_failed;

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "llamataps: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static void put(const void *p, size_t n) {
    if (fwrite(p, 1, n, g_out) != n) {
        die("writing the dump failed: %s", strerror(errno));
    }
}
static void put_u8(uint8_t v) { put(&v, 1); }
static void put_u32(uint32_t v) { put(&v, 4); }
static void put_i32(int32_t v) { put(&v, 4); }
static void put_i64(int64_t v) { put(&v, 8); }
static void put_str(const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    put_u32(n);
    put(s, n);
}

// ---- taps: the names the caller wants ----
// TAPS_LAYER (environment): comma-separated per-layer node names, captured as NAME-L for
// any layer L; TAPS_GLOBAL: whole-model node names, captured as they are.

static char *g_layer[MAX_WANT], *g_global[MAX_WANT];
static int g_n_layer_names, g_n_global;

static bool wanted(const char *name) {
    for (int i = 0; i < g_n_global; i++) {
        if (strcmp(g_global[i], name) == 0) {
            return true;
        }
    }
    for (int i = 0; i < g_n_layer_names; i++) {
        size_t n = strlen(g_layer[i]);
        if (strncmp(g_layer[i], name, n) == 0 && name[n] == '-' && name[n + 1] != 0) {
            const char *p = name + n + 1;
            while (*p >= '0' && *p <= '9') {
                p++;
            }
            if (*p == 0) {
                return true;
            }
        }
    }
    return false;
}

static int parse_list(const char *var, char **dst) {
    const char *list = getenv(var);
    if (!list || !*list) {
        fprintf(stderr, "llamataps: %s is not set\n", var);
        exit(2);
    }
    if (strcmp(list, "-") == 0) {
        return 0;
    }
    int n = 0;
    char *copy = strdup(list);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_WANT) {
            fprintf(stderr, "llamataps: %s names too many nodes\n", var);
            exit(2);
        }
        dst[n++] = tok;
    }
    return n;
}

static bool eval_cb(struct ggml_tensor *t, bool ask, void *user) {
    (void)user;
    const char *name = ggml_get_name(t);
    if (ask) {
        if (strncmp(name, "kq-", 3) == 0) {
            put_u8('K');
            put_u32((uint32_t)t->ne[0]);
        }
        return wanted(name);
    }
    if (!wanted(name)) {
        return true;
    }
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_I32) {
        fprintf(stderr, "llamataps: node %s is %s, taps must be F32 (or I32 indices)\n", name,
                ggml_type_name(t->type));
        g_failed = true;
        return false;
    }
    int64_t count = ggml_nelements(t);
    float *out = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    if (!out) {
        die("%s", "out of memory");
    }
    if (count == 0) {
        // A graph without output rows: its pruned taps hold nothing (an empty view's
        // strides cover no bytes).
    } else if (ggml_is_contiguous(t)) {
        ggml_backend_tensor_get(t, out, 0, (size_t)count * sizeof(float));
    } else {
        // A strided view: fetch the byte span it covers, then gather with its strides.
        size_t span = sizeof(float);
        for (int d = 0; d < 4; d++) {
            span += (size_t)(t->ne[d] - 1) * t->nb[d];
        }
        char *raw = malloc(span);
        if (!raw) {
            die("%s", "out of memory");
        }
        ggml_backend_tensor_get(t, raw, 0, span);
        int64_t k = 0;
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                        memcpy(&out[k++],
                               raw + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3],
                               sizeof(float));
                    }
        free(raw);
    }
    if (t->type == GGML_TYPE_I32) {
        // Expert indices (ffn_moe_topk): stored as floats, exact below 2^24.
        for (int64_t i = 0; i < count; i++) {
            int32_t v;
            memcpy(&v, &out[i], sizeof v);
            out[i] = (float)v;
        }
    }
    put_u8('T');
    put_str(name);
    put_str(ggml_op_name(t->op));
    for (int d = 0; d < 4; d++) {
        put_i64(t->ne[d]);
    }
    put_u32((uint32_t)count);
    put(out, (size_t)count * sizeof(float));
    free(out);
    return true;
}

// ---- log: repack decisions and warnings go into the dump ----

static void log_cb(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    static char line[4096];
    static size_t len;
    static enum ggml_log_level last = GGML_LOG_LEVEL_INFO;
    if (level != GGML_LOG_LEVEL_CONT) {
        last = level;
    }
    for (const char *p = text; *p; p++) {
        if (*p != '\n' && len + 1 < sizeof(line)) {
            line[len++] = *p;
            continue;
        }
        if (*p != '\n') {
            continue;
        }
        line[len] = 0;
        char tensor[512], layout[64];
        const char *at = strstr(line, "repack tensor ");
        if (at && sscanf(at, "repack tensor %511s with %63s", tensor, layout) == 2) {
            put_u8('R');
            put_str(tensor);
            put_str(layout);
        }
        if (last >= GGML_LOG_LEVEL_WARN) {
            fprintf(stderr, "%s\n", line);
            put_u8('G');
            put_str(line);
        }
        len = 0;
    }
}

static int parse_int(const char *s, const char *what, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "llamataps: %s must be an integer in %ld..%ld, got '%s'\n", what, lo, hi, s);
        exit(2);
    }
    return (int)v;
}

static int usage(void) {
    fprintf(stderr,
            "usage: llamataps MODEL.gguf decode|prompt IDS THREADS REPACK(0|1) STEPS OUT.dump "
            "[KV(f32|f16) FA(0|1) [CTX BATCH UBATCH LOGITS(all|last) [STATE_IN|- STATE_OUT|-]]]\n"
            "       llamataps info\n"
            "TAPS_LAYER, TAPS_GLOBAL (environment): comma-separated node names to capture\n"
            "(per layer, captured as NAME-L, and whole-model)\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "info") == 0) {
        // The CPU backend reads the runtime features (the SVE vector length) at init.
        llama_backend_init();
        printf("arch=aarch64 neon=%d dotprod=%d i8mm=%d sve=%d sve_cnt=%d fp16_va=%d llamafile=%d\n",
               ggml_cpu_has_neon(), ggml_cpu_has_dotprod(), ggml_cpu_has_matmul_int8(),
               ggml_cpu_has_sve(), ggml_cpu_get_sve_cnt(), ggml_cpu_has_fp16_va(),
               ggml_cpu_has_llamafile());
        return 0;
    }
    if (argc != 8 && argc != 10 && argc != 14 && argc != 16) {
        return usage();
    }
    const char *state_in = NULL, *state_out = NULL;
    if (argc == 16) {
        state_in = strcmp(argv[14], "-") == 0 ? NULL : argv[14];
        state_out = strcmp(argv[15], "-") == 0 ? NULL : argv[15];
    }
    int n_ctx = 512, n_batch = 512, n_ubatch = 512;
    bool logits_all = true;
    if (argc >= 14) {
        n_ctx = parse_int(argv[10], "CTX", 1, MAX_CTX);
        n_batch = parse_int(argv[11], "BATCH", 1, MAX_CTX);
        n_ubatch = parse_int(argv[12], "UBATCH", 1, MAX_CTX);
        if (strcmp(argv[13], "all") == 0) {
            logits_all = true;
        } else if (strcmp(argv[13], "last") == 0) {
            logits_all = false;
        } else {
            fprintf(stderr, "llamataps: LOGITS must be all or last, got '%s'\n", argv[13]);
            return 2;
        }
    }
    enum ggml_type kv_type = GGML_TYPE_F32;
    int fa = 0;
    if (argc >= 10) {
        if (strcmp(argv[8], "f32") == 0) {
            kv_type = GGML_TYPE_F32;
        } else if (strcmp(argv[8], "f16") == 0) {
            kv_type = GGML_TYPE_F16;
        } else {
            fprintf(stderr, "llamataps: KV must be f32 or f16, got '%s'\n", argv[8]);
            return 2;
        }
        fa = parse_int(argv[9], "FA", 0, 1);
    }
    const char *model_path = argv[1];
    bool prompt;
    if (strcmp(argv[2], "decode") == 0) {
        prompt = false;
    } else if (strcmp(argv[2], "prompt") == 0) {
        prompt = true;
    } else {
        fprintf(stderr, "llamataps: mode must be decode or prompt, got '%s'\n", argv[2]);
        return 2;
    }
    int32_t *ids = malloc(sizeof(int32_t) * MAX_CTX);
    if (!ids) {
        die("%s", "out of memory");
    }
    int n_ids = 0;
    {
        char *copy;
        if (argv[3][0] == '@') {
            FILE *f = fopen(argv[3] + 1, "rb");
            if (!f) {
                fprintf(stderr, "llamataps: cannot open %s: %s\n", argv[3] + 1, strerror(errno));
                return 2;
            }
            size_t cap = 1 << 16, len = 0;
            copy = malloc(cap + 1);
            size_t got;
            while (copy && (got = fread(copy + len, 1, cap - len, f)) > 0) {
                len += got;
                if (len == cap) {
                    cap *= 2;
                    copy = realloc(copy, cap + 1);
                }
            }
            fclose(f);
            if (!copy) {
                die("%s", "out of memory");
            }
            copy[len] = 0;
            while (len > 0 && (copy[len - 1] == '\n' || copy[len - 1] == '\r')) {
                copy[--len] = 0;
            }
        } else {
            copy = strdup(argv[3]);
        }
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
            if (n_ids == n_ctx) {
                fprintf(stderr, "llamataps: more than %d ids (n_ctx)\n", n_ctx);
                return 2;
            }
            ids[n_ids++] = parse_int(tok, "an id", 0, INT32_MAX);
        }
        free(copy);
        if (n_ids == 0) {
            fprintf(stderr, "llamataps: no ids\n");
            return 2;
        }
    }
    int threads = parse_int(argv[4], "THREADS", 1, 256);
    int repack = parse_int(argv[5], "REPACK", 0, 1);
    int steps = parse_int(argv[6], "STEPS", 0, MAX_CTX);
    const char *out_path = argv[7];
    g_n_layer_names = parse_list("TAPS_LAYER", g_layer);
    g_n_global = parse_list("TAPS_GLOBAL", g_global);
    if (n_ids + steps > n_ctx) {
        fprintf(stderr, "llamataps: %d ids and %d steps exceed n_ctx %d\n", n_ids, steps, n_ctx);
        return 2;
    }

    char tmp_path[4096];
    snprintf(tmp_path, sizeof(tmp_path), "%s.tmp", out_path);
    g_out = fopen(tmp_path, "wb");
    if (!g_out) {
        fprintf(stderr, "llamataps: cannot create %s: %s\n", tmp_path, strerror(errno));
        return 2;
    }
    put("TCLT1\n", 6);

    llama_log_set(log_cb, NULL);
    ggml_log_set(log_cb, NULL);
    llama_backend_init();
    const char *numa = getenv("LLAMATAPS_NUMA");
    if (numa && *numa) {
        enum ggml_numa_strategy s;
        if (strcmp(numa, "distribute") == 0) {
            s = GGML_NUMA_STRATEGY_DISTRIBUTE;
        } else if (strcmp(numa, "isolate") == 0) {
            s = GGML_NUMA_STRATEGY_ISOLATE;
        } else if (strcmp(numa, "numactl") == 0) {
            s = GGML_NUMA_STRATEGY_NUMACTL;
        } else {
            fprintf(stderr, "llamataps: LLAMATAPS_NUMA must be distribute, isolate or numactl, got '%s'\n",
                    numa);
            return 2;
        }
        llama_numa_init(s);
        put_u8('N');
        put_u32(ggml_is_numa() ? 1 : 0);
    }

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = repack != 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        die("llama_model_load_from_file(%s) failed", model_path);
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    char desc[256];
    llama_model_desc(model, desc, sizeof(desc));
    put_u8('I');
    put_u32((uint32_t)llama_model_n_layer(model));
    put_u32((uint32_t)llama_model_n_embd(model));
    put_u32((uint32_t)n_vocab);
    put_str(desc);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_ubatch;
    cp.n_seq_max = 1;
    cp.n_outputs_max = 0;
    cp.n_outputs_max_per_seq = 0;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = kv_type;
    cp.type_v = kv_type;
    cp.embeddings = false;
    cp.no_perf = true;
    cp.cb_eval = eval_cb;
    cp.cb_eval_user_data = NULL;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        die("%s", "llama_init_from_model failed");
    }
    // The threadpool of THREADS threads, sleeping instead of spinning between graphs
    // (poll 0): which thread computes which chunk never changes a value, and under qemu
    // on fewer cores than threads, spinning threads make a run dozens of times slower.
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    tpp.poll = 0;
    struct ggml_threadpool *pool = ggml_threadpool_new(&tpp);
    if (!pool) {
        die("%s", "ggml_threadpool_new failed");
    }
    llama_attach_threadpool(ctx, pool, pool);

    // The tokens of the sequence so far (a loaded state's, then every id fed), for
    // STATE_OUT.
    int32_t *seq_tokens = malloc(sizeof(int32_t) * ((size_t)n_ctx + 1));
    if (!seq_tokens) {
        die("%s", "out of memory");
    }
    size_t n_seq_tokens = 0;
    int n_past = 0;
    if (state_in) {
        size_t n_tok = 0;
        if (llama_state_seq_load_file(ctx, state_in, 0, seq_tokens, (size_t)n_ctx, &n_tok) == 0) {
            fprintf(stderr, "llamataps: loading the sequence state %s failed\n", state_in);
            return 1;
        }
        n_seq_tokens = n_tok;
        n_past = (int)llama_memory_seq_pos_max(llama_get_memory(ctx), 0) + 1;
        put_u8('P');
        put_u32((uint32_t)n_past);
        put_u32((uint32_t)n_tok);
    }
    if (n_past + n_ids + steps > n_ctx) {
        fprintf(stderr, "llamataps: %d saved cells, %d ids and %d steps exceed n_ctx %d\n", n_past,
                n_ids, steps, n_ctx);
        return 2;
    }

    // The batch size llama.cpp runs with (capped at n_ctx): a prompt step goes to
    // llama_decode in pieces of this many ids.
    int chunk = (int)llama_n_batch(ctx);
    int n_steps = prompt ? 1 : n_ids;
    int32_t next = -1;
    float *last = malloc(sizeof(float) * (size_t)n_vocab);
    if (!last) {
        die("%s", "out of memory");
    }
    for (int step = 0; step < n_steps + steps; step++) {
        const int32_t *inp;
        int32_t fed = next; // a greedy step's input: the previous step's choice
        int n;
        if (step < n_steps) {
            n = prompt ? n_ids : 1;
            inp = prompt ? ids : &ids[step];
        } else {
            n = 1;
            inp = &fed;
        }
        for (int i = 0; i < n; i++) {
            if (inp[i] < 0 || inp[i] >= n_vocab) {
                fprintf(stderr, "llamataps: token id %d is outside the vocabulary (n_vocab %d)\n",
                        inp[i], n_vocab);
                return 2;
            }
        }
        // Rows that get logits: every row, or the step's last row only; a greedy step's
        // one row always.
        bool all = logits_all || step >= n_steps;
        for (int off = 0; off < n; off += chunk) {
            int nb = n - off < chunk ? n - off : chunk;
            struct llama_batch batch = llama_batch_init(nb, 0, 1);
            int n_out = 0;
            for (int i = 0; i < nb; i++) {
                batch.token[i] = inp[off + i];
                batch.pos[i] = n_past + off + i;
                batch.n_seq_id[i] = 1;
                batch.seq_id[i][0] = 0;
                batch.logits[i] = all || off + i == n - 1;
                n_out += batch.logits[i];
            }
            batch.n_tokens = nb;
            int rc = llama_decode(ctx, batch);
            if (g_failed) {
                die("%s", "the eval callback failed");
            }
            if (rc != 0) {
                fprintf(stderr, "llamataps: llama_decode returned %d at position %d\n", rc,
                        n_past + off);
                return 1;
            }
            if (n_out > 0) {
                put_u8('L');
                put_u32((uint32_t)n_out);
                put_u32((uint32_t)n_vocab);
                for (int i = 0; i < nb; i++) {
                    if (!batch.logits[i]) {
                        continue;
                    }
                    const float *row = llama_get_logits_ith(ctx, i);
                    if (!row) {
                        die("%s", "llama_get_logits_ith returned NULL");
                    }
                    put(row, (size_t)n_vocab * sizeof(float));
                    memcpy(last, row, (size_t)n_vocab * sizeof(float));
                }
            }
            llama_batch_free(batch);
        }
        // Greedy: argmax of the last output row, ties to the lowest id (trace_io.pick).
        next = 0;
        for (int j = 1; j < n_vocab; j++) {
            if (last[j] > last[next]) {
                next = j;
            }
        }
        put_u8('S');
        put_u32((uint32_t)step);
        put_u32((uint32_t)n);
        for (int i = 0; i < n; i++) {
            put_i32(inp[i]);
            put_i32(n_past + i);
        }
        put_i32(next);
        n_past += n;
        for (int i = 0; i < n; i++) {
            seq_tokens[n_seq_tokens++] = inp[i];
        }
    }
    free(last);
    if (state_out) {
        char tmp_state[4096];
        snprintf(tmp_state, sizeof(tmp_state), "%s.tmp", state_out);
        if (llama_state_seq_save_file(ctx, tmp_state, 0, seq_tokens, n_seq_tokens) == 0) {
            fprintf(stderr, "llamataps: saving the sequence state to %s failed\n", tmp_state);
            return 1;
        }
        if (rename(tmp_state, state_out) != 0) {
            fprintf(stderr, "llamataps: renaming %s to %s failed: %s\n", tmp_state, state_out,
                    strerror(errno));
            return 1;
        }
    }
    free(seq_tokens);
    free(ids);
    llama_detach_threadpool(ctx);
    llama_free(ctx);
    ggml_threadpool_free(pool);
    llama_model_free(model);
    llama_backend_free();
    put_u8('E');
    if (fclose(g_out) != 0) {
        fprintf(stderr, "llamataps: closing %s failed: %s\n", tmp_path, strerror(errno));
        return 1;
    }
    if (rename(tmp_path, out_path) != 0) {
        fprintf(stderr, "llamataps: renaming %s to %s failed: %s\n", tmp_path, out_path, strerror(errno));
        return 1;
    }
    return 0;
}
