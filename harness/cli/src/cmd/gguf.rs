//! `tiercheck gguf`: inspect, dequantize and quantize GGUF files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use tiercheck_core::blocks;
use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_gguf::{GgufFile, MetaValue};
use tiercheck_lanes::provenance;
use tiercheck_model::model_quant::{quantize_file, Scheme, SCHEME_NAMES};

#[derive(Subcommand)]
pub enum GgufCommand {
    /// Print metadata and a tensor table (name, type, shape, bytes).
    Info {
        /// The GGUF file.
        file: PathBuf,
        /// Print arrays in full instead of their first few elements.
        #[arg(long)]
        full: bool,
    },
    /// Dequantize one tensor to f32 and write it as safetensors.
    Dequant {
        /// The GGUF file.
        file: PathBuf,
        /// Tensor name.
        tensor: String,
        /// Output safetensors file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Quantize a model's f32/f16/bf16 weights with the reference quantizers.
    Quantize {
        /// Input GGUF.
        input: PathBuf,
        /// Output GGUF (written atomically).
        output: PathBuf,
        /// llama.cpp's mixes q2_k, q3_k_m, q4_k_m, q5_k_m, iq4_xs; one type for every weight:
        /// q4_0, q4_1, q5_0, q5_1, q8_0, q3_k, q4_k, q5_k, q6_k, iq4_nl, or uniform:TYPE.
        #[arg(long = "type")]
        scheme: String,
    },
}

/// `tiercheck gguf ...`.
pub fn run(command: GgufCommand) -> Result<()> {
    match command {
        GgufCommand::Info { file, full } => cmd_info(&file, full),
        GgufCommand::Dequant { file, tensor, out } => cmd_dequant(&file, &tensor, &out),
        GgufCommand::Quantize { input, output, scheme } => cmd_quantize(&input, &output, &scheme),
    }
}

fn cmd_info(path: &Path, full: bool) -> Result<()> {
    let f = GgufFile::open(path)?;
    println!("file: {}", path.display());
    println!(
        "version: {}  alignment: {}  data offset: {}",
        f.version(),
        f.alignment(),
        f.data_offset()
    );
    println!("metadata ({} keys):", f.metadata().len());
    for (k, v) in f.metadata() {
        println!("  {k} = {}", show(v, if full { usize::MAX } else { 8 }));
    }
    println!("tensors ({}):", f.tensors().len());
    println!("  {:<40} {:<8} {:<24} {:>14}", "name", "type", "shape (ne0 first)", "bytes");
    let mut total = 0u64;
    for t in f.tensors() {
        let shape: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        println!(
            "  {:<40} {:<8} {:<24} {:>14}",
            t.name,
            t.ty.name(),
            format!("[{}]", shape.join(", ")),
            t.n_bytes
        );
        total += t.n_bytes;
    }
    println!("  total tensor bytes: {total}");
    Ok(())
}

fn cmd_dequant(path: &Path, name: &str, out: &Path) -> Result<()> {
    let f = GgufFile::open(path)?;
    let t =
        f.tensor(name).with_context(|| format!("{}: no tensor named '{name}'", path.display()))?;
    let n = usize::try_from(t.n_elements()).context("tensor too large for this machine")?;
    let mut values = vec![0.0f32; n];
    blocks::dequantize(t.ty, f.tensor_data(t), &mut values)
        .with_context(|| format!("{}: tensor '{name}'", path.display()))?;
    // safetensors shapes are outermost first: reverse ggml's ne order.
    let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
    let mut meta = provenance::base();
    meta.insert("source".into(), path.display().to_string());
    meta.insert("source_tensor".into(), name.to_string());
    meta.insert("source_type".into(), t.ty.name().to_string());
    tensorfile::write(out, &[Tensor { name: name.to_string(), shape, data: values }], &meta)?;
    eprintln!("wrote {} ({} values of {name}, from {})", out.display(), n, t.ty.name());
    Ok(())
}

fn cmd_quantize(input: &Path, output: &Path, scheme: &str) -> Result<()> {
    let Some(scheme) = Scheme::parse(scheme) else {
        bail!("unknown --type '{scheme}'; expected {SCHEME_NAMES}");
    };
    if input == output {
        bail!("output must differ from input ({})", input.display());
    }
    let f = GgufFile::open(input)?;
    let plans = quantize_file(&f, output, scheme)?;
    for p in &plans {
        let change =
            if p.from == p.to { "kept".to_string() } else { format!("{} -> {}", p.from, p.to) };
        println!("  {:<40} {:<16} {}", p.name, change, p.reason);
    }
    let n = plans.iter().filter(|p| p.from != p.to).count();
    eprintln!("wrote {} ({n} tensors quantized, {} kept)", output.display(), plans.len() - n);
    Ok(())
}

/// A metadata value for people: strings quoted, arrays as `[a, b, ... (N items)]`.
fn show(v: &MetaValue, max_items: usize) -> String {
    match v {
        MetaValue::String(s) => format!("{s:?}"),
        MetaValue::Array(a) => {
            let mut parts: Vec<String> =
                a.iter().take(max_items).map(|x| show(&x, max_items)).collect();
            if a.len() > max_items {
                parts.push(format!("... ({} items of {})", a.len(), a.elem_type().name()));
            }
            format!("[{}]", parts.join(", "))
        }
        MetaValue::U8(x) => x.to_string(),
        MetaValue::I8(x) => x.to_string(),
        MetaValue::U16(x) => x.to_string(),
        MetaValue::I16(x) => x.to_string(),
        MetaValue::U32(x) => x.to_string(),
        MetaValue::I32(x) => x.to_string(),
        MetaValue::U64(x) => x.to_string(),
        MetaValue::I64(x) => x.to_string(),
        MetaValue::F32(x) => x.to_string(),
        MetaValue::F64(x) => x.to_string(),
        MetaValue::Bool(x) => x.to_string(),
    }
}
