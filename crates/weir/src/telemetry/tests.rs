//! Registry, status and router tests; `/metrics` is checked line by line against the
//! Prometheus text format.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;
use weir_flow::FlowStats;

use super::*;

fn queue_stats() -> FlowStats {
    let mut stats = FlowStats::default();
    stats.offered = 20;
    stats.accepted = 15;
    stats.delivered = 10;
    stats.dropped_newest = 5;
    stats.depth = 5;
    stats.bytes = 900;
    stats.max_depth = 7;
    stats.oldest_age = Duration::from_millis(2500);
    stats
}

/// A sample line of the Prometheus text format: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the Prometheus text format (0.0.4) strictly enough to catch malformed output:
/// every sample belongs to a family announced by `# HELP` then `# TYPE`, names and
/// label names are valid, label values are quoted, values are numbers.
fn parse_prometheus(text: &str) -> Result<Vec<Sample>, String> {
    let valid_name = |n: &str| {
        let mut c = n.chars();
        c.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut helped = BTreeSet::new();
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |msg: &str| format!("line {}: {msg}: {line:?}", i + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            if !valid_name(name) || !helped.insert(name.to_owned()) {
                return Err(at("bad or repeated HELP"));
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            if !helped.contains(name)
                || !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind)
            {
                return Err(at("TYPE without HELP or unknown type"));
            }
            typed.insert(name.to_owned(), kind.to_owned());
        } else if line.starts_with('#') || line.is_empty() {
            return Err(at("unexpected comment or blank line"));
        } else {
            let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value"))?;
            let value: f64 = value.parse().map_err(|_| at("value is not a number"))?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (
                    name,
                    rest.strip_suffix('}')
                        .ok_or_else(|| at("unclosed labels"))?,
                ),
                None => (series, ""),
            };
            if !valid_name(name) || !typed.contains_key(name) {
                return Err(at("sample of an undeclared family"));
            }
            let mut parsed = BTreeMap::new();
            for pair in labels.split(',').filter(|p| !p.is_empty()) {
                let (key, quoted) = pair.split_once('=').ok_or_else(|| at("label without ="))?;
                let value = quoted
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .ok_or_else(|| at("unquoted label value"))?;
                if !valid_name(key) {
                    return Err(at("bad label name"));
                }
                parsed.insert(key.to_owned(), value.to_owned());
            }
            samples.push((name.to_owned(), parsed, value));
        }
    }
    Ok(samples)
}

fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|(n, l, _)| n == name && *l == wanted)
        .map(|(_, _, v)| *v)
}

/// A registry with one of everything.
fn populated() -> Telemetry {
    let telemetry = Telemetry::new("sha256:feed".to_owned());
    telemetry
        .component(ComponentKind::Sink, "lake")
        .set_state(State::Running);
    telemetry
        .component(ComponentKind::Source, "gen")
        .set_state(State::Backpressured);
    telemetry.register_queue("wal.pending", Some(10), Some(1000), queue_stats);
    telemetry.register_queue("unbounded", None, None, FlowStats::default);
    telemetry
        .counter(
            "weir_source_dropped_total",
            "Records a source dropped.",
            &[("source", "gen"), ("reason", "qos0_queue_full")],
        )
        .inc_by(3);
    telemetry
        .gauge(
            "weir_sink_lag_seconds",
            "How far a sink is behind.",
            &[("sink", "lake")],
        )
        .set(1.5);
    telemetry.register_gauge_fn(
        "weir_wal_disk_used_bytes",
        "WAL bytes on disk.",
        &[],
        || 4096.0,
    );
    telemetry.register_counter_fn("weir_log_dropped_total", "Log lines dropped.", &[], || 2);
    telemetry.register_status("wal", || serde_json::json!({ "disk_used_bytes": 4096 }));
    telemetry
}

#[test]
fn the_documented_example_holds() {
    let telemetry = Telemetry::new("sha256:abc".into());
    let source = telemetry.component(ComponentKind::Source, "gen");
    source.set_state(State::Backpressured);
    let dropped = telemetry.counter(
        "weir_source_dropped_total",
        "Records a source dropped.",
        &[("source", "gen"), ("reason", "qos0_queue_full")],
    );
    dropped.inc();
    let text = telemetry.render_metrics();
    assert!(
        text.contains(r#"weir_source_dropped_total{source="gen",reason="qos0_queue_full"} 1"#),
        "{text}"
    );
}

#[test]
fn component_state_keeps_since_until_it_changes() {
    let telemetry = Telemetry::new("h".into());
    let wal = telemetry.component(ComponentKind::Wal, "wal");
    assert_eq!(wal.state(), State::Starting);
    wal.set_state(State::Running);
    let first = telemetry.status().components[0].since_unix_ms;
    std::thread::sleep(Duration::from_millis(5));
    wal.set_state(State::Running);
    assert_eq!(telemetry.status().components[0].since_unix_ms, first);
    wal.set_state(State::Failed("fsync failed: disk full".into()));
    let report = telemetry.status();
    assert!(report.components[0].since_unix_ms > first);
    assert_eq!(report.components[0].state, "failed");
    assert_eq!(
        report.components[0].reason.as_deref(),
        Some("fsync failed: disk full")
    );

    let again = telemetry.component(ComponentKind::Wal, "wal");
    assert_eq!(again.state(), wal.state(), "same kind and name: same state");
    assert_eq!(telemetry.status().components.len(), 1);
    assert_eq!((again.name(), again.kind()), ("wal", ComponentKind::Wal));
}

#[test]
fn component_state_gauges_are_one_for_the_current_state_only() {
    let samples = parse_prometheus(&populated().render_metrics()).expect("well-formed");
    let gen_state = |state| {
        sample(
            &samples,
            "weir_component_state",
            &[("component", "gen"), ("kind", "source"), ("state", state)],
        )
    };
    assert_eq!(gen_state("backpressured"), Some(1.0));
    for state in [
        "starting", "running", "paused", "degraded", "failed", "stopped",
    ] {
        assert_eq!(gen_state(state), Some(0.0), "{state}");
    }
    let seconds = sample(
        &samples,
        "weir_component_state_seconds",
        &[("component", "lake"), ("kind", "sink")],
    );
    assert!(seconds.is_some_and(|s| s >= 0.0));
}

#[test]
fn counters_and_gauges_are_resolved_once_and_shared() {
    let telemetry = Telemetry::new("h".into());
    let a = telemetry.counter("weir_x_total", "X.", &[("sink", "a")]);
    let a_again = telemetry.counter("weir_x_total", "X.", &[("sink", "a")]);
    let b = telemetry.counter("weir_x_total", "X.", &[("sink", "b")]);
    a.inc();
    a_again.inc_by(4);
    assert_eq!((a.get(), a_again.get(), b.get()), (5, 5, 0));
    let gauge = telemetry.gauge("weir_y_seconds", "Y.", &[]);
    gauge.set(0.25);
    assert_eq!(telemetry.gauge("weir_y_seconds", "Y.", &[]).get(), 0.25);
    let samples = parse_prometheus(&telemetry.render_metrics()).expect("well-formed");
    assert_eq!(
        sample(&samples, "weir_x_total", &[("sink", "a")]),
        Some(5.0)
    );
    assert_eq!(
        sample(&samples, "weir_x_total", &[("sink", "b")]),
        Some(0.0)
    );
    assert_eq!(sample(&samples, "weir_y_seconds", &[]), Some(0.25));
}

#[test]
fn queues_are_probed_on_every_scrape() {
    let samples = parse_prometheus(&populated().render_metrics()).expect("well-formed");
    let q = [("queue", "wal.pending")];
    assert_eq!(sample(&samples, "weir_queue_depth", &q), Some(5.0));
    assert_eq!(sample(&samples, "weir_queue_bytes", &q), Some(900.0));
    assert_eq!(
        sample(&samples, "weir_queue_oldest_age_seconds", &q),
        Some(2.5)
    );
    assert_eq!(sample(&samples, "weir_queue_bound_items", &q), Some(10.0));
    assert_eq!(sample(&samples, "weir_queue_bound_bytes", &q), Some(1000.0));
    assert_eq!(sample(&samples, "weir_queue_max_depth", &q), Some(7.0));
    assert_eq!(sample(&samples, "weir_queue_offered_total", &q), Some(20.0));
    let dropped = [("queue", "wal.pending"), ("reason", "drop_newest")];
    assert_eq!(
        sample(&samples, "weir_queue_dropped_total", &dropped),
        Some(5.0)
    );
    let rejected = [("queue", "wal.pending"), ("reason", "full")];
    assert_eq!(
        sample(&samples, "weir_queue_rejected_total", &rejected),
        Some(0.0)
    );
    let expired = [("queue", "wal.pending"), ("reason", "max_age")];
    assert_eq!(
        sample(&samples, "weir_queue_expired_total", &expired),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &samples,
            "weir_queue_bound_items",
            &[("queue", "unbounded")]
        ),
        None
    );
    assert_eq!(
        sample(&samples, "weir_wal_disk_used_bytes", &[]),
        Some(4096.0)
    );
    assert_eq!(sample(&samples, "weir_log_dropped_total", &[]), Some(2.0));
    assert_eq!(
        sample(&samples, "weir_sink_lag_seconds", &[("sink", "lake")]),
        Some(1.5)
    );
}

#[test]
fn a_queue_registered_again_replaces_its_probe() {
    let telemetry = Telemetry::new("h".into());
    telemetry.register_queue("q", Some(1), None, FlowStats::default);
    telemetry.register_queue("q", Some(10), None, queue_stats);
    let report = telemetry.status();
    assert_eq!(report.queues.len(), 1);
    assert_eq!(
        (report.queues[0].depth, report.queues[0].bound_items),
        (5, Some(10))
    );
}

#[test]
fn status_reports_components_in_pipeline_order_queues_and_sections() {
    let report = populated().status();
    assert_eq!(report.config_hash, "sha256:feed");
    let names: Vec<_> = report
        .components
        .iter()
        .map(|c| (c.kind.as_str(), c.state.as_str()))
        .collect();
    assert_eq!(names, [("source", "backpressured"), ("sink", "running")]);
    let queue = &report.queues[0];
    assert_eq!((queue.depth, queue.bytes, queue.dropped), (5, 900, 5));
    // 5 of 10 items, 900 of 1000 bytes: the fuller bound counts.
    assert_eq!(queue.fill, Some(0.9));
    assert_eq!(report.queues[1].fill, None);
    assert_eq!(report.sections["wal"]["disk_used_bytes"], 4096);

    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(
        json["wal"]["disk_used_bytes"], 4096,
        "sections are top-level keys"
    );
    let back: StatusReport = serde_json::from_value(json).expect("weir status reads it back");
    assert_eq!(back, report);
}

#[test]
#[should_panic(expected = "expected a name ending in _total")]
fn a_counter_must_end_in_total() {
    Telemetry::new("h".into()).counter("weir_dropped", "Dropped.", &[]);
}

#[test]
#[should_panic(expected = "expected weir_ followed by")]
fn metric_names_start_with_weir() {
    Telemetry::new("h".into()).gauge("queue_depth", "Depth.", &[]);
}

#[test]
#[should_panic(expected = "already registered as another kind")]
fn one_name_is_one_kind() {
    let telemetry = Telemetry::new("h".into());
    telemetry.gauge("weir_thing", "A gauge.", &[]);
    telemetry.register_gauge_fn("weir_thing", "Now polled.", &[], || 1.0);
}

#[test]
#[should_panic(expected = "reported by the queue and component probes")]
fn probe_families_cannot_be_registered_by_hand() {
    Telemetry::new("h".into()).gauge("weir_queue_depth", "Depth.", &[("queue", "q")]);
}

#[test]
#[should_panic(expected = "would hide the report's own key")]
fn a_section_cannot_hide_the_reports_keys() {
    Telemetry::new("h".into()).register_status("queues", || serde_json::Value::Null);
}

#[test]
fn empty_registry_renders_valid_metrics() {
    let text = Telemetry::new("h".into()).render_metrics();
    assert_eq!(parse_prometheus(&text).expect("well-formed"), Vec::new());
}

#[test]
fn the_parser_catches_malformed_text() {
    for bad in [
        "weir_x 1\n",
        "# HELP weir_x X.\nweir_x 1\n",
        "# HELP weir_x X.\n# TYPE weir_x gauge\nweir_x{a=b} 1\n",
        "# HELP weir_x X.\n# TYPE weir_x gauge\nweir_x one\n",
    ] {
        assert!(parse_prometheus(bad).is_err(), "{bad:?}");
    }
}

async fn get(telemetry: &Telemetry, path: &str) -> (StatusCode, String, String) {
    let request = Request::get(path).body(Body::empty()).expect("request");
    let response = telemetry
        .router()
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).expect("utf-8"),
    )
}

#[tokio::test]
async fn router_serves_status_as_json() {
    let telemetry = populated();
    let (status, content_type, body) = get(&telemetry, "/status").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let report: StatusReport = serde_json::from_str(&body).expect("a StatusReport");
    assert_eq!(report.queues[0].name, "wal.pending");
    assert_eq!(report.components[0].state, "backpressured");
}

#[tokio::test]
async fn router_serves_well_formed_prometheus_text() {
    let telemetry = populated();
    let (status, content_type, body) = get(&telemetry, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let samples = parse_prometheus(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert!(samples.iter().all(|(name, _, _)| name.starts_with("weir_")));
    let dropped = [("source", "gen"), ("reason", "qos0_queue_full")];
    assert_eq!(
        sample(&samples, "weir_source_dropped_total", &dropped),
        Some(3.0)
    );
    assert!(
        body.contains("# HELP weir_source_dropped_total Records a source dropped.\n"),
        "{body}"
    );
    assert!(!body.contains(".."), "help texts end with one full stop");
}

#[tokio::test]
async fn router_serves_a_self_contained_dashboard() {
    let (status, content_type, body) = get(&Telemetry::new("h".into()), "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(body.contains(r#"fetch("status""#), "polls /status");
    assert!(body.contains("setInterval(poll, 1000)"), "every second");
    assert!(
        body.contains(r#"getJson("history" + since)"#),
        "polls /history"
    );
    // One document: the markup, the figures and rates, the page's logic.
    assert_eq!(body.matches("<script>").count(), 1);
    assert!(body.contains("function smoothRates(") && body.contains("async function poll()"));
    assert!(body.trim_end().ends_with("</script>\n</body>\n</html>"));
    for external in ["http://", "https://", "<link", "src="] {
        assert!(
            !body.contains(external),
            "no external assets: found {external}"
        );
    }
    let (status, _, _) = get(&Telemetry::new("h".into()), "/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn serve_answers_on_a_loopback_port_until_shutdown() {
    let telemetry = populated();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let telemetry = telemetry.clone();
        async move {
            let limits = crate::serve::Limits {
                max_connections: std::num::NonZeroU32::MIN,
                header_timeout: Duration::from_secs(5),
            };
            telemetry
                .serve(listener, limits, async {
                    let _ = stopped.await;
                })
                .await
        }
    });
    let report: StatusReport = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET /status HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("answered in time")
            .expect("read");
        let answer = String::from_utf8(answer).expect("utf-8");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
        serde_json::from_str(body).expect("a status report")
    };
    assert_eq!(report.config_hash, "sha256:feed");
    stop.send(()).expect("server waiting");
    server.await.expect("joined");
}

#[tokio::test]
async fn router_serves_history_as_json_and_only_newer_samples_after_since() {
    let telemetry = populated();
    let (status, _, body) = get(&telemetry, "/history").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "no history installed: {body}"
    );
    let history = telemetry.install_history(history::History::new(
        history::HistoryLayout::pipeline(["gen"], ["lake"]),
        history::SAMPLE_INTERVAL,
        10,
    ));
    for t in [1_000, 2_000, 3_000] {
        history.record(t, &telemetry.status());
    }
    let (status, content_type, body) = get(&telemetry, "/history").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let report: history::HistoryReport = serde_json::from_str(&body).expect("a HistoryReport");
    assert_eq!(report.t_unix_ms, [1_000, 2_000, 3_000]);
    assert_eq!(report.held, 3);
    let (_, _, body) = get(&telemetry, "/history?since=1000").await;
    let newer: history::HistoryReport = serde_json::from_str(&body).expect("a HistoryReport");
    assert_eq!(newer.t_unix_ms, [2_000, 3_000]);
    let (_, _, body) = get(&telemetry, "/history?since=oops").await;
    let all: history::HistoryReport = serde_json::from_str(&body).expect("a HistoryReport");
    assert_eq!(all.t_unix_ms.len(), 3, "an unreadable since is ignored");
}

#[test]
fn degraded_overlays_the_flow_state_until_cleared_and_failed_wins() {
    let telemetry = Telemetry::new("h".into());
    let sink = telemetry.component(ComponentKind::Sink, "out");
    sink.set_state(State::Backpressured);
    sink.set_degraded("the quarantine is full");
    let report = telemetry.status();
    assert_eq!(report.components[0].state, "degraded");
    assert_eq!(
        report.components[0].reason.as_deref(),
        Some("the quarantine is full")
    );
    // The code that moves records keeps setting its flow state; degraded holds.
    sink.set_state(State::Running);
    assert_eq!(telemetry.status().components[0].state, "degraded");
    let samples = parse_prometheus(&telemetry.render_metrics()).expect("well-formed");
    let state = |state| {
        sample(
            &samples,
            "weir_component_state",
            &[("component", "out"), ("kind", "sink"), ("state", state)],
        )
    };
    assert_eq!(state("degraded"), Some(1.0));
    assert_eq!(state("running"), Some(0.0));

    sink.clear_degraded();
    assert_eq!(telemetry.status().components[0].state, "running");
    assert_eq!(telemetry.status().components[0].reason, None);

    sink.set_degraded("again");
    sink.set_state(State::Failed("gave up".into()));
    let report = telemetry.status();
    assert_eq!(report.components[0].state, "failed");
    assert_eq!(report.components[0].reason.as_deref(), Some("gave up"));
}

async fn post_reload(telemetry: &Telemetry, peer: Option<&str>) -> (StatusCode, String) {
    let mut request = Request::post("/reload")
        .body(Body::empty())
        .expect("request");
    if let Some(peer) = peer {
        request
            .extensions_mut()
            .insert(crate::serve::PeerAddr(peer.parse().expect("address")));
    }
    let response = telemetry
        .router()
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// `POST /reload` runs the hook only for a loopback peer (IPv4, IPv6, or IPv4 mapped
/// into IPv6), answers 422 with the outcome when it was not applied, and 503 without a
/// hook.
#[tokio::test]
async fn reload_is_accepted_only_from_loopback() {
    let telemetry = Telemetry::new("sha256:test".into());
    assert_eq!(
        post_reload(&telemetry, Some("127.0.0.1:5000")).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::sync::Arc::clone(&calls);
    assert!(telemetry.set_reload_hook(std::sync::Arc::new(move || {
        let n = counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async move { (n == 0, serde_json::json!({ "call": n })) })
    })));
    for peer in [None, Some("10.1.2.3:5000"), Some("[2001:db8::1]:5000")] {
        let (status, body) = post_reload(&telemetry, peer).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{peer:?}");
        assert!(body.contains("only from a loopback address"), "{body}");
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 0);
    let (status, body) = post_reload(&telemetry, Some("127.0.0.1:5000")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"call":0}"#));
    let (status, _) = post_reload(&telemetry, Some("[::1]:5000")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "not applied");
    let (status, _) = post_reload(&telemetry, Some("[::ffff:127.0.0.1]:5000")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // Only GET elsewhere; only POST here.
    assert_eq!(
        get(&telemetry, "/reload").await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );
}

/// A forgotten component leaves the states, its queue and its scrape-time metrics.
#[test]
fn a_forgotten_sink_leaves_status_and_metrics() {
    let telemetry = Telemetry::new("sha256:test".into());
    telemetry.component(ComponentKind::Sink, "gone");
    telemetry.component(ComponentKind::Sink, "kept");
    for name in ["gone", "kept"] {
        telemetry.register_queue(&format!("wal->{name}"), Some(2), None, FlowStats::default);
        telemetry.register_counter_fn(
            "weir_sink_records_total",
            "Records a sink stored.",
            &[("sink", name)],
            || 7,
        );
    }
    telemetry.forget_component(ComponentKind::Sink, "gone");
    let status = telemetry.status();
    let names: Vec<&str> = status.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["kept"]);
    let queues: Vec<&str> = status.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(queues, ["wal->kept"]);
    let metrics = telemetry.render_metrics();
    assert!(
        metrics.contains(r#"weir_sink_records_total{sink="kept"} 7"#),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"sink="gone""#), "{metrics}");
}
