//! The samples `weir top` keeps between refreshes: the daemon's `/history` is fetched
//! whole once, then only the samples newer than the newest held, and the last
//! [`KEEP`] are kept. Rates are smoothed over them
//! ([`smoothed_rate`](crate::telemetry::trend::smoothed_rate), a 10 s time constant),
//! so a minute holds all but a fraction of a percent of their weight.

use crate::telemetry::history::{HistoryReport, SeriesReport};

/// Samples kept (one a second on the daemon).
pub const KEEP: usize = 60;

/// The newest samples of the daemon's history, merged across fetches.
#[derive(Debug, Default)]
pub struct Window {
    held: Option<HistoryReport>,
}

impl Window {
    /// The `since` of the next `/history` request: the newest sample held.
    pub fn since(&self) -> Option<u64> {
        self.held.as_ref()?.t_unix_ms.last().copied()
    }

    /// The samples held, with the newest fetch's forecast and counts.
    pub fn report(&self) -> Option<&HistoryReport> {
        self.held.as_ref()
    }

    /// Milliseconds between the oldest and the newest sample held.
    pub fn span_ms(&self) -> u64 {
        let Some(held) = &self.held else { return 0 };
        match (held.t_unix_ms.first(), held.t_unix_ms.last()) {
            (Some(first), Some(last)) => last.saturating_sub(*first),
            _ => 0,
        }
    }

    /// Adds the samples of `newer` taken after those held (a series new to the window
    /// has no values before; one `newer` lacks has none after), then keeps the newest
    /// [`KEEP`].
    pub fn merge(&mut self, newer: HistoryReport) {
        let Some(held) = &mut self.held else {
            let mut first = newer;
            trim(&mut first);
            self.held = Some(first);
            return;
        };
        let after = held.t_unix_ms.last().copied();
        let from = newer
            .t_unix_ms
            .iter()
            .position(|&t| after.is_none_or(|after| t > after))
            .unwrap_or(newer.t_unix_ms.len());
        let added = newer.t_unix_ms.len() - from;
        let before = held.t_unix_ms.len();
        held.t_unix_ms.extend_from_slice(&newer.t_unix_ms[from..]);
        for series in &mut held.series {
            match newer.series.iter().find(|s| s.name == series.name) {
                Some(new) => series.values.extend(new.values.iter().skip(from).copied()),
                None => series.values.extend(std::iter::repeat_n(None, added)),
            }
        }
        for new in &newer.series {
            if held.series.iter().all(|s| s.name != new.name) {
                let mut values = vec![None; before];
                values.extend(new.values.iter().skip(from).copied());
                held.series.push(SeriesReport {
                    name: new.name.clone(),
                    kind: new.kind,
                    unit: new.unit.clone(),
                    values,
                });
            }
        }
        held.wal_forecast = newer.wal_forecast;
        held.held = newer.held;
        held.capacity = newer.capacity;
        held.interval_ms = newer.interval_ms;
        held.memory_bytes = newer.memory_bytes;
        trim(held);
    }
}

/// Keeps the newest [`KEEP`] samples.
fn trim(report: &mut HistoryReport) {
    let extra = report.t_unix_ms.len().saturating_sub(KEEP);
    if extra == 0 {
        return;
    }
    report.t_unix_ms.drain(..extra);
    for series in &mut report.series {
        let n = extra.min(series.values.len());
        series.values.drain(..n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::history::{Forecast, SeriesKind};

    fn report(t: &[u64], series: &[(&str, &[Option<f64>])]) -> HistoryReport {
        HistoryReport {
            interval_ms: 1000,
            capacity: 900,
            held: t.len(),
            memory_bytes: 0,
            t_unix_ms: t.to_vec(),
            series: series
                .iter()
                .map(|(name, values)| SeriesReport {
                    name: (*name).to_owned(),
                    kind: SeriesKind::Counter,
                    unit: "records".to_owned(),
                    values: values.to_vec(),
                })
                .collect(),
            wal_forecast: Forecast::default(),
        }
    }

    #[test]
    fn newer_samples_are_appended_once_and_the_window_stays_bounded() {
        let mut window = Window::default();
        assert_eq!((window.since(), window.span_ms()), (None, 0));
        window.merge(report(&[1_000, 2_000], &[("a", &[Some(0.0), Some(10.0)])]));
        assert_eq!(window.since(), Some(2_000));
        // An overlapping fetch adds only what is newer; a new series starts empty.
        window.merge(report(
            &[2_000, 3_000],
            &[
                ("a", &[Some(10.0), Some(20.0)]),
                ("b", &[Some(1.0), Some(2.0)]),
            ],
        ));
        let held = window.report().expect("held");
        assert_eq!(held.t_unix_ms, [1_000, 2_000, 3_000]);
        assert_eq!(
            held.series("a").expect("a").values,
            [Some(0.0), Some(10.0), Some(20.0)]
        );
        assert_eq!(held.series("b").expect("b").values, [None, None, Some(2.0)]);
        // A series the daemon no longer reports gets no values.
        window.merge(report(&[4_000], &[("b", &[Some(3.0)])]));
        let held = window.report().expect("held");
        assert_eq!(held.series("a").expect("a").values.len(), 4);
        assert_eq!(held.series("a").expect("a").values[3], None);
        assert_eq!(window.span_ms(), 3_000);
        // Bounded.
        for i in 5..200u64 {
            window.merge(report(&[i * 1_000], &[("a", &[Some(i as f64)])]));
        }
        let held = window.report().expect("held");
        assert_eq!(held.t_unix_ms.len(), KEEP);
        assert!(held.series.iter().all(|s| s.values.len() == KEEP));
        assert_eq!(held.t_unix_ms.last(), Some(&199_000));
    }
}
