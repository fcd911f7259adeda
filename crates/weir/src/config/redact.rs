//! The configuration as it is shown (`/status` → `config`, `{:?}`): every value weir
//! runs with, each credential replaced by `***` ([`crate::keys::redact`]).
//!
//! Shown as `***`: a key whose name says it holds a credential (a Kafka property such
//! as `ssl.key.password`, say), every value of an HTTP sink's `headers` (any of them
//! may carry one: `Authorization`, an API key), and in every URL its user-info and the
//! values of query parameters such as `sig` or `token`. Keys that name where a
//! credential is (`password_env`, `creds_file`) are shown: they hold no secret. The
//! [hash](super::ConfigHash) covers the real values.

use std::fmt;

use serde_json::Value;

use super::Config;
use crate::keys::redact::{MASK, is_secret_name, url};

impl Config {
    /// The configuration as JSON, with every credential shown as `***`.
    ///
    /// # Examples
    ///
    /// ```
    /// use weir::config::Config;
    ///
    /// let text = r#"
    ///     [runtime]
    ///     data_dir = "./weir-data"
    ///     [wal]
    ///     max_disk = "1 GiB"
    ///     on_full = "block"
    ///     [sources.gen]
    ///     type = "generator"
    ///     rate = 0
    ///     [sinks.hook]
    ///     type = "http"
    ///     inputs = ["gen"]
    ///     url = "https://hooks.example/in?token=${HOOK_TOKEN}"
    ///     headers = { Authorization = "Bearer ${HOOK_TOKEN}" }
    /// "#;
    /// let env = |_: &str| Some("s3cr3t".to_owned());
    /// let shown = Config::from_toml_with_env(text, &env)?.redacted();
    /// let hook = &shown["sinks"]["hook"];
    /// assert_eq!(hook["url"], "https://hooks.example/in?token=***");
    /// assert_eq!(hook["headers"][0]["value"]["literal"], "***");
    /// assert!(!shown.to_string().contains("s3cr3t"));
    /// # Ok::<(), weir::config::ConfigErrors>(())
    /// ```
    pub fn redacted(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        mask(&mut value);
        value
    }
}

/// Masks every credential in `value`, at any depth.
fn mask(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(masked) = url(text) {
                *text = masked;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        Value::Object(object) => {
            for (key, item) in object.iter_mut() {
                if is_secret_name(key) {
                    mask_all(item);
                } else if key == "headers" {
                    mask_header_values(item);
                } else {
                    mask(item);
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Every string in `value` becomes `***` (a credential may be a string or a list of
/// them); the shape stays, so `null` still says "not set".
fn mask_all(value: &mut Value) {
    match value {
        Value::String(text) => *text = MASK.to_owned(),
        Value::Array(items) => items.iter_mut().for_each(mask_all),
        Value::Object(object) => object.values_mut().for_each(mask_all),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// An HTTP sink's `headers`: `[{"name": N, "value": {"literal": V}}]`; the values
/// written in the file are masked, the names and the variables (`{"env": NAME}`) are
/// not.
fn mask_header_values(headers: &mut Value) {
    let Value::Array(items) = headers else {
        mask(headers);
        return;
    };
    for header in items {
        match header.get_mut("value").and_then(|v| v.get_mut("literal")) {
            Some(literal) => mask_all(literal),
            None => mask(header),
        }
    }
}

impl fmt::Debug for Config {
    /// The [redacted](Config::redacted) JSON: a configuration printed in a log or a
    /// failed assertion shows no credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Config {}", self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "hunter2-s3cr3t";

    fn config(env: &dyn Fn(&str) -> Option<String>) -> Config {
        let text = r#"
            [runtime]
            data_dir = "/tmp/weir-redact-never-created"
            [wal]
            max_disk = "1 GiB"
            on_full = "block"
            [sources.k]
            type = "kafka"
            brokers = "127.0.0.1:9092"
            topics = ["t"]
            group_id = "g"
            security_protocol = "sasl_ssl"
            sasl_mechanism = "PLAIN"
            sasl_username = "weir"
            sasl_password_env = "KAFKA_PASSWORD"
            properties = { "ssl.key.password" = "${SECRET}", "client.rack" = "r1" }
            [sources.m]
            type = "mqtt"
            url = "mqtt://127.0.0.1:1883"
            topics = ["a/#"]
            password_env = "MQTT_PASSWORD"
            username_env = "MQTT_USER"
            [sinks.hook]
            type = "http"
            inputs = ["k", "m"]
            url = "https://user:${SECRET}@hooks.example/in?sig=${SECRET}&tenant=t1"
            headers = { Authorization = "Bearer ${SECRET}", "X-Tenant" = "t1" }
            headers_env = { "X-Api-Key" = "WEIR_API_KEY" }
        "#;
        Config::from_toml_with_env(text, env).unwrap()
    }

    fn env(name: &str) -> Option<String> {
        (name == "SECRET").then(|| SECRET.to_owned())
    }

    #[test]
    fn credentials_are_masked_and_everything_else_is_shown() {
        let config = config(&env);
        let shown = config.redacted();
        let text = shown.to_string();
        assert!(!text.contains(SECRET), "{text}");
        let hook = &shown["sinks"]["hook"];
        assert_eq!(
            hook["url"],
            "https://user:***@hooks.example/in?sig=***&tenant=t1"
        );
        let headers = hook["headers"].as_array().unwrap();
        assert_eq!(headers[0]["name"], "Authorization");
        assert_eq!(headers[0]["value"]["literal"], "***");
        assert_eq!(headers[1]["value"]["literal"], "***");
        assert_eq!(headers[2]["value"]["env"], "WEIR_API_KEY");
        let kafka = &shown["sources"]["k"];
        assert_eq!(kafka["properties"]["ssl.key.password"], "***");
        assert_eq!(kafka["properties"]["client.rack"], "r1");
        assert_eq!(kafka["sasl_password_env"], "KAFKA_PASSWORD");
        assert_eq!(shown["sources"]["m"]["password_env"], "MQTT_PASSWORD");
        // Debug output is the redacted form, and a header's value is masked in its own.
        let debug = format!("{config:?}");
        assert!(!debug.contains(SECRET) && debug.contains("***"), "{debug}");
        let crate::sinks::SinkKind::Http(http) = &config.sinks["hook"].kind else {
            panic!("an http sink");
        };
        let headers = format!("{:?}", http.headers);
        assert!(
            !headers.contains(SECRET) && headers.contains("Authorization"),
            "{headers}"
        );
    }

    #[test]
    fn the_hash_covers_the_real_values_but_not_readably() {
        let a = config(&env);
        let b = config(&|name: &str| (name == "SECRET").then(|| "other".to_owned()));
        assert_ne!(a.hash(), b.hash(), "a changed password changes the hash");
        assert_eq!(a.redacted(), b.redacted(), "and shows the same");
        assert!(!a.hash().hex().contains(SECRET));
    }
}
