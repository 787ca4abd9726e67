//! The scale series' curves as an SVG (plotters): per-job costs relative to the first
//! point, peak RSS of the operator commands, their time and the sweep's pass, and the
//! idle dispatcher's cost, each against the number of schedules on a log axis.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::figures::scale::Point;

/// One curve: a label and its (schedules, value) points.
type Curve = (String, Vec<(f64, f64)>);

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the four panels into `path`.
pub fn scale(path: &Path, points: &[Point]) -> Result<()> {
    let xs = |f: &dyn Fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.n as f64, f(p))).collect()
    };
    let Some(first) = points.first() else {
        return Ok(());
    };
    let relative = |f: fn(&Point) -> f64| xs(&|p| f(p) / f(first));
    let per_job: Vec<Curve> = vec![
        (
            "Redis bytes per schedule".into(),
            relative(|p| p.bytes_per_schedule),
        ),
        ("load, per job".into(), relative(Point::load_us)),
        (
            "load, redis-server CPU per job".into(),
            relative(Point::load_redis_us),
        ),
        ("dispatch, per job".into(), relative(Point::dispatch_us)),
        ("no-op worker, per job".into(), relative(Point::noop_us)),
        (
            "no-op worker, redis-server CPU per job".into(),
            relative(Point::noop_redis_us),
        ),
    ];
    let names: Vec<&str> = first.commands.iter().map(|c| c.name).collect();
    let command = |i: usize, rss: bool| {
        xs(&|p: &Point| {
            p.commands
                .get(i)
                .map_or(f64::NAN, |c| if rss { c.rss_mib } else { c.secs })
        })
    };
    let mut rss: Vec<Curve> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("redbike {n}"), command(i, true)))
        .collect();
    rss.push(("redbike load".into(), xs(&|p| p.load_rss_mib)));
    let mut times: Vec<Curve> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("redbike {n}"), command(i, false)))
        .collect();
    times.push(("sweep pass (coverage)".into(), xs(&|p| p.sweep_pass_secs)));
    times.push((
        "sweep pass, 500 every 5 s (before)".into(),
        xs(&|p| p.sweep_least_pass_secs),
    ));
    let idle: Vec<Curve> = vec![
        (
            "idle dispatcher: redis-server CPU, % of a core".into(),
            xs(&|p| p.idle_redis_cpu_percent),
        ),
        (
            "idle dispatcher: Redis commands/s / 100".into(),
            xs(&|p| p.idle_cmds_per_s / 100.0),
        ),
    ];

    let root = SVGBackend::new(path, (1400, 1000)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((2, 2));
    panel(
        &panels[0],
        "cost relative to the first point (target: within 0.8 – 1.2)",
        "x",
        &per_job,
        Some((0.0, 2.0)),
        false,
    )?;
    panel(&panels[1], "peak RSS", "MiB", &rss, None, false)?;
    panel(&panels[2], "time", "s", &times, None, true)?;
    panel(&panels[3], "idle dispatcher", "", &idle, None, false)?;
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
