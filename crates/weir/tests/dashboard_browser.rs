//! The dashboard in a real browser: headless Chromium loads `/` from a daemon whose
//! sink is stalled and whose WAL is full, runs the page's scripts on virtual time
//! (`--virtual-time-budget`: the page's timers run as fast as its fetches answer, no
//! fixed sleep), and the rendered DOM is checked: the graph names every component, the
//! wave banner names the slow sink, a chart has data points, the WAL gauge shows a
//! percentage. A screenshot goes under the target directory (`dashboard/overload.png`).
//!
//! The browser is `$CHROME`, else `chromium` from the PATH (`scripts/test.sh` installs
//! Debian's package).

mod run_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use run_support::{Daemon, free_addr, get, write_config};

fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "1s"

[wal]
max_disk = "2 MiB"
segment_bytes = "256 KiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 5000
size = 200

[sinks.lake]
type = "blackhole"
inputs = ["gen"]

[sinks.stalled]
type = "blackhole"
inputs = ["gen"]
rate = 20
max_lag = {{ bytes = "24 MiB", age = "1h" }}
"#,
        data = dir.join("data").display(),
    )
}

/// The browser binary: `$CHROME`, or the first of Debian's and Ubuntu's names found on
/// the PATH.
fn chrome() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROME") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no headless browser: install Chromium (scripts/test.sh runs `apt-get install -y \
         chromium`), or name one with CHROME=/path/to/chrome"
    );
}

/// Runs the browser headless on `url` with `args`, its profile in `profile`, and
/// returns its standard output.
fn browse(profile: &Path, url: &str, args: &[&str]) -> String {
    let output = Command::new(chrome())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,1500",
            // Scripts run on virtual time: every timer of the page fires within this
            // budget, each as soon as the fetches before it have answered.
            "--virtual-time-budget=4000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("start the browser");
    assert!(
        output.status.success(),
        "the browser failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The text of the element with `id="ID"` (its markup stripped), from a dumped DOM:
/// everything up to the tag that closes it.
fn text_of(dom: &str, id: &str) -> String {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the DOM"));
    let open_end = start + dom[start..].find('>').expect("tag end") + 1;
    let mut text = String::new();
    let mut depth = 0i32;
    let mut rest = &dom[open_end..];
    while let Some(lt) = rest.find('<') {
        text.push_str(&rest[..lt]);
        let gt = rest[lt..].find('>').map_or(rest.len(), |g| lt + g);
        let tag = &rest[lt..gt];
        if tag.starts_with("</") {
            depth -= 1;
            if depth < 0 {
                break;
            }
        } else if !tag.ends_with('/') {
            depth += 1;
        }
        rest = &rest[(gt + 1).min(rest.len())..];
    }
    text.replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&amp;", "&")
}

/// The cell after the first `<td>KEY</td>` in a dumped DOM (a key/value panel's value).
fn cell_after(dom: &str, key: &str) -> String {
    let start = dom
        .find(&format!("<td>{key}</td><td>"))
        .unwrap_or_else(|| panic!("no {key} in a panel:\n{dom}"))
        + key.len()
        + "<td></td><td>".len();
    let end = start + dom[start..].find("</td>").expect("the cell ends");
    dom[start..end].to_owned()
}

/// Every `data-points="N"` value in the DOM.
fn chart_points(dom: &str) -> Vec<u64> {
    dom.match_indices("data-points=\"")
        .filter_map(|(i, m)| {
            let rest = &dom[i + m.len()..];
            rest[..rest.find('"')?].parse().ok()
        })
        .collect()
}

#[test]
fn the_dashboard_shows_the_wave_from_a_stalled_sink() {
    let browser = chrome();
    let dir = tempfile::tempdir().expect("tempdir");
    let status_addr = free_addr();
    let path = write_config(dir.path(), &config(dir.path(), status_addr));
    let daemon = Daemon::start(dir.path(), &path, status_addr, &[]);
    // The overload itself, read from /status: the WAL full, the generator held back.
    daemon.wait_for(
        "the WAL full and gen backpressured",
        Duration::from_secs(60),
        |s| {
            s["wal"]["budget_used"].as_f64().unwrap_or(0.0) >= 0.9
                && s["components"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["name"] == "gen" && c["state"] == "backpressured")
        },
    );
    let (code, _, body) = get(status_addr, "/history").expect("GET /history");
    assert_eq!(code, 200);
    let history: serde_json::Value = serde_json::from_slice(&body).expect("history JSON");
    assert!(history["held"].as_u64().unwrap_or(0) >= 2, "{history}");

    let profile = tempfile::tempdir().expect("profile dir");
    let url = format!("http://{status_addr}/");
    let dom = browse(profile.path(), &url, &["--dump-dom"]);
    assert!(
        dom.contains("data-rendered="),
        "the page's scripts never rendered a status (browser {}):\n{dom}",
        browser.display()
    );

    // The graph names every component.
    let graph = &dom[dom.find("id=\"graph-svg\"").expect("the graph")..];
    for node in ["source:gen", "wal:wal", "sink:lake", "sink:stalled"] {
        assert!(
            graph.contains(&format!("data-node=\"{node}\"")),
            "{node} missing from the graph:\n{dom}"
        );
    }
    for edge in ["gen-&gt;wal", "wal-&gt;lake", "wal-&gt;stalled"] {
        assert!(graph.contains(&format!("data-edge=\"{edge}\"")), "{edge}");
    }
    // The wave: the slow sink, the WAL's budget, the blocked source; on the graph too.
    let wave = text_of(&dom, "wave");
    assert!(
        wave.contains("slow sink stalled") && wave.contains("WAL") && wave.contains("gen blocked"),
        "{wave}"
    );
    assert!(
        graph.contains("class=\"node s-backpressured on-wave\" data-node=\"source:gen\""),
        "gen is on the wave's path:\n{graph}"
    );
    assert!(graph.contains("class=\"edge on-wave\" data-edge=\"wal-&gt;stalled\""));
    assert!(!graph.contains("class=\"edge on-wave\" data-edge=\"wal-&gt;lake\""));
    // A chart has data points, drawn as a line.
    let points = chart_points(&dom);
    assert_eq!(points.len(), 6, "six charts");
    assert!(points.iter().any(|&n| n >= 2), "{points:?}");
    assert!(dom.contains("<polyline"), "a line is drawn");
    // The WAL gauge shows a percentage, and the forecast says it is full.
    let pct = text_of(&dom, "wal-pct");
    let value: u32 = pct
        .trim()
        .strip_suffix('%')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a percentage: {pct:?}"));
    assert!((90..=100).contains(&value), "{pct}");
    assert!(text_of(&dom, "forecast").contains("Full"), "{dom}");
    // The sink table and the per-source panel.
    let sinks = text_of(&dom, "sinks");
    assert!(
        sinks.contains("stalled") && sinks.contains("lake"),
        "{sinks}"
    );
    // max_lag and every panel's sizes and durations in human units.
    assert!(
        sinks.contains("24 MiB, 1h") && !sinks.contains("25165824"),
        "{sinks}"
    );
    let waiting = cell_after(&dom, "waiting_ms");
    assert!(
        [" µs", " ms", " s", " min", " h"]
            .iter()
            .any(|unit| waiting.ends_with(unit)),
        "waiting_ms: {waiting:?}"
    );
    let lag = cell_after(&dom, "lag_bytes");
    assert!(
        [" B", " KiB", " MiB"]
            .iter()
            .any(|unit| lag.ends_with(unit)),
        "lag_bytes: {lag:?}"
    );

    // A screenshot under the target directory.
    let shots = Path::new(env!("CARGO_BIN_EXE_weir"))
        .parent()
        .expect("the target's profile directory")
        .join("dashboard");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let shot = shots.join("overload.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        profile.path(),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    assert!(png.len() > 10_000, "{} bytes: an empty page?", png.len());
    daemon.stop();
}

/// The checks run in the browser on a page of their own: the dashboard's figures and
/// smoothed rates (`dashboard_units.js`), on the cases the Rust side is tested with.
const UNITS_CHECKS: &str = r#"
const t = [], v = [];
for (let s = 0; s <= 120; s++) { t.push(1000 + s * 1000); v.push(1024 * Math.floor(s / 2)); }
const rates = smoothRates(t, v);
const steady = smoothRates([0, 1000, 2000, 3000], [0, 100, 200, 300]);
const gap = smoothRates([0, 1000, 2000], [0, null, 200]);
const out = {
  rates, steady, gap,
  maxLag: [maxLagText({ bytes: 25165824, age: null }), maxLagText({ bytes: 25165824, age: "10m" }),
           maxLagText({ bytes: null, age: "1h" }), maxLagText(null)],
  values: [humanValue("lag_bytes", 3145728), humanValue("bytes", 512), humanValue("lag_age_ms", 90000),
           humanValue("fsync_p99_us", 2500), humanValue("fsync_p50_us", 150), humanValue("uptime_seconds", 7200),
           humanValue("budget_used", 0.5), humanValue("since_unix_ms", 1700000000000),
           humanValue("ranges", [[5, 9], [12, 20]]), humanValue("gaps", []), humanValue("max_disk", 67108864),
           humanValue("waiting_ms", 0), humanValue("records", 12)],
  bytes: [bytes(1023), bytes(8388608), bytes(1572864), bytes(38000)],
  grew: [grewRecently([1, 1, 1, 1, 1, 1, 2], 5), grewRecently([1, 2, 2, 2, 2, 2, 2, 2], 5)],
};
document.getElementById("out").textContent = JSON.stringify(out);
"#;

#[test]
fn the_dashboards_figures_and_smoothed_rates_in_a_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("units.html");
    let html = String::from("<!doctype html><html><body><pre id=\"out\"></pre><script>\n")
        + include_str!("../src/telemetry/dashboard_units.js")
        + UNITS_CHECKS
        + "</script></body></html>\n";
    std::fs::write(&page, html).expect("write the page");
    let profile = tempfile::tempdir().expect("profile dir");
    let dom = browse(
        profile.path(),
        &format!("file://{}", page.display()),
        &["--dump-dom"],
    );
    let text = text_of(&dom, "out");
    let out: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the checks did not run ({e}):\n{dom}"));
    // 1,024 records every 2 s: about 512/s, never 0 or 1,024 after the first interval.
    let rates: Vec<Option<f64>> = out["rates"]
        .as_array()
        .expect("rates")
        .iter()
        .map(serde_json::Value::as_f64)
        .collect();
    assert_eq!(rates[0], None);
    for rate in &rates[2..] {
        let rate = rate.expect("a rate");
        assert!(rate > 300.0 && rate < 700.0, "{rates:?}");
    }
    for rate in &rates[41..] {
        let rate = rate.expect("a rate");
        assert!((rate - 512.0).abs() < 0.06 * 512.0, "{rate}");
    }
    let last = |key: &str| {
        out[key]
            .as_array()
            .and_then(|a| a.last())
            .and_then(serde_json::Value::as_f64)
    };
    assert!((last("steady").expect("steady") - 100.0).abs() < 1e-9);
    assert!((last("gap").expect("gap") - 100.0).abs() < 1e-9);
    assert_eq!(
        out["maxLag"],
        serde_json::json!(["24 MiB", "24 MiB, 10m", "1h", "none"])
    );
    assert_eq!(
        out["values"],
        serde_json::json!([
            "3 MiB",
            "512 B",
            "90.0 s",
            "2.5 ms",
            "150 µs",
            "2.0 h",
            "50%",
            "2023-11-14T22:13:20Z",
            "5..9, 12..20",
            "none",
            "64 MiB",
            "0 s",
            "12"
        ])
    );
    assert_eq!(
        out["bytes"],
        serde_json::json!(["1023 B", "8 MiB", "1.5 MiB", "37.1 KiB"])
    );
    assert_eq!(out["grew"], serde_json::json!([true, false]));
}
