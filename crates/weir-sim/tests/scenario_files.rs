//! Scenario files: the shipped examples run, and bad files are refused with the key
//! named.

use std::path::PathBuf;

use weir_sim::scenario::{Scenario, ScenarioError};

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/lab");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/lab exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_example_runs_and_accounts_for_every_message() {
    let files = examples();
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let scenario = Scenario::from_toml(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let run = scenario.run().unwrap();
        assert_eq!(run.rows.len(), scenario.strategies.len());
        for row in &run.rows {
            let o = &row.outcome;
            assert_eq!(
                o.offered, scenario.workload.messages,
                "{file:?} {}",
                row.name
            );
            assert_eq!(
                o.offered,
                o.completed + o.rejected + o.dropped + o.expired + o.superseded,
                "{file:?} {}",
                row.name
            );
        }
        let again = scenario.run().unwrap();
        assert_eq!(scenario.report(&run), scenario.report(&again), "{file:?}");
    }
}

const GOOD: &str = r#"
messages = 50
arrivals = { process = "constant", interval_ms = 10 }
service = { default_ms = 5 }
strategies = [{ kind = "reject", capacity = 5 }]
"#;

/// The error for `GOOD` with `from` replaced by `to`.
fn error_for(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    let text = GOOD.replace(from, to);
    match Scenario::from_toml(&text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_reference_file_is_good() {
    assert!(Scenario::from_toml(GOOD).is_ok());
}

#[test]
fn an_unknown_key_is_named() {
    let e = error_for("capacity = 5", "capacty = 5");
    assert!(e.contains("unknown field `capacty`"), "{e}");
    let e = error_for("messages = 50", "messages = 50\nmesages = 3");
    assert!(e.contains("unknown field `mesages`"), "{e}");
}

#[test]
fn a_missing_key_is_named() {
    let e = error_for("interval_ms = 10", "seed = 1");
    assert!(e.contains("arrivals.interval_ms: required"), "{e}");
    assert!(e.contains("arrivals.seed: not used"), "{e}");
    let e = error_for("capacity = 5", "name = \"x\"");
    assert!(e.contains("strategies[0].capacity: required"), "{e}");
    let e = error_for("messages = 50", "");
    assert!(
        e.contains("messages, duration_ms: set one of them, found neither"),
        "{e}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_shown_with_its_key() {
    let e = error_for("default_ms = 5", "default_ms = \"5 ms\"");
    assert!(e.contains("default_ms"), "{e}");
    assert!(e.contains("invalid type"), "{e}");
}

#[test]
fn an_unknown_kind_lists_the_kinds() {
    let e = error_for("kind = \"reject\"", "kind = \"rejects\"");
    assert!(e.contains("unknown variant `rejects`"), "{e}");
    assert!(e.contains("latest_per_key"), "{e}");
}

#[test]
fn out_of_range_values_are_all_reported_with_their_paths() {
    let text = r#"
        messages = 0
        arrivals = { process = "bursts", size = 0, every_ms = 10 }
        service = { default_ms = 0, periods = [{ from_ms = 10, until_ms = 5, service_ms = 0 }] }
        strategies = [
            { kind = "credit", window = 0 },
            { kind = "expire", deadline_ms = 5, capacity = 3 },
        ]
    "#;
    let Err(ScenarioError::Invalid(problems)) = Scenario::from_toml(text) else {
        panic!("expected validation problems");
    };
    for expected in [
        "arrivals.size: must be at least 1, found 0",
        "service.default_ms: must be at least 1, found 0",
        "strategies[0].window: must be at least 1, found 0",
        "strategies[1].capacity: not used by kind = \"expire\"",
    ] {
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "no {expected:?} in {problems:#?}"
        );
    }
}

#[test]
fn period_problems_name_the_period() {
    let e = error_for(
        "service = { default_ms = 5 }",
        "service = { default_ms = 5, periods = [{ from_ms = 10, until_ms = 5, service_ms = 0 }] }",
    );
    assert!(
        e.contains("service.periods[0].until_ms: must be after from_ms (10), found 5"),
        "{e}"
    );
    assert!(
        e.contains("service.periods[0].service_ms: must be at least 1"),
        "{e}"
    );
}

#[test]
fn runs_that_would_be_too_long_are_refused() {
    let text = GOOD
        .replace("messages = 50", "messages = 1000000")
        .replace("default_ms = 5", "default_ms = 100");
    let e = Scenario::from_toml(&text).unwrap_err().to_string();
    assert!(e.contains("messages: the runs could need up to"), "{e}");
}

#[test]
fn duration_counts_the_messages_of_the_undisturbed_schedule() {
    let text = GOOD.replace("messages = 50", "duration_ms = 1000");
    let scenario = Scenario::from_toml(&text).unwrap();
    // Due at 0, 10, …, 990.
    assert_eq!(scenario.workload.messages, 100);
}
