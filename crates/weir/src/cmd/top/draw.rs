//! Draws a [`View`] on the terminal with ratatui: the title and wave, the components
//! with their rates, the queues as fill bars, the WAL budget as a gauge with its
//! forecast, and the sinks' lag.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Gauge, Paragraph, Row, Table};

use super::view::{View, WAVE_FILL};
use crate::cmd::human::{per_second, seconds};
use crate::config::format_bytes;

/// A fill bar of `width` cells: `█` for the filled part, `░` for the rest.
pub fn bar(fill: Option<f64>, width: usize) -> String {
    let Some(fill) = fill else {
        return "-".repeat(width);
    };
    let filled = ((fill.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

fn state_style(state: &str) -> Style {
    match state.split(' ').next().unwrap_or_default() {
        "running" => Style::new().fg(Color::Green),
        "backpressured" | "paused" => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        "failed" | "degraded" => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        _ => Style::new().fg(Color::Gray),
    }
}

fn fill_style(fill: Option<f64>) -> Style {
    match fill {
        Some(f) if f >= WAVE_FILL => Style::new().fg(Color::Red),
        Some(f) if f >= 0.5 => Style::new().fg(Color::Yellow),
        Some(_) => Style::new().fg(Color::Green),
        None => Style::new().fg(Color::Gray),
    }
}

/// Draws `view` and, when the last fetch failed, `error` on `frame`.
pub fn draw(frame: &mut Frame<'_>, view: &View, error: Option<&str>) {
    let components = view.components.len() as u16 + 3;
    let queues = view.queues.len() as u16 + 3;
    let sinks = view.sinks.len() as u16 + 3;
    let [
        title,
        wave,
        comp_area,
        queue_area,
        wal_area,
        sink_area,
        help,
    ] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(components),
        Constraint::Length(queues),
        Constraint::Length(4),
        Constraint::Length(sinks),
        Constraint::Min(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(view.title.as_str()))
            .style(Style::new().add_modifier(Modifier::BOLD)),
        title,
    );
    let wave_line = match (error, &view.wave) {
        (Some(e), _) => {
            Paragraph::new(format!("unreachable: {e}")).style(Style::new().fg(Color::Red))
        }
        (None, Some(w)) => Paragraph::new(format!("WAVE: {w}"))
            .style(Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)),
        (None, None) => Paragraph::new("no backpressure: no source held back")
            .style(Style::new().fg(Color::Green)),
    };
    frame.render_widget(wave_line, wave);

    let rows = view.components.iter().map(|c| {
        Row::new(vec![
            c.name.clone(),
            c.kind.clone(),
            c.state.clone(),
            seconds(c.for_seconds),
            per_second(c.records_per_second, false),
            per_second(c.bytes_per_second, true),
        ])
        .style(state_style(&c.state))
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(18),
            Constraint::Length(8),
            Constraint::Length(22),
            Constraint::Length(9),
            Constraint::Length(10),
            Constraint::Length(12),
        ],
    )
    .header(
        Row::new(["COMPONENT", "KIND", "STATE", "FOR", "RECORDS", "BYTES"])
            .style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(Block::bordered().title(" components "));
    frame.render_widget(table, comp_area);

    let rows = view.queues.iter().map(|q| {
        Row::new(vec![
            q.name.clone(),
            bar(q.fill, 30),
            q.fill
                .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
            q.depth.clone(),
        ])
        .style(fill_style(q.fill))
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(22),
            Constraint::Length(31),
            Constraint::Length(6),
            Constraint::Length(14),
        ],
    )
    .header(
        Row::new(["QUEUE", "FILL", "", "DEPTH"]).style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(Block::bordered().title(" queues "));
    frame.render_widget(table, queue_area);

    let gauge = Gauge::default()
        .block(Block::bordered().title(format!(" WAL budget: {} ", view.wal_line)))
        .gauge_style(fill_style(Some(view.wal_used)))
        .ratio(view.wal_used.clamp(0.0, 1.0))
        .label(format!("{:.0}%", view.wal_used * 100.0));
    frame.render_widget(gauge, wal_area);

    let rows = view.sinks.iter().map(|s| {
        Row::new(vec![
            s.name.clone(),
            s.committed.to_string(),
            s.lag_records.to_string(),
            format_bytes(s.lag_bytes),
            seconds(s.lag_age_seconds),
            s.max_lag.clone(),
            s.required.clone(),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(18),
            Constraint::Length(12),
            Constraint::Length(12),
            Constraint::Length(11),
            Constraint::Length(9),
            Constraint::Length(20),
            Constraint::Length(15),
        ],
    )
    .header(
        Row::new([
            "SINK",
            "CURSOR",
            "LAG",
            "LAG BYTES",
            "LAG AGE",
            "MAX_LAG",
            "REQUIRED",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(Block::bordered().title(" sinks "));
    frame.render_widget(table, sink_area);
    frame.render_widget(
        Paragraph::new("q quits · refreshed every second").style(Style::new().fg(Color::Gray)),
        help,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_in_proportion() {
        assert_eq!(bar(Some(0.5), 10), "█████░░░░░");
        assert_eq!(bar(Some(1.5), 4), "████");
        assert_eq!(bar(Some(0.0), 3), "░░░");
        assert_eq!(bar(None, 3), "---");
    }
}
