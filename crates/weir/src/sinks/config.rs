//! The keys every sink has: `inputs`, the filter (`where`, `on_filter_error`),
//! retention (`required`, `max_lag`, `start_from`), the WAL reads and the driver
//! channel, `retry`, `rename_from`, the startup check (`healthcheck`,
//! `healthcheck_timeout`). The sink type's own keys
//! are in its folder's `config.rs`.

use std::num::NonZeroU32;

use serde::Serialize;
use weir_wal::StartFrom;

use super::{NOT_BUILT, SinkKind, TYPES};
use crate::keys::walk::closest;
use crate::keys::{ByteSize, Duration, Section, read_type};
use crate::pipeline::filter::{Filter, OnFilterError, SinkFilter};

/// One configured sink: the keys every sink has, and its type's own. The keys are
/// declared where they are parsed (`weir config reference` lists them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinkConfig {
    /// `inputs`: the source names this sink reads (not empty, each configured).
    pub inputs: Vec<String>,
    /// `where` (compiled) and `on_filter_error`: which records of its inputs it gets.
    #[serde(flatten)]
    pub filter: Option<SinkFilter>,
    /// `required`: whether WAL retention waits for this sink.
    pub required: bool,
    /// `max_lag`: how far behind a required sink may fall before it is evicted from
    /// retention.
    pub max_lag: Option<MaxLag>,
    /// `start_from`: where a sink with no cursor starts.
    pub start_from: StartFrom,
    /// `read_batch_records`: records per WAL read.
    pub read_batch_records: NonZeroU32,
    /// `read_batch_bytes`: bytes per WAL read.
    pub read_batch_bytes: ByteSize,
    /// `channel_batches`: read batches the driver channel holds.
    pub channel_batches: NonZeroU32,
    /// `retry`: backoff between retries of a failed write.
    pub retry: Retry,
    /// `rename_from`: the sink's earlier name, whose WAL cursor and state
    /// (`<data_dir>/sinks/<name>/`) it takes over before the WAL opens. Left out of the
    /// serialized form when unset, so that configurations without it keep their hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rename_from: Option<String>,
    /// `healthcheck`: whether `weir run` checks the destination before it opens the
    /// WAL ([`SinkConfig::healthcheck`](crate::sinks::SinkConfig::healthcheck)).
    pub healthcheck: bool,
    /// `healthcheck_timeout`: how long that check may take.
    pub healthcheck_timeout: Duration,
    /// The sink type and its own keys.
    #[serde(flatten)]
    pub kind: SinkKind,
}

/// `max_lag = { bytes, age }`: at least one of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MaxLag {
    /// `max_lag.bytes`: the largest distance, in WAL bytes, behind the durable end.
    pub bytes: Option<ByteSize>,
    /// `max_lag.age`: the largest age of the oldest unread record.
    pub age: Option<Duration>,
}

/// `retry = { initial, max }`: exponential backoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retry {
    /// `retry.initial`: the first delay.
    pub initial: Duration,
    /// `retry.max`: the largest delay.
    pub max: Duration,
}

impl SinkConfig {
    /// How the driver of the sink `name` reads for it: its inputs, read bounds,
    /// channel, retry backoff and filter.
    pub fn driver_config(&self, name: &str) -> crate::pipeline::driver::DriverConfig {
        crate::pipeline::driver::DriverConfig {
            name: name.to_owned(),
            inputs: self.inputs.clone(),
            limits: weir_wal::ReadLimits {
                max_records: self.read_batch_records.get() as usize,
                max_bytes: self.read_batch_bytes.bytes(),
            },
            channel_batches: self.channel_batches.get() as usize,
            retry_initial: self.retry.initial.get(),
            retry_max: self.retry.max.get(),
            filter: self.filter.clone(),
        }
    }

    /// Default `read_batch_bytes`.
    pub const DEFAULT_READ_BATCH_BYTES: ByteSize = ByteSize::mib(1);

    /// Reads one sink. Unknown keys are reported only when the type is known.
    /// `sources` are the names under `[sources]`, whether or not they parsed.
    pub fn parse(mut s: Section<'_>, sources: &[&str]) -> Option<Self> {
        let type_name = read_type(
            &mut s,
            TYPES,
            NOT_BUILT.iter().map(|(t, _)| *t),
            "sink",
            "The sink type: its own keys are listed under its name below.",
        );
        let inputs = parse_inputs(&mut s, sources);
        let filter = parse_filter(&mut s);
        let required = s
            .key(
                "required",
                "Whether WAL retention waits for this sink (false: it falls behind into a counted gap instead).",
            )
            .or(true);
        let max_lag = s
            .key(
                "max_lag",
                "A required sink further behind than this is evicted from retention (a counted loss for this sink only).",
            )
            .default_text("no limit")
            .table()
            .and_then(parse_max_lag);
        if max_lag.is_some() && !required {
            s.error("max_lag", "only applies to required sinks; a sink with required = false never holds WAL retention");
        }
        let start_from = s
            .key(
                "start_from",
                "Where a sink with no cursor starts in the WAL.",
            )
            .or(StartFrom::Earliest);
        let read_batch_records = s
            .key("read_batch_records", "Records per WAL read.")
            .unit("records")
            .or(NonZeroU32::new(1024).expect("1024 > 0"));
        let read_batch_bytes = s
            .key(
                "read_batch_bytes",
                "Bytes per WAL read (a single larger record is still read alone).",
            )
            .or(Self::DEFAULT_READ_BATCH_BYTES);
        let channel_batches = s
            .key(
                "channel_batches",
                "Read batches the driver channel holds; its byte bound is `channel_batches × read_batch_bytes`.",
            )
            .or(NonZeroU32::new(2).expect("2 > 0"));
        let retry = parse_retry(&mut s);
        let rename_from = parse_rename_from(&mut s);
        let healthcheck = s
            .key(
                "healthcheck",
                "Before it opens the WAL, `weir run` checks that the destination is reachable: `object_store` resolves its credentials and writes and deletes `_weir_healthcheck` under its prefix, `http` connects (and makes its TLS handshake), `nats` finds its stream; a failure exits naming the key. false: start anyway (the sink shows `failed` with the reason until it succeeds). Sinks that write local files have nothing to check.",
            )
            .or(true);
        let healthcheck_timeout = s
            .key(
                "healthcheck_timeout",
                "How long the startup check may take before it fails.",
            )
            .or(Duration::secs(10));
        // Unknown keys are reported only when the type is known: otherwise every key
        // of the type would look unknown.
        let type_name = type_name?;
        let kind = match NOT_BUILT.iter().find(|(t, _)| *t == type_name) {
            Some((_, parse)) => {
                parse(&mut s);
                None
            }
            None => SinkKind::parse(type_name, &mut s),
        };
        s.finish();
        Some(Self {
            inputs: inputs?,
            filter,
            required,
            max_lag,
            start_from,
            read_batch_records,
            read_batch_bytes,
            channel_batches,
            retry,
            rename_from,
            healthcheck,
            healthcheck_timeout,
            kind: kind?,
        })
    }

    /// Byte cap of the driver channel: `channel_batches × read_batch_bytes`.
    pub fn channel_bytes(&self) -> u64 {
        u64::from(self.channel_batches.get()).saturating_mul(self.read_batch_bytes.bytes())
    }
}

fn parse_inputs(s: &mut Section<'_>, sources: &[&str]) -> Option<Vec<String>> {
    let declared = s
        .key("inputs", "Names of the sources this sink reads.")
        .required()
        .example(vec!["gen"])
        .raw("list of source names");
    let Some(value) = declared else {
        s.error(
            "inputs",
            r#"missing required key (expected a list of source names, e.g. inputs = ["gen"])"#,
        );
        return None;
    };
    if !value.is_array() {
        let hint = value
            .as_str()
            .map_or_else(String::new, |name| format!(": write inputs = [{name:?}]"));
        s.error(
            "inputs",
            format!(
                "expected a list of source names, found {}{hint}",
                crate::keys::units::describe(value)
            ),
        );
        return None;
    }
    let inputs = s.read_list::<String>("inputs", value)?;
    if inputs.is_empty() {
        s.error(
            "inputs",
            "expected at least one source name, found an empty list",
        );
        return None;
    }
    let path = s.key_path("inputs");
    let mut ok = true;
    for (i, input) in inputs.iter().enumerate() {
        let element = format!("{path}[{i}]");
        if inputs[..i].contains(input) {
            s.diagnostics()
                .error(&element, format!("{input:?} is listed twice"));
            ok = false;
        } else if !sources.contains(&input.as_str()) {
            let mut message = format!("no source named {input:?}; ");
            if sources.is_empty() {
                message.push_str("no sources are configured");
            } else {
                message.push_str(&format!("configured sources: {}", sources.join(", ")));
            }
            if let Some(close) = closest(input, sources) {
                message.push_str(&format!(" (did you mean \"{close}\"?)"));
            }
            s.diagnostics().error(&element, message);
            ok = false;
        }
    }
    ok.then_some(inputs)
}

fn parse_rename_from(s: &mut Section<'_>) -> Option<String> {
    let old: String = s
        .key(
            "rename_from",
            "The sink's earlier name: at startup its WAL cursor and its state (`<data_dir>/sinks/<old>/`) become this sink's, so it resumes where the old one stopped; harmless once done.",
        )
        .example("lake_v1")
        .opt()?;
    let bare = !old.is_empty()
        && old
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !bare {
        s.error(
            "rename_from",
            format!("expected a sink name (letters, digits, '_' and '-'), found {old:?}"),
        );
        return None;
    }
    Some(old)
}

fn parse_filter(s: &mut Section<'_>) -> Option<SinkFilter> {
    let expression: Option<String> = s
        .key(
            "where",
            "A jq expression: the sink gets only the records of its inputs for which it is true; the others advance its cursor, counted as `filtered` ([filters](filters.md)).",
        )
        .example(r#".temp > 30 and $key == "sensors/d1""#)
        .opt();
    let given = s.has("where");
    let on_error = s
        .key(
            "on_filter_error",
            "What a record the `where` expression fails on (a field read from a payload that is not a JSON object, `error(…)`) becomes; counted as `filter_errors` and logged either way.",
        )
        .only_if(given, "only applies to a sink with `where`")
        .or(OnFilterError::Drop);
    match Filter::compile(&expression?) {
        Ok(filter) => Some(SinkFilter { filter, on_error }),
        Err(e) => {
            s.error("where", e.to_string());
            None
        }
    }
}

fn parse_max_lag(mut t: Section<'_>) -> Option<MaxLag> {
    let lag = MaxLag {
        bytes: t
            .key(
                "bytes",
                "Largest distance, in WAL bytes, behind the durable end.",
            )
            .example("1 GiB")
            .opt(),
        age: t
            .key("age", "Largest age of the oldest record not yet read.")
            .example("1h")
            .opt(),
    };
    let given = t.has("bytes") || t.has("age");
    if !given {
        t.error_here(
            "expected bytes, age or both, e.g. max_lag = { bytes = \"1 GiB\", age = \"1h\" }",
        );
    }
    t.finish();
    (lag.bytes.is_some() || lag.age.is_some()).then_some(lag)
}

fn parse_retry(s: &mut Section<'_>) -> Retry {
    let default = Retry {
        initial: Duration::millis(100),
        max: Duration::secs(30),
    };
    let declared = s
        .key(
            "retry",
            "Exponential backoff between retries of a failed write.",
        )
        .table();
    let Some(mut t) = declared else {
        return default;
    };
    let retry = Retry {
        initial: t.key("initial", "First delay.").or(default.initial),
        max: t.key("max", "Largest delay.").or(default.max),
    };
    if retry.initial > retry.max && !t.failed(&["initial", "max"]) {
        t.error(
            "initial",
            format!("{} is longer than retry.max = {}", retry.initial, retry.max),
        );
    }
    t.finish();
    retry
}
