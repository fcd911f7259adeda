//! The HTTP sink's counters: its `/status` section (`sinks.NAME.http`) and Prometheus
//! series (`weir_http_sink_*{sink}`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use weir_flow::aimd::{ConcurrencyLimiter, Permit};
use weir_flow::ordered::StageView;

use super::core::{RetryBudget, Srtt};
use crate::telemetry::{Counter, Telemetry};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts by reason, mirrored in a Prometheus counter family.
#[derive(Debug, Default)]
struct ByReason(Mutex<BTreeMap<String, u64>>);

impl ByReason {
    fn add(&self, reason: &str) {
        *lock(&self.0).entry(reason.to_owned()).or_default() += 1;
    }

    fn json(&self) -> Value {
        json!(*lock(&self.0))
    }

    fn total(&self) -> u64 {
        lock(&self.0).values().sum()
    }
}

/// One HTTP sink's live numbers.
pub struct HttpStats {
    sink: String,
    telemetry: Telemetry,
    limiter: ConcurrencyLimiter,
    pause_until: Arc<Mutex<Option<Instant>>>,
    budget: Arc<Mutex<RetryBudget>>,
    srtt: Mutex<Srtt>,
    last_decrease: Mutex<Option<(String, Instant)>>,
    last_error: Mutex<Option<String>>,
    requests_ok: Counter,
    records_delivered: Counter,
    delivered: AtomicU64,
    records: AtomicU64,
    retry_after: AtomicU64,
    budget_exhausted: AtomicU64,
    config_errors: AtomicU64,
    /// The sink's current request stage (replaced when the sink starts over).
    stage: Mutex<Option<StageView<Option<u64>, String>>>,
    retries: ByReason,
    splits: ByReason,
    dead_letters: ByReason,
    decreases: ByReason,
}

impl std::fmt::Debug for HttpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStats")
            .field("sink", &self.sink)
            .finish_non_exhaustive()
    }
}

const PREFIX: &str = "weir_http_sink_";

impl HttpStats {
    /// Registers the sink's series with `telemetry`.
    pub fn new(
        sink: &str,
        telemetry: &Telemetry,
        limiter: ConcurrencyLimiter,
        pause_until: Arc<Mutex<Option<Instant>>>,
        budget: Arc<Mutex<RetryBudget>>,
    ) -> Self {
        let labels = [("sink", sink)];
        let l = limiter.clone();
        #[allow(clippy::cast_precision_loss)]
        telemetry.register_gauge_fn(
            "weir_http_sink_concurrency_limit",
            "The HTTP sink's adaptive concurrency limit (requests in flight allowed).",
            &labels,
            move || l.limit() as f64,
        );
        let l = limiter.clone();
        #[allow(clippy::cast_precision_loss)]
        telemetry.register_gauge_fn(
            "weir_http_sink_in_flight",
            "The HTTP sink's requests in flight.",
            &labels,
            move || l.in_flight() as f64,
        );
        let p = Arc::clone(&pause_until);
        telemetry.register_gauge_fn(
            "weir_http_sink_retry_after_seconds",
            "Seconds left before the HTTP sink may start a request again (Retry-After).",
            &labels,
            move || remaining(&p).as_secs_f64(),
        );
        HttpStats {
            requests_ok: telemetry.counter(
                "weir_http_sink_requests_ok_total",
                "Requests the endpoint answered with 2xx.",
                &labels,
            ),
            records_delivered: telemetry.counter(
                "weir_http_sink_records_delivered_total",
                "Records the endpoint accepted.",
                &labels,
            ),
            sink: sink.to_owned(),
            telemetry: telemetry.clone(),
            limiter,
            pause_until,
            budget,
            srtt: Mutex::new(Srtt::default()),
            last_decrease: Mutex::new(None),
            last_error: Mutex::new(None),
            delivered: AtomicU64::new(0),
            records: AtomicU64::new(0),
            retry_after: AtomicU64::new(0),
            budget_exhausted: AtomicU64::new(0),
            config_errors: AtomicU64::new(0),
            stage: Mutex::new(None),
            retries: ByReason::default(),
            splits: ByReason::default(),
            dead_letters: ByReason::default(),
            decreases: ByReason::default(),
        }
    }

    /// Registers the smoothed-RTT gauge, which reads `me`.
    pub fn register_srtt(me: &Arc<Self>) {
        let stats = Arc::clone(me);
        me.telemetry.register_gauge_fn(
            "weir_http_sink_srtt_seconds",
            "The HTTP sink's smoothed round-trip time.",
            &[("sink", &me.sink)],
            move || lock(&stats.srtt).get().unwrap_or_default().as_secs_f64(),
        );
    }

    fn count(&self, name: &str, help: &str, label: (&str, &str)) {
        self.telemetry
            .counter(
                &format!("{PREFIX}{name}_total"),
                help,
                &[("sink", &self.sink), label],
            )
            .inc();
    }

    /// A request answered (2xx, 400/413/422) after `rtt`: frees its slot, which may
    /// raise the limit or, over `target_latency`, cut it.
    pub fn finished(&self, permit: Permit, rtt: Duration) {
        let before = self.limiter.limit();
        permit.finish_with_latency(rtt);
        lock(&self.srtt).observe(rtt);
        if self.limiter.limit() < before {
            self.decreased("latency");
        }
    }

    /// An overload signal (429, 503, timeout, connection error): cuts the limit.
    pub fn cut(&self, permit: Permit, reason: &'static str) {
        let before = self.limiter.limit();
        permit.dropped();
        if self.limiter.limit() < before {
            self.decreased(reason);
        }
    }

    fn decreased(&self, reason: &str) {
        *lock(&self.last_decrease) = Some((reason.to_owned(), Instant::now()));
        self.decreases.add(reason);
        self.count(
            "limit_decreases",
            "Cuts of the HTTP sink's concurrency limit, by reason.",
            ("reason", reason),
        );
    }

    /// Records delivered in one 2xx answer.
    pub fn delivered(&self, records: u64) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(records, Ordering::Relaxed);
        self.requests_ok.inc();
        self.records_delivered.inc_by(records);
    }

    /// A transient failure that will be retried.
    pub fn count_retry(&self, reason: &str) {
        self.retries.add(reason);
        self.count(
            "retries",
            "Requests the HTTP sink sent again after a transient failure, by reason.",
            ("reason", reason),
        );
    }

    /// A retry that had to wait for the retry budget.
    pub fn count_budget_exhausted(&self) {
        self.budget_exhausted.fetch_add(1, Ordering::Relaxed);
        self.telemetry
            .counter(
                "weir_http_sink_retry_budget_exhausted_total",
                "Retries that waited because the retry budget was spent.",
                &[("sink", &self.sink)],
            )
            .inc();
    }

    /// A `Retry-After` that paused new requests.
    pub fn count_retry_after(&self) {
        self.retry_after.fetch_add(1, Ordering::Relaxed);
        self.telemetry
            .counter(
                "weir_http_sink_retry_after_total",
                "Answers whose Retry-After paused new requests.",
                &[("sink", &self.sink)],
            )
            .inc();
    }

    /// A batch split after `status` (400, 413, 422).
    pub fn count_split(&self, status: u16) {
        let status = status.to_string();
        self.splits.add(&status);
        self.count(
            "splits",
            "Batches the HTTP sink split to isolate refused records, by status.",
            ("status", &status),
        );
    }

    /// A record refused with `status`, dead-lettered.
    pub fn count_dead_letter(&self, status: u16) {
        let status = status.to_string();
        self.dead_letters.add(&status);
        self.count(
            "dead_letters",
            "Records the endpoint refused, put in the quarantine, by status.",
            ("status", &status),
        );
    }

    /// A configuration error answer (401, 403, 404, 405, …).
    pub fn count_config_error(&self) {
        self.config_errors.fetch_add(1, Ordering::Relaxed);
        self.telemetry
            .counter(
                "weir_http_sink_config_errors_total",
                "Answers that say the sink is misconfigured (401, 403, 404, 405).",
                &[("sink", &self.sink)],
            )
            .inc();
    }

    /// The ordered stage whose batches `/status` shows (read when asked): admitted and
    /// not taken, and of those, done but held back behind an earlier one.
    pub fn watch_stage(&self, stage: StageView<Option<u64>, String>) {
        *lock(&self.stage) = Some(stage);
    }

    /// The last failure's description, for `/status`.
    pub fn set_last_error(&self, message: &str) {
        *lock(&self.last_error) = Some(message.to_owned());
    }

    /// Retries so far (all reasons).
    pub fn retries(&self) -> u64 {
        self.retries.total()
    }

    /// The `/status` section.
    pub fn status(&self) -> Value {
        let srtt = lock(&self.srtt).get();
        let last = lock(&self.last_decrease).clone();
        let (window_requests, window_retries, window_secs) = {
            let mut budget = lock(&self.budget);
            let (requests, retries) = budget.window(std::time::Instant::now());
            (requests, retries, budget.window_secs())
        };
        let stage = lock(&self.stage)
            .as_ref()
            .map(StageView::counts)
            .unwrap_or_default();
        let (batches, held_back) = (stage.in_flight + stage.held, stage.held_back);
        json!({
            "limit": self.limiter.limit(),
            "in_flight": self.limiter.in_flight(),
            "batches": batches,
            "held_back": held_back,
            "srtt_ms": srtt.map(|d| d.as_secs_f64() * 1e3),
            "last_decrease": last.map(|(reason, at)| json!({
                "reason": reason,
                "ago_ms": u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX),
            })),
            "retry_after_wait_ms": u64::try_from(remaining(&self.pause_until).as_millis()).unwrap_or(u64::MAX),
            "requests_ok": self.delivered.load(Ordering::Relaxed),
            "records_delivered": self.records.load(Ordering::Relaxed),
            "retries": self.retries.json(),
            "retry_after_pauses": self.retry_after.load(Ordering::Relaxed),
            "retry_budget_window": json!({
                "seconds": window_secs,
                "requests": window_requests,
                "retries": window_retries,
            }),
            "retry_budget_exhausted": self.budget_exhausted.load(Ordering::Relaxed),
            "splits": self.splits.json(),
            "dead_letters": self.dead_letters.json(),
            "limit_decreases": self.decreases.json(),
            "config_errors": self.config_errors.load(Ordering::Relaxed),
            "last_error": *lock(&self.last_error),
        })
    }
}

fn remaining(pause: &Mutex<Option<Instant>>) -> Duration {
    lock(pause).map_or(Duration::ZERO, |u| {
        u.saturating_duration_since(Instant::now())
    })
}
