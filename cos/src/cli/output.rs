//! How `cos` prints: text unless `-o json` (or `CREATEOS_OUTPUT=json`) asks for JSON; the
//! choice never depends on whether stdout is a terminal. A failure always goes to stderr in
//! words and exits 1; in JSON mode it is also printed on stdout as `{"error": {"code",
//! "message", …}}`, for scripts.

use std::io::Write;

use serde::Serialize;
use serde_json::{json, Value};

use createos_sandbox::Error;

/// The output format chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable text.
    Text,
    /// One JSON document per command.
    Json,
}

/// Printer bound to the chosen format.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub json: bool,
    /// `-o json` was asked for. Since the format no longer follows the terminal this equals
    /// `json`; commands that stream raw output read it to say "a JSON summary instead".
    pub explicit_json: bool,
}

impl Out {
    pub fn new(format: Format) -> Self {
        let json = format == Format::Json;
        Out {
            json,
            explicit_json: json,
        }
    }

    /// Print `value` as JSON, or `text()` for people.
    pub fn show<T: Serialize>(&self, value: &T, text: impl FnOnce() -> String) {
        let mut stdout = std::io::stdout().lock();
        if self.json {
            let _ = serde_json::to_writer_pretty(&mut stdout, value);
            let _ = writeln!(stdout);
        } else {
            let t = text();
            if !t.is_empty() {
                let _ = writeln!(stdout, "{}", t.trim_end());
            }
        }
    }

    /// Print a value that has no special text form.
    pub fn value<T: Serialize>(&self, value: &T) {
        self.show(value, || {
            serde_json::to_string_pretty(value).unwrap_or_default()
        })
    }

    /// A progress or status line for people (stderr, never in JSON mode's stdout).
    pub fn note(&self, line: impl AsRef<str>) {
        eprintln!("{}", line.as_ref());
    }
}

/// Stable error codes of the JSON error envelope (a guest file operation's own code, e.g.
/// `ambiguous`, passes through).
pub fn error_code(err: &anyhow::Error) -> String {
    if let Some(g) = err.downcast_ref::<Error>().and_then(Error::guest) {
        return g.code.to_string();
    }
    let code = match err.downcast_ref::<Error>() {
        Some(Error::Validation(_)) | Some(Error::InvalidInput { .. }) => "bad_request",
        Some(Error::Auth(_)) | Some(Error::NotSignedIn(_)) | Some(Error::Credentials { .. }) => {
            "unauthorized"
        }
        Some(Error::Permission(_)) => "forbidden",
        Some(Error::NotFound(_)) => "not_found",
        Some(Error::Conflict(_)) => "conflict",
        Some(Error::RateLimited { .. }) => "rate_limited",
        Some(Error::PaymentRequired(_)) => "payment_required",
        Some(Error::Server(_)) => "server_error",
        Some(Error::Timeout { .. }) => "timeout",
        Some(Error::Connection { .. }) => "connection_error",
        Some(Error::Cancelled) => "cancelled",
        Some(_) => "api_error",
        None => "error",
    };
    code.to_string()
}

/// Report a failure: always on stderr in words; in JSON mode also on stdout as JSON.
pub fn report_error(out: Out, err: &anyhow::Error) {
    eprintln!("error: {err:#}");
    if out.json {
        let mut body = json!({ "code": error_code(err), "message": format!("{err:#}") });
        if let Some(api) = err.downcast_ref::<Error>().and_then(Error::api) {
            body["status"] = json!(api.status);
            if let Some(id) = &api.request_id {
                body["request_id"] = json!(id);
            }
            if !api.fields.is_empty() {
                body["fields"] = json!(api.fields);
            }
        }
        // A guest helper's failure: its own code (exists, ambiguous, patch_failed, …), the
        // operation and its details are what a script acts on.
        if let Some(g) = err.downcast_ref::<Error>().and_then(Error::guest) {
            body["op"] = json!(g.op);
            body["message"] = json!(g.message);
            if let Some(details) = &g.details {
                body["details"] = details.clone();
            }
        }
        let doc: Value = json!({ "error": body });
        println!("{}", serde_json::to_string(&doc).unwrap_or_default());
    }
}

/// A simple aligned table for text output.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        let n = cells.len();
        for (i, cell) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(&cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push('\n');
    };
    line(headers.iter().map(|h| h.to_string()).collect(), &mut out);
    for row in rows {
        line(row, &mut out);
    }
    out
}
