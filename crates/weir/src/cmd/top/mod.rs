//! `weir top [--addr ADDR]`: the dashboard in a terminal. Every second it reads
//! `/status` and the newest `/history` samples from a running daemon (through the same
//! client as `weir status`) and shows the components with their rates, the queues as
//! fill bars, the WAL budget with its forecast, the sinks' lag, and where the
//! backpressure wave is. `q` (or Esc, or Ctrl-C) quits.
//!
//! When stdout is not a terminal it prints the same figures as plain lines, one block a
//! second (`--iterations N` stops after N).

mod draw;
pub mod view;

use std::io::IsTerminal as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::cmd::status::{MAX_RESPONSE_BYTES, fetch_path};
use crate::telemetry::StatusReport;
use crate::telemetry::history::HistoryReport;

use self::view::View;

/// Arguments of `weir top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// The daemon's `runtime.status_addr`.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub addr: String,
    /// How long each request may take.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Stop after this many refreshes (default: until `q`, or forever without a
    /// terminal).
    #[arg(long)]
    pub iterations: Option<u64>,
}

/// Time between refreshes.
pub const REFRESH: Duration = Duration::from_secs(1);

/// The daemon's figures as `weir top` keeps them between refreshes: the history is
/// fetched whole once, then only from the second-newest sample on, which is enough
/// for a rate.
struct Source {
    addr: SocketAddr,
    timeout: Duration,
    since: Option<u64>,
}

impl Source {
    fn fetch(&mut self) -> anyhow::Result<(StatusReport, Option<HistoryReport>)> {
        let body = fetch_path(self.addr, "/status", self.timeout, MAX_RESPONSE_BYTES)?;
        let status: StatusReport = serde_json::from_str(&body).with_context(|| {
            format!(
                "{} answered /status with something other than weir's status JSON",
                self.addr
            )
        })?;
        let path = match self.since {
            Some(since) => format!("/history?since={since}"),
            None => "/history".to_owned(),
        };
        // A daemon without a history (an older weir) still shows its status.
        let history = fetch_path(self.addr, &path, self.timeout, MAX_RESPONSE_BYTES)
            .ok()
            .and_then(|body| serde_json::from_str::<HistoryReport>(&body).ok());
        if let Some(h) = &history
            && h.t_unix_ms.len() >= 2
        {
            self.since = Some(h.t_unix_ms[h.t_unix_ms.len() - 2].saturating_sub(1));
        }
        Ok((status, history))
    }
}

/// Runs `weir top`.
pub fn run(args: TopArgs) -> anyhow::Result<ExitCode> {
    let addr = args
        .addr
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "--addr {:?}: expected HOST:PORT, e.g. 127.0.0.1:9464",
                args.addr
            )
        })?
        .next()
        .ok_or_else(|| anyhow!("--addr {:?} resolves to no address", args.addr))?;
    let mut source = Source {
        addr,
        timeout: args.timeout,
        since: None,
    };
    if std::io::stdout().is_terminal() {
        terminal(&mut source, args.iterations)
    } else {
        plain(&mut source, args.iterations)
    }
}

/// Plain lines, one block a second; the first failure to reach the daemon is the
/// command's error (a script gets an exit code, not a screen of retries).
fn plain(source: &mut Source, iterations: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut n = 0u64;
    loop {
        let started = Instant::now();
        let (status, history) = source.fetch()?;
        let view = View::new(&source.addr.to_string(), &status, history.as_ref());
        out!("{}\n", view.plain());
        n += 1;
        if iterations.is_some_and(|max| n >= max) {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(REFRESH.saturating_sub(started.elapsed()));
    }
}

/// The full-screen view, until `q`. A daemon that stops answering keeps the last
/// figures on screen with the error above them, and is asked again each second.
fn terminal(source: &mut Source, iterations: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        let mut last: Option<View> = None;
        let mut n = 0u64;
        loop {
            let started = Instant::now();
            let error = match source.fetch() {
                Ok((status, history)) => {
                    last = Some(View::new(
                        &source.addr.to_string(),
                        &status,
                        history.as_ref(),
                    ));
                    None
                }
                Err(e) => Some(crate::cmd::error_chain(&e)),
            };
            let empty = View::new(&source.addr.to_string(), &empty_report(), None);
            let view = last.as_ref().unwrap_or(&empty);
            terminal.draw(|frame| draw::draw(frame, view, error.as_deref()))?;
            n += 1;
            if iterations.is_some_and(|max| n >= max) {
                return Ok(());
            }
            // Keys are read until the next refresh is due.
            while let Some(left) = REFRESH.checked_sub(started.elapsed()) {
                if !event::poll(left)? {
                    break;
                }
                if let Event::Key(key) = event::read()?
                    && key.kind == KeyEventKind::Press
                {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL);
                    if matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result.map(|()| ExitCode::SUCCESS)
}

fn empty_report() -> StatusReport {
    StatusReport {
        config_hash: "-".to_owned(),
        started_unix_ms: 0,
        uptime_seconds: 0.0,
        components: Vec::new(),
        queues: Vec::new(),
        sections: serde_json::Map::new(),
    }
}
