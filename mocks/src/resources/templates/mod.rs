//! Templates (E52–E56): custom rootfs images built from a Dockerfile. The build is
//! simulated step by step (one log line group per instruction at the `template_build`
//! latency); `RUN` lines are syntax-checked with `sh -n` and a syntax error fails the
//! build. Logs are served as text or followed as NDJSON.

mod dockerfile;

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::clock::{now, rfc3339};
use crate::envelope::{ok, paginate, ApiError, JsonBody, PageQuery};
use crate::operation::{op, Operation};
use crate::resources::store::templates::{
    BuildStatus, LogLine, TemplateEntry, TemplateState, MAX_CONCURRENT_BUILDS,
};
use crate::state::AppState;

pub use dockerfile::{ALLOWED_FROM, MAX_DOCKERFILE_BYTES};

pub const OPERATIONS: &[Operation] = &[
    op(
        "listTemplates",
        "GET",
        "/v1/templates",
        "resources::templates::list_templates",
    ),
    op(
        "createTemplate",
        "POST",
        "/v1/templates",
        "resources::templates::create_template",
    ),
    op(
        "getTemplate",
        "GET",
        "/v1/templates/{template}",
        "resources::templates::get_template",
    ),
    op(
        "deleteTemplate",
        "DELETE",
        "/v1/templates/{template}",
        "resources::templates::delete_template",
    ),
    op(
        "getTemplateLogs",
        "GET",
        "/v1/templates/{template}/logs",
        "resources::templates::get_template_logs",
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/templates", get(list_templates).post(create_template))
        .route(
            "/v1/templates/{template}",
            get(get_template).delete(delete_template),
        )
        .route("/v1/templates/{template}/logs", get(get_template_logs))
}

fn not_found() -> ApiError {
    ApiError::not_found("template", "template not found")
}

fn name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub async fn list_templates(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PageQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let items = state
        .resources
        .templates
        .of_tenant(&caller.tenant)
        .iter()
        .map(|t| t.view(false))
        .collect();
    paginate(items, &q)
}

#[derive(Debug, Default, Deserialize)]
pub struct CreateTemplateRequest {
    pub name: Option<String>,
    pub dockerfile: Option<String>,
    pub base: Option<String>,
}

pub async fn create_template(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(req): JsonBody<CreateTemplateRequest>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    state.require_credit(&caller)?;
    let name = req.name.as_deref().unwrap_or("").trim().to_string();
    if !name_ok(&name) {
        return Err(ApiError::validation(
            "name",
            "name must match ^[a-z0-9][a-z0-9-]{0,62}$",
        ));
    }
    let source = req.dockerfile.unwrap_or_default();
    let (instructions, image) = dockerfile::validate(&source)?;
    let base = match req.base.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        Some(b) if crate::catalog::builtin_rootfs(b).is_some() => b.to_string(),
        Some(b) => {
            return Err(ApiError::validation(
                "base",
                format!("unknown base rootfs {b:?}"),
            ))
        }
        None => dockerfile::base_for(&image).to_string(),
    };
    let entry = {
        let mut rows = state
            .resources
            .templates
            .rows
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let running = rows
            .iter()
            .filter(|t| {
                t.tenant == caller.tenant
                    && matches!(t.status(), BuildStatus::Pending | BuildStatus::Building)
            })
            .count();
        if running >= MAX_CONCURRENT_BUILDS {
            return Err(ApiError::conflict_on(
                "templates",
                "too many concurrent builds (max 2)",
            ));
        }
        let entry = Arc::new(TemplateEntry {
            id: crate::ids::new_id("tpl_"),
            tenant: caller.tenant.clone(),
            name,
            base,
            dockerfile: source,
            created_at: now(),
            state: Mutex::new(TemplateState {
                status: BuildStatus::Pending,
                ext4_size_bytes: 0,
                built_at: None,
                log: Vec::new(),
            }),
            changed: Notify::new(),
            cancel: CancellationToken::new(),
        });
        rows.push(Arc::clone(&entry));
        entry
    };
    entry.log("info", format!("build {} queued", entry.id));
    tokio::spawn(run_build(state.clone(), Arc::clone(&entry), instructions));
    Ok(ok(entry.view(false)))
}

/// Simulated build: one step per instruction, `RUN` lines syntax-checked for real.
async fn run_build(
    state: AppState,
    entry: Arc<TemplateEntry>,
    instructions: Vec<dockerfile::Instruction>,
) {
    let step = state.config.latencies.template_build;
    let pause = |d| {
        let cancel = entry.cancel.clone();
        let shutdown = state.shutdown.clone();
        async move {
            tokio::select! {
                _ = tokio::time::sleep(d) => true,
                _ = cancel.cancelled() => false,
                _ = shutdown.cancelled() => false,
            }
        }
    };
    if !pause(step).await {
        return cancelled(&entry);
    }
    entry.set_status(BuildStatus::Building);
    entry.log(
        "info",
        format!("building {} on base {}", entry.name, entry.base),
    );
    let total = instructions.len();
    let mut size: i64 = 512 << 20;
    for (i, ins) in instructions.iter().enumerate() {
        entry.log("info", format!("Step {}/{} : {}", i + 1, total, ins.text()));
        if !pause(step).await {
            return cancelled(&entry);
        }
        if ins.keyword == "RUN" {
            match check_run(&ins.args).await {
                Ok(()) => {
                    entry.log("info", " ---> ran in a build container");
                    size += 16 << 20;
                }
                Err(msg) => {
                    entry.log("error", format!("Step {}/{} failed: {msg}", i + 1, total));
                    entry.set_status(BuildStatus::Failed);
                    entry.log("error", "build failed");
                    return;
                }
            }
        }
        entry.log("info", format!(" ---> {}", &crate::ids::random_token(12)));
    }
    entry.lock().ext4_size_bytes = size;
    entry.log(
        "info",
        format!("Successfully built {} ({} bytes)", entry.id, size),
    );
    entry.set_status(BuildStatus::Ready);
}

fn cancelled(entry: &TemplateEntry) {
    entry.set_status(BuildStatus::Cancelled);
    entry.log("warn", "build cancelled");
}

/// Checks a `RUN` instruction: exec form must be a JSON string array; shell form must
/// pass `sh -n` (syntax only: nothing is executed on the host).
async fn check_run(args: &str) -> Result<(), String> {
    let args = args.trim();
    if args.is_empty() {
        return Err("RUN needs a command".into());
    }
    if args.starts_with('[') {
        return match serde_json::from_str::<Vec<String>>(args) {
            Ok(v) if !v.is_empty() => Ok(()),
            _ => Err("RUN exec form must be a non-empty JSON array of strings".into()),
        };
    }
    let output = tokio::process::Command::new("/bin/sh")
        .arg("-n")
        .arg("-c")
        .arg(args)
        .env_clear()
        .env("PATH", crate::isolation::SANDBOX_PATH)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot check RUN: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        Err(format!("/bin/sh: syntax error in RUN ({stderr})"))
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct GetQuery {
    pub include: Option<String>,
}

pub async fn get_template(
    State(state): State<AppState>,
    caller: Caller,
    Path(template): Path<String>,
    Query(q): Query<GetQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let t = state
        .resources
        .templates
        .find(&caller.tenant, &template)
        .ok_or_else(not_found)?;
    let mut with_dockerfile = false;
    for part in q
        .include
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        if part != "dockerfile" {
            return Err(ApiError::validation(
                "include",
                format!("unknown include {part:?} (dockerfile)"),
            ));
        }
        with_dockerfile = true;
    }
    Ok(ok(t.view(with_dockerfile)))
}

pub async fn delete_template(
    State(state): State<AppState>,
    caller: Caller,
    Path(template): Path<String>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let templates = &state.resources.templates;
    let mine = templates.of_tenant(&caller.tenant);
    let doomed: Vec<Arc<TemplateEntry>> = match mine.iter().find(|t| t.id == template) {
        Some(t) => vec![Arc::clone(t)],
        None => mine.into_iter().filter(|t| t.name == template).collect(),
    };
    if doomed.is_empty() {
        return Err(not_found());
    }
    for t in &doomed {
        t.cancel.cancel();
    }
    templates.remove(&doomed.iter().map(|t| t.id.clone()).collect::<Vec<_>>());
    Ok(ok(json!({"ok": true})))
}

#[derive(Debug, Default, Deserialize)]
pub struct LogsQuery {
    pub follow: Option<String>,
    pub attempt: Option<String>,
}

fn event(l: &LogLine) -> Value {
    json!({"ts": rfc3339(l.ts), "level": l.level, "line": l.line, "attempt": l.attempt})
}

pub async fn get_template_logs(
    State(state): State<AppState>,
    caller: Caller,
    Path(template): Path<String>,
    Query(q): Query<LogsQuery>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let t = state
        .resources
        .templates
        .find(&caller.tenant, &template)
        .ok_or_else(not_found)?;
    let attempt: Option<u32> = match q.attempt.as_deref().filter(|a| !a.is_empty()) {
        None => None,
        Some(raw) => match raw.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(ApiError::validation(
                    "attempt",
                    "attempt must be a positive integer",
                ))
            }
        },
    };
    let keep = move |l: &LogLine| attempt.is_none_or(|a| l.attempt == a);
    let follow = matches!(q.follow.as_deref(), Some("true" | "1" | "yes"));
    if !follow {
        let mut text = String::new();
        for l in t.lock().log.iter().filter(|l| keep(l)) {
            text.push_str(&l.line);
            text.push('\n');
        }
        let mut resp = Response::new(Body::from(text));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return Ok(resp);
    }
    let (tx, resp) = crate::ndjson::channel_response(64);
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let mut sent = 0usize;
        loop {
            let notified = t.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (lines, status) = {
                let s = t.lock();
                (s.log[sent..].to_vec(), s.status)
            };
            sent += lines.len();
            for l in lines.iter().filter(|l| keep(l)) {
                if tx.send(event(l)).await.is_err() {
                    return;
                }
            }
            if status.finished() {
                let _ = tx
                    .send(json!({"final": true, "status": status.as_str()}))
                    .await;
                return;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tx.closed() => return,
                _ = shutdown.cancelled() => return,
            }
        }
    });
    Ok(resp)
}
