//! SVG charts of a run's time series: queue depth and age of the oldest waiting message
//! over time, one line per strategy, with the slow period shaded.

use plotters::prelude::*;

use crate::lesson::{Lesson, Row, SLOW_FROM_MS, SLOW_LAST_MS};
use crate::series::Series;

/// Why a chart could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChartError {
    /// The plotting library refused to draw.
    #[error("could not draw the chart `{title}`: {reason}")]
    Draw {
        /// The chart's title.
        title: String,
        /// What the plotting library said.
        reason: String,
    },
}

/// One line of a chart: a name and its series.
pub type Line<'a> = (&'a str, &'a Series);

/// Line colours, one per strategy, readable on white and distinct in grey.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// A chart with two panels — messages waiting on top, age of the oldest waiting message
/// below — one line per entry of `lines`, and `shade` (a `[from, until)` range of
/// milliseconds) drawn as a grey band on both panels.
///
/// # Errors
///
/// [`ChartError::Draw`] if plotters fails (it does not for in-memory SVG in practice).
pub fn depth_and_age_chart(
    title: &str,
    lines: &[Line<'_>],
    shade: Option<(u64, u64)>,
) -> Result<String, ChartError> {
    let mut svg = String::new();
    draw(&mut svg, title, lines, shade).map_err(|reason| ChartError::Draw {
        title: title.to_owned(),
        reason,
    })?;
    Ok(svg)
}

/// The lesson's charts: one SVG per part, with its file name.
///
/// # Errors
///
/// [`ChartError::Draw`] if a chart cannot be drawn.
pub fn lesson_charts(lesson: &Lesson) -> Result<Vec<(String, String)>, ChartError> {
    let shade = Some((SLOW_FROM_MS, SLOW_LAST_MS + 1));
    let part = |rows: &[Row], title: &str, shade| {
        let lines: Vec<Line<'_>> = rows.iter().map(|r| (r.name, &r.series)).collect();
        depth_and_age_chart(title, &lines, shade)
    };
    Ok(vec![
        (
            "lesson-slow.svg".to_owned(),
            part(
                &lesson.slow,
                "Part 1: slow consumer (20 ms per message in the shaded period)",
                shade,
            )?,
        ),
        (
            "lesson-healthy.svg".to_owned(),
            part(&lesson.healthy, "Part 2: healthy consumer", None)?,
        ),
    ])
}

fn draw(
    svg: &mut String,
    title: &str,
    lines: &[Line<'_>],
    shade: Option<(u64, u64)>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let end_ms = lines
        .iter()
        .filter_map(|(_, s)| s.buckets().last().map(|b| b.start_ms + s.bucket_ms()))
        .max()
        .unwrap_or(1)
        .max(1);
    let root = SVGBackend::with_string(svg, (1100, 820)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 24))
        .map_err(|e| err(&e))?;
    let (upper, lower) = root.split_vertically(390);
    panel(&upper, lines, shade, end_ms, "messages waiting", |b| {
        b.depth_max
    })?;
    panel(
        &lower,
        lines,
        shade,
        end_ms,
        "age of oldest waiting message (ms)",
        |b| b.oldest_age_ms_max,
    )?;
    root.present().map_err(|e| err(&e))
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    lines: &[Line<'_>],
    shade: Option<(u64, u64)>,
    end_ms: u64,
    y_desc: &str,
    value: impl Fn(&crate::series::Bucket) -> u64,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let y_max = lines
        .iter()
        .flat_map(|(_, s)| s.buckets().iter().map(&value))
        .max()
        .unwrap_or(0);
    // Head-room above the highest line, and a non-empty range when every value is 0.
    let y_top = (y_max + y_max / 10).max(2);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0..end_ms, 0..y_top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("simulated time (ms)")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    if let Some((from, until)) = shade {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(from, 0), (until.min(end_ms), y_top)],
                RGBColor(225, 225, 225).filled(),
            )))
            .map_err(|e| err(&e))?;
    }
    for (i, (name, series)) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points = series.buckets().iter().map(|b| (b.start_ms, value(b)));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))
}
