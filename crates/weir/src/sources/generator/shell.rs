//! The `generator` source's tokio task (see the [module docs](super)).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use weir_wal::Batch;

use super::config::GeneratorConfig;
use super::core::{RecordMaker, Schedule};
use crate::pipeline::Detail;
use crate::pipeline::ingest::Ingest;
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::{Counter, LossLog, Severity, State};

impl StartSource for GeneratorConfig {
    type Checked = ();

    async fn check(&self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn start(self, (): (), cx: SourceContext) -> impl Future<Output = ()> + Send + 'static {
        let skipped = cx.telemetry.counter(
            "weir_generator_skipped_records_total",
            "Records a generator never made: it was behind its schedule by more than a second (a stall).",
            &[("source", &cx.name)],
        );
        let shown = skipped.clone();
        let _ = cx.ingest.stats().fields.set(Detail(Arc::new(
            move || serde_json::json!({ "skipped_records": shown.get() }),
        )));
        let skipped = Skipped {
            counter: skipped,
            log: LossLog::new(format!("source {}", cx.name), "never made", Severity::Warn),
        };
        run(cx.name, self, cx.ingest, cx.stop, skipped)
    }
}

/// Records never made because a stall put the generator behind its schedule: counted
/// (`skipped_records`) and logged, rate-limited.
pub struct Skipped {
    /// `weir_generator_skipped_records_total`.
    pub counter: Counter,
    /// The WARN lines.
    pub log: LossLog,
}

/// First wait after a refusal; it doubles while refusals go on.
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// Longest wait after a refusal.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Runs the generator until `stop` turns true or `count` records are durable.
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`. Dropped, it loses nothing
/// acknowledged (a generator acknowledges nobody).
pub async fn run(
    name: Arc<str>,
    config: GeneratorConfig,
    ingest: Ingest,
    mut stop: watch::Receiver<bool>,
    skipped: Skipped,
) {
    let mut maker = RecordMaker::new(
        name.clone(),
        config.seed,
        config.keys.get(),
        config.size.bytes() as usize,
    );
    let schedule = Schedule::new(config.rate);
    let mut started = Instant::now();
    let batch_size = u64::from(config.batch_size.get());
    let total = config.count.map(|c| c.get());
    let mut wire = Vec::new();
    let mut refused_seen = 0;
    let mut backoff = Duration::ZERO;
    loop {
        if *stop.borrow() {
            break;
        }
        // Refused since the last batch (on_full = "reject", a full disk): back off
        // instead of producing records only to see them refused, and shift the schedule
        // by the wait, so that what was not produced is never produced in a burst later.
        let refused = ingest.stats().refused_batches.load(Ordering::Relaxed);
        if refused > refused_seen {
            refused_seen = refused;
            backoff = (backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
            tokio::select! {
                biased;
                () = crate::pipeline::stopped(&mut stop) => break,
                () = tokio::time::sleep(backoff) => {}
            }
            started += backoff;
        } else {
            backoff = Duration::ZERO;
        }
        let made = maker.made();
        // Behind by more than a second (a stall: backpressure, SIGSTOP): what is due
        // beyond one second of records is never made, and counted.
        let behind = schedule.behind(made, started.elapsed());
        if behind > 0 {
            started += schedule.due_after(behind);
            skipped.counter.inc_by(behind);
            skipped.log.note(
                behind,
                &"a stall (backpressure, SIGSTOP) put it more than a second behind its \
                  schedule; it catches up one second of records at most",
            );
        }
        let n = match total {
            Some(total) if made >= total => break,
            Some(total) => batch_size.min(total - made),
            None => batch_size,
        };
        let due = started + schedule.due_after(made + n);
        tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop) => break,
            () = tokio::time::sleep_until(due.into()) => {}
        }
        let now_ms = crate::record::now_ms();
        let mut batch = Batch::new();
        for _ in 0..n {
            let record = maker.next_record(now_ms);
            wire.clear();
            record.encode_into(&mut wire);
            if let Err(e) = batch.push(&wire) {
                tracing::warn!("source {name}: {e}; lower size");
                ingest
                    .stats()
                    .component
                    .set_state(State::Failed(e.to_string()));
                return;
            }
        }
        let admission = tokio::select! {
            biased;
            () = crate::pipeline::stopped(&mut stop) => break,
            admission = ingest.admit(batch.encoded_len(), None) => admission,
        };
        match admission {
            Ok(admission) => {
                // Refusals (on_full = "reject") are counted in the source's stats.
                tokio::spawn(admission.append(batch));
            }
            Err(e) => {
                tracing::warn!("source {name}: {e}");
                ingest
                    .stats()
                    .component
                    .set_state(State::Failed(e.to_string()));
                return;
            }
        }
    }
    ingest.idle().await;
    if total.is_some_and(|t| maker.made() >= t) {
        tracing::info!(source = %name, records = maker.made(), "generator: count reached, stopped");
    }
    ingest.stats().component.set_state(State::Stopped);
}
