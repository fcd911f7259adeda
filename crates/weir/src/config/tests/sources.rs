//! Source-specific keys: MQTT subscriptions and sessions, HTTP, NATS, file.

use super::*;
use crate::sources::mqtt::{MqttConfig, Qos};

/// A whole configuration around one MQTT source with `keys`.
fn source(keys: &str) -> Result<MqttConfig, Vec<String>> {
    let text = format!(
        "[runtime]\ndata_dir = \"d\"\n[wal]\nmax_disk = \"1 GiB\"\non_full = \"block\"\n\
         [sources.m]\ntype = \"mqtt\"\nurl = \"mqtt://127.0.0.1:18830\"\n{keys}\n\
         [sinks.out]\ntype = \"blackhole\"\ninputs = [\"m\"]\n"
    );
    match Config::from_toml(&text) {
        Ok(config) => match &config.sources["m"].kind {
            SourceKind::Mqtt(mqtt) => Ok(mqtt.clone()),
            other => panic!("not mqtt: {other:?}"),
        },
        Err(errors) => Err(errors.errors().iter().map(ToString::to_string).collect()),
    }
}

#[test]
fn topics_as_filters_take_the_source_qos_and_the_session_follows_qos() {
    let m = source("topics = [\"a/#\", \"b/+\"]").expect("valid");
    assert_eq!(
        m.topics.iter().map(|t| t.qos).collect::<Vec<_>>(),
        [Qos::AtLeastOnce; 2]
    );
    assert!(!m.clean_session, "QoS 1 defaults to a persistent session");
    assert_eq!(m.client_id, "weir-m");
    assert_eq!(m.session_expiry, None);
    let m = source("topics = [\"a/#\"]\nqos = 0").expect("valid");
    assert!(m.clean_session, "all QoS 0 defaults to a clean session");
    let m = source("topics = [{ filter = \"a\", qos = 2 }, \"b\"]\nqos = 0\nprotocol = \"5\"")
        .expect("valid");
    assert_eq!(m.topics[0].qos, Qos::ExactlyOnce);
    assert_eq!(m.topics[1].qos, Qos::AtMostOnce);
    assert_eq!(m.session_expiry, Some(std::time::Duration::from_secs(3600)));
    assert_eq!(m.guard_limit(), 80);
}

#[test]
fn every_mqtt_mistake_is_reported() {
    let errors = source(
        "topics = [\"a/#/b\", { filter = \"c\", qos = 3 }]\nprotocol = 5\nsession_expiry = \"1h\"\n\
         password_env = \"PW\"\nca_file = \"ca.pem\"\nkeepalive = \"1500ms\"",
    )
    .expect_err("invalid");
    let paths: Vec<&str> = errors
        .iter()
        .map(|e| e.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        paths,
        [
            "sources.m.ca_file",
            "sources.m.topics[0]",
            "sources.m.topics[1].qos",
            "sources.m.protocol",
            "sources.m.keepalive",
            "sources.m.password_env",
        ],
        "{errors:#?}"
    );
    assert!(
        errors[3].ends_with("write protocol = \"5\""),
        "{}",
        errors[3]
    );
    let missing = source("").expect_err("no topics");
    assert!(missing[0].starts_with("sources.m.topics: missing required key"));
    let v5_keepalive = source("topics = [\"a\"]\nprotocol = \"5\"\nkeepalive = \"2s\"")
        .expect_err("MQTT 5 keepalive below 5 s");
    assert!(
        v5_keepalive[0]
            .starts_with("sources.m.keepalive: expected at least 5s with protocol = \"5\""),
        "{v5_keepalive:?}"
    );
    assert!(
        source("topics = [\"a\"]\nkeepalive = \"2s\"").is_ok(),
        "3.1.1 allows 1 s"
    );
    let v311_expiry = source("topics = [\"a\"]\nsession_expiry = \"1h\"").expect_err("3.1.1");
    assert!(v311_expiry[0].starts_with("sources.m.session_expiry: needs protocol = \"5\""));
}

#[test]
fn http_file_and_nats_sources_check_their_keys() {
    let http = errors_of_source(
        "type = \"http\"\nlisten = \"localhost:8080\"\npath = \"ingest\"\nauth_token_env = \"MY TOKEN\"",
    );
    let paths: Vec<&str> = http
        .iter()
        .map(|e| e.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        paths,
        [
            "sources.s.listen",
            "sources.s.path",
            "sources.s.auth_token_env"
        ],
        "{http:#?}"
    );
    let file = errors_of_source("type = \"file\"");
    assert_eq!(file.len(), 1);
    assert!(
        file[0].starts_with("sources.s.path: missing required key"),
        "{file:?}"
    );
    let nats = errors_of_source(
        "type = \"nats\"\nurl = \"http://x\"\nstream = \"S\"\nmax_ack_pending = 10\nfetch_batch = 20",
    );
    let paths: Vec<&str> = nats
        .iter()
        .map(|e| e.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        paths,
        [
            "sources.s.url",
            "sources.s.consumer",
            "sources.s.fetch_batch"
        ],
        "{nats:#?}"
    );
    assert!(nats[0].contains("nats:// or tls://"), "{nats:#?}");
}

#[test]
fn source_defaults_are_filled_in() {
    let text = with(
        &[(
            "inputs = [\"gen\"]",
            "inputs = [\"gen\", \"api\", \"lines\"]",
        )],
        "\n[sources.api]\ntype = \"http\"\nlisten = \"127.0.0.1:8080\"\n\
         \n[sources.lines]\ntype = \"file\"\npath = \"-\"\n",
    );
    let config = Config::from_toml(&text).expect("valid");
    let SourceKind::Http(http) = &config.sources["api"].kind else {
        panic!("api is http")
    };
    assert_eq!(http.path, "/ingest");
    assert_eq!(http.max_body, ByteSize::mib(1));
    assert_eq!(
        http.admission_timeout,
        std::time::Duration::from_millis(100)
    );
    assert_eq!(http.auth_token_env, None);
    assert_eq!(http.body_timeout.get(), std::time::Duration::from_secs(10));
    let SourceKind::File(file) = &config.sources["lines"].kind else {
        panic!("lines is file")
    };
    assert_eq!(file.path, std::path::Path::new("-"));
    let SourceKind::Generator(generator) = &config.sources["gen"].kind else {
        panic!("gen is a generator")
    };
    assert_eq!(
        (generator.rate, generator.count, generator.seed),
        (5000, None, 0)
    );
}
