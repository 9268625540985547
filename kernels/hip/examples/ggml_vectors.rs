//! Writes the vectors file that `device/ggml_gpu_check.cu` (ggml's own CUDA kernels)
//! checks an NVIDIA GPU against: [`tiercheck_hip::ggml_cases`].
//!
//! ```text
//! cargo run -p tiercheck-hip --example ggml_vectors -- OUT.bin
//! ```
//!
//! The file is written whole under a temporary name, then renamed.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out_path] = args.as_slice() else {
        eprintln!("usage: ggml_vectors OUT.bin");
        std::process::exit(2);
    };
    let file = tiercheck_hip::ggml_cases::vectors();
    let tmp = format!("{out_path}.tmp");
    let res = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&file))
        .and_then(|_| std::fs::rename(&tmp, out_path));
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("ggml_vectors: cannot write {out_path}: {e}");
        std::process::exit(1);
    }
    println!("ggml_vectors: {} bytes -> {out_path}", file.len());
}
