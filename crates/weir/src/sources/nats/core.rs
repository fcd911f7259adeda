//! The `nats` source's policy, sans IO: which fetched messages are owed an ack, which
//! are due a progress ack, which redeliveries are already durable; the server-version
//! gate and the subject-filter check. The shell feeds it `now` and the messages.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;

/// A server version, `major.minor.patch` (a `-beta` suffix is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// The first version whose consumers honour `filter_subjects`.
    pub const MULTI_FILTER: Version = Version(2, 10, 0);

    /// Parses `"2.9.10"`, `"v2.10.0-beta.1"`; `None` when it is not a version.
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.trim().trim_start_matches('v');
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next()??;
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Refuses more than one subject filter below 2.10: older servers ignore
/// `filter_subjects` and deliver the whole stream.
///
/// # Errors
///
/// What is wrong and what to do.
pub fn version_gate(version: &str, subjects: &[String]) -> Result<(), String> {
    if subjects.len() <= 1 {
        return Ok(());
    }
    match Version::parse(version) {
        Some(v) if v >= Version::MULTI_FILTER => Ok(()),
        Some(v) => Err(format!(
            "subjects: {} subject filters need nats-server 2.10 or later, the server is {v} \
             (older servers ignore filter_subjects and deliver the whole stream); use one \
             subject, or a stream or server that covers only what this source should read",
            subjects.len()
        )),
        None => Err(format!(
            "subjects: {} subject filters need nats-server 2.10 or later, and the server's \
             version {version:?} cannot be read; use one subject",
            subjects.len()
        )),
    }
}

/// Checks that the consumer filters what was configured (the server returns its
/// filter in the consumer info; an old server drops what it does not know).
///
/// # Errors
///
/// The configured and the found filters.
pub fn check_consumer_filter(
    configured: &[String],
    filter_subject: &str,
    filter_subjects: &[String],
) -> Result<(), String> {
    let mut found: Vec<&str> = filter_subjects.iter().map(String::as_str).collect();
    if !filter_subject.is_empty() {
        found.push(filter_subject);
    }
    found.sort_unstable();
    let mut wanted: Vec<&str> = configured.iter().map(String::as_str).collect();
    wanted.sort_unstable();
    if found == wanted {
        Ok(())
    } else {
        Err(format!(
            "subjects: the consumer filters {found:?}, but {wanted:?} is configured; a consumer \
             bound by several sources or instances must have one filter: change subjects, or \
             delete the consumer so that weir creates it"
        ))
    }
}

/// Checks a NATS subject filter: non-empty tokens separated by `.`, `*` only as a whole
/// token, `>` only as the whole last token, no whitespace.
///
/// # Errors
///
/// Why it is not a filter.
pub fn check_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() || filter.contains(char::is_whitespace) {
        return Err(format!(
            "{filter:?} is not a subject filter (empty, or with whitespace)"
        ));
    }
    let tokens: Vec<&str> = filter.split('.').collect();
    for (i, token) in tokens.iter().enumerate() {
        let bad = token.is_empty()
            || (token.contains('*') && *token != "*")
            || (token.contains('>') && (*token != ">" || i + 1 != tokens.len()));
        if bad {
            return Err(format!(
                "{filter:?} is not a subject filter: tokens are non-empty, '*' is a whole token and '>' the whole last token"
            ));
        }
    }
    Ok(())
}

/// What the ledger says about a message just fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// New: write it to the WAL.
    New,
    /// A redelivery of a message still on its way to the WAL: not written twice; its
    /// newest reply subject is the one acked.
    AlreadyPending,
    /// A redelivery of a message already made durable in this run: ack it (its reply
    /// subject, handed back), do not write it again.
    AlreadyDurable(String),
}

/// A message fetched and not yet acked.
#[derive(Debug)]
struct Pending {
    reply: String,
    /// When it was fetched or last progress-acked (ms).
    touched_ms: u64,
}

/// The ledger's settings.
#[derive(Debug, Clone)]
pub struct LedgerConfig {
    /// `max_inflight`: the credits.
    pub max_inflight: u64,
    /// The consumer's `ack_wait` (ms), as the server reported it.
    pub ack_wait_ms: u64,
    /// How many durable stream sequences are remembered to recognise redeliveries.
    pub remembered: usize,
}

/// Counters and state for `/status` (`sources.NAME.nats`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NatsStatus {
    /// The server's version, once connected.
    pub server_version: String,
    /// The stream and consumer.
    pub stream: String,
    /// The durable consumer.
    pub consumer: String,
    /// Credits: messages fetched and not yet durable, at most.
    pub max_inflight: u64,
    /// Messages fetched and not yet durable (credits in use).
    pub credits_outstanding: u64,
    /// Credits granted and not yet used by a fetch.
    pub credits_available: u64,
    /// The consumer's ack-pending count, as the server last reported it (every
    /// instance sharing the consumer counts).
    pub ack_pending: u64,
    /// The consumer's messages not yet delivered, as the server last reported it.
    pub num_pending: u64,
    /// The consumer's `ack_wait` (ms).
    pub ack_wait_ms: u64,
    /// The consumer's `max_ack_pending`.
    pub consumer_max_ack_pending: i64,
    /// The consumer's `max_deliver` (-1: unlimited).
    pub max_deliver: i64,
    /// Messages fetched.
    pub fetched: u64,
    /// Fetch requests sent.
    pub fetches: u64,
    /// Messages delivered more than once (the server's delivery count above 1).
    pub redelivered: u64,
    /// Redeliveries already durable in this run: acked, not written again.
    pub duplicates_acked: u64,
    /// Acks sent (`+ACK`).
    pub acked: u64,
    /// Acks that failed to go out or to be confirmed.
    pub ack_errors: u64,
    /// Progress acks sent (`+WPI`) for messages waiting longer than half of `ack_wait`.
    pub progress_acks: u64,
    /// Messages larger than `max_message_bytes`, quarantined and acked.
    pub quarantined: u64,
    /// The highest stream sequence made durable (or quarantined) in this run; 0 before
    /// the first.
    pub last_durable_seq: u64,
    /// The consumer's ack floor as the server last reported it: every message up to
    /// it was acked (by any instance).
    pub ack_floor_seq: u64,
    /// Times the durable consumer was found deleted and created again.
    pub consumer_recreated: u64,
    /// Fetch requests that failed.
    pub fetch_errors: u64,
    /// Units appended to the WAL and not yet durable (several are on their way at
    /// once: unit k+1 is appended while unit k is fsynced).
    pub units_in_flight: u64,
    /// The most ever on their way at once.
    pub max_units_in_flight: u64,
    /// The last fetch, ack or connection error.
    pub last_error: Option<String>,
    /// The startup warnings about the consumer's settings.
    pub warnings: Vec<String>,
}

/// Which fetched messages are owed what. See the [module docs](self).
#[derive(Debug)]
pub struct Ledger {
    config: LedgerConfig,
    pending: HashMap<u64, Pending>,
    durable: HashSet<u64>,
    durable_order: VecDeque<u64>,
    status: NatsStatus,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(config: LedgerConfig) -> Self {
        let status = NatsStatus {
            max_inflight: config.max_inflight,
            ack_wait_ms: config.ack_wait_ms,
            ..NatsStatus::default()
        };
        Ledger {
            config,
            pending: HashMap::new(),
            durable: HashSet::new(),
            durable_order: VecDeque::new(),
            status,
        }
    }

    /// Sets the consumer's `ack_wait` (as read from the server).
    pub fn set_ack_wait_ms(&mut self, ack_wait_ms: u64) {
        self.config.ack_wait_ms = ack_wait_ms.max(1);
        self.status.ack_wait_ms = self.config.ack_wait_ms;
    }

    /// A message was fetched: stream sequence `seq`, delivery count `delivered`, its
    /// ack subject `reply`.
    pub fn fetched(&mut self, seq: u64, delivered: u64, reply: String, now_ms: u64) -> Fetched {
        self.status.fetched += 1;
        if delivered > 1 {
            self.status.redelivered += 1;
        }
        if let Some(p) = self.pending.get_mut(&seq) {
            p.reply = reply;
            p.touched_ms = now_ms;
            return Fetched::AlreadyPending;
        }
        if delivered > 1 && self.durable.contains(&seq) {
            self.status.duplicates_acked += 1;
            return Fetched::AlreadyDurable(reply);
        }
        self.pending.insert(
            seq,
            Pending {
                reply,
                touched_ms: now_ms,
            },
        );
        self.status.credits_outstanding = self.pending.len() as u64;
        Fetched::New
    }

    /// The messages `seqs` are durable (or quarantined): returns the reply subjects to
    /// ack, in the given order, and remembers the sequences for redeliveries.
    pub fn durable(&mut self, seqs: &[u64]) -> Vec<String> {
        let mut replies = Vec::with_capacity(seqs.len());
        for seq in seqs {
            if let Some(p) = self.pending.remove(seq) {
                replies.push(p.reply);
            }
            self.status.last_durable_seq = self.status.last_durable_seq.max(*seq);
            if self.config.remembered > 0 && self.durable.insert(*seq) {
                self.durable_order.push_back(*seq);
                if self.durable_order.len() > self.config.remembered
                    && let Some(old) = self.durable_order.pop_front()
                {
                    self.durable.remove(&old);
                }
            }
        }
        self.status.credits_outstanding = self.pending.len() as u64;
        replies
    }

    /// Forgets messages that will not become durable in this run (shutdown): the
    /// server redelivers them after `ack_wait`.
    pub fn abandon(&mut self, seqs: &[u64]) {
        for seq in seqs {
            self.pending.remove(seq);
        }
        self.status.credits_outstanding = self.pending.len() as u64;
    }

    /// Forgets every message fetched and not yet durable (the WAL failed: nothing more
    /// is acked in this run, and the server redelivers them after `ack_wait`).
    pub fn abandon_all(&mut self) {
        self.pending.clear();
        self.status.credits_outstanding = 0;
    }

    /// The reply subjects of messages that have waited at least half of `ack_wait`
    /// since they were fetched or last progress-acked: send each a progress ack
    /// (`+WPI`) now. Each counts as touched now.
    pub fn progress_due(&mut self, now_ms: u64) -> Vec<String> {
        let half = self.config.ack_wait_ms / 2;
        let mut due = Vec::new();
        for p in self.pending.values_mut() {
            if now_ms.saturating_sub(p.touched_ms) >= half {
                p.touched_ms = now_ms;
                due.push(p.reply.clone());
            }
        }
        self.status.progress_acks += due.len() as u64;
        due
    }

    /// How often the shell should ask [`Ledger::progress_due`]: an eighth of
    /// `ack_wait`, between 50 ms and 5 s.
    pub fn progress_interval_ms(&self) -> u64 {
        (self.config.ack_wait_ms / 8).clamp(50, 5000)
    }

    /// The consumer's ack floor, as the server reported it.
    pub fn set_ack_floor(&mut self, stream_seq: u64) {
        self.status.ack_floor_seq = self.status.ack_floor_seq.max(stream_seq);
    }

    /// Where a consumer created again after it was deleted starts: after the last
    /// message known durable, in this run's WAL or (the ack floor) anywhere; `None`
    /// when none is known, and the configured `deliver_policy` applies. Messages on
    /// their way to the WAL with a lower sequence become durable in this run; those
    /// above are delivered again (at least once).
    pub fn resume_after(&self) -> Option<u64> {
        let seq = self.status.last_durable_seq.max(self.status.ack_floor_seq);
        (seq > 0).then_some(seq)
    }

    /// Messages fetched and not yet durable.
    pub fn outstanding(&self) -> u64 {
        self.pending.len() as u64
    }

    /// The counters, for updating by the shell.
    pub fn status_mut(&mut self) -> &mut NatsStatus {
        &mut self.status
    }

    /// The counters now.
    pub fn status(&self) -> NatsStatus {
        self.status.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        Ledger::new(LedgerConfig {
            max_inflight: 8,
            ack_wait_ms: 1000,
            remembered: 4,
        })
    }

    #[test]
    fn versions_parse_and_gate_multiple_filters() {
        assert_eq!(Version::parse("2.9.10"), Some(Version(2, 9, 10)));
        assert_eq!(Version::parse("v2.10.0-beta.1"), Some(Version(2, 10, 0)));
        assert_eq!(Version::parse("2.15"), Some(Version(2, 15, 0)));
        assert_eq!(Version::parse("x"), None);
        let two = vec!["a.>".to_owned(), "b.>".to_owned()];
        assert!(version_gate("2.9.10", &two).unwrap_err().contains("2.10"));
        assert!(version_gate("2.10.0", &two).is_ok());
        assert!(version_gate("2.9.10", &two[..1]).is_ok());
        assert!(version_gate("?", &two).is_err());
    }

    #[test]
    fn the_consumer_filter_must_match_the_configuration() {
        let two = vec!["a.>".to_owned(), "b.>".to_owned()];
        assert!(check_consumer_filter(&two, "", &["b.>".into(), "a.>".into()]).is_ok());
        // A 2.9 server drops filter_subjects: the consumer filters nothing.
        assert!(check_consumer_filter(&two, "", &[]).is_err());
        assert!(check_consumer_filter(&two[..1], "a.>", &[]).is_ok());
        assert!(check_consumer_filter(&[], "", &[]).is_ok());
        assert!(check_consumer_filter(&[], "a.>", &[]).is_err());
    }

    #[test]
    fn filters_check_wildcards() {
        for ok in ["a", "a.*.c", "a.>", ">", "*"] {
            assert!(check_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a..b", "a.b*", "a.>.c", "a b", ".a", "a."] {
            assert!(check_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn acks_follow_durability_and_redeliveries_are_not_written_twice() {
        let mut l = ledger();
        assert_eq!(l.fetched(1, 1, "r1".into(), 0), Fetched::New);
        assert_eq!(l.fetched(2, 1, "r2".into(), 0), Fetched::New);
        assert_eq!(l.outstanding(), 2);
        // Redelivered while still on its way: the newest reply is the one acked.
        assert_eq!(l.fetched(2, 2, "r2b".into(), 10), Fetched::AlreadyPending);
        assert_eq!(l.durable(&[1, 2]), vec!["r1".to_owned(), "r2b".to_owned()]);
        assert_eq!(l.outstanding(), 0);
        // Redelivered after it was made durable (its ack was lost).
        assert_eq!(
            l.fetched(1, 2, "r1b".into(), 20),
            Fetched::AlreadyDurable("r1b".into())
        );
        let s = l.status();
        assert_eq!((s.fetched, s.redelivered, s.duplicates_acked), (4, 2, 1));
    }

    #[test]
    fn a_failed_wal_forgets_everything_not_yet_durable() {
        let mut l = ledger();
        for seq in 1..=3 {
            let _ = l.fetched(seq, 1, format!("r{seq}"), 0);
        }
        assert_eq!(l.durable(&[1]), vec!["r1".to_owned()]);
        l.abandon_all();
        assert_eq!((l.outstanding(), l.status().credits_outstanding), (0, 0));
        assert!(l.durable(&[2, 3]).is_empty(), "nothing left to ack");
        assert!(
            l.progress_due(u64::MAX).is_empty(),
            "no progress acks either"
        );
    }

    #[test]
    fn remembered_sequences_are_bounded() {
        let mut l = ledger();
        for seq in 1..=10 {
            let _ = l.fetched(seq, 1, "r".into(), 0);
        }
        let _ = l.durable(&(1..=10).collect::<Vec<_>>());
        assert_eq!(l.durable.len(), 4);
        // An old one is forgotten: written again (at least once).
        assert_eq!(l.fetched(1, 2, "r".into(), 0), Fetched::New);
        assert_eq!(
            l.fetched(10, 2, "r".into(), 0),
            Fetched::AlreadyDurable("r".into())
        );
    }

    #[test]
    fn a_recreated_consumer_resumes_after_the_last_durable_message() {
        let mut l = ledger();
        assert_eq!(
            l.resume_after(),
            None,
            "nothing known: the configured policy"
        );
        for seq in 1..=5 {
            let _ = l.fetched(seq, 1, format!("r{seq}"), 0);
        }
        let _ = l.durable(&[1, 2, 3]);
        assert_eq!(l.resume_after(), Some(3));
        // A redelivery made durable late does not move it back.
        let _ = l.durable(&[2]);
        assert_eq!(l.resume_after(), Some(3));
        // Another instance's acks moved the floor further.
        l.set_ack_floor(10);
        assert_eq!(l.resume_after(), Some(10));
        l.set_ack_floor(4);
        assert_eq!(l.resume_after(), Some(10));
        assert_eq!(l.status().last_durable_seq, 3);
    }

    #[test]
    fn progress_acks_go_out_at_half_of_ack_wait() {
        let mut l = ledger();
        let _ = l.fetched(1, 1, "r1".into(), 0);
        let _ = l.fetched(2, 1, "r2".into(), 300);
        assert!(l.progress_due(400).is_empty());
        assert_eq!(l.progress_due(500), vec!["r1".to_owned()]);
        assert!(l.progress_due(700).is_empty());
        let mut due = l.progress_due(1000);
        due.sort();
        assert_eq!(due, vec!["r1".to_owned(), "r2".to_owned()]);
        assert_eq!(l.status().progress_acks, 3);
        let _ = l.durable(&[1, 2]);
        assert!(l.progress_due(5000).is_empty());
        assert_eq!(l.progress_interval_ms(), 125);
    }
}
