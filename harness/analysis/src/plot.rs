//! The per-layer divergence plot (SVG): relative L2 divergence per layer for chosen tap
//! kinds, free-running (solid) and layer-local (thin), over the floor band.

use plotters::prelude::*;

use crate::free_running::Divergence;
use crate::report::DeltaReport;
use crate::trace::tap_layer;

/// Values below this (bitwise-equal taps) are drawn at it.
const BOTTOM: f64 = 1e-10;

fn series(d: &Divergence, kind: &str, n_layer: usize) -> Vec<(f64, f64)> {
    (0..n_layer)
        .filter_map(|l| {
            let name = format!("{kind}-{l}");
            d.rows
                .iter()
                .find(|r| r.name == name)
                .map(|r| (l as f64, r.all.rel_l2.max(BOTTOM).log10()))
        })
        .collect()
}

/// Write the plot of `report` for the tap `kinds` to `path` (SVG).
pub fn write_svg(
    report: &DeltaReport,
    kinds: &[&str],
    n_layer: usize,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut all: Vec<f64> = Vec::new();
    type Line = (String, Vec<(f64, f64)>, bool);
    let mut lines: Vec<Line> = Vec::new();
    for kind in kinds {
        let s = series(&report.free, kind, n_layer);
        all.extend(s.iter().map(|p| p.1));
        lines.push((format!("{kind} free-running"), s, true));
        if let Some(ll) = &report.layer_local {
            let s = series(ll, kind, n_layer);
            all.extend(s.iter().map(|p| p.1));
            lines.push((format!("{kind} layer-local"), s, false));
        }
    }
    let band: Vec<(f64, f64, f64)> = match &report.floor {
        Some(f) => (0..n_layer)
            .filter_map(|l| {
                f.per_tap.get(&format!("{}-{l}", kinds[0])).map(|v| {
                    (l as f64, (v / 4.0).max(BOTTOM).log10(), (v * 4.0).max(BOTTOM).log10())
                })
            })
            .collect(),
        None => Vec::new(),
    };
    all.extend(band.iter().flat_map(|b| [b.1, b.2]));
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).min(-8.0).floor();
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(-2.0).ceil() + 0.5;
    let title = format!("relative L2 divergence per layer: {} vs {}", report.a, report.b);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3f64..(n_layer as f64 - 0.7), lo..hi)
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .x_desc("layer")
        .y_desc("||a-b|| / ||b||")
        .x_labels(n_layer)
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .y_label_formatter(&|y| format!("1e{}", y.round() as i64))
        .draw()
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    if !band.is_empty() {
        let mut poly: Vec<(f64, f64)> = band.iter().map(|b| (b.0, b.2)).collect();
        poly.extend(band.iter().rev().map(|b| (b.0, b.1)));
        chart
            .draw_series(std::iter::once(Polygon::new(
                poly,
                RGBColor(200, 200, 200).mix(0.5).filled(),
            )))
            .map_err(|e| anyhow::anyhow!("plot: {e}"))?
            .label(format!("floor band of {} (x1/4..x4)", kinds[0]))
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 16, y + 5)], RGBColor(200, 200, 200).filled())
            });
    }
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
    ];
    for (i, (label, pts, solid)) in lines.into_iter().enumerate() {
        let color = palette[(i / 2) % palette.len()];
        let style = if solid { color.stroke_width(3) } else { color.stroke_width(1) };
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|e| anyhow::anyhow!("plot: {e}"))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        chart
            .draw_series(
                pts.into_iter().map(|p| Circle::new(p, if solid { 4 } else { 2 }, color.filled())),
            )
            .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let _ = tap_layer;
    Ok(())
}
