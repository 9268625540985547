//! Writes the vectors file that `device/ggml_gpu_check.cu` (ggml's own CUDA kernels)
//! checks an NVIDIA GPU against: [`tiercheck_gpu_testkit::ggml_cases`].
//!
//! ```text
//! cargo run -p tiercheck-hip --example ggml_vectors -- OUT.bin
//! ```
//!
//! The file is written whole under a temporary name, then renamed.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out_path] = args.as_slice() else {
        eprintln!("usage: ggml_vectors OUT.bin");
        std::process::exit(2);
    };
    let file = tiercheck_gpu_testkit::ggml_cases::vectors();
    if let Err(e) = tiercheck_gpu_testkit::inputs::write_atomically(out_path, &file) {
        eprintln!("ggml_vectors: cannot write {out_path}: {e}");
        std::process::exit(1);
    }
    println!("ggml_vectors: {} bytes -> {out_path}", file.len());
}
