// ggml's own CUDA kernels against the GPU lanes' twins, bit for bit, on a device.
//
// Built by ci/ggml-gpu-driver with nvcc and ggml's CUDA flags, and linked with ggml's own
// ggml-cuda units (mmvq.cu, quantize.cu, norm.cu, unary.cu, rope.cu, softmax.cu, compiled
// unchanged) and ggml-base: every case below runs ggml's host entry point of the op, the
// function llama.cpp's CUDA backend calls for that graph node, on tensors built by
// ggml's own graph constructors (so the op parameters are llama.cpp's), and compares the
// output with the twin's, which `cargo run -p tiercheck-hip --example ggml_vectors`
// wrote next to the inputs.
//
// ggml-cuda.cu itself (the backend, the graph scheduler, cuBLAS) is not linked: this file
// supplies the five functions the units call from it: the device table
// (ggml_cuda_info: compute capability 100*major + 10*minor, the SM count, the shared
// memory limits, the warp size and cooperative launch, read from the device as
// ggml_cuda_init reads them), the current device, the error report and a memory pool
// (cudaMalloc per request).
//
//   ggml_gpu_check VECTORS     run every case; exit 0 when all are equal, 1 when one
//                              differs, 2 on a bad file or a failed CUDA call, 3 when
//                              there is no CUDA device (the reason on the last line)
//   ggml_gpu_check --replay VECTORS
//                              no device: check the comparison itself (each case's twin
//                              output compares equal, an alternative unequal and named)
//
// The vectors file (little-endian): "TCGG0001", u32 cases; per case u32 kind, u32 name
// length and the name, u32 params and i64 each, u32 inputs and per input (u32 dtype:
// 0 f32, 1 bytes, 2 i32; u64 bytes; the bytes), then the expected output the same way,
// then u32 alternatives and per alternative u32 name length, the name and an output:
// other recipes' outputs for the same inputs. Where the device differs from the twin,
// the driver names the alternatives it equals (none: no recipe here explains it).

#include "common.cuh"
#include "ggml.h"
#include "ggml-backend-impl.h"
#include "mmvf.cuh"
#include "mmvq.cuh"
#include "norm.cuh"
#include "quantize.cuh"
#include "rope.cuh"
#include "softmax.cuh"
#include "unary.cuh"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

// ---------------------------------------------------------------- what ggml-cuda.cu provides

static ggml_cuda_device_info device_table() {
    ggml_cuda_device_info info = {};
    if (cudaGetDeviceCount(&info.physical_device_count) != cudaSuccess) {
        info.physical_device_count = 0;
    }
    info.device_count = info.physical_device_count;
    for (int id = 0; id < info.device_count && id < GGML_CUDA_MAX_DEVICES; ++id) {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, id));
        int coop = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, id));
        auto & d = info.devices[id];
        d.cc = 100 * prop.major + 10 * prop.minor;
        d.nsm = prop.multiProcessorCount;
        d.smpb = prop.sharedMemPerBlock;
        d.smpbo = prop.sharedMemPerBlockOptin;
        d.warp_size = prop.warpSize;
        d.supports_cooperative_launch = coop != 0;
        d.total_vram = prop.totalGlobalMem;
        d.physical_device = id;
        d.physical_share_count = 1;
    }
    return info;
}

const ggml_cuda_device_info & ggml_cuda_info() {
    static ggml_cuda_device_info info = device_table();
    return info;
}

void ggml_cuda_set_device(int device) {
    int current = -1;
    CUDA_CHECK(cudaGetDevice(&current));
    if (current != device) {
        CUDA_CHECK(cudaSetDevice(device));
    }
}

int ggml_cuda_get_device() {
    int id = 0;
    CUDA_CHECK(cudaGetDevice(&id));
    return id;
}

[[noreturn]] void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg) {
    fprintf(stderr, "CUDA error: %s\n  in %s at %s:%d\n  %s\n", msg, func, file, line, stmt);
    exit(2);
}

namespace {
struct plain_pool : ggml_cuda_pool {
    void * alloc(size_t size, size_t * actual_size) override {
        void * p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, size));
        *actual_size = size;
        return p;
    }
    void free(void * ptr, size_t) override { CUDA_CHECK(cudaFree(ptr)); }
};
}  // namespace

std::unique_ptr<ggml_cuda_pool> ggml_backend_cuda_context::new_pool_for_device(int, int) {
    return std::unique_ptr<ggml_cuda_pool>(new plain_pool());
}

// ---------------------------------------------------------------- the vectors file

namespace {

enum Kind : uint32_t {
    QUANTIZE_Q8_1 = 1, MMVQ = 2, RMS_NORM_MUL = 3, SWIGLU = 4, ROPE_NEOX = 5, SOFT_MAX = 6, MMVF = 7
};

const char * kind_name(uint32_t k) {
    switch (k) {
        case QUANTIZE_Q8_1: return "quantize_q8_1";
        case MMVQ: return "mmvq";
        case RMS_NORM_MUL: return "rms_norm_mul";
        case SWIGLU: return "swiglu";
        case ROPE_NEOX: return "rope_neox";
        case SOFT_MAX: return "soft_max";
        case MMVF: return "mmvf";
        default: return "?";
    }
}

struct Blob {
    uint32_t dtype = 0;
    std::vector<uint8_t> bytes;
};

struct Case {
    uint32_t kind = 0;
    std::string name;
    std::vector<int64_t> params;
    std::vector<Blob> inputs;
    Blob expected;
    std::vector<std::pair<std::string, Blob>> alternatives;
};

struct Reader {
    const std::vector<uint8_t> & d;
    size_t at = 0;
    bool ok = true;
    template <typename T> T get() {
        T v{};
        if (at + sizeof(T) > d.size()) {
            ok = false;
            return v;
        }
        memcpy(&v, d.data() + at, sizeof(T));
        at += sizeof(T);
        return v;
    }
    std::vector<uint8_t> take(uint64_t n) {
        if (n > d.size() - at) {
            ok = false;
            return {};
        }
        std::vector<uint8_t> out(d.begin() + at, d.begin() + at + n);
        at += n;
        return out;
    }
    Blob blob() {
        Blob b;
        b.dtype = get<uint32_t>();
        b.bytes = take(get<uint64_t>());
        return b;
    }
};

[[noreturn]] void bad_file(const char * path, const char * what) {
    fprintf(stderr, "%s: %s\n", path, what);
    exit(2);
}

std::vector<Case> read_cases(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        bad_file(path, "cannot open");
    }
    std::vector<uint8_t> d;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        d.insert(d.end(), buf, buf + n);
    }
    fclose(f);
    if (d.size() < 12 || memcmp(d.data(), "TCGG0001", 8) != 0) {
        bad_file(path, "not a vectors file (no TCGG0001 header)");
    }
    Reader r{d, 8};
    const uint32_t count = r.get<uint32_t>();
    std::vector<Case> cases;
    for (uint32_t i = 0; i < count && r.ok; ++i) {
        Case c;
        c.kind = r.get<uint32_t>();
        auto name = r.take(r.get<uint32_t>());
        c.name.assign(name.begin(), name.end());
        const uint32_t np = r.get<uint32_t>();
        for (uint32_t k = 0; k < np && r.ok; ++k) {
            c.params.push_back(r.get<int64_t>());
        }
        const uint32_t ni = r.get<uint32_t>();
        for (uint32_t k = 0; k < ni && r.ok; ++k) {
            c.inputs.push_back(r.blob());
        }
        c.expected = r.blob();
        const uint32_t na = r.get<uint32_t>();
        for (uint32_t k = 0; k < na && r.ok; ++k) {
            auto alt = r.take(r.get<uint32_t>());
            c.alternatives.emplace_back(std::string(alt.begin(), alt.end()), r.blob());
        }
        cases.push_back(std::move(c));
    }
    if (!r.ok || r.at != d.size()) {
        bad_file(path, "truncated or malformed (regenerate it with the ggml_vectors example)");
    }
    return cases;
}

// ---------------------------------------------------------------- running one case

// Tensors come from ggml's own constructors (no allocation); their data is device memory.
struct Graph {
    ggml_context * ctx;
    std::vector<void *> device;
    ggml_backend_buffer buffer = {};

    Graph() {
        ggml_init_params p = {64 * ggml_tensor_overhead(), nullptr, true};
        ctx = ggml_init(p);
        // ggml reads the buffer's usage (MMVQ clears a compute buffer's padding): weights.
        buffer.usage = GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
    }
    ~Graph() {
        for (void * p : device) {
            cudaFree(p);
        }
        ggml_free(ctx);
    }
    // Device memory for `t` (and its bytes from `host`), zeroed past its end as far as two
    // more rows and 4 KiB: ggml's CUDA buffers pad a tensor's last row, and a kernel that
    // reads a row or a block beyond the tensor reads zeros here too, never unmapped memory.
    void place(ggml_tensor * t, const void * host = nullptr) {
        void * p = nullptr;
        const size_t bytes = ggml_nbytes(t) + 2 * ggml_row_size(t->type, t->ne[0]) + 4096;
        CUDA_CHECK(cudaMalloc(&p, bytes));
        CUDA_CHECK(cudaMemset(p, 0, bytes));
        device.push_back(p);
        t->data = p;
        t->buffer = &buffer;
        if (host) {
            CUDA_CHECK(cudaMemcpy(p, host, ggml_nbytes(t), cudaMemcpyHostToDevice));
        }
    }
    std::vector<uint8_t> fetch(const void * p, size_t n) {
        std::vector<uint8_t> out(n);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost));
        return out;
    }
};

float f32_of(int64_t bits) {
    const uint32_t b = (uint32_t) bits;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

const void * input(const Case & c, size_t i, uint32_t dtype, size_t bytes) {
    if (i >= c.inputs.size() || c.inputs[i].dtype != dtype || c.inputs[i].bytes.size() != bytes) {
        fprintf(stderr, "case %s: input %zu is not %zu bytes of dtype %u\n", c.name.c_str(), i, bytes, dtype);
        exit(2);
    }
    return c.inputs[i].bytes.data();
}

void need_params(const Case & c, size_t n) {
    if (c.params.size() != n) {
        fprintf(stderr, "case %s: %zu params, want %zu\n", c.name.c_str(), c.params.size(), n);
        exit(2);
    }
}

std::vector<uint8_t> run(ggml_backend_cuda_context & cuda, const Case & c) {
    Graph g;
    switch (c.kind) {
        case QUANTIZE_Q8_1: {
            need_params(c, 1);
            const int64_t k = c.params[0];
            ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, k);
            g.place(x, input(c, 0, 0, 4 * k));
            const size_t bytes = k / QK8_1 * sizeof(block_q8_1);
            void * q = nullptr;
            CUDA_CHECK(cudaMalloc(&q, bytes));
            g.device.push_back(q);
            // What ggml_cuda_mul_mat_vec_q does with one activation column (unpadded).
            quantize_row_q8_1_cuda((const float *) x->data, nullptr, q, GGML_TYPE_Q8_0, k, k, k, k, k, 1, 1, 1,
                                   cuda.stream());
            return g.fetch(q, bytes);
        }
        case MMVQ: {
            need_params(c, 3);
            const auto type = (ggml_type) c.params[0];
            const int64_t k = c.params[1], n = c.params[2];
            ggml_tensor * w = ggml_new_tensor_2d(g.ctx, type, k, n);
            ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, k);
            ggml_tensor * y = ggml_mul_mat(g.ctx, w, x);
            g.place(w, input(c, 0, 1, ggml_nbytes(w)));
            g.place(x, input(c, 1, 0, 4 * k));
            g.place(y);
            ggml_cuda_mul_mat_vec_q(cuda, w, x, nullptr, y, nullptr);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        case RMS_NORM_MUL: {
            need_params(c, 3);
            const int64_t n = c.params[0], rows = c.params[1];
            ggml_tensor * x = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, n, rows);
            ggml_tensor * w = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, n);
            ggml_tensor * norm = ggml_rms_norm(g.ctx, x, f32_of(c.params[2]));
            ggml_tensor * y = ggml_mul(g.ctx, norm, w);
            g.place(x, input(c, 0, 0, 4 * n * rows));
            g.place(w, input(c, 1, 0, 4 * n));
            g.place(norm);
            g.place(y);
            // The backend fuses RMS_NORM followed by MUL into this call.
            ggml_cuda_op_rms_norm_fused(cuda, norm, y);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        case SWIGLU: {
            need_params(c, 1);
            const int64_t n = c.params[0];
            ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, n);
            ggml_tensor * gate = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, n);
            ggml_tensor * y = ggml_swiglu_split(g.ctx, x, gate);
            g.place(x, input(c, 0, 0, 4 * n));
            g.place(gate, input(c, 1, 0, 4 * n));
            g.place(y);
            ggml_cuda_op_swiglu(cuda, y);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        case ROPE_NEOX: {
            need_params(c, 5);
            const int64_t hd = c.params[0], heads = c.params[1], tokens = c.params[2];
            const int n_dims = (int) c.params[3];
            ggml_tensor * x = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, hd, heads, tokens);
            ggml_tensor * pos = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, tokens);
            // llama.cpp's Qwen3 call: NeoX, no frequency factors, no YaRN.
            ggml_tensor * y = ggml_rope_ext(g.ctx, x, pos, nullptr, n_dims, GGML_ROPE_TYPE_NEOX, 32768,
                                            f32_of(c.params[4]), 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            g.place(x, input(c, 0, 0, 4 * hd * heads * tokens));
            g.place(pos, input(c, 1, 2, 4 * tokens));
            g.place(y);
            ggml_cuda_op_rope(cuda, y);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        case SOFT_MAX: {
            need_params(c, 3);
            const int64_t n_kv = c.params[0], rows = c.params[1];
            ggml_tensor * kq = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, n_kv, rows);
            ggml_tensor * mask = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, n_kv, rows);
            // llama.cpp's graph without flash attention: an F32 mask, no ALiBi.
            ggml_tensor * y = ggml_soft_max_ext(g.ctx, kq, mask, f32_of(c.params[2]), 0.0f);
            g.place(kq, input(c, 0, 0, 4 * n_kv * rows));
            g.place(mask, input(c, 1, 0, 4 * n_kv * rows));
            g.place(y);
            ggml_cuda_op_soft_max(cuda, y);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        case MMVF: {
            // The attention products: an F16 (or F32) matrix times one F32 column, at
            // GGML_PREC_F32 (llama.cpp's K·Q) or the default precision (V·p).
            need_params(c, 4);
            const bool f16 = c.params[0] != 0;
            const int64_t k = c.params[1], n = c.params[2];
            ggml_tensor * w = ggml_new_tensor_2d(g.ctx, f16 ? GGML_TYPE_F16 : GGML_TYPE_F32, k, n);
            ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, k);
            ggml_tensor * y = ggml_mul_mat(g.ctx, w, x);
            if (c.params[3] != 0) {
                ggml_mul_mat_set_prec(y, GGML_PREC_F32);
            }
            g.place(w, input(c, 0, 1, ggml_nbytes(w)));
            g.place(x, input(c, 1, 0, 4 * k));
            g.place(y);
            ggml_cuda_mul_mat_vec_f(cuda, w, x, nullptr, y, nullptr);
            return g.fetch(y->data, ggml_nbytes(y));
        }
        default:
            fprintf(stderr, "case %s: unknown kind %u\n", c.name.c_str(), c.kind);
            exit(2);
    }
}

}  // namespace

// Compares one case's output with the twin's and prints the verdict line (and, when they
// differ, the first difference and the alternatives the output equals). True: equal.
bool compare(const Case & c, const std::vector<uint8_t> & got) {
    const std::vector<uint8_t> & want = c.expected.bytes;
    if (got.size() != want.size()) {
        printf("case %s: %zu bytes, the twin's %zu\n", c.name.c_str(), got.size(), want.size());
        return false;
    }
    // Compared as 32-bit words (f32 bits), or bytes for the quantizer's blocks.
    const size_t w = c.kind == QUANTIZE_Q8_1 ? 1 : 4;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i + w <= got.size(); i += w) {
        if (memcmp(&got[i], &want[i], w) != 0) {
            if (bad++ == 0) {
                first = i / w;
            }
        }
    }
    if (bad == 0) {
        printf("case %s: equal\n", c.name.c_str());
        return true;
    }
    if (w == 4) {
        uint32_t g32, w32;
        memcpy(&g32, &got[4 * first], 4);
        memcpy(&w32, &want[4 * first], 4);
        float gf, wf;
        memcpy(&gf, &g32, 4);
        memcpy(&wf, &w32, 4);
        printf("case %s: %zu of %zu values differ; first at %zu: device 0x%08x (%.9g), twin 0x%08x (%.9g)\n",
               c.name.c_str(), bad, got.size() / 4, first, g32, gf, w32, wf);
    } else {
        printf("case %s: %zu of %zu bytes differ; first at byte %zu: device 0x%02x, twin 0x%02x\n", c.name.c_str(),
               bad, got.size(), first, got[first], want[first]);
    }
    std::string same;
    for (const auto & [alt, blob] : c.alternatives) {
        if (blob.bytes == got) {
            same += same.empty() ? alt : "; " + alt;
        }
    }
    printf("  the device equals: %s\n", same.empty() ? "no alternative here" : same.c_str());
    return false;
}

// `--replay`: no device; each case's own twin output must compare equal, and its first
// alternative (where one differs from the twin) must compare unequal and be named.
int replay(const std::vector<Case> & cases) {
    int wrong = 0, checked = 0;
    for (const Case & c : cases) {
        checked++;
        if (!compare(c, c.expected.bytes)) {
            printf("replay: %s: the twin's own output was not equal\n", c.name.c_str());
            wrong++;
        }
        for (const auto & [alt, blob] : c.alternatives) {
            if (blob.bytes == c.expected.bytes) {
                continue;
            }
            if (compare(c, blob.bytes)) {
                printf("replay: %s: alternative %s compared equal\n", c.name.c_str(), alt.c_str());
                wrong++;
            }
            break;
        }
    }
    printf("replay: %d cases, %d wrong verdicts\n", checked, wrong);
    return wrong == 0 ? 0 : 1;
}

int main(int argc, char ** argv) {
    const bool replay_only = argc == 3 && strcmp(argv[1], "--replay") == 0;
    if (argc != 2 && !replay_only) {
        fprintf(stderr, "usage: %s [--replay] VECTORS\n", argv[0]);
        return 2;
    }
    const std::vector<Case> cases = read_cases(argv[argc - 1]);
    if (replay_only) {
        return replay(cases);
    }
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        printf("no CUDA device: %s\n", err != cudaSuccess ? cudaGetErrorString(err) : "none found");
        return 3;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    printf("device 0: %s, compute capability %d.%d, %d SMs; driver %d, runtime %d\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, driver, runtime);
    // Never freed: its destructor lives in ggml-cuda.cu, which is not linked.
    auto * cuda = new ggml_backend_cuda_context(0);

    std::map<std::string, std::pair<int, int>> tally;  // kind -> (equal, cases)
    int differ = 0;
    for (const Case & c : cases) {
        auto & t = tally[kind_name(c.kind)];
        t.second++;
        if (compare(c, run(*cuda, c))) {
            t.first++;
        } else {
            differ++;
        }
    }
    printf("summary\n");
    for (const auto & [kind, t] : tally) {
        printf("  %s: %d of %d cases equal\n", kind.c_str(), t.first, t.second);
    }
    return differ == 0 ? 0 : 1;
}
