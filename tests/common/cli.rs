//! Reading what a `cos` process printed with `-o json`.

use std::process::Output;

use serde_json::Value;

/// stdout as JSON (a panic shows both streams when it is not).
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The JSON of a run that must have succeeded.
pub fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "cos failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

/// `cos` with none of the caller's CreateOS settings: no credential variables, no output format
/// from the environment, `HOME` (and the XDG directories) under `home`.
pub fn clean_cos(home: &std::path::Path) -> std::process::Command {
    // Set for the `cos` package's tests only (the binary is theirs).
    let Some(cos) = option_env!("CARGO_BIN_EXE_cos") else {
        panic!("clean_cos serves the cos package's tests only")
    };
    let mut cmd = std::process::Command::new(cos);
    for name in createos_sandbox::auth::API_KEY_ENV_VARS {
        cmd.env_remove(name);
    }
    cmd.env_remove("CREATEOS_OUTPUT")
        .env_remove("CREATEOS_SANDBOX_BASE_URL")
        .env_remove("RUST_LOG")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .stdin(std::process::Stdio::null());
    cmd
}

/// stdout and stderr as text.
pub fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
