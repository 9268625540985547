//! `tiercheck matmul`: replay one matmul on a lane, activations from safetensors, weights
//! from a GGUF.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use tiercheck_core::{Lane, WeightMatrix};
use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_gguf::GgufFile;
use tiercheck_lanes::{self as lanes, provenance, Impl};

use crate::args::LaneParser;

/// `tiercheck matmul`.
#[derive(Args, Clone, Debug)]
pub struct MatmulArgs {
    /// Lane name (see `tiercheck lanes`).
    #[arg(long, value_parser = LaneParser)]
    pub lane: &'static Lane,
    /// Which implementation to run.
    #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
    pub imp: Impl,
    /// GGUF file holding the weight.
    #[arg(long)]
    pub gguf: PathBuf,
    /// Weight tensor name (2-D: n rows of k values).
    #[arg(long)]
    pub tensor: String,
    /// safetensors file with one f32 tensor [m, k] (or [k]).
    #[arg(long)]
    pub input: PathBuf,
    /// Output safetensors file, one f32 tensor "output" [m, n].
    #[arg(long)]
    pub out: PathBuf,
    /// Threads (work split by output columns only: never changes a bit).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Threads the tier ran the matmul with (llama.cpp's `-t`): the i8mm builds' 2x2
    /// tiles follow ggml's chunk plan for that many threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tier_threads: u32,
    /// The tier's ggml ran NUMA-aware (llama.cpp's `--numa` on a host with several NUMA
    /// nodes): its chunk plan then always chunks by thread.
    #[arg(long)]
    pub tier_numa: bool,
}

/// `tiercheck matmul`.
pub fn run(a: MatmulArgs) -> Result<()> {
    cmd_matmul(
        a.lane,
        a.imp,
        &a.gguf,
        &a.tensor,
        &a.input,
        &a.out,
        a.threads,
        tiercheck_core::lane::TierPool { threads: a.tier_threads as usize, numa: a.tier_numa },
    )
}

#[allow(clippy::too_many_arguments)]
fn cmd_matmul(
    lane: &'static Lane,
    imp: Impl,
    gguf: &Path,
    tensor: &str,
    input: &Path,
    out: &Path,
    threads: usize,
    tier: tiercheck_core::lane::TierPool,
) -> Result<()> {
    let chosen = lanes::choose(lane, imp).map_err(anyhow::Error::msg)?;
    let f = GgufFile::open(gguf)?;
    let t = f
        .tensor(tensor)
        .with_context(|| format!("{}: no tensor named '{tensor}'", gguf.display()))?;
    if t.dims.len() != 2 {
        bail!(
            "{}: tensor '{tensor}' has {} dimensions; matmul needs a 2-D weight",
            gguf.display(),
            t.dims.len()
        );
    }
    if chosen.kernels.act_rule(t.ty).is_err() {
        let types = crate::cmd::lanes::weight_types(lane);
        let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
        bail!(
            "{}: tensor '{tensor}' is {}; lane {} multiplies {} weights (`ref` multiplies every \
             quantizable type)",
            gguf.display(),
            t.ty.name(),
            lane.name,
            names.join(", ")
        );
    }
    let (k, n) = (t.dims[0] as usize, t.dims[1] as usize);
    let w = WeightMatrix::new(t.ty, n, k, f.tensor_data(t))
        .with_context(|| format!("{}: tensor '{tensor}'", gguf.display()))?;
    let (x, m, xk) = tensorfile::read_matrix(input)?;
    if xk != k {
        bail!(
            "{}: input has {xk} columns but weight '{tensor}' has rows of {k} values",
            input.display()
        );
    }
    if m == 0 {
        bail!("{}: input has no rows", input.display());
    }
    eprintln!(
        "lane {} ({}): {} x [{m}, {k}] -> [{m}, {n}] ({})",
        lane.name,
        chosen.impl_name(),
        t.ty.name(),
        if m == 1 { "gemv" } else { "gemm" }
    );
    let prepared = chosen.kernels.prepare(w, tiercheck_core::repack::Target::Cpu)?;
    let layout = match &prepared {
        tiercheck_core::repack::Prepared::Plain(_) => "plain".to_string(),
        tiercheck_core::repack::Prepared::Repacked(r) => r.layout().name().to_string(),
    };
    let y = tiercheck_core::lane::parallel::matmul_parallel(
        chosen.kernels,
        &prepared,
        &x.data,
        m,
        threads,
        tier,
    )?;
    let mut meta = provenance::base();
    meta.insert("lane".into(), lane.name.to_string());
    meta.insert("impl".into(), chosen.impl_name().to_string());
    meta.insert("weight_file".into(), gguf.display().to_string());
    meta.insert("weight_tensor".into(), tensor.to_string());
    meta.insert("weight_type".into(), t.ty.name().to_string());
    meta.insert("input_file".into(), input.display().to_string());
    meta.insert("path".into(), if m == 1 { "gemv" } else { "gemm" }.to_string());
    meta.insert("weight_layout".into(), layout);
    meta.insert("threads".into(), threads.to_string());
    meta.insert("tier_threads".into(), tier.threads.to_string());
    meta.insert("tier_numa".into(), if tier.numa { "on" } else { "off" }.into());
    tensorfile::write(out, &[Tensor { name: "output".into(), shape: vec![m, n], data: y }], &meta)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
