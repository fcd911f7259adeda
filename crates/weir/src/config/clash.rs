//! Sources that would fight over one session on a broker: two MQTT sources with one
//! client id on one broker, and two NATS sources binding one durable consumer with
//! different filters.

use super::Config;
use crate::keys::{ConfigError, join};
use crate::sources::SourceKind;

/// Reports every such pair at the later source's key, naming the earlier one.
pub(super) fn check_sessions(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    check_mqtt_client_ids(config, failed, errors);
    check_nats_durables(config, failed, errors);
}

/// An MQTT broker allows one connection per client id: a second one with the same id
/// takes the session over and disconnects the first, which reconnects and disconnects
/// the second, and so on.
fn check_mqtt_client_ids(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    let mut seen: Vec<(String, String, u16, &str)> = Vec::new();
    for (name, source) in &config.sources {
        let SourceKind::Mqtt(mqtt) = &source.kind else {
            continue;
        };
        let path = join("sources", name);
        if failed(&join(&path, "url")) || failed(&join(&path, "client_id")) {
            continue;
        }
        let host = mqtt.url.host.to_ascii_lowercase();
        let clash = seen.iter().find(|(_, other_host, other_port, id)| {
            *other_host == host && *other_port == mqtt.url.port && *id == mqtt.client_id
        });
        if let Some((other, ..)) = clash {
            errors.push(ConfigError::Key {
                path: join(&path, "client_id"),
                message: format!(
                    "{:?} is also the client id of {other} on the same broker ({host}:{}); a broker \
                     keeps one connection per client id, so each would disconnect the other in a \
                     reconnect loop: give each source its own client_id",
                    mqtt.client_id, mqtt.url.port
                ),
            });
            continue;
        }
        seen.push((path, host, mqtt.url.port, &mqtt.client_id));
    }
}

/// A JetStream durable consumer has one set of filter subjects: two sources binding it
/// with different `subjects` would each reconfigure it (or fail to bind), and each would
/// receive the other's messages.
fn check_nats_durables(
    config: &Config,
    failed: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    struct Durable<'a> {
        path: String,
        urls: Vec<String>,
        stream: &'a str,
        consumer: &'a str,
        subjects: Vec<&'a str>,
    }
    let mut seen: Vec<Durable<'_>> = Vec::new();
    for (name, source) in &config.sources {
        let SourceKind::Nats(nats) = &source.kind else {
            continue;
        };
        let path = join("sources", name);
        let keys = ["url", "stream", "consumer", "subjects"];
        if keys.iter().any(|key| failed(&join(&path, key))) {
            continue;
        }
        let mut subjects: Vec<&str> = nats.subjects.iter().map(String::as_str).collect();
        subjects.sort_unstable();
        subjects.dedup();
        let durable = Durable {
            path,
            urls: nats.url.iter().map(|u| normal_url(u)).collect(),
            stream: &nats.stream,
            consumer: &nats.consumer,
            subjects,
        };
        let clash = seen.iter().find(|other| {
            other.stream == durable.stream
                && other.consumer == durable.consumer
                && other.urls.iter().any(|u| durable.urls.contains(u))
                && other.subjects != durable.subjects
        });
        if let Some(other) = clash {
            let shown = |subjects: &[&str]| {
                if subjects.is_empty() {
                    "the whole stream".to_owned()
                } else {
                    format!("{subjects:?}")
                }
            };
            errors.push(ConfigError::Key {
                path: join(&durable.path, "subjects"),
                message: format!(
                    "{} binds the durable consumer {:?} of stream {:?} on the same server as {}, \
                     which filters {}; a durable consumer has one set of filters, so the two would \
                     reconfigure it or receive each other's messages: give this source its own \
                     consumer name, or the same subjects",
                    shown(&durable.subjects),
                    durable.consumer,
                    durable.stream,
                    other.path,
                    shown(&other.subjects)
                ),
            });
            continue;
        }
        seen.push(durable);
    }
}

/// A server URL as compared: lower case, without a trailing `/`.
fn normal_url(url: &str) -> String {
    url.trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const HEAD: &str = r#"
        [runtime]
        data_dir = "/tmp/weir-clash-never-created"
        [wal]
        max_disk = "1 GiB"
        on_full = "block"
        [sinks.out]
        type = "blackhole"
        inputs = ["a", "b"]
    "#;

    fn errors(sources: &str) -> Vec<String> {
        match Config::from_toml(&format!("{HEAD}{sources}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors().iter().map(ToString::to_string).collect(),
        }
    }

    fn mqtt(name: &str, url: &str, client_id: Option<&str>) -> String {
        let id = client_id.map_or_else(String::new, |id| format!("client_id = {id:?}"));
        format!("[sources.{name}]\ntype = \"mqtt\"\nurl = {url:?}\ntopics = [\"t/#\"]\n{id}\n")
    }

    #[test]
    fn two_mqtt_sources_with_one_client_id_on_one_broker_are_refused() {
        let found = errors(&format!(
            "{}{}",
            mqtt("a", "mqtt://Broker.example:1883", Some("ingest")),
            mqtt("b", "mqtt://broker.example", Some("ingest"))
        ));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .starts_with("sources.b.client_id: \"ingest\" is also the client id of sources.a")
                && found[0].contains("own client_id"),
            "{found:?}"
        );
        // The default client id of `a` (weir-a) taken explicitly by `b`.
        let found = errors(&format!(
            "{}{}",
            mqtt("a", "mqtt://127.0.0.1:1883", None),
            mqtt("b", "mqtt://127.0.0.1:1883", Some("weir-a"))
        ));
        assert_eq!(found.len(), 1, "{found:?}");
    }

    #[test]
    fn one_client_id_on_two_brokers_or_two_ids_on_one_broker_are_fine() {
        for sources in [
            format!(
                "{}{}",
                mqtt("a", "mqtt://127.0.0.1:1883", Some("ingest")),
                mqtt("b", "mqtt://127.0.0.1:1884", Some("ingest"))
            ),
            format!(
                "{}{}",
                mqtt("a", "mqtt://127.0.0.1:1883", None),
                mqtt("b", "mqtt://127.0.0.1:1883", None)
            ),
        ] {
            assert_eq!(errors(&sources), Vec::<String>::new());
        }
    }

    fn nats(name: &str, url: &str, consumer: &str, subjects: &[&str]) -> String {
        format!(
            "[sources.{name}]\ntype = \"nats\"\nurl = {url:?}\nstream = \"EVENTS\"\nconsumer = {consumer:?}\nsubjects = {subjects:?}\n"
        )
    }

    /// A source on a cluster: one server in common is the same server.
    fn nats_cluster(name: &str, urls: &[&str], consumer: &str, subjects: &[&str]) -> String {
        nats(name, "nats://x:1", consumer, subjects).replace("\"nats://x:1\"", &format!("{urls:?}"))
    }

    #[test]
    fn one_durable_consumer_with_two_filters_is_refused() {
        let found = errors(&format!(
            "{}{}",
            nats("a", "nats://127.0.0.1:4222", "weir", &["events.a"]),
            nats_cluster(
                "b",
                &["nats://127.0.0.2:4222", "nats://127.0.0.1:4222"],
                "weir",
                &["events.b"]
            )
        ));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "sources.b.subjects: [\"events.b\"] binds the durable consumer \"weir\""
            ) && found[0].contains("sources.a, which filters [\"events.a\"]"),
            "{found:?}"
        );
        // The whole stream against a filter clashes too.
        let found = errors(&format!(
            "{}{}",
            nats("a", "nats://127.0.0.1:4222", "weir", &[]),
            nats("b", "nats://127.0.0.1:4222", "weir", &["events.b"])
        ));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("the whole stream"), "{found:?}");
    }

    #[test]
    fn one_durable_with_the_same_filters_or_two_durables_are_fine() {
        for sources in [
            // The same filters in another order: one consumer shared.
            format!(
                "{}{}",
                nats("a", "nats://127.0.0.1:4222", "weir", &["x", "y"]),
                nats("b", "nats://127.0.0.1:4222", "weir", &["y", "x"])
            ),
            format!(
                "{}{}",
                nats("a", "nats://127.0.0.1:4222", "weir-a", &["events.a"]),
                nats("b", "nats://127.0.0.1:4222", "weir-b", &["events.b"])
            ),
            format!(
                "{}{}",
                nats("a", "nats://127.0.0.1:4222", "weir", &["events.a"]),
                nats("b", "nats://127.0.0.2:4222", "weir", &["events.b"])
            ),
        ] {
            assert_eq!(errors(&sources), Vec::<String>::new());
        }
    }
}
