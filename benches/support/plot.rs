//! Curves against the number of schedules (log axis) as an SVG of four panels
//! (plotters). What the curves are is the figure's business (figures/scale.rs).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One curve: a label and its (schedules, value) points.
pub type Curve = (String, Vec<(f64, f64)>);

/// One panel of the figure: its title, the unit of its y axis, its curves, and a
/// fixed y range or a log y axis (linear from 0 otherwise).
pub struct Panel {
    pub title: &'static str,
    pub unit: &'static str,
    pub curves: Vec<Curve>,
    pub y_range: Option<(f64, f64)>,
    pub log_y: bool,
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws four panels, two by two, into `path`.
pub fn four_panels(path: &Path, panels: &[Panel; 4]) -> Result<()> {
    let root = SVGBackend::new(path, (1400, 1000)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    for (area, p) in root.split_evenly((2, 2)).iter().zip(panels) {
        panel(area, p.title, p.unit, &p.curves, p.y_range, p.log_y)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// One panel: `curves` against the schedules (log axis); y linear from 0, or log.
fn panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    curves: &[Curve],
    y_range: Option<(f64, f64)>,
    log_y: bool,
) -> Result<()> {
    let all = || {
        curves
            .iter()
            .flat_map(|(_, c)| c.iter())
            .filter(|p| p.1.is_finite())
    };
    let x_max = all().map(|p| p.0).fold(10_000.0, f64::max) * 1.5;
    let x_min = all()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .min(10_000.0)
        / 1.5;
    let y_max = all().map(|p| p.1).fold(0.0, f64::max).max(1e-3);
    let err = |e: DrawingAreaErrorKind<std::io::Error>| anyhow!("{e}");
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    let x = (x_min..x_max).log_scale();
    if log_y {
        let y_min = all()
            .map(|p| p.1)
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let y = (y_min.min(y_max) / 2.0..y_max * 2.0).log_scale();
        let mut chart = builder.build_cartesian_2d(x, y).map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("schedules")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        for (i, (label, c)) in curves.iter().enumerate() {
            draw(&mut chart, i, label, c).map_err(err)?;
        }
        legend(&mut chart).map_err(err)
    } else {
        let (lo, hi) = y_range.unwrap_or((0.0, y_max * 1.15));
        let mut chart = builder.build_cartesian_2d(x, lo..hi).map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("schedules")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        for (i, (label, c)) in curves.iter().enumerate() {
            draw(&mut chart, i, label, c).map_err(err)?;
        }
        legend(&mut chart).map_err(err)
    }
}

type Chart<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

fn draw<'a, X, Y>(
    chart: &mut Chart<'a, X, Y>,
    i: usize,
    label: &str,
    curve: &[(f64, f64)],
) -> Result<(), DrawingAreaErrorKind<std::io::Error>>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = COLOURS[i % COLOURS.len()];
    let finite: Vec<(f64, f64)> = curve.iter().copied().filter(|p| p.1.is_finite()).collect();
    chart
        .draw_series(LineSeries::new(finite.clone(), colour.stroke_width(2)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    chart.draw_series(
        finite
            .into_iter()
            .map(|p| Circle::new(p, 4, colour.filled())),
    )?;
    Ok(())
}

fn legend<'a, X, Y>(chart: &mut Chart<'a, X, Y>) -> Result<(), DrawingAreaErrorKind<std::io::Error>>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}
