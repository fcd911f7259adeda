//! A throwaway CA and server certificates made with the `openssl` CLI, for the TLS
//! end-to-end tests (`mqtts://`, the HTTP sink's `https://`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `openssl ARGS…` in `dir`; panics on failure.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA (P-256) as `dir/NAME.crt` and `dir/NAME.key`.
pub fn make_ca(dir: &Path, name: &str) -> PathBuf {
    let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-days",
            "2",
            "-subj",
            &format!("/CN=weir test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    dir.join(crt)
}

/// A server certificate for IP 127.0.0.1 signed by CA `ca`: `dir/server.{crt,key}`.
pub fn make_server_cert(dir: &Path, ca: &str) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = IP:127.0.0.1\n\
         basicConstraints = CA:FALSE\n\
         keyUsage = critical, digitalSignature\n\
         extendedKeyUsage = serverAuth\n",
    )
    .expect("write server.ext");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    (dir.join("server.crt"), dir.join("server.key"))
}
