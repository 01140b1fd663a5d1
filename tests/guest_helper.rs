//! Runs the guest helper's own test suite (`guest/test_cos_guest.py`) with the machine's
//! `python3`, so `cargo test` covers the Python file operations that ship inside sandboxes.
//! The suite drives `guest/cos_guest.py` through its stdin/stdout protocol; when `rg` is
//! installed it also checks that ripgrep and the pure-Python fallback give identical answers.

use std::path::Path;
use std::process::{Command, Output};

fn python3(args: &[&str]) -> Output {
    Command::new("python3")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("COS_GUEST_NO_RG")
        .env_remove("RIPGREP_CONFIG_PATH")
        .output()
        .expect("python3 must be on PATH to test guest/cos_guest.py")
}

fn report(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn guest_helper_python_suite_passes() {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/test_cos_guest.py");
    assert!(suite.is_file(), "missing {}", suite.display());

    let version = python3(&[
        "-c",
        "import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)",
    ]);
    assert!(
        version.status.success(),
        "cos_guest.py needs Python >= 3.9\n{}",
        report(&version)
    );

    let output = python3(&["guest/test_cos_guest.py"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "guest helper tests failed\n{}",
        report(&output)
    );
    // unittest reports "Ran N tests" then "OK": make sure tests actually ran.
    let ran = stderr
        .lines()
        .find_map(|line| {
            line.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        ran >= 50,
        "expected the full guest suite to run, saw {ran} tests\n{}",
        report(&output)
    );
    assert!(
        stderr.lines().any(|line| line.starts_with("OK")),
        "no OK line\n{}",
        report(&output)
    );
}
