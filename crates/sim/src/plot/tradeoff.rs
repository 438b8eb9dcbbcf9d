//! A trade-off figure: what a knob buys (x) against what it costs (y), one curve per setting
//! around it (e.g. per queue depth), each point labelled with the knob's value and the default
//! ringed; dashed reference lines mark the bounds the points are judged by.

use super::{canvas, draw_line, draw_marker, round_value, Axis, COLORS, MARKERS};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const CHART_H: u32 = 560;
const LEGEND_ROW: i32 = 20;

/// One curve: its points in the order the knob turns, the knob's value at each (labels) and
/// the index of the default setting.
#[derive(Clone, Debug)]
pub struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub knob: Vec<String>,
    pub default: usize,
}

/// A reference line: vertical at `x` or horizontal at `y`, with its label.
#[derive(Clone, Debug)]
pub enum Bound {
    X(f64, String),
    Y(f64, String),
}

/// Ticks every 1, 2 or 5 × 10^k over [lo, hi] (at most about nine), the axis range just past
/// the outer ticks, and the decimals a label needs.
fn span_ticks(lo: f64, hi: f64) -> ((f64, f64), Vec<f64>, usize) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, lo + 1.0)
    };
    let raw = (hi - lo) / 8.0;
    let k = raw.log10().floor() as i32;
    let step = [1, 2, 5, 10]
        .map(|d| round_value(d, k))
        .into_iter()
        .find(|s| *s >= raw)
        .unwrap_or(round_value(1, k + 1));
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    let ticks: Vec<f64> = (first..=last).map(|i| i as f64 * step).collect();
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let pad = step * 0.15;
    (
        (first as f64 * step - pad, last as f64 * step + pad),
        ticks,
        decimals,
    )
}

/// Writes the figure to `path`.
pub fn write(
    path: &Path,
    (title, subtitle): (&str, &str),
    (x_desc, y_desc): (&str, &str),
    curves: &[Curve],
    bounds: &[Bound],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let xs = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let ys = curves.iter().flat_map(|c| c.points.iter().map(|p| p.1));
    let bx = bounds.iter().filter_map(|b| match b {
        Bound::X(x, _) => Some(*x),
        Bound::Y(..) => None,
    });
    let by = bounds.iter().filter_map(|b| match b {
        Bound::Y(y, _) => Some(*y),
        Bound::X(..) => None,
    });
    let (x_lo, x_hi) = xs
        .chain(bx)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let (y_lo, y_hi) = ys
        .chain(by)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
    let (x_range, x_ticks, x_dec) = span_ticks(x_lo, x_hi);
    let (y_range, y_ticks, y_dec) = span_ticks(y_lo.min(0.0), y_hi);

    let rows = curves.len() as i32 + 1;
    let (root, plot_area, legend) = canvas(path, (title, subtitle), CHART_H, rows)?;
    let grey = RGBColor(80, 80, 80);

    let mut chart = ChartBuilder::on(&plot_area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            Axis {
                range: x_range,
                labelled: x_ticks,
                light: Vec::new(),
            },
            Axis {
                range: y_range,
                labelled: y_ticks,
                light: Vec::new(),
            },
        )
        .map_err(|e| err(&e))?;
    let x_label = |x: &f64| format!("{x:.x_dec$}");
    let y_label = |y: &f64| format!("{y:.y_dec$}");
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()
        .map_err(|e| err(&e))?;

    let small = TextStyle::from(("sans-serif", 12).into_font()).color(&grey);
    for (n, b) in (0i32..).zip(bounds) {
        // Labels inside the plot: left of a vertical line near its top (staggered, lines may
        // be close), above a horizontal one at its left end.
        let (from, to, label, at, pos, shift) = match b {
            Bound::X(x, label) => (
                (*x, y_range.0),
                (*x, y_range.1),
                label,
                (*x, y_range.1),
                Pos::new(HPos::Right, VPos::Top),
                (-4, 4 + 16 * n),
            ),
            Bound::Y(y, label) => (
                (x_range.0, *y),
                (x_range.1, *y),
                label,
                (x_range.0, *y),
                Pos::new(HPos::Left, VPos::Bottom),
                (4, -3),
            ),
        };
        let line = vec![chart.backend_coord(&from), chart.backend_coord(&to)];
        draw_line(&root, line, Some((6, 4)), grey).map_err(|e| err(&e))?;
        let (px, py) = chart.backend_coord(&at);
        root.draw_text(label, &small.pos(pos), (px + shift.0, py + shift.1))
            .map_err(|e| err(&e))?;
    }
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let marker = MARKERS[i % MARKERS.len()];
        let pixels: Vec<(i32, i32)> = c.points.iter().map(|p| chart.backend_coord(p)).collect();
        draw_line(&root, pixels.clone(), None, color).map_err(|e| err(&e))?;
        let label = TextStyle::from(("sans-serif", 11).into_font()).color(&color);
        for (n, (&at, knob)) in pixels.iter().zip(&c.knob).enumerate() {
            draw_marker(&root, at, marker, 5, color).map_err(|e| err(&e))?;
            if n == c.default {
                root.draw(&Circle::new(at, 11, color.stroke_width(2)))
                    .map_err(|e| err(&e))?;
            }
            root.draw_text(knob, &label, (at.0 + 7, at.1 - 14))
                .map_err(|e| err(&e))?;
        }
    }

    let font =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (n, c) in curves.iter().enumerate() {
        let (x, y) = (20, 8 + n as i32 * LEGEND_ROW + LEGEND_ROW / 2);
        let color = COLORS[n % COLORS.len()];
        draw_line(&legend, vec![(x, y), (x + 40, y)], None, color)
            .and_then(|()| draw_marker(&legend, (x + 20, y), MARKERS[n % MARKERS.len()], 5, color))
            .map_err(|e| err(&e))?;
        legend
            .draw_text(&c.name, &font, (x + 50, y))
            .map_err(|e| err(&e))?;
    }
    let (x, y) = (20, 8 + curves.len() as i32 * LEGEND_ROW + LEGEND_ROW / 2);
    legend
        .draw(&Circle::new((x + 20, y), 11, grey.stroke_width(2)))
        .map_err(|e| err(&e))?;
    legend
        .draw_text(
            "default setting; labels: the knob's value at each point",
            &font,
            (x + 50, y),
        )
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_span_negative_and_positive_values() {
        let ((lo, hi), ticks, decimals) = span_ticks(-6.4, 7.9);
        assert_eq!(ticks.first(), Some(&-8.0));
        assert_eq!(ticks.last(), Some(&8.0));
        assert!(
            lo < -8.0 && hi > 8.0 && decimals == 0,
            "{lo} {hi} {decimals}"
        );
        let (_, ticks, decimals) = span_ticks(0.0, 1.45);
        assert_eq!(
            (ticks.first(), ticks.last(), decimals),
            (Some(&0.0), Some(&1.6), 1)
        );
    }

    #[test]
    fn a_figure_is_written() {
        let dir = std::env::temp_dir().join(format!("stint-tradeoff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("t.svg");
        let curve = Curve {
            name: "QD 32".into(),
            points: vec![(1.3, 2.0), (1.0, 4.0), (0.8, 7.5)],
            knob: vec!["0".into(), "2".into(), "4".into()],
            default: 1,
        };
        let bounds = [
            Bound::X(1.4, "p99 bound".into()),
            Bound::Y(8.0, "8 %".into()),
        ];
        write(&path, ("t", "s"), ("x", "y"), &[curve], &bounds).expect("written");
        let svg = std::fs::read_to_string(&path).expect("read back");
        std::fs::remove_dir_all(&dir).expect("cleaned up");
        assert!(svg.contains("QD 32") && svg.contains("p99 bound") && svg.contains("<circle"));
    }
}
