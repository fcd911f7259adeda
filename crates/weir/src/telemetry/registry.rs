//! [`Telemetry`]: the registry of components, queues, metrics and status sections.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use prometheus_client::metrics::counter::Counter as PromCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge as PromGauge;
use prometheus_client::registry::Registry;
use weir_flow::FlowStats;

use super::component::{Component, ComponentCell, ComponentKind};
use super::metrics::{PROBED_FAMILIES, ProbeCollector};

/// Label pairs of one series, in the order given.
pub(super) type Labels = Vec<(String, String)>;
type PromGaugeF64 = PromGauge<f64, AtomicU64>;

/// A polled statistic: called on every scrape or status request.
pub(super) type Probe<T> = Arc<dyn Fn() -> T + Send + Sync>;

/// A queue registered with [`Telemetry::register_queue`].
pub(super) struct QueueProbe {
    pub(super) name: String,
    pub(super) bound_items: Option<u64>,
    pub(super) bound_bytes: Option<u64>,
    pub(super) probe: Probe<FlowStats>,
}

/// A metric whose value is read from a closure at scrape time.
pub(super) enum FnValue {
    Counter(Probe<u64>),
    Gauge(Probe<f64>),
}

/// All series of one polled metric name.
pub(super) struct FnFamily {
    pub(super) help: String,
    pub(super) series: Vec<(Labels, FnValue)>,
}

/// What the scrape-time collector reads. Shared with it, so it holds no reference back
/// to the registry that owns the collector.
#[derive(Default)]
pub(super) struct Probes {
    pub(super) components: Mutex<Vec<Arc<ComponentCell>>>,
    pub(super) queues: Mutex<Vec<Arc<QueueProbe>>>,
    pub(super) fn_metrics: Mutex<BTreeMap<String, FnFamily>>,
}

enum Registered {
    Counter(Family<Labels, PromCounter>),
    Gauge(Family<Labels, PromGaugeF64>),
    Polled,
}

struct Metrics {
    registry: Registry,
    by_name: BTreeMap<String, Registered>,
}

struct Inner {
    config_hash: Mutex<String>,
    started_at: SystemTime,
    started_instant: Instant,
    probes: Arc<Probes>,
    sections: Mutex<Vec<(String, Probe<serde_json::Value>)>>,
    metrics: Mutex<Metrics>,
    history: std::sync::OnceLock<Arc<super::history::History>>,
    reload: std::sync::OnceLock<ReloadHook>,
}

/// What `POST /reload` calls: reloads the configuration and answers with the outcome
/// (`ok`: whether it was applied) and the body to send back.
pub type ReloadHook = Arc<
    dyn Fn()
            -> std::pin::Pin<Box<dyn std::future::Future<Output = (bool, serde_json::Value)> + Send>>
        + Send
        + Sync,
>;

/// The daemon's telemetry: component states, queue probes, counters and gauges, and
/// the status sections, served by [`router`](Telemetry::router) as `/status`,
/// `/metrics` and the dashboard at `/`.
///
/// Cheap to clone (an `Arc` inside). Counters and gauges are atomics resolved once by
/// [`counter`](Self::counter) / [`gauge`](Self::gauge) and then updated without any
/// lookup. Queue and status probes are closures called on each scrape: they must be
/// quick and must not call back into this `Telemetry`.
///
/// # Examples
///
/// ```
/// use weir::telemetry::{ComponentKind, State, Telemetry};
///
/// let telemetry = Telemetry::new("sha256:abc".into());
/// let source = telemetry.component(ComponentKind::Source, "gen");
/// source.set_state(State::Backpressured);
/// let dropped = telemetry.counter(
///     "weir_source_dropped_total",
///     "Records a source dropped.",
///     &[("source", "gen"), ("reason", "qos0_queue_full")],
/// );
/// dropped.inc();
/// let text = telemetry.render_metrics();
/// assert!(text.contains(r#"weir_source_dropped_total{source="gen",reason="qos0_queue_full"} 1"#));
/// ```
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("config_hash", &self.config_hash())
            .finish_non_exhaustive()
    }
}

/// A monotonic counter, resolved once and updated with atomics.
#[derive(Debug, Clone, Default)]
pub struct Counter(PromCounter);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.inc_by(n);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// A gauge of `f64`, resolved once and updated with atomics.
#[derive(Debug, Clone, Default)]
pub struct Gauge(PromGaugeF64);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, value: f64) {
        self.0.set(value);
    }

    /// The current value.
    pub fn get(&self) -> f64 {
        self.0.get()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn to_labels(labels: &[(&str, &str)]) -> Labels {
    for (key, _) in labels {
        assert!(
            is_metric_name(key) && !key.starts_with("__"),
            "label name {key:?}: expected [a-z_][a-z0-9_]* not starting with __"
        );
    }
    labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Checks a metric name and returns the name the encoder is given (counters without
/// their `_total`, which the encoder appends).
fn base_name(name: &str, counter: bool) -> &str {
    assert!(
        name.starts_with("weir_") && is_metric_name(name),
        "metric name {name:?}: expected weir_ followed by [a-z0-9_], units last"
    );
    assert!(
        !PROBED_FAMILIES.contains(&name),
        "metric name {name:?} is reported by the queue and component probes"
    );
    match (counter, name.strip_suffix("_total")) {
        (true, Some(base)) => base,
        (true, None) => panic!("counter {name:?}: expected a name ending in _total"),
        (false, Some(_)) => panic!("gauge {name:?}: _total is for counters"),
        (false, None) => name,
    }
}

/// prometheus-client's registry ends every help text with a full stop; the caller's
/// own is dropped so it is not doubled.
fn registry_help(help: &str) -> &str {
    help.strip_suffix('.').unwrap_or(help)
}

impl Telemetry {
    /// An empty registry for a daemon running the configuration with this hash.
    pub fn new(config_hash: String) -> Self {
        let probes = Arc::new(Probes::default());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProbeCollector(Arc::clone(&probes))));
        Self {
            inner: Arc::new(Inner {
                config_hash: Mutex::new(config_hash),
                started_at: SystemTime::now(),
                started_instant: Instant::now(),
                probes,
                sections: Mutex::new(Vec::new()),
                metrics: Mutex::new(Metrics {
                    registry,
                    by_name: BTreeMap::new(),
                }),
                history: std::sync::OnceLock::new(),
                reload: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The hash of the configuration in force: given to [`new`](Self::new), changed
    /// by [`set_config_hash`](Self::set_config_hash) when a reload applies a new one.
    pub fn config_hash(&self) -> String {
        lock(&self.inner.config_hash).clone()
    }

    /// Sets the hash of the configuration in force (after a reload).
    pub fn set_config_hash(&self, config_hash: String) {
        *lock(&self.inner.config_hash) = config_hash;
    }

    /// Installs what `POST /reload` calls; false (and `hook` dropped) if one is
    /// already installed. Without one, `POST /reload` answers 503.
    pub fn set_reload_hook(&self, hook: ReloadHook) -> bool {
        self.inner.reload.set(hook).is_ok()
    }

    /// What `POST /reload` calls, once installed.
    pub(super) fn reload_hook(&self) -> Option<&ReloadHook> {
        self.inner.reload.get()
    }

    /// Forgets the component `name` of `kind` (a source or sink removed by a reload):
    /// its state, its queue (`wal->NAME` for a sink) and the scrape-time metrics
    /// labelled with it leave `/status`, `/metrics` and the dashboard. Counters it
    /// made with [`counter`](Self::counter) keep their last value in `/metrics`, as a
    /// Prometheus counter of a series that stopped.
    pub fn forget_component(&self, kind: ComponentKind, name: &str) {
        lock(&self.inner.probes.components).retain(|c| !(c.kind == kind && c.name == name));
        let label = match kind {
            ComponentKind::Source => "source",
            ComponentKind::Sink => {
                let queue = format!("wal->{name}");
                lock(&self.inner.probes.queues).retain(|q| q.name != queue);
                "sink"
            }
            ComponentKind::Wal | ComponentKind::Runtime => return,
        };
        for family in lock(&self.inner.probes.fn_metrics).values_mut() {
            family
                .series
                .retain(|(labels, _)| !labels.iter().any(|(k, v)| k == label && v == name));
        }
    }

    /// When the registry was created.
    pub(super) fn started(&self) -> (SystemTime, Instant) {
        (self.inner.started_at, self.inner.started_instant)
    }

    pub(super) fn probes(&self) -> &Probes {
        &self.inner.probes
    }

    /// The history ring, once [`start_history`](Self::start_history) or
    /// [`install_history`](Self::install_history) created it.
    pub fn history(&self) -> Option<&Arc<super::history::History>> {
        self.inner.history.get()
    }

    /// Sets the history ring; false (and `history` dropped) if one is already set.
    pub(super) fn set_history(&self, history: Arc<super::history::History>) -> bool {
        self.inner.history.set(history).is_ok()
    }

    pub(super) fn sections(&self) -> Vec<(String, Probe<serde_json::Value>)> {
        lock(&self.inner.sections).clone()
    }

    /// The component `name` of `kind`, created in state [`State::Starting`] on first
    /// use; later calls with the same kind and name return a handle on the same state.
    ///
    /// [`State::Starting`]: super::State::Starting
    pub fn component(&self, kind: ComponentKind, name: &str) -> Component {
        let mut components = lock(&self.inner.probes.components);
        if let Some(cell) = components
            .iter()
            .find(|cell| cell.kind == kind && cell.name == name)
        {
            return Component {
                cell: Arc::clone(cell),
            };
        }
        let cell = Arc::new(ComponentCell::new(kind, name));
        components.push(Arc::clone(&cell));
        Component { cell }
    }

    /// Registers a queue: `probe` is called on each scrape and status request for its
    /// depth, bytes, oldest age and drop counters. Registering a name again replaces
    /// the earlier probe (a restarted component re-registers).
    pub fn register_queue(
        &self,
        name: &str,
        bound_items: Option<u64>,
        bound_bytes: Option<u64>,
        probe: impl Fn() -> FlowStats + Send + Sync + 'static,
    ) {
        let queue = Arc::new(QueueProbe {
            name: name.to_owned(),
            bound_items,
            bound_bytes,
            probe: Arc::new(probe),
        });
        let mut queues = lock(&self.inner.probes.queues);
        match queues.iter_mut().find(|q| q.name == name) {
            Some(existing) => *existing = queue,
            None => queues.push(queue),
        }
    }

    /// Adds a section to `/status`: `probe`'s JSON appears under the key `section`.
    /// Registering a section again replaces it.
    ///
    /// # Panics
    ///
    /// When `section` is one of the report's own keys (`config_hash`,
    /// `uptime_seconds`, `started_unix_ms`, `components`, `queues`).
    pub fn register_status(
        &self,
        section: &str,
        probe: impl Fn() -> serde_json::Value + Send + Sync + 'static,
    ) {
        assert!(
            !super::status::RESERVED_KEYS.contains(&section),
            "status section {section:?} would hide the report's own key"
        );
        let mut sections = lock(&self.inner.sections);
        let probe: Probe<serde_json::Value> = Arc::new(probe);
        match sections.iter_mut().find(|(name, _)| name == section) {
            Some(existing) => existing.1 = probe,
            None => sections.push((section.to_owned(), probe)),
        }
    }

    /// The counter `name` (ending in `_total`) with these labels. Call it once per
    /// series and keep the handle: later updates are atomic adds with no lookup.
    /// Asking again for the same name and labels returns the same counter.
    ///
    /// # Panics
    ///
    /// When the name does not start with `weir_` and end with `_total`, is already a
    /// gauge or a polled metric, or a label name is not `[a-z_][a-z0-9_]*`: a
    /// programming error that any test reaching the call finds.
    pub fn counter(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Counter {
        let base = base_name(name, true);
        let labels = to_labels(labels);
        let mut metrics = lock(&self.inner.metrics);
        let Metrics { registry, by_name } = &mut *metrics;
        let registered = by_name.entry(name.to_owned()).or_insert_with(|| {
            let family = Family::<Labels, PromCounter>::default();
            registry.register(base, registry_help(help), family.clone());
            Registered::Counter(family)
        });
        match registered {
            Registered::Counter(family) => Counter(family.get_or_create(&labels).clone()),
            _ => panic!("metric {name:?} is already registered as another kind"),
        }
    }

    /// The gauge `name` with these labels; see [`counter`](Self::counter).
    ///
    /// # Panics
    ///
    /// As for [`counter`](Self::counter), with names that do not end in `_total`.
    pub fn gauge(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Gauge {
        let base = base_name(name, false);
        let labels = to_labels(labels);
        let mut metrics = lock(&self.inner.metrics);
        let Metrics { registry, by_name } = &mut *metrics;
        let registered = by_name.entry(name.to_owned()).or_insert_with(|| {
            let family = Family::<Labels, PromGaugeF64>::default();
            registry.register(base, registry_help(help), family.clone());
            Registered::Gauge(family)
        });
        match registered {
            Registered::Gauge(family) => Gauge(family.get_or_create(&labels).clone()),
            _ => panic!("metric {name:?} is already registered as another kind"),
        }
    }

    /// A counter whose value `probe` reads at scrape time, for totals another
    /// component already keeps in an atomic (e.g. the log writer's dropped lines).
    ///
    /// # Panics
    ///
    /// As for [`counter`](Self::counter).
    pub fn register_counter_fn(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        probe: impl Fn() -> u64 + Send + Sync + 'static,
    ) {
        base_name(name, true);
        self.register_fn(name, help, labels, FnValue::Counter(Arc::new(probe)));
    }

    /// A gauge whose value `probe` reads at scrape time (e.g. the WAL's disk use).
    ///
    /// # Panics
    ///
    /// As for [`gauge`](Self::gauge).
    pub fn register_gauge_fn(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        probe: impl Fn() -> f64 + Send + Sync + 'static,
    ) {
        base_name(name, false);
        self.register_fn(name, help, labels, FnValue::Gauge(Arc::new(probe)));
    }

    fn register_fn(&self, name: &str, help: &str, labels: &[(&str, &str)], value: FnValue) {
        let labels = to_labels(labels);
        let mut metrics = lock(&self.inner.metrics);
        let entry = metrics
            .by_name
            .entry(name.to_owned())
            .or_insert(Registered::Polled);
        assert!(
            matches!(entry, Registered::Polled),
            "metric {name:?} is already registered as another kind"
        );
        let mut families = lock(&self.inner.probes.fn_metrics);
        let family = families.entry(name.to_owned()).or_insert_with(|| FnFamily {
            help: help.to_owned(),
            series: Vec::new(),
        });
        assert!(
            family.series.first().is_none_or(|(_, v)| matches!(
                (v, &value),
                (FnValue::Counter(_), FnValue::Counter(_)) | (FnValue::Gauge(_), FnValue::Gauge(_))
            )),
            "metric {name:?} is already registered as another kind"
        );
        match family.series.iter_mut().find(|(l, _)| *l == labels) {
            Some(existing) => existing.1 = value,
            None => family.series.push((labels, value)),
        }
    }

    /// All metrics in the Prometheus text format (version 0.0.4), as `/metrics`
    /// serves them.
    pub fn render_metrics(&self) -> String {
        let metrics = lock(&self.inner.metrics);
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &metrics.registry)
            .expect("writing to a String cannot fail");
        text
    }
}
