// A standalone driver that runs tiercheck's device kernels (tiercheck_mmvq.hip) on
// the GPU of this machine against test vectors written by the Rust portable twins
// (`cargo run -p tiercheck-hip --example gpu_vectors -- FILE`), and reports, bit for
// bit:
//   - whether the device's q8_1 activations equal the twin's, per case;
//   - which of the twin's contraction variants (which multiply-adds fused) each MMVQ
//     output matches, and per weight type the variants that match every case.
// Builds with nvcc (NVIDIA: the wave32 kernels) or with hipcc (AMD):
//   nvcc  -O3 -arch=native -I kernels/hip/device -o gpu_check kernels/hip/device/gpu_check.cu
//   hipcc -O3 -x hip --offload-arch=<gfx> -I kernels/hip/device -o gpu_check kernels/hip/device/gpu_check.cu
// No fast-math flag: the q8_1 quantizer's divisions must be IEEE divisions.
// Exit status: 0 when every q8_1 case matched and every type matched at least one
// variant on every case; 1 otherwise; 2 on a usage, file or runtime error.

#include "tiercheck_mmvq.hip"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(TC_PLATFORM_HIP)
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuGetDeviceCount hipGetDeviceCount
#define TC_PLATFORM_NAME "HIP"
#else
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDeviceCount cudaGetDeviceCount
#define TC_PLATFORM_NAME "CUDA"
#endif

#define CK(call)                                                                          \
    do {                                                                                  \
        gpuError_t e_ = (call);                                                           \
        if (e_ != gpuSuccess) {                                                           \
            fprintf(stderr, "gpu_check: %s failed: %s\n", #call, gpuGetErrorString(e_)); \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

typedef void (*mmvq_fn)(const void*, const block_q8_1*, float*, int);

static mmvq_fn pick(unsigned type, unsigned nwarps) {
#define TC_PICK(T, NAME)                                    \
    if (type == T) {                                        \
        switch (nwarps) {                                   \
            case 1: return tc_mmvq_##NAME##_w32_n1;         \
            case 2: return tc_mmvq_##NAME##_w32_n2;         \
            case 4: return tc_mmvq_##NAME##_w32_n4;         \
            case 8: return tc_mmvq_##NAME##_w32_n8;         \
        }                                                   \
    }
    TC_PICK(0, q4_K)
    TC_PICK(1, q6_K)
    TC_PICK(2, q8_0)
    TC_PICK(3, q4_1)
    TC_PICK(4, q5_0)
    TC_PICK(5, q5_1)
    TC_PICK(6, q2_K)
    TC_PICK(7, q3_K)
    TC_PICK(8, q5_K)
    TC_PICK(9, iq4_nl)
    TC_PICK(10, iq4_xs)
#undef TC_PICK
    return nullptr;
}

// The type codes of the vectors file (examples/gpu_vectors.rs): names and values per block.
#define TC_NTYPES 11
static const char* const TYPE_NAMES[TC_NTYPES] = {"q4_K", "q6_K", "q8_0", "q4_1", "q5_0", "q5_1",
                                                  "q2_K", "q3_K", "q5_K", "iq4_nl", "iq4_xs"};
static const unsigned TYPE_QK[TC_NTYPES] = {256, 256, 32, 32, 32, 32, 256, 256, 256, 32, 256};

static const char* type_name(unsigned t) {
    return t < TC_NTYPES ? TYPE_NAMES[t] : "?";
}

struct Reader {
    std::vector<unsigned char> buf;
    size_t pos = 0;
    const char* path;
    const unsigned char* take(size_t n) {
        if (n > buf.size() - pos) {
            fprintf(stderr, "gpu_check: %s is truncated at byte %zu (wanted %zu more)\n", path,
                    pos, n);
            exit(2);
        }
        const unsigned char* p = buf.data() + pos;
        pos += n;
        return p;
    }
    unsigned u32() {
        unsigned v;
        memcpy(&v, take(4), 4);
        return v;
    }
};

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gpu_check VECTORS.bin\n");
        return 2;
    }
    Reader r;
    r.path = argv[1];
    FILE* f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "gpu_check: cannot open %s\n", argv[1]);
        return 2;
    }
    unsigned char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        r.buf.insert(r.buf.end(), chunk, chunk + n);
    }
    fclose(f);
    if (r.buf.size() < 8 || memcmp(r.take(8), "TCVEC001", 8) != 0) {
        fprintf(stderr, "gpu_check: %s is not a tiercheck vector file (TCVEC001)\n", argv[1]);
        return 2;
    }
    const unsigned ncases = r.u32();
    const unsigned nvar = r.u32();
    if (nvar == 0 || nvar > 64) {
        fprintf(stderr, "gpu_check: %s: %u variants (1..64 expected)\n", argv[1], nvar);
        return 2;
    }
    std::vector<std::string> names;
    for (unsigned v = 0; v < nvar; ++v) {
        const char* p = (const char*)r.take(32);
        names.push_back(std::string(p, strnlen(p, 32)));
    }

    int ndev = 0;
    gpuError_t e = gpuGetDeviceCount(&ndev);
    if (e != gpuSuccess || ndev == 0) {
        fprintf(stderr, "gpu_check: no %s device (%s)\n", TC_PLATFORM_NAME,
                e != gpuSuccess ? gpuGetErrorString(e) : "device count 0");
        return 2;
    }
    printf("gpu_check (%s): %u cases, %u contraction variants\n", TC_PLATFORM_NAME, ncases, nvar);
    unsigned q8_ok = 0;
    unsigned long long type_mask[TC_NTYPES];
    unsigned type_cases[TC_NTYPES] = {0};
    for (unsigned t = 0; t < TC_NTYPES; ++t) {
        type_mask[t] = ~0ull;
    }
    for (unsigned c = 0; c < ncases; ++c) {
        const unsigned type = r.u32(), k = r.u32(), rows = r.u32(), nwarps = r.u32();
        const unsigned wbytes = r.u32();
        mmvq_fn fn = pick(type, nwarps);
        if (!fn || k == 0 || k % TYPE_QK[type] != 0 || rows == 0) {
            fprintf(stderr, "gpu_check: case %u: bad header (type %u, k %u, rows %u, nwarps %u)\n",
                    c, type, k, rows, nwarps);
            return 2;
        }
        const unsigned nblocks = k / 32;
        const unsigned char* w = r.take(wbytes);
        const unsigned char* x = r.take((size_t)k * 4);
        const unsigned char* q8 = r.take((size_t)nblocks * sizeof(block_q8_1));
        const unsigned char* outs = r.take((size_t)nvar * rows * 4);

        void *dw, *dx, *dq, *dd;
        CK(gpuMalloc(&dw, wbytes));
        CK(gpuMalloc(&dx, (size_t)k * 4));
        CK(gpuMalloc(&dq, (size_t)nblocks * sizeof(block_q8_1)));
        CK(gpuMalloc(&dd, (size_t)rows * 4));
        CK(gpuMemcpy(dw, w, wbytes, gpuMemcpyHostToDevice));
        CK(gpuMemcpy(dx, x, (size_t)k * 4, gpuMemcpyHostToDevice));

        tc_quantize_q8_1<<<(nblocks * 32 + 255) / 256, 256>>>((const float*)dx, (block_q8_1*)dq,
                                                             (int)k, (int)nblocks);
        CK(gpuGetLastError());
        CK(gpuDeviceSynchronize());
        std::vector<unsigned char> q8_dev((size_t)nblocks * sizeof(block_q8_1));
        CK(gpuMemcpy(q8_dev.data(), dq, q8_dev.size(), gpuMemcpyDeviceToHost));
        long first_bad = -1;
        for (size_t i = 0; i < q8_dev.size(); ++i) {
            if (q8_dev[i] != q8[i]) {
                first_bad = (long)i;
                break;
            }
        }
        if (first_bad < 0) {
            ++q8_ok;
        }

        // The MMVQ kernel reads the twin's q8_1 blocks, so its check stands on its own.
        CK(gpuMemcpy(dq, q8, q8_dev.size(), gpuMemcpyHostToDevice));
        fn<<<rows, dim3(32, nwarps)>>>(dw, (const block_q8_1*)dq, (float*)dd,
                                      (int)(k / TYPE_QK[type]));
        CK(gpuGetLastError());
        CK(gpuDeviceSynchronize());
        std::vector<unsigned> y((size_t)rows);
        CK(gpuMemcpy(y.data(), dd, (size_t)rows * 4, gpuMemcpyDeviceToHost));
        CK(gpuFree(dw));
        CK(gpuFree(dx));
        CK(gpuFree(dq));
        CK(gpuFree(dd));

        unsigned long long mask = 0;
        for (unsigned v = 0; v < nvar; ++v) {
            bool all = true;
            for (unsigned j = 0; j < rows && all; ++j) {
                unsigned want;
                memcpy(&want, outs + ((size_t)v * rows + j) * 4, 4);
                all = y[j] == want;
            }
            if (all) {
                mask |= 1ull << v;
            }
        }
        type_mask[type] &= mask;
        ++type_cases[type];
        printf("case %3u %s k=%-5u rows=%-3u nwarps=%u: q8_1 %s", c, type_name(type), k, rows,
               nwarps, first_bad < 0 ? "equal" : "DIFFERS");
        if (first_bad >= 0) {
            printf(" (first at byte %ld, block %ld)", first_bad, first_bad / 36);
        }
        printf(", mmvq matches %d of %u variants\n", __builtin_popcountll(mask), nvar);
    }
    if (r.pos != r.buf.size()) {
        fprintf(stderr, "gpu_check: %s has %zu trailing bytes\n", argv[1], r.buf.size() - r.pos);
        return 2;
    }

    printf("\nsummary\n");
    printf("  q8_1 activations equal to the twin: %u / %u cases\n", q8_ok, ncases);
    bool ok = q8_ok == ncases;
    for (unsigned t = 0; t < TC_NTYPES; ++t) {
        if (type_cases[t] == 0) {
            continue;
        }
        printf("  %s mmvq, %u cases, variants matching every case:", type_name(t), type_cases[t]);
        if (type_mask[t] == 0) {
            printf(" NONE\n");
            ok = false;
            continue;
        }
        for (unsigned v = 0; v < nvar; ++v) {
            if (type_mask[t] & (1ull << v)) {
                printf(" [%s]", names[v].c_str());
            }
        }
        printf("\n");
    }
    printf("gpu_check: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
