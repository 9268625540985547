//! Records the target triple this crate is built for (`TIERCHECK_TARGET`).

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=TIERCHECK_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
