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
