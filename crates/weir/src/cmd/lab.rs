//! `weir lab`: the backpressure lab.
//!
//! Every subcommand runs simulated experiments on the real `weir-flow` cores on a
//! virtual clock (see the `weir-sim` crate) and prints tables; the same command prints
//! the same bytes every time.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use weir_sim::lesson::{Lesson, Limits};

/// Arguments of `weir lab`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LabArgs {
    /// The experiment to run; the lesson when none is named.
    #[command(subcommand)]
    pub command: Option<LabCommand>,
    /// The lesson's options, when no experiment is named.
    #[command(flatten)]
    pub lesson: LessonArgs,
}

/// The experiments of `weir lab`.
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// The backpressure lesson: five strategies against a slow and a healthy consumer,
    /// plus latest-per-key and adaptive credit, and the demand-rule traces.
    Lesson(LessonArgs),
    /// Seed 001: a poll loop over 30,000 records into a slow downstream, unbounded
    /// against pause/resume watermarks, then an AIMD rate limiter against a downstream
    /// whose capacity moves.
    Kafka(OutputArgs),
    /// Seed 002: a slow stage behind the ordered concurrent stage, in-flight depth
    /// swept 1..256, with a fixed and a heavy-tailed latency.
    LittlesLaw(LittlesLawArgs),
    /// Run a scenario file (TOML): arrival process, service-time schedule, strategies
    /// and their limits. See examples/lab/ for the format.
    Run(RunArgs),
}

/// Options of `weir lab littles-law`.
#[derive(Debug, Clone, clap::Args)]
pub struct LittlesLawArgs {
    /// The slow stage's latency (fixed; the median of the heavy-tailed one), in ms.
    #[arg(long, value_name = "MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub latency: u64,
    /// The seed of the heavy-tailed latencies.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Operations per run.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub operations: u64,
    /// Write the held-back count over time (`t_ms,held_back`, one row per completion) as
    /// one CSV file per latency and depth into DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
}

/// Options of `weir lab run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The scenario file.
    pub file: PathBuf,
    /// Time series and chart output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where to write time series and charts.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Write per-strategy time series as CSV files into DIR (10 ms buckets; 100 ms for kafka).
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Write SVG charts of queue depth and oldest age into DIR.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
}

/// Options of `weir lab lesson`.
#[derive(Debug, Clone, clap::Args)]
pub struct LessonArgs {
    /// Capacity of the bounded queues, in waiting messages.
    #[arg(long, default_value_t = Limits::default().capacity)]
    pub capacity: NonZeroU64,
    /// Deadline of "drop if too old", in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = Limits::default().deadline_ms)]
    pub deadline: u64,
    /// Credit window (initial demand).
    #[arg(long, default_value_t = Limits::default().window)]
    pub window: NonZeroU64,
    /// Distinct keys of "latest per key" (key = message index mod keys).
    #[arg(long, default_value_t = Limits::default().keys)]
    pub keys: NonZeroU64,
    /// Time series and chart output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `weir lab`.
pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        None => lesson(&args.lesson),
        Some(LabCommand::Lesson(lesson_args)) => lesson(&lesson_args),
        Some(LabCommand::Kafka(output)) => kafka(&output),
        Some(LabCommand::LittlesLaw(args)) => {
            let experiment = weir_sim::littles_law::LittlesLaw {
                operations: args.operations,
                ..weir_sim::littles_law::LittlesLaw::default()
            };
            let latency = std::time::Duration::from_millis(args.latency);
            out!(
                "{}",
                weir_sim::littles_law::report(&experiment, latency, args.seed)?
            );
            if let Some(dir) = &args.csv {
                littles_law_csv(&experiment, latency, args.seed, dir)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(LabCommand::Run(run_args)) => scenario(&run_args),
    }
}

/// Writes `littles-law-<latency>-depth-<N>.csv` (held back over time) into `dir`.
fn littles_law_csv(
    experiment: &weir_sim::littles_law::LittlesLaw,
    latency: std::time::Duration,
    seed: u64,
    dir: &Path,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for latency in weir_sim::littles_law::latencies(latency, seed) {
        for &depth in &experiment.depths {
            let result = weir_sim::littles_law::run_depth(experiment, latency, depth)?;
            let path = dir.join(format!("littles-law-{}-depth-{depth}.csv", latency.slug()));
            std::fs::write(&path, result.held_back_csv())
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

fn kafka(output: &OutputArgs) -> anyhow::Result<ExitCode> {
    use weir_sim::kafka::{AimdExperiment, HandOffConfig, Kafka};
    let kafka = Kafka::run(&HandOffConfig::default())?;
    out!(
        "{}",
        weir_sim::kafka::report_of(&kafka, &AimdExperiment::default())?
    );
    let runs = [
        ("unbounded", &kafka.unbounded.series),
        ("pause-resume", &kafka.bounded.series),
    ];
    if let Some(dir) = &output.csv {
        for (name, series) in runs {
            write(&dir.join(format!("kafka-{name}.csv")), &series.to_csv())?;
        }
    }
    if let Some(dir) = &output.svg {
        let svg = weir_sim::chart::depth_and_age_chart(
            "Kafka-style consumer: unbounded hand-off against pause/resume (100 ms buckets)",
            &runs,
            None,
        )?;
        write(&dir.join("kafka.svg"), &svg)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn scenario(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading the scenario file {}", args.file.display()))?;
    let scenario = weir_sim::scenario::Scenario::from_toml(&text)
        .with_context(|| format!("in {}", args.file.display()))?;
    let run = scenario.run()?;
    out!("{}", scenario.report(&run));
    let stem = args
        .file
        .file_stem()
        .map_or_else(|| "scenario".to_owned(), |s| slug(&s.to_string_lossy()));
    if let Some(dir) = &args.output.csv {
        for row in &run.rows {
            let file = dir.join(format!("{stem}-{}.csv", slug(&row.name)));
            write(&file, &row.series.to_csv())?;
        }
    }
    if let Some(dir) = &args.output.svg {
        let lines: Vec<weir_sim::chart::Line<'_>> = run
            .rows
            .iter()
            .map(|r| (r.name.as_str(), &r.series))
            .collect();
        let title = scenario.title.clone().unwrap_or_else(|| stem.clone());
        let svg = weir_sim::chart::depth_and_age_chart(&title, &lines, scenario.slow_period())?;
        write(&dir.join(format!("{stem}.svg")), &svg)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn lesson(args: &LessonArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits {
        capacity: args.capacity,
        deadline_ms: args.deadline,
        window: args.window,
        keys: args.keys,
    };
    let lesson = Lesson::run(limits)?;
    out!("{}", lesson.report());
    if let Some(dir) = &args.output.csv {
        for (part, rows) in [("slow", &lesson.slow), ("healthy", &lesson.healthy)] {
            for row in rows {
                let file = dir.join(format!("lesson-{part}-{}.csv", slug(row.name)));
                write(&file, &row.series.to_csv())?;
            }
        }
    }
    if let Some(dir) = &args.output.svg {
        for (file, svg) in weir_sim::chart::lesson_charts(&lesson)? {
            write(&dir.join(file), &svg)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `credit (Flow)` → `credit-flow`: a file-name-safe form of a row name.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

fn write(path: &Path, contents: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}
