//! The values of the `mqtt` source's keys: the broker URL, QoS, protocol version, and
//! the subscriptions of `topics` with their checks.

use serde::Serialize;
use toml::Value;

use crate::keys::units::{FromValue, ToValue, describe, mismatch, string_enum};
use crate::keys::{Section, join};

/// MQTT quality of service of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u8")]
#[allow(clippy::enum_variant_names, reason = "the MQTT specification's names")]
pub enum Qos {
    /// At most once: nothing to withhold; a byte-bounded queue drops the newest.
    AtMostOnce,
    /// At least once: the PUBACK is withheld until the record is durable.
    AtLeastOnce,
    /// Exactly once: PUBREC withheld until durable.
    ExactlyOnce,
}

impl From<Qos> for u8 {
    fn from(qos: Qos) -> Self {
        match qos {
            Qos::AtMostOnce => 0,
            Qos::AtLeastOnce => 1,
            Qos::ExactlyOnce => 2,
        }
    }
}

impl ToValue for Qos {
    fn to_value(&self) -> Value {
        Value::Integer(u8::from(*self).into())
    }
}

impl FromValue for Qos {
    const EXPECTED: &'static str = "a QoS of 0, 1 or 2";
    const KIND: &'static str = "one of 0 | 1 | 2";
    fn from_value(value: &Value) -> Result<Self, String> {
        match value.as_integer() {
            Some(0) => Ok(Self::AtMostOnce),
            Some(1) => Ok(Self::AtLeastOnce),
            Some(2) => Ok(Self::ExactlyOnce),
            _ => Err(mismatch(Self::EXPECTED, value)),
        }
    }
}

/// MQTT protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MqttProtocol {
    /// MQTT 3.1.1: the receive window is the broker's setting.
    V311,
    /// MQTT 5: the client announces its receive maximum.
    V5,
}

string_enum!(MqttProtocol { "3.1.1" => V311, "5" => V5 });

/// Plain TCP or TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MqttScheme {
    /// `mqtt://`, default port 1883.
    Tcp,
    /// `mqtts://`, default port 8883.
    Tls,
}

string_enum!(MqttScheme { "mqtt" => Tcp, "mqtts" => Tls });

/// A parsed broker URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MqttUrl {
    /// `mqtt` or `mqtts`.
    pub scheme: MqttScheme,
    /// Host name or IP address.
    pub host: String,
    /// Port (1883 or 8883 when not written).
    pub port: u16,
}

impl FromValue for MqttUrl {
    const EXPECTED: &'static str = r#"a URL like "mqtt://127.0.0.1:1883" or "mqtts://broker:8883""#;
    const KIND: &'static str = r#"URL ("mqtt://host:1883", "mqtts://host:8883")"#;
    fn from_value(value: &Value) -> Result<Self, String> {
        let bad = || mismatch(Self::EXPECTED, value);
        let text = value.as_str().ok_or_else(bad)?;
        let (scheme, rest) = text.split_once("://").ok_or_else(bad)?;
        let scheme = match scheme {
            "mqtt" => MqttScheme::Tcp,
            "mqtts" => MqttScheme::Tls,
            _ => return Err(bad()),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['@', '/', '?', '#']) {
            return Err(format!(
                "{}: credentials go in username_env/password_env, and the URL has no path",
                bad()
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && !host.ends_with(':') => {
                (host, port.parse::<u16>().map_err(|_| bad())?)
            }
            Some(_) => return Err(bad()),
            None => (
                authority,
                if scheme == MqttScheme::Tls {
                    8883
                } else {
                    1883
                },
            ),
        };
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
        })
    }
}

/// One subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MqttTopic {
    /// Topic filter; `+` matches one level, `#` the rest.
    pub filter: String,
    /// Requested QoS.
    pub qos: Qos,
}

/// Reads `topics`: a non-empty list of filters or `{ filter, qos }` tables.
pub(super) fn parse_topics(s: &mut Section<'_>, default_qos: Qos) -> Option<Vec<MqttTopic>> {
    let path = s.key_path("topics");
    let diag = s.diagnostics();
    let declared = s
        .key(
            "topics",
            "Subscriptions: topic filters (with the source's `qos`) or `{ filter, qos }` tables.",
        )
        .required()
        .example(vec!["sensors/#"])
        .raw("list of topic filters or { filter, qos } tables");
    if let Some(template) = s.element_template("topics") {
        parse_topic(template, default_qos);
    }
    let Some(value) = declared else {
        s.error("topics", r#"missing required key (expected a list like ["sensors/#"] or [{ filter = "sensors/#", qos = 1 }])"#);
        return None;
    };
    let Some(array) = value.as_array().filter(|a| !a.is_empty()) else {
        s.error(
            "topics",
            format!(
                "expected a non-empty list of topic filters, found {}",
                describe(value)
            ),
        );
        return None;
    };
    let mut topics = Vec::with_capacity(array.len());
    let mut ok = true;
    for (i, element) in array.iter().enumerate() {
        let element_path = format!("{path}[{i}]");
        let topic = match element {
            Value::String(filter) => Some(MqttTopic {
                filter: filter.clone(),
                qos: default_qos,
            }),
            Value::Table(table) => parse_topic(s.element("topics", i, table), default_qos),
            other => {
                diag.error(
                    &element_path,
                    format!(
                        "expected a topic filter or {{ filter, qos }}, found {}",
                        describe(other)
                    ),
                );
                None
            }
        };
        match topic {
            Some(topic) => {
                if let Err(message) = check_filter(&topic.filter) {
                    let filter_path = if element.is_table() {
                        join(&element_path, "filter")
                    } else {
                        element_path
                    };
                    diag.error(&filter_path, message);
                    ok = false;
                } else if topics.iter().any(|t: &MqttTopic| t.filter == topic.filter) {
                    diag.error(
                        &element_path,
                        format!("{:?} is subscribed twice", topic.filter),
                    );
                    ok = false;
                }
                topics.push(topic);
            }
            None => ok = false,
        }
    }
    ok.then_some(topics)
}

/// Reads one `{ filter, qos }` subscription.
fn parse_topic(mut t: Section<'_>, default_qos: Qos) -> Option<MqttTopic> {
    let filter = t
        .key(
            "filter",
            "Topic filter; `+` matches one level, `#` the rest.",
        )
        .example("sensors/#")
        .req::<String>("");
    let qos = t
        .key("qos", "Requested QoS of this subscription.")
        .default_text("the source's `qos`")
        .or(default_qos);
    t.finish();
    filter.map(|filter| MqttTopic { filter, qos })
}

/// Checks an MQTT topic filter: non-empty, `#` only as the whole last level, `+` only as
/// a whole level.
fn check_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() {
        return Err("expected a topic filter, found an empty string".to_owned());
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let wildcard_misused = (level.contains('#') && (*level != "#" || i + 1 != levels.len()))
            || (level.contains('+') && *level != "+");
        if wildcard_misused {
            return Err(format!(
                "{filter:?} is not a valid topic filter: '+' must be a whole level and '#' the whole last level"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Result<MqttUrl, String> {
        MqttUrl::from_value(&Value::String(text.to_owned()))
    }

    #[test]
    fn urls_take_scheme_host_and_port() {
        assert_eq!(
            url("mqtt://127.0.0.1:18830"),
            Ok(MqttUrl {
                scheme: MqttScheme::Tcp,
                host: "127.0.0.1".into(),
                port: 18830
            })
        );
        assert_eq!(url("mqtts://broker").map(|u| u.port), Ok(8883));
        assert_eq!(url("mqtt://broker/").map(|u| u.port), Ok(1883));
        assert!(url("http://broker").is_err());
        assert!(
            url("mqtt://user:pw@broker")
                .unwrap_err()
                .contains("username_env")
        );
        assert!(url("mqtt://broker:99999").is_err());
        assert!(url("mqtt://:1883").is_err());
    }

    #[test]
    fn filters_check_wildcards() {
        assert!(check_filter("sensors/#").is_ok());
        assert!(check_filter("sensors/+/temp").is_ok());
        assert!(check_filter("#").is_ok());
        assert!(check_filter("sensors/#/temp").is_err());
        assert!(check_filter("sensors/te+").is_err());
        assert!(check_filter("").is_err());
    }
}
