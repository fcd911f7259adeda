//! The running `http` sink (see the [module docs](super)): opening it (URL, headers,
//! client, concurrency limiter, retry budget), gathering records into requests, and the
//! requests in flight through weir-flow's ordered stage, released in WAL order. Each
//! batch's retries, bisection and dead letters are its own operation
//! ([`deliver`](super::deliver)).

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::header::HeaderName;
use tokio::sync::watch;
use tokio::time::Instant;
use weir_flow::aimd::{AimdConfig, ConcurrencyLimiter};
use weir_flow::ordered::{OrderedConfig, OrderedError, OrderedStage, RetryPolicy, SubmitError};

use super::body::{self, Gather};
use super::config::{HeaderValue, HttpSinkConfig, Method};
use super::core::RetryBudget;
use super::deliver::{Shared, deliver};
use super::service::client;
use super::stats::HttpStats;
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::{OpenSink, SinkContext};

type OpFuture = Pin<Box<dyn Future<Output = Result<Option<u64>, String>> + Send>>;
type Op = Box<dyn Fn(Arc<Batch>) -> OpFuture + Send + Sync>;
type Stage = OrderedStage<Arc<Batch>, Option<u64>, String, Op>;

/// One request's records, and the offset the cursor may move to once they (and every
/// earlier batch) are delivered. A WAL read larger than a request is split; only its
/// last request carries the offset.
#[derive(Debug)]
pub(super) struct Batch {
    pub(super) records: Gather,
    pub(super) next_offset: Option<u64>,
}

/// The HTTP sink.
pub struct HttpSink {
    shared: Arc<Shared>,
    stage: Option<Stage>,
    /// Records of the request being filled (encoded by its own task once sealed).
    pending: Gather,
    /// The offset of the last WAL read wholly in `pending` or sealed before it.
    pending_offset: Option<u64>,
    /// When the first record (or offset) went into `pending`.
    pending_since: Option<Instant>,
    /// A request sealed and waiting for the stage to admit it.
    sealed: Option<Arc<Batch>>,
    /// A durable offset taken from the stage and not reported yet.
    released: Option<u64>,
    permanent: watch::Receiver<Option<String>>,
    /// When a configuration error was last reported to the driver.
    permanent_reported: Option<Instant>,
    /// How far [`Sink::write`] got into a batch before it returned early (a
    /// configuration error while waiting for a slot) or was cancelled: the batch's
    /// `next_offset` and the records of it already taken. Written again, the batch goes
    /// on from there instead of sending those records twice.
    partial: Option<(u64, usize)>,
}

impl std::fmt::Debug for HttpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("name", &self.shared.name)
            .field("url", &crate::keys::redact::url(&self.shared.config.url))
            .field("pending", &self.pending.len())
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

impl OpenSink for HttpSinkConfig {
    type Sink = HttpSink;

    fn healthcheck(
        &self,
        _name: &str,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<(), String>> + Send {
        self.reach(timeout)
    }

    fn open(&self, name: &str, cx: &SinkContext) -> Result<HttpSink, SinkError> {
        let refuse = |key: &str, message: String| SinkError::Permanent(format!("{key}: {message}"));
        let uri: hyper::Uri = self.url.parse().map_err(|e| {
            refuse(
                "url",
                format!(
                    "{:?} is not a valid URL: {e}",
                    crate::keys::redact::url(&self.url)
                ),
            )
        })?;
        let mut headers = Vec::with_capacity(self.headers.len());
        for header in &self.headers {
            let name = HeaderName::from_bytes(header.name.as_bytes())
                .map_err(|e| refuse("headers", format!("{:?}: {e}", header.name)))?;
            let (key, text) = match &header.value {
                HeaderValue::Literal(text) => ("headers", text.clone()),
                HeaderValue::Env(var) => (
                    "headers_env",
                    std::env::var(var).map_err(|_| {
                        refuse(
                            "headers_env",
                            format!(
                                "{}: the environment variable {var} is not set (or not UTF-8)",
                                header.name
                            ),
                        )
                    })?,
                ),
            };
            let value = hyper::header::HeaderValue::from_str(&text).map_err(|_| {
                refuse(
                    key,
                    format!(
                        "{}: not a valid header value (visible ASCII only)",
                        header.name
                    ),
                )
            })?;
            headers.push((name, value));
        }
        let client =
            client(self, uri.scheme_str() == Some("https")).map_err(SinkError::Permanent)?;
        let mut aimd = AimdConfig::concurrency(
            self.target_latency.map(|d| d.get()),
            self.min_concurrency.get(),
        );
        aimd.min = f64::from(self.min_concurrency.get());
        aimd.max = f64::from(self.max_concurrency.get());
        aimd.increase_per_round_trip = true;
        let limiter =
            ConcurrencyLimiter::new(aimd).map_err(|e| refuse("min_concurrency", e.to_string()))?;
        let pause_until = Arc::new(Mutex::new(None));
        let budget = Arc::new(Mutex::new(RetryBudget::new(
            self.retry_budget,
            self.retry_budget_floor,
            self.retry_budget_window,
            std::time::Instant::now(),
        )));
        let stats = Arc::new(HttpStats::new(
            name,
            &cx.telemetry,
            limiter.clone(),
            Arc::clone(&pause_until),
            Arc::clone(&budget),
        ));
        HttpStats::register_srtt(&stats);
        let detail_stats = Arc::clone(&stats);
        let _ = cx.detail.set(crate::pipeline::Detail(Arc::new(move || {
            detail_stats.status()
        })));
        let (permanent, permanent_rx) = watch::channel(None);
        let shared = Arc::new(Shared {
            line: match &self.fields {
                Some(fields) => crate::record::Line::Fields(fields.clone()),
                None => crate::record::Line::Envelope,
            },
            name: name.to_owned(),
            client,
            unencodable: Arc::clone(&cx.unencodable),
            uri,
            method: match self.method {
                Method::Post => hyper::Method::POST,
                Method::Put => hyper::Method::PUT,
            },
            headers,
            config: self.clone(),
            retry_initial: cx.retry.initial.get(),
            retry_max: cx.retry.max.get(),
            limiter,
            budget,
            pause_until,
            quarantine: cx.quarantine.clone(),
            stats,
            permanent,
            failing: AtomicBool::new(false),
            config_errors: std::sync::atomic::AtomicU64::new(0),
            config_pause_until: Mutex::new(None),
            probe: tokio::sync::Mutex::new(()),
        });
        Ok(HttpSink {
            shared,
            stage: None,
            pending: Gather::default(),
            pending_offset: None,
            pending_since: None,
            sealed: None,
            released: None,
            permanent: permanent_rx,
            permanent_reported: None,
            partial: None,
        })
    }
}

impl HttpSink {
    fn new_stage(&self) -> Stage {
        let max = NonZeroUsize::new(self.shared.config.max_concurrency.get() as usize)
            .unwrap_or(NonZeroUsize::MIN);
        let mut config = OrderedConfig::new(max);
        // Each operation keeps its own timeouts and retries (budget, Retry-After).
        config.attempt_timeout = None;
        config.retry = RetryPolicy::none();
        let shared = Arc::clone(&self.shared);
        let op: Op = Box::new(move |batch| Box::pin(deliver(Arc::clone(&shared), batch)));
        let stage = OrderedStage::new(config, op).expect("max_held = 2 × max_in_flight is valid");
        self.shared.stats.watch_stage(stage.view());
        stage
    }

    fn stage(&mut self) -> &Stage {
        if self.stage.is_none() {
            self.stage = Some(self.new_stage());
        }
        self.stage.as_ref().expect("just set")
    }

    fn idle(&mut self) -> bool {
        let stage = self.stage();
        stage.in_flight() == 0 && stage.held() == 0
    }

    /// Moves `pending` into `sealed` (if nothing is sealed yet).
    fn seal(&mut self) {
        if self.sealed.is_some() {
            return;
        }
        self.sealed = Some(Arc::new(Batch {
            records: self.pending.take(),
            next_offset: self.pending_offset.take(),
        }));
        self.pending_since = None;
    }

    fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_offset.is_some()
    }

    /// Takes one result from the stage.
    fn take(
        &mut self,
        result: Option<Result<Option<u64>, OrderedError<String>>>,
    ) -> Result<(), SinkError> {
        match result {
            Some(Ok(Some(offset))) => {
                self.released = Some(self.released.map_or(offset, |r| r.max(offset)));
                Ok(())
            }
            Some(Ok(None)) | None => Ok(()),
            Some(Err(e)) => Err(SinkError::Abandoned(format!(
                "sink {}: a request was given up ({e}); sending again from the committed cursor",
                self.shared.name
            ))),
        }
    }

    /// Hands the sealed request to the stage. While it is full, waits for a slot (any
    /// request finishing, not only the oldest) or the next result in order, and takes
    /// results as they come. Cancel-safe: the request stays in `sealed` until admitted.
    async fn submit_sealed(&mut self) -> Result<(), SinkError> {
        while let Some(batch) = self.sealed.take() {
            match self.stage().try_submit(batch) {
                Ok(_) => {}
                Err(SubmitError::Full(batch)) => {
                    self.sealed = Some(batch);
                    let stage = self.stage.as_ref().expect("created above");
                    // A slot frees when any request finishes, not only the oldest:
                    // waiting for the oldest alone would leave the others' slots
                    // empty behind a slow head (held results stay bounded by the
                    // stage's `max_held`). Results are still taken as they come.
                    // A configuration error is reported from here too: all slots may be
                    // held by requests the endpoint refuses, and the driver waiting in
                    // `write` would never see it otherwise.
                    let taken = tokio::select! {
                        result = stage.next() => Some(Some(result)),
                        () = stage.room() => None,
                        changed = self.permanent.changed() => changed.is_ok().then_some(None),
                    };
                    match taken {
                        Some(Some(result)) => self.take(result)?,
                        Some(None) => {
                            if let Some(message) = self.permanent_due() {
                                return Err(SinkError::Permanent(message));
                            }
                        }
                        None => {}
                    }
                }
                Err(SubmitError::Closed(batch)) => {
                    self.sealed = Some(batch);
                    return Err(SinkError::Abandoned(format!(
                        "sink {}: the request stage is closed",
                        self.shared.name
                    )));
                }
                Err(e) => {
                    self.sealed = Some(e.into_inner());
                    return Err(SinkError::Abandoned(format!(
                        "sink {}: the request stage refused a batch",
                        self.shared.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// The configuration error to report to the driver now, if there is one and none
    /// was reported within `retry.max` (it is reported as failed and logged at ERROR at
    /// most once per `retry.max`).
    fn permanent_due(&mut self) -> Option<String> {
        let due = self
            .permanent_reported
            .is_none_or(|at| at.elapsed() >= self.shared.retry_max);
        let message = self.permanent.borrow_and_update().clone()?;
        due.then(|| {
            self.permanent_reported = Some(Instant::now());
            message
        })
    }

    fn full(&self) -> bool {
        let c = &self.shared.config;
        self.pending.len() >= c.batch_records.get() as usize
            || self.pending.bytes() >= c.batch_bytes.bytes()
    }
}

impl Sink for HttpSink {
    /// Records are encoded in each request's task straight from their WAL form.
    fn takes_wire(&self) -> bool {
        true
    }

    /// Adds the batch's records to the request being filled, and hands full requests
    /// to the stage (waiting only while all its slots are busy).
    ///
    /// # Cancel safety
    ///
    /// A write that returned an error or was cancelled part-way remembers how many of
    /// the batch's records it took: written again, the batch goes on from there. A
    /// record is never taken twice, and nothing acknowledged is lost.
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        _rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        let start = match self.partial {
            Some((offset, taken)) if offset == batch.next_offset => taken,
            _ => 0,
        };
        self.partial = Some((batch.next_offset, start));
        self.submit_sealed().await?;
        let (encoding, batch_bytes) = (
            self.shared.config.encoding,
            self.shared.config.batch_bytes.bytes(),
        );
        for (i, record) in batch.wire.iter().enumerate().skip(start) {
            let size = body::size(record, encoding);
            if !self.pending.is_empty()
                && (self.full() || self.pending.bytes() + size > batch_bytes)
            {
                self.seal();
                self.partial = Some((batch.next_offset, i));
                self.submit_sealed().await?;
            }
            self.pending.push(batch, i, size);
            self.pending_since.get_or_insert_with(Instant::now);
        }
        self.partial = Some((batch.next_offset, batch.wire.len()));
        if self.pending.is_empty() && self.sealed.is_none() && self.idle() {
            // Nothing to send and nothing before it in flight: stored at once.
            self.pending_offset = None;
            self.released = Some(batch.next_offset);
        } else {
            self.pending_offset = Some(batch.next_offset);
            self.pending_since.get_or_insert_with(Instant::now);
            if self.full() {
                self.seal();
                self.submit_sealed().await?;
            }
        }
        self.partial = None;
        Ok(Written {
            durable_through: self.released.take(),
            // The request's encoder refuses what its encoding cannot hold: counted in
            // the sink's `unencodable` and put in the quarantine there.
            unencodable: 0,
            buffered_bytes: self.pending.bytes(),
        })
    }

    /// Yields the durable offset as requests complete, released in WAL order; sends
    /// the request being filled once it has waited `batch_linger`; reports each
    /// configuration error (401, 403, …) as [`SinkError::Permanent`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: results are taken only in the poll that returns them, and a
    /// sealed request stays held until the stage admits it.
    async fn settled(&mut self) -> Result<Option<u64>, SinkError> {
        let _ = self.stage();
        loop {
            if let Some(offset) = self.released.take() {
                return Ok(Some(offset));
            }
            let linger = self.shared.config.batch_linger.get();
            if self.sealed.is_none()
                && self.has_pending()
                && self.pending_since.is_some_and(|t| t.elapsed() >= linger)
            {
                self.seal();
            }
            // Whether the sealed request waits for a slot (not for a closed stage, for
            // which `room` would not wait at all).
            let mut full = false;
            if let Some(batch) = self.sealed.take() {
                let stage = self.stage.as_ref().expect("created above");
                match stage.try_submit(batch) {
                    Ok(_) => continue,
                    Err(e) => {
                        full = matches!(e, SubmitError::Full(_));
                        self.sealed = Some(e.into_inner());
                    }
                }
            }
            let linger_at = match (&self.sealed, self.pending_since) {
                (None, Some(since)) if self.has_pending() => Some(since + linger),
                _ => None,
            };
            let stage = self.stage.as_ref().expect("created above");
            tokio::select! {
                result = stage.next() => self.take(result)?,
                // The sealed request goes as soon as any slot frees.
                () = stage.room(), if full => {}
                changed = self.permanent.changed() => {
                    if changed.is_ok()
                        && let Some(message) = self.permanent_due()
                    {
                        return Err(SinkError::Permanent(message));
                    }
                }
                () = async {
                    match linger_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }

    /// Sends what is pending and waits for the requests in flight, at most one
    /// request timeout, and not at all while the endpoint refuses the sink's
    /// configuration (what is not delivered is sent again by the next run).
    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        if self.has_pending() {
            self.seal();
        }
        let wait = if self.shared.failing.load(Ordering::Relaxed) {
            Duration::ZERO
        } else {
            self.shared.config.timeout.get()
        };
        let deadline = Instant::now() + wait;
        let submitted = tokio::time::timeout_at(deadline, self.submit_sealed()).await;
        if let Ok(result) = submitted {
            result?;
        }
        while !self.idle() {
            let stage = self.stage.as_ref().expect("created by idle");
            match tokio::time::timeout_at(deadline, stage.next()).await {
                Ok(result) => self.take(result)?,
                Err(_) => {
                    tracing::warn!(
                        "sink {}: {} requests still in flight at shutdown; the next run sends them again",
                        self.shared.name,
                        stage.in_flight()
                    );
                    break;
                }
            }
        }
        Ok(self.released.take())
    }

    /// Forgets everything not yet delivered (after a rewind the driver reads it
    /// again): requests in flight are dropped.
    fn resume_at(&mut self, _next_offset: u64) {
        if self.stage.is_some() {
            self.stage = Some(self.new_stage());
        }
        self.pending.clear();
        self.pending_offset = None;
        self.pending_since = None;
        self.sealed = None;
        self.released = None;
        self.partial = None;
    }
}
