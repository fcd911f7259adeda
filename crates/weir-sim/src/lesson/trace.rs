//! Part 3: the Reactive Streams demand rules, traced on a [`PacedPublisher`] over the
//! credit core.

use std::fmt::Write as _;
use std::num::NonZeroU64;

use weir_flow::credit::{RequestError, RequestOutcome, UNBOUNDED};

use crate::engine::Producer;
use crate::paced::{PacedPublisher, Subscriber};
use crate::workload::{Arrivals, ServiceSchedule, Workload};

/// Items of the traced source.
const ITEMS: u64 = 3;
/// Milliseconds between the traced source's items.
const INTERVAL_MS: u64 = 10;

/// A subscriber that writes every signal as a trace line, stamped with the clock.
struct Trace {
    now_ms: u64,
    out: String,
}

impl Trace {
    fn new() -> Self {
        let mut trace = Trace {
            now_ms: 0,
            out: String::new(),
        };
        trace.say("onSubscribe (no demand yet)");
        trace
    }

    fn at(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    fn say(&mut self, line: &str) {
        let _ = writeln!(self.out, "  t={:<4}{line}", self.now_ms);
    }
}

impl Subscriber for Trace {
    fn on_next(&mut self, item: u64) {
        self.say(&format!("onNext({item})"));
    }

    fn on_complete(&mut self) {
        self.say("onComplete");
    }

    fn on_error(&mut self, error: RequestError) {
        // Rule 3.9 names the error the Java lab raises; the message is the core's.
        let RequestError::NonPositive(n) = error else {
            self.say(&format!("onError({error})"));
            return;
        };
        self.say(&format!(
            "onError(IllegalArgumentException: request(n) needs n > 0, got {n})"
        ));
    }
}

/// A source of 3 items, one ready every 10 ms, the first at t=0.
fn source() -> Producer {
    Producer::new(&Workload {
        messages: ITEMS,
        arrivals: Arrivals::Constant {
            interval_ms: INTERVAL_MS,
        },
        service: ServiceSchedule::new(NonZeroU64::MIN),
    })
}

/// A `tick` at `now_ms`, narrated: what was sent, or why nothing was.
fn tick(p: &mut PacedPublisher, source: &mut Producer, trace: &mut Trace, now_ms: u64, but: bool) {
    trace.at(now_ms);
    let before = p.emitted();
    p.tick(now_ms, source, trace);
    if p.emitted() > before {
        trace.say(&format!("tick: demand left {}", p.demand()));
    } else if let Some(item) = source.due_at(now_ms) {
        let but = if but { "but " } else { "" };
        trace.say(&format!(
            "tick: item {item} is ready, {but}demand is {}, so nothing is sent",
            p.demand()
        ));
    } else {
        trace.say("tick: nothing is ready");
    }
}

/// a) Items are sent only against demand.
fn only_against_demand() -> String {
    let (mut p, mut source, mut trace) = (PacedPublisher::new(), source(), Trace::new());
    tick(&mut p, &mut source, &mut trace, 20, true);
    let _ = p.request(2, 20, &mut source, &mut trace);
    trace.say(&format!("request(2) done, demand left {}", p.demand()));
    tick(&mut p, &mut source, &mut trace, 30, true);
    tick(&mut p, &mut source, &mut trace, 40, false);
    let _ = p.request(UNBOUNDED, 40, &mut source, &mut trace);
    trace.say(&format!(
        "request(Long.MAX_VALUE) done, emitted {} of {ITEMS}",
        p.emitted()
    ));
    let outcome = p.request(1, 40, &mut source, &mut trace);
    if matches!(outcome, RequestOutcome::Ignored(_)) {
        trace.say("request(1) after the terminal signal: nothing happens");
    }
    trace.out
}

/// b) `request(0)` is an error.
fn request_zero_is_an_error() -> String {
    let (mut p, mut source, mut trace) = (PacedPublisher::new(), source(), Trace::new());
    let _ = p.request(0, 0, &mut source, &mut trace);
    let outcome = p.request(5, 0, &mut source, &mut trace);
    if matches!(outcome, RequestOutcome::Ignored(_)) {
        trace.say(&format!(
            "request(5) after onError: nothing happens, emitted {}",
            p.emitted()
        ));
    }
    trace.out
}

/// c) After cancel nothing more is sent.
fn nothing_after_cancel() -> String {
    let (mut p, mut source, mut trace) = (PacedPublisher::new(), source(), Trace::new());
    let _ = p.request(1, 0, &mut source, &mut trace);
    trace.at(10);
    p.cancel();
    let _ = p.request(5, 10, &mut source, &mut trace);
    p.tick(10, &mut source, &mut trace);
    trace.say(&format!(
        "cancelled, then request(5) and a tick: emitted {} of {ITEMS}",
        p.emitted()
    ));
    trace.out
}

/// Part 3 of the report: the three demand-rule traces.
pub fn part3() -> String {
    let mut out = format!(
        "Part 3. The Reactive Streams rules the publisher follows (a paced source of {ITEMS} items, one ready every {INTERVAL_MS} ms).\n"
    );
    out.push_str(" a) Items are sent only against demand:\n");
    out.push_str(&only_against_demand());
    out.push_str(" b) request(0) is an error:\n");
    out.push_str(&request_zero_is_an_error());
    out.push_str(" c) After cancel nothing more is sent:\n");
    out.push_str(&nothing_after_cancel());
    out
}
