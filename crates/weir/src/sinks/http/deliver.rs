//! One batch's operation in the ordered stage: its records encoded in its own task;
//! each request started only once no `Retry-After` pause holds, the retry budget has
//! room (for a retry) and the concurrency limit has a slot; sent until the answer is
//! final (transient failures retried with backoff, configuration errors by one probe
//! every `retry.max`); bisected while refused (400, 422, 413); the records refused alone, and
//! those its encoding cannot hold, put in the quarantine before the batch counts as
//! delivered. [`Shared`] is what every operation shares.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use hyper::header::HeaderName;
use tokio::sync::watch;
use tokio::time::Instant;
use weir_flow::aimd::{ConcurrencyLimiter, Permit};

use super::body::Parts;
use super::config::HttpSinkConfig;
use super::core::{self, Class, RetryBudget};
use super::service::{HttpClient, SendError};
use super::shell::Batch;
use super::stats::HttpStats;
use crate::quarantine::{Quarantine, QuarantineError, Rejected};

/// What every operation shares: the client, the limiter, the budget, the pause.
pub(super) struct Shared {
    pub(super) name: String,
    pub(super) client: HttpClient,
    /// The sink's `unencodable` count: records its encoding cannot hold, refused by
    /// each request's encoder and put in the quarantine.
    pub(super) unencodable: Arc<std::sync::atomic::AtomicU64>,
    pub(super) uri: hyper::Uri,
    pub(super) method: hyper::Method,
    pub(super) headers: Vec<(HeaderName, hyper::header::HeaderValue)>,
    pub(super) config: HttpSinkConfig,
    /// What an envelope line is: the envelope, or the object of the `fields`.
    pub(super) line: crate::record::Line,
    pub(super) retry_initial: Duration,
    pub(super) retry_max: Duration,
    pub(super) limiter: ConcurrencyLimiter,
    pub(super) budget: Arc<Mutex<RetryBudget>>,
    /// No request starts before this (`Retry-After`).
    pub(super) pause_until: Arc<Mutex<Option<Instant>>>,
    pub(super) quarantine: Quarantine,
    pub(super) stats: Arc<HttpStats>,
    /// The last configuration error (401, 403, …), sent on every one.
    pub(super) permanent: watch::Sender<Option<String>>,
    /// Whether the last final answer was a configuration error (no delivery since).
    pub(super) failing: AtomicBool,
    /// Configuration errors so far: a delivery ends `failing` only if its request
    /// started after the last of them (one answered 200 just before the endpoint began
    /// refusing must not let every held request go).
    pub(super) config_errors: AtomicU64,
    /// After a configuration error no request starts before this (`retry.max` later):
    /// one probe per `retry.max` instead of every batch asking in turn.
    pub(super) config_pause_until: Mutex<Option<Instant>>,
    /// Held by the one request that probes the endpoint while `failing`: the batches
    /// waiting behind it start only once its answer is in (a delivery lets them all go,
    /// another configuration error pauses them again).
    pub(super) probe: tokio::sync::Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a request ended, as far as its records go.
enum Final {
    /// Stored.
    Delivered,
    /// Refused (400, 422) or too large (413): split, or dead-letter a single record.
    Refused { status: u16, body: String },
}

/// One batch's life: sent until delivered, bisected while refused; refused records
/// go to the quarantine (durably) before the batch counts as delivered.
pub(super) async fn deliver(shared: Arc<Shared>, batch: Arc<Batch>) -> Result<Option<u64>, String> {
    // Encoded here, in the request's own task, so that requests encode in parallel.
    let mut dead = Vec::new();
    let parts = batch
        .records
        .encode(shared.config.encoding, &shared.line, |record, reason| {
            shared.unencodable.fetch_add(1, Ordering::Relaxed);
            dead.push(Rejected {
                reason,
                payload: record.payload(),
            });
        });
    let mut todo = vec![(0, parts.len())];
    while let Some((lo, hi)) = todo.pop() {
        if lo == hi {
            continue;
        }
        match shared.send_until_final(&parts, lo, hi).await? {
            Final::Delivered => shared.stats.delivered((hi - lo) as u64),
            Final::Refused { status, body } if hi - lo == 1 => {
                shared.stats.count_dead_letter(status);
                dead.push(Rejected {
                    reason: format!("HTTP {status}: {body}"),
                    payload: batch.records.record(parts.gather_index(lo)).payload(),
                });
            }
            Final::Refused { status, .. } => {
                shared.stats.count_split(status);
                let mid = lo + (hi - lo) / 2;
                todo.push((mid, hi));
                todo.push((lo, mid));
            }
        }
    }
    if !dead.is_empty() {
        match shared.quarantine.put_durable(&shared.name, dead).await {
            // Over budget: dropped and counted by the quarantine, which never blocks.
            Ok(()) | Err(QuarantineError::Full { .. }) => {}
            Err(e) => return Err(format!("dead letters: {e}")),
        }
    }
    Ok(batch.next_offset)
}

impl Shared {
    /// Sends records `lo..hi` of `parts` until the answer is final: transient failures are retried (with
    /// backoff, `Retry-After` and the budget), configuration errors every `retry.max`.
    async fn send_until_final(&self, parts: &Parts, lo: usize, hi: usize) -> Result<Final, String> {
        let config = &self.config;
        let body = parts
            .body(lo, hi, config.encoding, config.compression)
            .map_err(|e| format!("building a request body: {e}"))?;
        let mut retries = 0u32;
        loop {
            // `_probe` is held until this attempt's answer is in.
            let (permit, _probe) = self.start(retries > 0).await;
            let errors_before = self.config_errors.load(Ordering::Acquire);
            if retries == 0 {
                lock(&self.budget).record_request(std::time::Instant::now());
            }
            let started = Instant::now();
            let outcome = tokio::time::timeout(config.timeout.get(), self.send(body.clone())).await;
            let rtt = started.elapsed();
            let reason = match outcome {
                Ok(Ok(answer)) => match core::classify(answer.status) {
                    Class::Delivered => {
                        if self.config_errors.load(Ordering::Acquire) == errors_before {
                            self.failing.store(false, Ordering::Relaxed);
                        }
                        self.stats.finished(permit, rtt);
                        return Ok(Final::Delivered);
                    }
                    Class::Refused | Class::TooLarge => {
                        self.stats.finished(permit, rtt);
                        return Ok(Final::Refused {
                            status: answer.status,
                            body: answer.body,
                        });
                    }
                    Class::Config => {
                        // Paused before the slot is given back, so that no request
                        // waiting for it slips in before the pause.
                        self.refused_configuration(format!(
                            "{} {} answered HTTP {}: {}; check url, method and headers",
                            self.method,
                            crate::keys::redact::url(&config.url),
                            answer.status,
                            answer.body.trim(),
                        ));
                        drop(permit);
                        continue;
                    }
                    Class::Transient { overload, reason } => {
                        if overload {
                            self.stats.cut(permit, reason);
                        } else {
                            drop(permit);
                        }
                        if matches!(answer.status, 429 | 503)
                            && let Some(wait) = answer.retry_after.as_deref().and_then(|v| {
                                core::parse_retry_after(
                                    v,
                                    SystemTime::now(),
                                    config.max_retry_after.get(),
                                )
                            })
                        {
                            self.pause_for(wait);
                        }
                        reason
                    }
                },
                Ok(Err(SendError::Certificate(e))) => {
                    self.refused_configuration(format!(
                        "{e}; the endpoint's TLS certificate is not trusted: set ca_file to \
                         the PEM file of the CA that signed it, or use the host name it names"
                    ));
                    drop(permit);
                    continue;
                }
                Ok(Err(SendError::Connection(e))) => {
                    self.stats.cut(permit, "connection");
                    self.stats.set_last_error(&e);
                    "connection"
                }
                Err(_) => {
                    self.stats.cut(permit, "timeout");
                    "timeout"
                }
            };
            retries += 1;
            self.stats.count_retry(reason);
            tokio::time::sleep(core::backoff(retries, self.retry_initial, self.retry_max)).await;
        }
    }

    /// The endpoint refuses the sink's configuration (401, 403, …, or an untrusted
    /// certificate): the sink shows `failed` with `message`, nothing is dead-lettered,
    /// and no request starts before `retry.max` has passed (one probe per `retry.max`).
    fn refused_configuration(&self, message: String) {
        self.stats.count_config_error();
        let message = format!(
            "{message} (nothing is dead-lettered; sent again every retry.max, {:?})",
            self.retry_max
        );
        self.stats.set_last_error(&message);
        self.config_errors.fetch_add(1, Ordering::AcqRel);
        self.failing.store(true, Ordering::Relaxed);
        *lock(&self.config_pause_until) = Some(Instant::now() + self.retry_max);
        self.permanent.send_replace(Some(message));
    }

    /// Waits until a request may start: no `Retry-After` pause, room in the retry
    /// budget (for a retry), a slot under the concurrency limit, and, while the endpoint
    /// refuses the configuration, the probe's turn (returned, to hold until the answer).
    async fn start(&self, is_retry: bool) -> (Permit, Option<tokio::sync::MutexGuard<'_, ()>>) {
        let mut budget_counted = false;
        let mut budget_taken = !is_retry;
        loop {
            self.wait_pause().await;
            let probe = if self.failing.load(Ordering::Relaxed) {
                let probe = self.probe.lock().await;
                // The probe before this one may have been answered meanwhile: a delivery
                // lets every request go, a refusal paused them again.
                if self.paused().is_some() {
                    continue;
                }
                self.failing.load(Ordering::Relaxed).then_some(probe)
            } else {
                None
            };
            if !budget_taken {
                let allowed = lock(&self.budget).try_retry(std::time::Instant::now());
                if let Err(wait) = allowed {
                    if !budget_counted {
                        budget_counted = true;
                        self.stats.count_budget_exhausted();
                    }
                    tokio::time::sleep(wait).await;
                    continue;
                }
                budget_taken = true;
            }
            let permit = self.limiter.acquire().await;
            // A pause may have begun while this waited for a slot, or the endpoint may
            // have refused the configuration: then only the probe goes.
            if self.paused().is_some() || (probe.is_none() && self.failing.load(Ordering::Relaxed))
            {
                drop(permit);
                continue;
            }
            return (permit, probe);
        }
    }

    fn paused(&self) -> Option<Instant> {
        let retry_after = *lock(&self.pause_until);
        let config = *lock(&self.config_pause_until);
        retry_after.max(config).filter(|u| *u > Instant::now())
    }

    async fn wait_pause(&self) {
        while let Some(until) = self.paused() {
            tokio::time::sleep_until(until).await;
        }
    }

    fn pause_for(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut pause = lock(&self.pause_until);
        if pause.is_none_or(|p| p < until) {
            *pause = Some(until);
        }
        drop(pause);
        self.stats.count_retry_after();
    }
}
