// stdsort: the permutation libstdc++'s std::sort leaves, with ggml's argsort comparator
// (ggml-cpu's ggml_compute_forward_argsort_f32, descending: a before b when
// x[a] > x[b]), for tiercheck's check of its own copy of that sort
// (harness/model/src/moe.rs). Reads lines of whitespace-separated floats from stdin and
// writes, per line, the sorted indices separated by spaces.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::vector<float> x;
        float v;
        while (in >> v) {
            x.push_back(v);
        }
        std::vector<int> idx(x.size());
        for (size_t i = 0; i < idx.size(); i++) {
            idx[i] = (int)i;
        }
        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] > x[b]; });
        for (size_t i = 0; i < idx.size(); i++) {
            std::printf(i ? " %d" : "%d", idx[i]);
        }
        std::printf("\n");
    }
    return 0;
}
