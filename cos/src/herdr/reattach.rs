//! `attach`: reconnect a pane to its agent by typing `cos herdr connect` into the pane's
//! shell, and report what the pane did.
//!
//! The line is typed only when the pane's shell is in the foreground (`pane process-info`):
//! typed into a running agent it would be a prompt, typed into an attached sandbox it would run
//! there. It carries what `connect` needs (the state directory, Herdr's agent label, …) because
//! a pane that Herdr restored after a cold restart has none of the environment it was opened
//! with. `connect` writes its outcome to `reports/<token>.json` in the state directory before it
//! attaches; `attach` waits for it and reports it, so a line that failed in the pane is a
//! failed action, not `ok: true`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::actions::{live_sandbox, ActionEnv};
use super::error::{HerdrError, HerdrResult};
use super::result::ActionResult;
use super::state::{write_bytes_atomic, StateStore};

/// How long `attach` waits for the typed `connect` to report.
pub const CONNECT_REPORT_WAIT: Duration = Duration::from_secs(30);
/// Pause between two looks for the report.
const REPORT_POLL: Duration = Duration::from_millis(100);
/// Directory of the reports in the state directory.
pub const REPORTS_DIR: &str = "reports";

/// A fresh report token (32 hex digits).
pub fn new_token() -> String {
    format!(
        "{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

fn report_path(store: &StateStore, token: &str) -> HerdrResult<PathBuf> {
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HerdrError::invalid(
            "report token",
            format!("{token:?} is not 32 hex digits"),
        ));
    }
    Ok(store.dir().join(REPORTS_DIR).join(format!("{token}.json")))
}

/// Write `connect`'s outcome for the `attach` that typed it.
pub fn write_report(store: &StateStore, token: &str, result: &ActionResult) -> HerdrResult<()> {
    let path = report_path(store, token)?;
    let dir = store.dir().join(REPORTS_DIR);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(&dir)
        .map_err(|e| HerdrError::io(format!("creating {}", dir.display()), e))?;
    write_bytes_atomic(&path, result.to_json().to_string().as_bytes(), 0o600)
}

/// Wait up to `within` for the report of `token`, and remove it.
pub async fn take_report(
    store: &StateStore,
    token: &str,
    within: Duration,
) -> HerdrResult<Option<Value>> {
    let path = report_path(store, token)?;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match std::fs::read(&path) {
            Ok(bytes) => {
                let _ = std::fs::remove_file(&path);
                return Ok(serde_json::from_slice(&bytes).ok());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(HerdrError::io(format!("reading {}", path.display()), e)),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(REPORT_POLL).await;
    }
}

/// `attach`: resume the sandbox if it is paused, check that the pane's shell is in the
/// foreground, type `cos herdr connect <pane> <token>` into it, and report what it did.
pub async fn attach(env: &ActionEnv, wait: Duration) -> HerdrResult<ActionResult> {
    let pane = env.context.require_pane()?.to_string();
    let entry = env.entry(&pane).await?;
    live_sandbox(env, &entry).await?;
    let info = env.host.process_info(&pane).await?;
    if !info.shell_in_foreground() {
        if info.runs_our_attach() {
            return Ok(ActionResult::ok("attach")
                .with("box", entry.box_name)
                .with("pane", pane)
                .with("result", "already-attached"));
        }
        let what = match (info.shell_pid, info.foreground_pgid) {
            (None, _) => format!("pane {pane} has no live shell"),
            (Some(_), None) => format!("Herdr cannot tell what runs in pane {pane}"),
            _ => format!(
                "pane {pane} runs {} in the foreground, not its shell",
                info.foreground_command()
            ),
        };
        return Err(HerdrError::Busy(format!(
            "{what}; attach types only into an idle shell (nothing was typed). Leave that program, then attach \
             again; sandbox {} keeps running",
            entry.box_name
        )));
    }
    let token = new_token();
    let line = env.typed_with(
        &env.pane_vars(&entry.agent),
        &["herdr", "connect", &pane, &token],
    )?;
    env.host.run_in_pane(&pane, &line).await?;
    let report = take_report(&env.store, &token, wait).await?;
    let Some(report) = report else {
        return Err(HerdrError::invalid(
            "attach",
            format!(
                "the pane did not run `cos herdr connect` within {}s (typed into pane {pane}; see the pane for what \
                 happened)",
                wait.as_secs()
            ),
        ));
    };
    if report["ok"] != true {
        let why = report["error"].as_str().unwrap_or("no reason given");
        return Err(HerdrError::invalid(
            "attach",
            format!("`cos herdr connect` failed in pane {pane}: {why}"),
        ));
    }
    let mut result = ActionResult::ok("attach")
        .with("box", entry.box_name)
        .with("pane", pane)
        .with("result", "attached");
    for key in ["processId", "restarted"] {
        if let Some(v) = report.get(key) {
            result = result.with(key, v.clone());
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reports_round_trip_once_and_tokens_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let token = new_token();
        assert!(take_report(&store, &token, Duration::ZERO)
            .await
            .unwrap()
            .is_none());
        write_report(
            &store,
            &token,
            &ActionResult::ok("connect").with("restarted", true),
        )
        .unwrap();
        let got = take_report(&store, &token, Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got["restarted"], true);
        assert!(
            take_report(&store, &token, Duration::ZERO)
                .await
                .unwrap()
                .is_none(),
            "taken once"
        );
        for bad in ["../../etc/passwd", "", "zz", &"a".repeat(33)] {
            assert!(
                write_report(&store, bad, &ActionResult::ok("connect")).is_err(),
                "{bad}"
            );
        }
    }
}
