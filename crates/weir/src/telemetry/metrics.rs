//! The scrape-time collector: component states, queue probes and polled metrics,
//! encoded with prometheus-client's text encoder.
//!
//! | family | labels | what |
//! |---|---|---|
//! | `weir_component_state` | `component`, `kind`, `state` | 1 for the current state, 0 for the others |
//! | `weir_component_state_seconds` | `component`, `kind` | time in the current state |
//! | `weir_queue_depth` | `queue` | items queued |
//! | `weir_queue_bytes` | `queue` | bytes queued |
//! | `weir_queue_oldest_age_seconds` | `queue` | age of the oldest queued item |
//! | `weir_queue_bound_items` / `weir_queue_bound_bytes` | `queue` | the bounds (when set) |
//! | `weir_queue_max_depth` | `queue` | the largest depth seen |
//! | `weir_queue_offered_total` / `weir_queue_delivered_total` | `queue` | items in / out |
//! | `weir_queue_dropped_total` | `queue`, `reason` (`drop_newest`, `drop_oldest`, `superseded`) | items dropped |
//! | `weir_queue_rejected_total` | `queue`, `reason` (`full`) | items refused and handed back |
//! | `weir_queue_expired_total` | `queue`, `reason` (`max_age`) | items discarded as too old |

use std::sync::{Arc, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use weir_flow::FlowStats;

use super::component::State;
use super::registry::{FnValue, Probes, QueueProbe};

/// The metric names the collector reports; registering them again is refused.
pub(super) const PROBED_FAMILIES: [&str; 13] = [
    "weir_component_state",
    "weir_component_state_seconds",
    "weir_queue_depth",
    "weir_queue_bytes",
    "weir_queue_oldest_age_seconds",
    "weir_queue_bound_items",
    "weir_queue_bound_bytes",
    "weir_queue_max_depth",
    "weir_queue_offered_total",
    "weir_queue_delivered_total",
    "weir_queue_dropped_total",
    "weir_queue_rejected_total",
    "weir_queue_expired_total",
];

/// Reads the probes at each scrape.
pub(super) struct ProbeCollector(pub(super) Arc<Probes>);

impl std::fmt::Debug for ProbeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProbeCollector")
    }
}

type Series<'a, T> = Vec<(Vec<(&'static str, &'a str)>, T)>;

/// Writes one family: HELP, TYPE, then every series.
fn family<T: Copy>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: &Series<'_, T>,
    encode: impl Fn(&mut MetricEncoder<'_>, T) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    if series.is_empty() {
        return Ok(());
    }
    let name = match metric_type {
        MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        let mut member = metric.encode_family(labels)?;
        encode(&mut member, *value)?;
    }
    Ok(())
}

fn gauge(m: &mut MetricEncoder<'_>, v: f64) -> Result<(), std::fmt::Error> {
    m.encode_gauge(&v)
}

fn counter(m: &mut MetricEncoder<'_>, v: u64) -> Result<(), std::fmt::Error> {
    m.encode_counter::<NoLabelSet, u64, f64>(&v, None)
}

impl Collector for ProbeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.encode_components(&mut encoder)?;
        let queues: Vec<Arc<QueueProbe>> = self
            .0
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let stats: Vec<(&QueueProbe, FlowStats)> =
            queues.iter().map(|q| (&**q, (q.probe)())).collect();
        encode_queues(&mut encoder, &stats)?;
        self.encode_polled(&mut encoder)
    }
}

impl ProbeCollector {
    fn encode_components(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        let components = self
            .0
            .components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let snapshots: Vec<_> = components.iter().map(|c| (c, c.snapshot())).collect();
        let mut states: Series<'_, f64> = Vec::new();
        let mut seconds: Series<'_, f64> = Vec::new();
        for (cell, snapshot) in &snapshots {
            let base = [
                ("component", cell.name.as_str()),
                ("kind", cell.kind.as_str()),
            ];
            for name in State::NAMES {
                let mut labels = base.to_vec();
                labels.push(("state", name));
                let current = f64::from(u8::from(snapshot.state.as_str() == name));
                states.push((labels, current));
            }
            seconds.push((
                base.to_vec(),
                snapshot.since_instant.elapsed().as_secs_f64(),
            ));
        }
        family(
            encoder,
            "weir_component_state",
            "Component state: 1 for the current state, 0 for the others.",
            MetricType::Gauge,
            &states,
            gauge,
        )?;
        family(
            encoder,
            "weir_component_state_seconds",
            "Time the component has been in its current state.",
            MetricType::Gauge,
            &seconds,
            gauge,
        )
    }

    fn encode_polled(&self, encoder: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let families = self
            .0
            .fn_metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (name, fn_family) in families.iter() {
            let Some((_, first)) = fn_family.series.first() else {
                continue;
            };
            let is_counter = matches!(first, FnValue::Counter(_));
            let metric_type = if is_counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let name = name.strip_suffix("_total").unwrap_or(name);
            let mut metric = encoder.encode_descriptor(name, &fn_family.help, None, metric_type)?;
            for (labels, value) in &fn_family.series {
                let mut member = metric.encode_family(labels)?;
                match value {
                    FnValue::Counter(probe) => counter(&mut member, probe())?,
                    FnValue::Gauge(probe) => gauge(&mut member, probe())?,
                }
            }
        }
        Ok(())
    }
}

fn encode_queues(
    encoder: &mut DescriptorEncoder<'_>,
    stats: &[(&QueueProbe, FlowStats)],
) -> Result<(), std::fmt::Error> {
    let per_queue = |value: &dyn Fn(&QueueProbe, &FlowStats) -> Option<f64>| -> Series<'_, f64> {
        stats
            .iter()
            .filter_map(|(q, s)| Some((vec![("queue", q.name.as_str())], value(q, s)?)))
            .collect()
    };
    let gauges: [(&str, &str, Series<'_, f64>); 6] = [
        (
            "weir_queue_depth",
            "Items queued.",
            per_queue(&|_, s| Some(s.depth as f64)),
        ),
        (
            "weir_queue_bytes",
            "Bytes queued.",
            per_queue(&|_, s| Some(s.bytes as f64)),
        ),
        (
            "weir_queue_oldest_age_seconds",
            "Age of the oldest queued item.",
            per_queue(&|_, s| Some(s.oldest_age.as_secs_f64())),
        ),
        (
            "weir_queue_bound_items",
            "The queue's bound in items.",
            per_queue(&|q, _| q.bound_items.map(|b| b as f64)),
        ),
        (
            "weir_queue_bound_bytes",
            "The queue's bound in bytes.",
            per_queue(&|q, _| q.bound_bytes.map(|b| b as f64)),
        ),
        (
            "weir_queue_max_depth",
            "The largest depth the queue reached.",
            per_queue(&|_, s| Some(s.max_depth as f64)),
        ),
    ];
    for (name, help, series) in &gauges {
        family(encoder, name, help, MetricType::Gauge, series, gauge)?;
    }
    let totals = |pick: fn(&FlowStats) -> u64, reason: Option<&'static str>| -> Series<'_, u64> {
        stats
            .iter()
            .map(|(q, s)| {
                let mut labels = vec![("queue", q.name.as_str())];
                labels.extend(reason.map(|r| ("reason", r)));
                (labels, pick(s))
            })
            .collect()
    };
    let mut dropped = totals(|s| s.dropped_newest, Some("drop_newest"));
    dropped.extend(totals(|s| s.dropped_oldest, Some("drop_oldest")));
    dropped.extend(totals(|s| s.superseded, Some("superseded")));
    let counters: [(&str, &str, Series<'_, u64>); 5] = [
        (
            "weir_queue_offered_total",
            "Items offered to the queue.",
            totals(|s| s.offered, None),
        ),
        (
            "weir_queue_delivered_total",
            "Items the consumer took.",
            totals(|s| s.delivered, None),
        ),
        (
            "weir_queue_dropped_total",
            "Items dropped, by reason.",
            dropped,
        ),
        (
            "weir_queue_rejected_total",
            "Items refused and handed back to the producer.",
            totals(|s| s.rejected, Some("full")),
        ),
        (
            "weir_queue_expired_total",
            "Items discarded because they were older than the deadline.",
            totals(|s| s.expired, Some("max_age")),
        ),
    ];
    for (name, help, series) in &counters {
        family(encoder, name, help, MetricType::Counter, series, counter)?;
    }
    Ok(())
}
