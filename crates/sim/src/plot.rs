//! Figures as SVG (plotters' SVG backend: no system fonts or libraries needed): IOPS vs queue
//! depth, p99 per class vs queue depth, and the latency CDF per class at the deepest queue; for
//! an erasure-coded array, also the user reads' p99.9 and p99.99 vs queue depth.
//!
//! Every series has its own colour, marker and dash pattern, so lines that cross or overlap
//! stay apart in print and for colour-blind readers. Series whose points coincide (B5's
//! real-time and deadline-admission variants are the same numbers) are kept visible by the
//! legend, which names the twin ("= other" for equal data, "≈ other" within half a percent of
//! the axis), and by how the later twin is drawn: its line after the others, with wide gaps
//! that let its twin show through, and its larger hollow marker under the twin's. No offset:
//! a figure never moves a point off its value.

pub mod tradeoff;

use crate::engine::group_name;
use crate::experiment::Experiment;
use crate::report::{Report, Run};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::{Path, PathBuf};

type Series = (String, Vec<(f64, f64)>);
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

const WIDTH: u32 = 900;
const TITLE_H: u32 = 58;
const CHART_H: u32 = 500;
const LEGEND_ROW: i32 = 20;

/// Okabe and Ito's colour-blind-safe palette, without its yellow (unreadable on white).
const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
}
const MARKERS: [Marker; 5] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
    Marker::Cross,
];

/// A line pattern: pixels drawn and skipped (`None`: solid).
type Dash = Option<(i32, i32)>;
const DASHES: [Dash; 3] = [None, Some((10, 5)), Some((2, 4))];
/// A twin's pattern: half gaps, so the series under it shows.
const TWIN_DASH: Dash = Some((6, 6));

/// How one series is drawn, and what its legend entry says.
#[derive(Clone, Debug, PartialEq)]
struct Style {
    label: String,
    color: RGBColor,
    marker: Marker,
    marker_size: i32,
    dash: Dash,
    /// Drawn after the series it coincides with.
    twin: bool,
}

/// Whether `b` would hide `a` (or the reverse): the same x values, and y values equal or
/// within half a percent of the axis height. `Some(true)` when the data are equal.
fn coincide(a: &[(f64, f64)], b: &[(f64, f64)], y_span: f64) -> Option<bool> {
    if a.len() != b.len() || a.iter().zip(b).any(|(p, q)| p.0 != q.0) {
        return None;
    }
    let far = a
        .iter()
        .zip(b)
        .map(|(p, q)| (p.1 - q.1).abs())
        .fold(0.0, f64::max);
    if far == 0.0 {
        Some(true)
    } else if far <= y_span * 0.005 {
        Some(false)
    } else {
        None
    }
}

/// Series `i` cycles colour (7), marker (5) and dash (3) independently, so no two of the
/// first 105 series look alike; a series that coincides with an earlier one is that one's twin.
fn styles(series: &[Series], y_span: f64) -> Vec<Style> {
    series
        .iter()
        .enumerate()
        .map(|(i, (name, pts))| {
            // An equal series if there is one, else the first that is as good as equal.
            let earlier = || {
                series[..i]
                    .iter()
                    .filter_map(|(other, o)| Some((other, coincide(o, pts, y_span)?)))
            };
            let twin = earlier()
                .find(|(_, equal)| *equal)
                .or_else(|| earlier().next());
            let label = match twin {
                Some((other, true)) => format!("{name} = {other}"),
                Some((other, false)) => format!("{name} ≈ {other}"),
                None => name.clone(),
            };
            Style {
                label,
                color: COLORS[i % COLORS.len()],
                marker: MARKERS[i % MARKERS.len()],
                marker_size: if twin.is_some() { 8 } else { 5 },
                dash: if twin.is_some() {
                    TWIN_DASH
                } else {
                    DASHES[i % DASHES.len()]
                },
                twin: twin.is_some(),
            }
        })
        .collect()
}

/// A linear axis with ticks chosen here: plotters' own choice on a log10 scale gives 31.623.
struct Axis {
    range: (f64, f64),
    labelled: Vec<f64>,
    light: Vec<f64>,
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, (from, to): (i32, i32)) -> i32 {
        let (a, b) = self.range;
        let t = if b > a { (v - a) / (b - a) } else { 0.5 };
        from + (t * f64::from(to - from)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.labelled.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.0..self.range.1
    }
}

/// d × 10^k, computed so that it prints as written (0.3, not 0.30000000000000004).
fn round_value(d: u32, k: i32) -> f64 {
    if k >= 0 {
        f64::from(d) * 10f64.powi(k)
    } else {
        f64::from(d) / 10f64.powi(-k)
    }
}

/// `v` as the round number it is near: one significant digit.
fn round_label(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return "0".to_owned();
    }
    let mut k = (v.log10() + 1e-9).floor() as i32;
    let mut d = (v / 10f64.powi(k)).round() as u32;
    if d >= 10 {
        d = 1;
        k += 1;
    }
    let r = round_value(d.max(1), k);
    if k >= 0 {
        format!("{r:.0}")
    } else {
        format!("{r:.*}", (-k) as usize)
    }
}

/// A log axis over [min, max]: the range snapped out to 1, 2 or 5 × 10^k, the labelled ticks
/// (powers of ten and the two ends; 1, 2 and 5 × 10^k when fewer than three powers of ten
/// fit) and unlabelled mesh lines at the other d × 10^k. Every tick is d × 10^k.
fn log_ticks(min: f64, max: f64) -> ((f64, f64), Vec<f64>, Vec<f64>) {
    let min = min.max(1e-3);
    let max = max.max(min);
    let grid = |k: i32| [1, 2, 5].map(move |d| round_value(d, k));
    let k_lo = min.log10().floor() as i32 - 1;
    let k_hi = max.log10().ceil() as i32 + 1;
    let lo = (k_lo..=k_hi)
        .flat_map(grid)
        .filter(|v| *v <= min * (1.0 + 1e-9))
        .fold(round_value(1, k_lo), f64::max);
    let hi = (k_lo..=k_hi)
        .flat_map(grid)
        .find(|v| *v >= max * (1.0 - 1e-9) && *v > lo)
        .unwrap_or(round_value(1, k_hi));
    let all: Vec<(u32, f64)> = (k_lo..=k_hi)
        .flat_map(|k| (1..=9).map(move |d| (d, round_value(d, k))))
        .filter(|(_, v)| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9))
        .collect();
    let decades = all.iter().filter(|(d, _)| *d == 1).count();
    let (labelled, light): (Vec<_>, Vec<_>) = all.iter().partition(|(d, v)| {
        *d == 1 || (decades < 3 && (*d == 2 || *d == 5)) || *v == lo || *v == hi
    });
    let values = |t: Vec<&(u32, f64)>| t.into_iter().map(|(_, v)| *v).collect();
    ((lo, hi), values(labelled), values(light))
}

/// A linear axis from 0 over `max`: ticks every 1, 2 or 5 × 10^k (at most nine of them), the
/// axis end just past the tick at or above `max`, and the decimals a label needs.
fn linear_ticks(max: f64) -> (f64, Vec<f64>, usize) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 8.0;
    let k = raw.log10().floor() as i32;
    let step = [1, 2, 5, 10]
        .map(|d| round_value(d, k))
        .into_iter()
        .find(|s| *s >= raw)
        .unwrap_or(round_value(1, k + 1));
    let n = (max / step - 1e-9).ceil().max(1.0) as u32;
    let ticks = (0..=n).map(|i| f64::from(i) * step).collect();
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    (f64::from(n) * step * 1.03, ticks, decimals)
}

/// Whether the experiment is a file without variants (run as one called "default"): then
/// neither titles nor series name a variant.
fn implicit_variant(exp: &Experiment) -> bool {
    exp.variants_in_file == 1 && exp.variants.iter().all(|v| v.name == "default")
}

/// A figure's heading: what it shows, for which experiment (and which variants when it holds
/// one or a subset), and where the numbers come from.
fn headings(exp: &Experiment, report: &Report, what: &str) -> (String, String) {
    let names: Vec<&str> = exp.variants.iter().map(|v| v.name.as_str()).collect();
    let subset = exp.variants.len() < exp.variants_in_file;
    let single = names.len() == 1 && !implicit_variant(exp);
    let title = if subset || single {
        format!("{} ({}): {what}", exp.id, names.join(", "))
    } else {
        format!("{}: {what}", exp.id)
    };
    let source = match report.run {
        Run::Sim(_) => format!("stint sim, seed {}", report.seed),
        Run::Bench(_) => "stint bench, in real time".to_owned(),
    };
    (title, format!("{} — {source}", exp.title))
}

fn draw_marker(
    area: &Area,
    (x, y): (i32, i32),
    marker: Marker,
    s: i32,
    color: RGBColor,
) -> Result<(), String> {
    let style = color.stroke_width(2);
    let path = |pts: &[(i32, i32)]| {
        PathElement::new(
            pts.iter()
                .map(|(dx, dy)| (x + dx, y + dy))
                .collect::<Vec<_>>(),
            style,
        )
    };
    let t = s * 4 / 5;
    match marker {
        Marker::Circle => area.draw(&Circle::new((x, y), s, style)),
        Marker::Square => area.draw(&path(&[(-t, -t), (t, -t), (t, t), (-t, t), (-t, -t)])),
        Marker::Triangle => area.draw(&path(&[(0, -s), (s, t), (-s, t), (0, -s)])),
        Marker::Diamond => area.draw(&path(&[(0, -s), (s, 0), (0, s), (-s, 0), (0, -s)])),
        Marker::Cross => area
            .draw(&path(&[(-t, -t), (t, t)]))
            .and_then(|()| area.draw(&path(&[(-t, t), (t, -t)]))),
    }
    .map_err(|e| e.to_string())
}

fn draw_line(area: &Area, pts: Vec<(i32, i32)>, dash: Dash, color: RGBColor) -> Result<(), String> {
    let style = color.stroke_width(2);
    match dash {
        None => area.draw(&PathElement::new(pts, style)),
        Some((on, off)) => area.draw(&DashedPathElement::new(pts, on, off, style)),
    }
    .map_err(|e| e.to_string())
}

/// Where a series carries markers: every point of a sweep; on a CDF (hundreds of points)
/// five, at fractions staggered per series so that coinciding curves show both.
fn marker_points(i: usize, pts: &[(f64, f64)], dense: bool) -> Vec<(f64, f64)> {
    if !dense {
        return pts.to_vec();
    }
    let phase = (0.5 + i as f64 * 0.618).fract();
    (0..5)
        .filter_map(|j| {
            let q = (f64::from(j) + phase) / 5.0;
            pts.iter().find(|p| p.1 >= q).copied()
        })
        .collect()
}

/// A figure's drawing areas: the whole (for lines drawn over the chart), the chart of
/// `chart_h` pixels below the headings, and the legend of `legend_rows` rows below it.
pub(crate) fn canvas<'a>(
    path: &'a Path,
    (title, subtitle): (&str, &str),
    chart_h: u32,
    legend_rows: i32,
) -> Result<(Area<'a>, Area<'a>, Area<'a>), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let legend_h = (legend_rows * LEGEND_ROW + 16) as u32;
    let root = SVGBackend::new(path, (WIDTH, TITLE_H + chart_h + legend_h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (head, rest) = root.split_vertically(TITLE_H);
    let (plot_area, legend) = rest.split_vertically(chart_h);
    let centre = Pos::new(HPos::Center, VPos::Top);
    let half = (WIDTH / 2) as i32;
    let grey = RGBColor(80, 80, 80);
    head.draw_text(
        title,
        &TextStyle::from(("sans-serif", 22).into_font()).pos(centre),
        (half, 8),
    )
    .and_then(|()| {
        head.draw_text(
            subtitle,
            &TextStyle::from(("sans-serif", 14).into_font())
                .color(&grey)
                .pos(centre),
            (half, 36),
        )
    })
    .map_err(|e| err(&e))?;
    Ok((root, plot_area, legend))
}

/// One figure: headings, the chart, and the legend below it (never over the data). With
/// `log_x` the x axis is logarithmic (values below 1 µs in ms are clamped), labelled in ms.
fn chart(
    path: &Path,
    (title, subtitle): (&str, &str),
    (x_desc, y_desc): (&str, &str),
    log_x: bool,
    series: &[Series],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let fx = |x: f64| if log_x { x.max(1e-3).log10() } else { x };
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in series.iter().flat_map(|(_, pts)| pts) {
        x_min = x_min.min(*x);
        x_max = x_max.max(*x);
        y_max = y_max.max(*y);
    }
    let (y_end, y_ticks, y_decimals) = linear_ticks(y_max);
    let styles = styles(series, y_end);
    let (x_range, x_bold, x_light, x_decimals) = if log_x {
        let lo = if x_min.is_finite() { x_min } else { 1.0 };
        let hi = if x_max.is_finite() { x_max } else { lo };
        let ((lo, hi), bold, light) = log_ticks(lo, hi);
        let log = |v: Vec<f64>| v.into_iter().map(f64::log10).collect::<Vec<_>>();
        ((lo.log10(), hi.log10()), log(bold), log(light), 0)
    } else {
        let (end, ticks, decimals) = linear_ticks(x_max);
        ((0.0, end), ticks, Vec::new(), decimals)
    };
    let x_label = |x: &f64| {
        if log_x {
            round_label(10f64.powf(*x))
        } else {
            format!("{x:.x_decimals$}")
        }
    };
    let y_label = |y: &f64| format!("{y:.y_decimals$}");

    let wide = styles
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0)
        > 60;
    let columns = if wide { 1 } else { 2 };
    let rows = styles.len().div_ceil(columns) as i32;
    let (root, plot_area, legend) = canvas(path, (title, subtitle), CHART_H, rows)?;

    let mut chart = ChartBuilder::on(&plot_area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            Axis {
                range: x_range,
                labelled: x_bold,
                light: x_light,
            },
            Axis {
                range: (0.0, y_end),
                labelled: y_ticks,
                light: Vec::new(),
            },
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()
        .map_err(|e| err(&e))?;

    let pixels: Vec<Vec<(i32, i32)>> = series
        .iter()
        .map(|(_, pts)| {
            pts.iter()
                .map(|(x, y)| chart.backend_coord(&(fx(*x), *y)))
                .collect()
        })
        .collect();
    // Twins last: their gaps show the series they coincide with.
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_by_key(|i| styles[*i].twin);
    for &i in &order {
        let s = &styles[i];
        draw_line(&root, pixels[i].clone(), s.dash, s.color).map_err(|e| err(&e))?;
    }
    // Markers the other way round: a twin's larger marker under its twin's smaller one.
    for &i in order.iter().rev() {
        let s = &styles[i];
        for (x, y) in marker_points(i, &series[i].1, log_x) {
            let at = chart.backend_coord(&(fx(x), y));
            draw_marker(&root, at, s.marker, s.marker_size, s.color).map_err(|e| err(&e))?;
        }
    }

    let column_w = (WIDTH as i32 - 40) / columns as i32;
    let font =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (n, s) in styles.iter().enumerate() {
        let x = 20 + (n % columns) as i32 * column_w;
        let y = 8 + (n / columns) as i32 * LEGEND_ROW + LEGEND_ROW / 2;
        draw_line(&legend, vec![(x, y), (x + 40, y)], s.dash, s.color)
            .and_then(|()| draw_marker(&legend, (x + 20, y), s.marker, s.marker_size, s.color))
            .map_err(|e| err(&e))?;
        legend
            .draw_text(&s.label, &font, (x + 50, y))
            .map_err(|e| err(&e))?;
    }
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

/// The user reads' p99.9 and p99.99 per variant vs queue depth, each point only where at least
/// MIN_SAMPLES_BEYOND samples lie beyond it (an erasure-coded array's figure).
fn tails(exp: &Experiment, report: &Report) -> Vec<Series> {
    let mut out = Vec::new();
    for variant in &exp.variants {
        for (name, pick) in [("p99.9", 3), ("p99.99", 4)] {
            let line: Vec<(f64, f64)> = report
                .points
                .iter()
                .filter(|p| p.variant == variant.name)
                .filter_map(|p| {
                    let beyond = p.total.samples_beyond.counts()[pick];
                    (beyond >= workload::MIN_SAMPLES_BEYOND)
                        .then(|| (f64::from(p.qd), p.total.lat_ms.percentiles()[pick]))
                })
                .collect();
            if !line.is_empty() {
                out.push((format!("{} {name}", variant.name), line));
            }
        }
    }
    out
}

/// Writes `<id>-iops.svg`, `<id>-p99.svg` and `<id>-cdf.svg` into `dir` (and `<id>-tail.svg`
/// for an erasure-coded array); returns their paths.
pub fn write(dir: &Path, exp: &Experiment, report: &Report) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut iops: Vec<Series> = Vec::new();
    let mut p99: Vec<Series> = Vec::new();
    let mut cdf: Vec<Series> = Vec::new();
    let implicit = implicit_variant(exp);
    for (v, variant) in exp.variants.iter().enumerate() {
        let prefix = if implicit {
            String::new()
        } else {
            format!("{} ", variant.name)
        };
        let points: Vec<_> = report
            .points
            .iter()
            .filter(|p| p.variant == variant.name)
            .collect();
        iops.push((
            if implicit {
                "all commands".to_owned()
            } else {
                variant.name.clone()
            },
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
            p99.push((format!("{prefix}{name}"), line));
        }
        if let Some((p, r)) = deepest {
            for (g, stats) in r.used_groups() {
                cdf.push((
                    format!("{prefix}{} (QD {})", group_name(g), p.qd),
                    thin(stats.cdf()),
                ));
            }
        }
    }
    let tail = exp
        .variants
        .iter()
        .any(|v| v.erasure.is_some())
        .then(|| tails(exp, report));
    let files = [
        (
            "iops",
            "IOPS vs queue depth",
            ("queue depth", "IOPS (all completions)"),
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
    ]
    .into_iter()
    .chain(tail.map(|series| {
        (
            "tail",
            "user-read p99.9 and p99.99 vs queue depth",
            ("queue depth", "user-read latency (ms)"),
            false,
            series,
        )
    }));
    let mut written = Vec::new();
    for (suffix, what, axes, log_x, series) in files {
        let path = dir.join(format!("{}-{suffix}.svg", exp.id));
        let (title, subtitle) = headings(exp, report, what);
        chart(&path, (&title, &subtitle), axes, log_x, &series)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label is d × 10^k: one digit 1–9, the rest zeros, a decimal point allowed.
    fn is_round(label: &str) -> bool {
        let digits: String = label.chars().filter(|c| *c != '.').collect();
        let digits = digits.trim_start_matches('0');
        label.chars().filter(|c| *c == '.').count() <= 1
            && digits.starts_with(|c: char| ('1'..='9').contains(&c))
            && digits[1..].chars().all(|c| c == '0')
    }

    #[test]
    fn log_axis_ticks_are_round_numbers() {
        // B5's CDF (2 ms .. 1.5 s), flash (20 µs .. 3 ms), a narrow range, one value.
        for (min, max) in [
            (2.31, 1496.9),
            (0.021, 3.3),
            (23.0, 58.0),
            (4.86, 61.0),
            (0.0004, 0.0004),
            (7.0, 7.0),
            (1.0, 1000.0),
        ] {
            let ((lo, hi), labelled, light) = log_ticks(min, max);
            assert!(lo <= min.max(1e-3) && hi >= max, "{min}..{max}: {lo}..{hi}");
            assert!(labelled.len() >= 2, "{min}..{max}: {labelled:?}");
            for v in labelled.iter().chain(&light) {
                let label = round_label(*v);
                assert!(
                    is_round(&label),
                    "{min}..{max}: tick {v} labelled {label:?}"
                );
                assert_eq!(label.parse::<f64>().ok(), Some(*v), "{label}");
                assert!((lo..=hi).contains(v));
            }
            // The label of a tick survives the trip through the axis' log10 coordinate.
            for v in &labelled {
                assert_eq!(round_label(10f64.powf(v.log10())), round_label(*v));
            }
        }
        let (_, labelled, _) = log_ticks(2.31, 1496.9);
        let labels: Vec<String> = labelled.iter().map(|v| round_label(*v)).collect();
        assert_eq!(labels, ["2", "10", "100", "1000", "2000"]);
        let (_, labelled, _) = log_ticks(23.0, 58.0);
        let labels: Vec<String> = labelled.iter().map(|v| round_label(*v)).collect();
        assert_eq!(labels, ["20", "50", "100"]);
        assert!(!is_round("31.623") && !is_round("316") && is_round("0.05") && is_round("300"));
    }

    #[test]
    fn linear_axis_ticks_are_round_steps() {
        let (end, ticks, decimals) = linear_ticks(1384.45);
        assert_eq!(ticks.last(), Some(&1400.0));
        assert!(end > 1400.0 && decimals == 0);
        assert!(ticks.windows(2).all(|w| w[1] - w[0] == 200.0), "{ticks:?}");
        let (_, ticks, decimals) = linear_ticks(1.0);
        assert_eq!((ticks.len(), decimals), (6, 1));
        assert_eq!(format!("{:.decimals$}", ticks[3]), "0.6");
    }

    #[test]
    fn coinciding_series_stay_apart() {
        let a = vec![(32.0, 52.3), (48.0, 51.7), (64.0, 52.1)];
        let near = vec![(32.0, 52.3), (48.0, 51.7), (64.0, 52.2)];
        let series: Vec<Series> = vec![
            ("best-effort high-dld1".into(), near.clone()),
            ("real-time high-dld1".into(), a.clone()),
            ("medium".into(), vec![(32.0, 455.0), (48.0, 545.0)]),
            ("deadline medium-dld1".into(), a),
            ("other".into(), near),
        ];
        let s = styles(&series, 1400.0);
        assert_eq!(s[0].label, "best-effort high-dld1");
        assert_eq!(s[1].label, "real-time high-dld1 ≈ best-effort high-dld1");
        assert_eq!(s[2].label, "medium");
        // An equal series is named before one that is only as good as equal.
        assert_eq!(s[3].label, "deadline medium-dld1 = real-time high-dld1");
        assert_eq!(s[4].label, "other = best-effort high-dld1");
        let twins: Vec<bool> = s.iter().map(|s| s.twin).collect();
        assert_eq!(twins, [false, true, false, true, true]);
        // A twin is drawn with gaps and a larger marker of another shape and colour.
        assert_ne!((s[0].color, s[0].marker), (s[4].color, s[4].marker));
        assert_eq!((s[0].dash, s[4].dash), (None, TWIN_DASH));
        assert!(s[4].marker_size > s[0].marker_size);
        // Without twins, no two of the first 105 series share colour, marker and dash.
        let many: Vec<Series> = (0..105)
            .map(|i| (format!("s{i}"), vec![(1.0, f64::from(i) * 100.0)]))
            .collect();
        let s = styles(&many, 2000.0);
        for (i, a) in s.iter().enumerate() {
            assert!(!a.twin);
            for b in &s[..i] {
                assert_ne!((a.color, a.marker, a.dash), (b.color, b.marker, b.dash));
            }
        }
    }

    /// Two variants that are the same device give equal series in every figure: each figure
    /// names both, says which equals which, and is titled with the experiment (and the
    /// variants when a subset is plotted).
    #[test]
    fn figures_name_every_series_and_the_experiment() {
        let text = "id = \"twins\"\ntitle = \"Two of a kind\"\nqd = [1, 4]\nios = 300\n\
                    [drive]\nmodel = \"instant\"\n[[job]]\nname = \"r\"\n\
                    [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n\
                    [[variant]]\nname = \"c\"\n";
        let dir = std::env::temp_dir().join(format!("stint-plot-test-{}", std::process::id()));
        let mut exp = Experiment::parse(text).unwrap();
        let report = crate::sweep::run(&exp, 1, 1, &|| {}).unwrap();
        for path in write(&dir, &exp, &report).unwrap() {
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.contains("twins: "), "{}", path.display());
            assert!(svg.contains("Two of a kind — stint sim, seed 1"));
            assert!(
                svg.contains("b") && svg.contains(" = a"),
                "{}",
                path.display()
            );
            assert!(!svg.contains("31.623"));
        }
        exp.select_variants(&["b".to_owned(), "c".to_owned()])
            .unwrap();
        let report = crate::sweep::run(&exp, 1, 1, &|| {}).unwrap();
        let files = write(&dir, &exp, &report).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("twins (b, c): IOPS vs queue depth"), "{svg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
