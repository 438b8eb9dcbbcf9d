//! Figures as SVG (plotters' SVG backend: no system fonts or libraries needed): IOPS vs queue
//! depth, p99 per class vs queue depth, and the latency CDF per class at the deepest queue.

use crate::engine::group_name;
use crate::experiment::Experiment;
use crate::report::Report;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

type Series = (String, Vec<(f64, f64)>);

/// Draws lines (with markers unless `log_x`); with `log_x` the x axis is logarithmic (values below 1 µs in ms
/// are clamped), labelled in the original unit.
fn chart(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    log_x: bool,
    series: &[Series],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let fx = |x: f64| if log_x { x.max(1e-3).log10() } else { x };
    let series: Vec<Series> = series
        .iter()
        .map(|(n, pts)| (n.clone(), pts.iter().map(|(x, y)| (fx(*x), *y)).collect()))
        .collect();
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 1.0f64);
    for (_, pts) in &series {
        for (x, y) in pts {
            x_min = x_min.min(*x);
            x_max = x_max.max(*x);
            y_max = y_max.max(*y);
        }
    }
    if !log_x || !x_min.is_finite() {
        x_min = 0.0;
    }
    if !x_max.is_finite() || x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let x_label = |x: &f64| {
        let v = if log_x { 10f64.powf(*x) } else { *x };
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_owned()
        }
    };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_min..x_max + (x_max - x_min) * 0.05, 0f64..y_max * 1.1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        // Markers on the sweep figures (few points); a CDF is a dense line.
        if !log_x {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// Keeps a CDF's shape with a few hundred points: a point per 0.2 % of commands, and every
/// point of the last 0.1 % (the tail the figure is for).
fn thin(cdf: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (x, y) in cdf {
        if !matches!(out.last(), Some((_, last)) if y - last < 0.002 && y <= 0.999) {
            out.push((x, y));
        }
    }
    out
}

/// Writes `<id>-iops.svg`, `<id>-p99.svg` and `<id>-cdf.svg` into `dir`; returns their paths.
pub fn write(dir: &Path, exp: &Experiment, report: &Report) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut iops: Vec<Series> = Vec::new();
    let mut p99: Vec<Series> = Vec::new();
    let mut cdf: Vec<Series> = Vec::new();
    for (v, variant) in exp.variants.iter().enumerate() {
        let points: Vec<_> = report
            .points
            .iter()
            .filter(|p| p.variant == variant.name)
            .collect();
        iops.push((
            variant.name.clone(),
            points
                .iter()
                .map(|p| (f64::from(p.qd), p.total.iops))
                .collect(),
        ));
        let deepest = report
            .results
            .iter()
            .filter(|(p, _)| p.variant == v)
            .max_by_key(|(p, _)| p.qd);
        let mut names: Vec<&String> = points.iter().flat_map(|p| p.classes.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| p.classes.get(name).map(|s| (f64::from(p.qd), s.lat_ms.p99)))
                .collect();
            p99.push((format!("{} {name}", variant.name), line));
        }
        if let Some((p, r)) = deepest {
            for (g, stats) in r.used_groups() {
                cdf.push((
                    format!("{} {} (QD {})", variant.name, group_name(g), p.qd),
                    thin(stats.cdf()),
                ));
            }
        }
    }
    let files = [
        (
            "iops",
            "IOPS vs queue depth",
            ("queue depth", "IOPS"),
            false,
            iops,
        ),
        (
            "p99",
            "p99 latency per class vs queue depth",
            ("queue depth", "p99 latency (ms)"),
            false,
            p99,
        ),
        (
            "cdf",
            "latency CDF per class at the deepest queue",
            ("latency (ms, log scale)", "fraction of commands"),
            true,
            cdf,
        ),
    ];
    let mut written = Vec::new();
    for (suffix, title, axes, log_x, series) in files {
        let path = dir.join(format!("{}-{suffix}.svg", exp.id));
        chart(&path, &format!("{}: {title}", exp.id), axes, log_x, &series)?;
        written.push(path);
    }
    Ok(written)
}
