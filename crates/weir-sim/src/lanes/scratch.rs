//! TEMPORARY scratch model (not to be published): checks the engine and formatting until
//! the weir-flow cores land.
use std::collections::VecDeque;
use std::time::Duration;

use weir_flow::{FlowStats, Timestamp};

use crate::engine::{Lane, Producer};
use crate::strategy::Strategy;

pub(crate) fn build(strategy: Strategy, name: &str) -> Box<dyn Lane> {
    Box::new(Scratch { name: name.to_owned(), strategy, q: VecDeque::new(), stats: FlowStats::default(), demand: 0, ready: 0 , init: false})
}

struct Scratch { name: String, strategy: Strategy, q: VecDeque<(u64, u64, u64)>, stats: FlowStats, demand: u64, ready: u64, init: bool }

impl Scratch {
    fn push(&mut self, i: u64, now: u64) {
        self.stats.offered += 1;
        if let Strategy::LatestPerKey { keys } = self.strategy {
            let k = i % keys.get();
            if let Some(slot) = self.q.iter_mut().find(|s| s.2 == k) { *slot = (i, now, k); self.stats.superseded += 1; return; }
        }
        self.q.push_back((i, now, i)); self.stats.max_depth = self.stats.max_depth.max(self.q.len() as u64);
    }
    fn emit(&mut self, now: u64, p: &mut Producer) {
        while let Some(i) = p.due_at(now) { if self.demand == 0 { break; } self.demand -= 1; p.mark_sent(now); self.push(i, now); }
    }
}

impl Lane for Scratch {
    fn name(&self) -> &str { &self.name }
    fn produce(&mut self, now: Timestamp, p: &mut Producer) {
        let now = now.as_millis();
        match self.strategy {
            Strategy::Credit { window } | Strategy::AdaptiveCredit { window, .. } => { if !self.init { self.init = true; self.demand = window.get(); } self.emit(now, p); }
            Strategy::Block { capacity } => { if let Some(i) = p.due_at(now) { if (self.q.len() as u64) < capacity.get() { p.mark_sent(now); self.push(i, now); } } }
            Strategy::Reject { capacity } => { if let Some(i) = p.due_at(now) { p.mark_sent(now); if (self.q.len() as u64) >= capacity.get() { self.stats.offered += 1; self.stats.rejected += 1; } else { self.push(i, now); } } }
            _ => { while let Some(i) = p.due_at(now) { p.mark_sent(now); self.push(i, now); } }
        }
    }
    fn completed(&mut self, now: Timestamp, p: &mut Producer) {
        if matches!(self.strategy, Strategy::Credit { .. } | Strategy::AdaptiveCredit { .. }) { self.demand += 1; self.emit(now.as_millis(), p); }
    }
    fn pick(&mut self, now: Timestamp) -> Option<u64> {
        let now = now.as_millis();
        if let Strategy::Expire { deadline_ms } = self.strategy { while self.q.front().is_some_and(|f| now - f.1 > deadline_ms) { self.q.pop_front(); self.stats.expired += 1; } }
        let (i, t, _) = self.q.pop_front()?;
        self.stats.delivered += 1;
        self.stats.max_queue_wait = self.stats.max_queue_wait.max(Duration::from_millis(now - t));
        Some(i)
    }
    fn stats(&self, now: Timestamp) -> FlowStats {
        let mut s = self.stats; s.depth = self.q.len() as u64; s.oldest_age = self.q.front().map_or(Duration::ZERO, |f| Duration::from_millis(now.as_millis() - f.1)); s
    }
}
