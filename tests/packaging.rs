//! `packaging/build.sh` and `packaging/install.sh` as a user meets them: the npm packages
//! install into a fresh directory with nothing but `/usr/bin:/bin` on PATH (no cargo, no cos),
//! and the installer checks the published SHA-256 before it installs anything.
//!
//! build.sh runs once per test process into a private dist directory; its release build uses
//! the normal target directory, so after CI's own `packaging/build.sh` it only packs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const SYSTEM_PATH: &str = "/usr/bin:/bin";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn target() -> &'static str {
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_os = "linux", target_arch = "aarch64")) {
        "aarch64-unknown-linux-gnu"
    } else if cfg!(all(target_os = "macos", target_arch = "x86_64")) {
        "x86_64-apple-darwin"
    } else {
        "aarch64-apple-darwin"
    }
}

fn npm_platform() -> &'static str {
    match target() {
        "x86_64-unknown-linux-gnu" => "linux-x64",
        "aarch64-unknown-linux-gnu" => "linux-arm64",
        "x86_64-apple-darwin" => "darwin-x64",
        _ => "darwin-arm64",
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The dist directory build.sh wrote (built once per test process).
fn dist() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packaging-dist");
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new("bash")
            .arg(root().join("packaging/build.sh"))
            .env("COS_DIST_DIR", &dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "packaging/build.sh failed:\n{}",
            text(&out)
        );
        dir
    })
}

/// The binary build.sh packed.
fn release_binary() -> PathBuf {
    let meta = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root())
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    PathBuf::from(doc["target_directory"].as_str().unwrap()).join("release/cos")
}

/// A command with only the system directories on PATH and `home` as HOME (plus the variables
/// that say how this machine reaches the network: proxies, extra CA certificates).
fn bare(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", SYSTEM_PATH)
        .env("HOME", home)
        .stdin(Stdio::null());
    for (name, value) in std::env::vars_os() {
        let n = name.to_string_lossy().to_ascii_lowercase();
        if n.ends_with("_proxy") || n == "node_extra_ca_certs" || n == "ssl_cert_file" {
            cmd.env(name, value);
        }
    }
    cmd
}

#[test]
fn build_writes_the_archive_its_checksum_and_the_npm_packages() {
    let dist = dist();
    let archive = dist.join(format!("cos-{VERSION}-{}.tar.gz", target()));
    for file in [
        archive.clone(),
        dist.join(format!("cos-{VERSION}-{}.tar.gz.sha256", target())),
        dist.join(format!("createos-cos-{}-{VERSION}.tgz", npm_platform())),
        dist.join(format!("createos-opencode-{VERSION}.tgz")),
        dist.join("install.sh"),
    ] {
        assert!(file.is_file(), "{} is missing", file.display());
    }
    let sums =
        std::fs::read_to_string(dist.join(format!("cos-{VERSION}-{}.tar.gz.sha256", target())))
            .unwrap();
    assert_eq!(
        sums,
        format!(
            "{}  cos-{VERSION}-{}.tar.gz\n",
            sha256_hex(&archive),
            target()
        )
    );
    let listing = Command::new("tar")
        .arg("tzf")
        .arg(&archive)
        .output()
        .unwrap();
    let mut names: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    let top = format!("cos-{VERSION}-{}", target());
    assert_eq!(
        names,
        [
            format!("{top}/"),
            format!("{top}/LICENSE"),
            format!("{top}/README.md"),
            format!("{top}/cos")
        ]
    );
    let license = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
}

#[test]
fn the_npm_tarballs_install_and_run_with_only_system_directories_on_path() {
    let dist = dist();
    for tool in ["cos", "cargo"] {
        assert!(
            SYSTEM_PATH
                .split(':')
                .all(|d| !Path::new(d).join(tool).exists()),
            "{tool} is in {SYSTEM_PATH}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let app = dir.path().join("app");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&app).unwrap();
    // npm runs as the user (their npm configuration and cache): third-party dependencies come
    // from the registry as for any install.
    let user_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    std::fs::write(
        app.join("package.json"),
        "{ \"name\": \"app\", \"private\": true }\n",
    )
    .unwrap();
    let install = bare("npm", &user_home)
        .current_dir(&app)
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .arg(dist.join(format!("createos-opencode-{VERSION}.tgz")))
        .arg(dist.join(format!("createos-cos-{}-{VERSION}.tgz", npm_platform())))
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "npm install of the tarballs failed:\n{}",
        text(&install)
    );

    // The plugin names every platform package; this platform's binary is the one built.
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(app.join("node_modules/@createos/opencode/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["name"], "@createos/opencode");
    assert_eq!(manifest["bin"]["cos"], "bin/cos.js");
    for platform in ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"] {
        assert_eq!(
            manifest["optionalDependencies"][format!("@createos/cos-{platform}")],
            VERSION,
            "{manifest}"
        );
    }
    let packaged = app.join(format!(
        "node_modules/@createos/cos-{}/bin/cos",
        npm_platform()
    ));
    assert_eq!(
        sha256_hex(&packaged),
        sha256_hex(&release_binary()),
        "the installed binary is the one build.sh packed"
    );

    // node_modules/.bin/cos runs it: version, exit codes and streams pass through.
    let cos = app.join("node_modules/.bin/cos");
    let out = bare(&cos, &home)
        .current_dir(&app)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("cos {VERSION}\n")
    );
    let out = bare(&cos, &home)
        .current_dir(&app)
        .args(["no-such-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = bare(&cos, &home)
        .current_dir(&app)
        .args(["ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("createos login"),
        "{}",
        text(&out)
    );

    // cosBinary(): the packaged binary, after COS_BIN and the bin option.
    let script = "import('@createos/opencode').then((m) => { \
        const r = [m.cosBinary(), m.cosBinary({ bin: '/bin/true' }), m.cosBinary({ env: { COS_BIN: '/bin/echo' }, bin: '/bin/true' })]; \
        console.log(JSON.stringify(r)); })";
    let out = bare("node", &home)
        .current_dir(&app)
        .args(["-e", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let got: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let packaged_real = std::fs::canonicalize(&packaged).unwrap();
    assert_eq!(
        std::fs::canonicalize(&got[0]).unwrap(),
        packaged_real,
        "{got:?}"
    );
    assert!(Path::new(&got[0]).is_absolute());
    assert_eq!(got[1], "/bin/true");
    assert_eq!(got[2], "/bin/echo");
}

/// `python3 -m http.server` on loopback serving `dir`; killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new("/usr/bin/python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 43521 (http://127.0.0.1:43521/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"));
        Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run dist/install.sh with `sh` (POSIX), `base` as COS_INSTALL_BASE.
fn install(base: &str, home: &Path, install_dir: Option<&Path>, tmp: &Path) -> Output {
    let mut cmd = bare("sh", home);
    cmd.arg(dist().join("install.sh"))
        .env("COS_INSTALL_BASE", base)
        .env("TMPDIR", tmp);
    if let Some(dir) = install_dir {
        cmd.env("COS_INSTALL_DIR", dir);
    }
    cmd.output().unwrap()
}

#[test]
fn install_sh_verifies_then_installs_and_refuses_a_tampered_archive() {
    let dist = dist();
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    let tmp = work.path().join("tmp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let server = Server::start(dist);

    // Default place: ~/.local/bin/cos.
    let out = install(&server.url, &home, None, &tmp);
    assert!(out.status.success(), "{}", text(&out));
    let installed = home.join(".local/bin/cos");
    assert_eq!(sha256_hex(&installed), sha256_hex(&release_binary()));
    let version = bare(&installed, &home).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("cos {VERSION}\n")
    );
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "the installer leaves no temporary files"
    );
    // COS_INSTALL_DIR moves it; running it again replaces the binary in place.
    let elsewhere = work.path().join("opt/bin");
    for _ in 0..2 {
        let out = install(&server.url, &home, Some(&elsewhere), &tmp);
        assert!(out.status.success(), "{}", text(&out));
    }
    let names: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["cos"]);
    drop(server);

    // A tampered archive beside the genuine checksum: refused, nothing installed, nothing left.
    let bad = work.path().join("tampered");
    std::fs::create_dir_all(&bad).unwrap();
    for entry in std::fs::read_dir(dist).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), bad.join(entry.file_name())).unwrap();
    }
    let archive = bad.join(format!("cos-{VERSION}-{}.tar.gz", target()));
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&archive, bytes).unwrap();
    let server = Server::start(&bad);
    let target_dir = work.path().join("never");
    let out = install(&server.url, &home, Some(&target_dir), &tmp);
    assert!(
        !out.status.success(),
        "a tampered archive was installed:\n{}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("checksum mismatch") && stderr.contains("Nothing was installed"),
        "{stderr}"
    );
    assert!(!target_dir.exists(), "the install directory was created");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "temporary files were left"
    );

    // A checksum file that is not one, and a missing one: refused the same way.
    std::fs::write(
        bad.join(format!("cos-{VERSION}-{}.tar.gz.sha256", target())),
        "not a checksum\n",
    )
    .unwrap();
    let out = install(&server.url, &home, Some(&target_dir), &tmp);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no SHA-256"),
        "{}",
        text(&out)
    );
    std::fs::remove_file(bad.join(format!("cos-{VERSION}-{}.tar.gz.sha256", target()))).unwrap();
    let out = install(&server.url, &home, Some(&target_dir), &tmp);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("could not download"),
        "{}",
        text(&out)
    );
    assert!(!target_dir.exists());
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

#[test]
fn install_sh_defaults_to_this_release_of_this_repository() {
    let script = std::fs::read_to_string(root().join("packaging/install.sh")).unwrap();
    assert!(
        script.contains(&format!("COS_VERSION=\"${{COS_VERSION:-{VERSION}}}\"")),
        "install.sh's default version is not {VERSION}"
    );
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let repo = cargo
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        script.contains(&format!("REPOSITORY=\"{repo}\"")),
        "install.sh downloads from another repository than {repo}"
    );
    assert!(script.contains("$REPOSITORY/releases/download/v$COS_VERSION"));
}
