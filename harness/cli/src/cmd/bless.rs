//! `tiercheck bless`: refresh the goldens of one lane or all lanes.

use anyhow::{bail, Result};
use clap::Args;

use tiercheck_core::Lane;
use tiercheck_golden::{self as golden, GoldenDir};
use tiercheck_lanes as lanes;

use crate::args::LaneParser;

/// `tiercheck bless`.
#[derive(Args, Clone, Debug)]
pub struct BlessArgs {
    /// Only this lane (default: every lane).
    #[arg(long, value_parser = LaneParser)]
    pub lane: Option<&'static Lane>,
    /// Only cases whose name contains this text.
    #[arg(long)]
    pub filter: Option<String>,
}

/// `tiercheck bless`.
pub fn run(a: BlessArgs) -> Result<()> {
    if !golden::bless::allowed() {
        bail!("refusing to refresh goldens under CI (the CI environment variable is set)");
    }
    let dir = GoldenDir::from_env();
    let inputs = dir.load_inputs()?;
    let selected: Vec<&'static Lane> = match a.lane {
        Some(lane) => vec![lane],
        None => lanes::all().to_vec(),
    };
    let filter = a.filter.as_deref();
    for lane in selected {
        let summary = golden::bless::bless_lane(&dir, lane, filter, &inputs)?;
        print!("{summary}");
        if filter.is_none() {
            print!("{}", golden::model::bless_lane(dir.root(), lane)?);
        }
    }
    Ok(())
}
