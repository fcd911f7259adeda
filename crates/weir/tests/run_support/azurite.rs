//! An Azure Blob Storage emulator of the test's own (Azurite's blob service on a free
//! loopback port, with its own directory and telemetry off), its container created and
//! its objects read back through pyarrow's Azure filesystem.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::free_addr;
use super::s3::{StoredObject, read_parquet_objects_with};

/// Azurite's one account.
pub const ACCOUNT: &str = "devstoreaccount1";
/// Its well-known key (Azurite's documented default, not a secret).
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The container every emulator has.
pub const CONTAINER: &str = "lake";

/// `azurite-blob`: `$WEIR_AZURITE` (set by scripts/test.sh), else what
/// scripts/install-azurite.sh prints when Azurite is already installed there. Resolved
/// once; without either the test fails, telling to run scripts/test.sh.
pub fn azurite_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("WEIR_AZURITE").filter(|b| !b.is_empty()) {
            return PathBuf::from(bin);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-azurite.sh");
        // Only look: installing (npm) is scripts/test.sh's job.
        let tools = std::env::var_os("WEIR_TOOLS").map_or_else(
            || {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/weir/tools")
            },
            PathBuf::from,
        );
        let version = std::fs::read_to_string(&script)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VERSION=").map(str::to_owned))
            })
            .unwrap_or_default();
        let bin = tools.join(format!("azurite-{version}/node_modules/.bin/azurite-blob"));
        assert!(
            bin.is_file(),
            "Azurite is not installed and WEIR_AZURITE is unset: run scripts/test.sh \
             (or scripts/install-azurite.sh, then export WEIR_AZURITE=<the path it prints>)"
        );
        bin
    })
    .clone()
}

/// A running Azurite blob service holding [`CONTAINER`]; killed on drop.
pub struct Azurite {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts an empty emulator and creates [`CONTAINER`] in it.
    pub fn start() -> Azurite {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data directory");
        let log = dir.path().join("azurite.log");
        let addr = free_addr();
        let child = Command::new(azurite_bin())
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(addr.port().to_string())
            .arg("--location")
            .arg(&data)
            .args(["--skipApiVersionCheck", "--loose", "--disableTelemetry"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn azurite-blob");
        let azurite = Azurite {
            child: Some(child),
            addr,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Azurite never listened:\n{}",
                azurite.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        azurite.python(
            "creating the container",
            &format!("store.create_dir({CONTAINER:?})"),
        );
        azurite
    }

    /// Its log (the access log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The sink's `endpoint` for it (path-style: the account is the first segment).
    pub fn endpoint(&self) -> String {
        format!("http://{}/{ACCOUNT}", self.addr)
    }

    /// The environment weir needs to reach it (object_store's standard variables).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT.to_owned()),
            ("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY.to_owned()),
        ]
    }

    /// A pyarrow filesystem on it, as a Python expression (`pyarrow.fs` as `fs`); both
    /// of its endpoints point here, so that nothing leaves loopback.
    fn filesystem(&self) -> String {
        format!(
            r#"fs.AzureFileSystem(account_name="{ACCOUNT}", account_key="{ACCOUNT_KEY}",
    blob_storage_authority="{addr}", blob_storage_scheme="http",
    dfs_storage_authority="{addr}", dfs_storage_scheme="http")"#,
            addr = self.addr
        )
    }

    /// Runs `statement` with `store` bound to a pyarrow filesystem on the emulator;
    /// returns what it printed. `what` names it in the failure.
    fn python(&self, what: &str, statement: &str) -> Vec<u8> {
        let script = format!(
            "import json, pyarrow.fs as fs\nstore = {}\n{statement}\n",
            self.filesystem()
        );
        let out = Command::new("python3")
            .arg("-c")
            .arg(&script)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{what} on Azurite with pyarrow failed (run scripts/test.sh, which \
             installs it):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Every Parquet object under `prefix` of [`CONTAINER`], sorted by first offset.
    pub fn read_parquet_objects(&self, prefix: &str) -> Vec<StoredObject> {
        read_parquet_objects_with(&self.filesystem(), &format!("{CONTAINER}/{prefix}"))
    }

    /// The user metadata (`x-ms-meta-*`) of blob `path` (container first) whose names
    /// start with `weir`.
    pub fn user_metadata(&self, path: &str) -> BTreeMap<String, String> {
        let out = self.python(
            &format!("reading {path}'s metadata"),
            &format!(
                "meta = store.open_input_stream({path:?}).metadata()\n\
                 print(json.dumps({{k: v.decode() for k, v in meta.items() if k.startswith('weir')}}))"
            ),
        );
        serde_json::from_slice(&out).expect("JSON")
    }

    /// Requests in its access log whose line contains `needle` (e.g. `comp=block`).
    pub fn requests(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
