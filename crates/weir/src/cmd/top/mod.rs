//! `weir top [--addr ADDR]`: the dashboard in a terminal. Every second it reads
//! `/status` and the newest `/history` samples from a running daemon (through the same
//! client as `weir status`) and shows the components with their rates, the queues as
//! fill bars, the WAL budget with its forecast, the sinks' lag, and where the
//! backpressure wave is. `q` (or Esc, or Ctrl-C) quits.
//!
//! Rates are smoothed over the last minute of samples ([`window`]; an exponentially
//! weighted rate with a 10 s time constant), so a sink that stores a large batch every
//! few seconds shows its average, not 0 and a burst in turn. Before the first frame it
//! takes two samples one refresh apart, so even `--iterations 1` shows rates over at
//! least one interval.
//!
//! When stdout is not a terminal it prints the same figures as plain lines, one block a
//! second (`--iterations N` stops after N).

mod draw;
pub mod view;
pub mod window;

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
use self::window::Window;

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
/// fetched whole once, then only what is newer, into a [`Window`].
struct Source {
    addr: SocketAddr,
    timeout: Duration,
    window: Window,
}

impl Source {
    fn fetch(&mut self) -> anyhow::Result<StatusReport> {
        let body = fetch_path(self.addr, "/status", self.timeout, MAX_RESPONSE_BYTES)?;
        let status: StatusReport = serde_json::from_str(&body).with_context(|| {
            format!(
                "{} answered /status with something other than weir's status JSON",
                self.addr
            )
        })?;
        let path = match self.window.since() {
            Some(since) => format!("/history?since={since}"),
            None => "/history".to_owned(),
        };
        // A daemon without a history (an older weir) still shows its status.
        let history = fetch_path(self.addr, &path, self.timeout, MAX_RESPONSE_BYTES)
            .ok()
            .and_then(|body| serde_json::from_str::<HistoryReport>(&body).ok());
        if let Some(history) = history {
            self.window.merge(history);
        }
        Ok(status)
    }

    fn view(&self, status: &StatusReport) -> View {
        View::new(&self.addr.to_string(), status, self.window.report())
    }

    /// The first sample, then a wait of one refresh and as many more fetches as it
    /// takes (within another refresh) for the samples held to span one of the daemon's
    /// sampling intervals: the first frame's rates then cover at least one interval.
    ///
    /// # Errors
    ///
    /// When the daemon cannot be reached.
    fn prime(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        self.fetch()?;
        std::thread::sleep(REFRESH.saturating_sub(started.elapsed()));
        let deadline = Instant::now() + REFRESH;
        loop {
            self.fetch()?;
            let Some(held) = self.window.report() else {
                return Ok(());
            };
            if self.window.span_ms() >= held.interval_ms || Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(REFRESH / 10);
        }
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
        window: Window::default(),
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
    source.prime()?;
    let mut n = 0u64;
    loop {
        let started = Instant::now();
        let status = source.fetch()?;
        out!("{}\n", source.view(&status).plain());
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
    // An unreachable daemon is shown on the screen, and asked again each second.
    let primed = source.prime();
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        let mut last: Option<View> = None;
        let mut n = 0u64;
        if let Err(e) = primed {
            let empty = View::new(&source.addr.to_string(), &empty_report(), None);
            let error = crate::cmd::error_chain(&e);
            terminal.draw(|frame| draw::draw(frame, &empty, Some(&error)))?;
        }
        loop {
            let started = Instant::now();
            let error = match source.fetch() {
                Ok(status) => {
                    last = Some(source.view(&status));
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
