//! Error cases derived from the spec for every operation at once: no credential (401), a
//! delegated token off its routes (403) or on another sandbox (404), unknown resources
//! (404), a POST without Content-Length (411), a non-JSON body (415), malformed JSON
//! (400), a paused sandbox on runtime routes (409), and an image without desktop (501).

use serde_json::Value;

use super::fixtures::Fixtures;
use super::harness::{Auth, Call, Conformance};
use super::samples::{self, UNKNOWN_SANDBOX};
use super::spec::Operation;

/// `op` with every path parameter filled (`id` = `sandbox`), its required query and a
/// valid body when it takes JSON.
fn filled<'a>(c: &'a Conformance, op: &Operation, sandbox: &str) -> Call<'a> {
    let mut call = c.op(&op.id);
    for name in op.path_params() {
        let value = if name == "id" {
            sandbox.to_string()
        } else {
            samples::path_param(&name).to_string()
        };
        call = call.p(&name, value);
    }
    for (k, v) in samples::required_query(&op.id) {
        call = call.q(k, v);
    }
    if op.takes_json() {
        let body: Value =
            samples::body(&op.id).unwrap_or_else(|| panic!("no sample body for {}", op.id));
        call = call.json(body);
    }
    call
}

/// Runs every generic probe on every operation.
pub async fn run(c: &Conformance, fx: &Fixtures) {
    let ops: Vec<Operation> = c.spec.operations().cloned().collect();
    for op in &ops {
        unauthorized(c, fx, op).await;
        delegated(c, fx, op).await;
        unknown(c, op).await;
        request_format(c, fx, op).await;
        not_running(c, fx, op).await;
        no_desktop(c, fx, op).await;
        bad_screen(c, fx, op).await;
    }
}

/// A malformed screen id, in the query or the path, is 400.
async fn bad_screen(c: &Conformance, fx: &Fixtures, op: &Operation) {
    if op.query_params.iter().any(|q| q == "screen_id") {
        let r = filled(c, op, &fx.desktop)
            .q("screen_id", "banana")
            .send()
            .await;
        c.want(&r, 400, "malformed screen_id query");
    }
    if op.path_params().iter().any(|p| p == "screen_id") {
        let mut call = c.op(&op.id).p("id", &fx.desktop).p("screen_id", "screen-x");
        if op.takes_json() {
            call = call.json(samples::body(&op.id).unwrap());
        }
        let r = call.send().await;
        c.want(&r, 400, "malformed screen id in the path");
    }
}

async fn unauthorized(c: &Conformance, fx: &Fixtures, op: &Operation) {
    if op.public {
        // A public route ignores a bad credential.
        let r = filled(c, op, &fx.sandbox)
            .auth(Auth::Key("skp_not_a_key".into()))
            .send()
            .await;
        if !(200..300).contains(&r.status) {
            c.violation(format!(
                "{}: public route refused a bad credential with {}",
                op.id, r.status
            ));
        }
        return;
    }
    if !op.lists(401) {
        c.violation(format!("{}: authenticated route does not list 401", op.id));
        return;
    }
    let r = filled(c, op, &fx.sandbox).auth(Auth::None).send().await;
    c.want(&r, 401, "no credential");
    if r.status == 401 && r.data()["auth"] != "missing credentials" {
        c.violation(format!(
            "{}: 401 without credential should say missing credentials: {}",
            op.id,
            r.text()
        ));
    }
    let r = filled(c, op, &fx.sandbox)
        .auth(Auth::Key("skp_wrong_key".into()))
        .send()
        .await;
    c.want(&r, 401, "wrong API key");
    let r = filled(c, op, &fx.sandbox)
        .auth(Auth::AccessToken("not-a-token".into()))
        .send()
        .await;
    c.want(&r, 401, "unknown access token");
}

async fn delegated(c: &Conformance, fx: &Fixtures, op: &Operation) {
    if op.public {
        return;
    }
    let token = Auth::Key(fx.delegated.clone());
    if !op.delegated {
        if !op.lists(403) {
            c.violation(format!("{}: management route does not list 403", op.id));
            return;
        }
        let r = filled(c, op, &fx.sandbox).auth(token).send().await;
        c.want(&r, 403, "delegated token on a management route");
    } else if op.path_params().iter().any(|p| p == "id") {
        let r = filled(c, op, &fx.desktop).auth(token).send().await;
        c.want(&r, 404, "delegated token of another sandbox");
    }
}

async fn unknown(c: &Conformance, op: &Operation) {
    let params = op.path_params();
    if params.is_empty() {
        return;
    }
    if !op.lists(404) {
        c.violation(format!(
            "{}: a route with path parameters does not list 404",
            op.id
        ));
        return;
    }
    let r = filled(c, op, UNKNOWN_SANDBOX).send().await;
    c.want(&r, 404, "unknown resource");
}

async fn request_format(c: &Conformance, fx: &Fixtures, op: &Operation) {
    let sandbox = if op.id.contains("omputer") {
        &fx.desktop
    } else {
        &fx.sandbox
    };
    if op.method == "POST" {
        if op.lists(411) {
            let r = filled(c, op, sandbox).missing_length().send().await;
            c.want(&r, 411, "POST without Content-Length");
        } else {
            c.violation(format!("{}: POST does not list 411", op.id));
        }
    }
    if !op.takes_json() {
        return;
    }
    if op.lists(415) {
        let r = filled(c, op, sandbox)
            .raw("text/plain", "hello")
            .send()
            .await;
        c.want(&r, 415, "text/plain body on a JSON route");
    } else {
        c.violation(format!("{}: JSON route does not list 415", op.id));
    }
    if op.lists(400) {
        let r = filled(c, op, sandbox)
            .raw("application/json", "{not json")
            .send()
            .await;
        c.want(&r, 400, "malformed JSON");
        if r.status == 400
            && !r.data()["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("invalid JSON")
        {
            c.violation(format!(
                "{}: malformed JSON should be {{\"body\": \"invalid JSON: …\"}}: {}",
                op.id,
                r.text()
            ));
        }
    } else {
        c.violation(format!("{}: JSON route does not list 400", op.id));
    }
}

/// Runtime routes (and the management routes that need a running sandbox) on a paused one.
async fn not_running(c: &Conformance, fx: &Fixtures, op: &Operation) {
    let needs_running = op.delegated || matches!(op.id.as_str(), "addSshPubkeys" | "resizeSandbox");
    if !needs_running || !op.path_params().iter().any(|p| p == "id") {
        return;
    }
    let paused = if op.lists(501) {
        &fx.paused_desktop
    } else {
        &fx.paused
    };
    let r = filled(c, op, paused).send().await;
    c.want(&r, 409, "paused sandbox");
}

async fn no_desktop(c: &Conformance, fx: &Fixtures, op: &Operation) {
    if !op.lists(501) {
        return;
    }
    let r = filled(c, op, &fx.sandbox).send().await;
    c.want(&r, 501, "computer route on an image without desktop");
}
