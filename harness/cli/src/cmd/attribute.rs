//! `tiercheck attribute`: which recipe components account for the divergence of one
//! lane from another.

use anyhow::Result;
use clap::Args;

use tiercheck_analysis as analysis;
use tiercheck_core::Lane;

use crate::args::{LaneParser, Setup};

/// `tiercheck attribute`.
#[derive(Args, Clone, Debug)]
pub struct AttributeArgs {
    /// Lane A (moved toward B one component at a time).
    #[arg(value_parser = LaneParser)]
    pub a: &'static Lane,
    /// Lane B.
    #[arg(value_parser = LaneParser)]
    pub b: &'static Lane,
    #[command(flatten)]
    pub setup: Setup,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `tiercheck attribute`.
pub fn run(a: AttributeArgs) -> Result<()> {
    let model = a.setup.model()?;
    let (ids, steps) = a.setup.prompt(&model)?;
    let attn = a.setup.attention();
    let mode = a.setup.mode();
    let Setup { residual, n_ctx, .. } = a.setup;
    let r =
        analysis::attribute::attribute(&model, a.a, a.b, &ids, steps, mode, residual, n_ctx, attn)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", analysis::attribute::render(&r));
    }
    Ok(())
}
