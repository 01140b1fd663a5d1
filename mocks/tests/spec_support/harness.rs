//! Calls operations by operationId — method and path come from the spec, never from the
//! emulator — and checks every answer against the spec: listed status, documented
//! headers, content type, and the body against the schema given for that status (each
//! NDJSON line against the event schema). Mismatches are collected, not fatal, so one run
//! reports them all; what was seen per operation feeds the coverage assertions.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::net::TcpStream;

use super::raw;
use super::spec::{Operation, Spec};

/// Which credential a call carries.
#[derive(Debug, Clone)]
pub enum Auth {
    /// The main tenant's API key.
    Main,
    None,
    /// Another `X-Api-Key` (another tenant, a delegated token).
    Key(String),
    /// `X-Access-Token` (OAuth).
    AccessToken(String),
}

#[derive(Debug, Clone)]
enum Body {
    /// No body; POST/PUT still send `Content-Length: 0`.
    Empty,
    Json(Value),
    Raw(String, Vec<u8>),
    /// A POST without Content-Length or Transfer-Encoding (raw socket).
    MissingLength,
}

#[derive(Default)]
struct Record {
    seen: BTreeMap<String, BTreeSet<u16>>,
    violations: Vec<String>,
}

pub struct Conformance {
    pub spec: Spec,
    pub base: String,
    pub addr: SocketAddr,
    pub key: String,
    pub http: reqwest::Client,
    record: Mutex<Record>,
}

/// One answer, as read off the wire.
#[derive(Debug)]
pub struct Reply {
    pub op: String,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {}", self.op, self.text()))
    }

    /// `data` of the envelope.
    pub fn data(&self) -> Value {
        self.json()["data"].clone()
    }

    pub fn ndjson(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// Panics unless the status is `status` (the scenario cannot go on otherwise).
    #[track_caller]
    pub fn expect(self, status: u16) -> Reply {
        assert_eq!(
            self.status,
            status,
            "{} answered {}: {}",
            self.op,
            self.status,
            self.text()
        );
        self
    }
}

/// A 101 answer and the upgraded socket.
pub struct Upgraded {
    pub reply: Reply,
    pub socket: Option<TcpStream>,
    pub early: Vec<u8>,
}

impl Conformance {
    pub fn new(spec: Spec, base: String, addr: SocketAddr, key: String) -> Conformance {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        Conformance {
            spec,
            base,
            addr,
            key,
            http,
            record: Mutex::new(Record::default()),
        }
    }

    /// A call of `op_id` to fill in.
    pub fn op(&self, op_id: &str) -> Call<'_> {
        Call {
            c: self,
            op: self.spec.op(op_id),
            params: Vec::new(),
            query: Vec::new(),
            body: Body::Empty,
            auth: Auth::Main,
            headers: Vec::new(),
            invalid_on_purpose: false,
        }
    }

    pub fn seen(&self) -> BTreeMap<String, BTreeSet<u16>> {
        self.record.lock().unwrap().seen.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.record.lock().unwrap().violations.clone()
    }

    /// Records a violation unless `reply` has `status` (for probes whose outcome the
    /// spec or the reference fixes).
    pub fn want(&self, reply: &Reply, status: u16, why: &str) {
        if reply.status != status {
            self.violation(format!(
                "{}: {why}: expected {status}, got {} ({})",
                reply.op,
                reply.status,
                short(&reply.text())
            ));
        }
    }

    pub fn violation(&self, msg: String) {
        self.record.lock().unwrap().violations.push(msg);
    }

    /// Checks an answer against the spec and records it.
    pub fn check(&self, reply: &Reply) {
        let op = self.spec.op(&reply.op);
        let problems = self.problems(op, reply);
        let mut record = self.record.lock().unwrap();
        record
            .seen
            .entry(op.id.clone())
            .or_default()
            .insert(reply.status);
        for p in problems {
            record
                .violations
                .push(format!("{} {} → {}: {p}", op.id, op.method, reply.status));
        }
    }

    fn problems(&self, op: &Operation, reply: &Reply) -> Vec<String> {
        let mut out = Vec::new();
        let Some(response) = op.response(reply.status) else {
            out.push(format!(
                "status not listed by the spec (body {})",
                short(&reply.text())
            ));
            return out;
        };
        for (name, header) in response["headers"].as_object().into_iter().flatten() {
            let header = self.spec.resolve(header);
            match reply
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
            {
                None if header["required"].as_bool() == Some(true) => {
                    out.push(format!("header {name} missing"))
                }
                None => {}
                Some(value) => {
                    if let Err(e) = self.check_header(&header["schema"], value) {
                        out.push(format!("header {name}: {value:?}: {e}"));
                    }
                }
            }
        }
        if reply.status == 429 && reply.headers.get("retry-after").is_none() {
            out.push("429 without Retry-After".into());
        }
        let Some(content) = response["content"].as_object() else {
            if !reply.body.is_empty() {
                out.push(format!(
                    "a body where the spec declares none: {}",
                    short(&reply.text())
                ));
            }
            return out;
        };
        let media = reply
            .header("content-type")
            .map(|ct| {
                ct.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let Some(entry) = content.get(&media) else {
            let known: Vec<&String> = content.keys().collect();
            out.push(format!(
                "content type {media:?} is not one of {known:?} (body {})",
                short(&reply.text())
            ));
            return out;
        };
        out.extend(self.check_body(&media, &entry["schema"], &reply.body));
        out
    }

    fn check_header(&self, schema: &Value, value: &str) -> Result<(), String> {
        let schema = self.spec.resolve(schema);
        if let Some(constant) = schema["const"].as_str() {
            // Connection / Upgrade tokens compare case-insensitively (RFC 9110).
            return if value.eq_ignore_ascii_case(constant) {
                Ok(())
            } else {
                Err(format!("expected {constant}"))
            };
        }
        let instance = if schema["type"] == "integer" {
            value
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| "not an integer".to_string())?
        } else {
            Value::String(value.to_string())
        };
        self.spec.validate(schema, &instance)
    }

    fn check_body(&self, media: &str, schema: &Value, body: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        match media {
            "application/json" => match serde_json::from_slice::<Value>(body) {
                Ok(v) => {
                    if let Err(e) = self.spec.validate(schema, &v) {
                        out.push(format!(
                            "body does not match the schema: {e}; body {}",
                            short(&v.to_string())
                        ));
                    }
                }
                Err(e) => out.push(format!(
                    "body is not JSON ({e}): {}",
                    short(&String::from_utf8_lossy(body))
                )),
            },
            "application/x-ndjson" => {
                let text = String::from_utf8_lossy(body);
                let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                if lines.is_empty() {
                    out.push("an empty NDJSON stream".into());
                }
                for line in lines {
                    match serde_json::from_str::<Value>(line) {
                        Ok(v) => {
                            if let Err(e) = self.spec.validate(schema, &v) {
                                out.push(format!(
                                    "NDJSON line {line} does not match the schema: {e}"
                                ));
                            }
                        }
                        Err(e) => out.push(format!("NDJSON line is not JSON ({e}): {line}")),
                    }
                }
            }
            "image/png" if !body.starts_with(b"\x89PNG\r\n\x1a\n") => out.push("not a PNG".into()),
            "text/plain" if std::str::from_utf8(body).is_err() => {
                out.push("text/plain body is not UTF-8".into())
            }
            _ => {}
        }
        out
    }
}

fn short(s: &str) -> String {
    if s.len() > 400 {
        format!(
            "{}…",
            &s[..s
                .char_indices()
                .take_while(|(i, _)| *i < 400)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        s.to_string()
    }
}

/// One request being built.
pub struct Call<'a> {
    c: &'a Conformance,
    op: &'a Operation,
    params: Vec<(String, String)>,
    query: Vec<(String, String)>,
    body: Body,
    auth: Auth,
    headers: Vec<(String, String)>,
    invalid_on_purpose: bool,
}

impl<'a> Call<'a> {
    /// A path parameter.
    pub fn p(mut self, name: &str, value: impl ToString) -> Self {
        self.params.push((name.to_string(), value.to_string()));
        self
    }

    pub fn q(mut self, name: &str, value: impl ToString) -> Self {
        self.query.push((name.to_string(), value.to_string()));
        self
    }

    /// A JSON body; it must match the spec's request schema unless marked invalid.
    pub fn json(mut self, body: Value) -> Self {
        self.body = Body::Json(body);
        self
    }

    pub fn raw(mut self, content_type: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.body = Body::Raw(content_type.to_string(), bytes.into());
        self
    }

    pub fn missing_length(mut self) -> Self {
        self.body = Body::MissingLength;
        self
    }

    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The JSON body breaks the request schema on purpose (a 400 probe).
    pub fn invalid(mut self) -> Self {
        self.invalid_on_purpose = true;
        self
    }

    fn target(&self) -> String {
        let mut path = self.op.path.clone();
        for name in self.op.path_params() {
            let value = self
                .params
                .iter()
                .find(|(k, _)| *k == name)
                .unwrap_or_else(|| panic!("{}: path parameter {name} not given", self.op.id));
            path = path.replace(
                &format!("{{{name}}}"),
                &utf8_percent_encode(&value.1, NON_ALPHANUMERIC).to_string(),
            );
        }
        if !self.query.is_empty() {
            let query: String = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&self.query)
                .finish();
            path = format!("{path}?{query}");
        }
        path
    }

    fn auth_header(&self) -> Option<(String, String)> {
        match &self.auth {
            Auth::Main => Some(("X-Api-Key".into(), self.c.key.clone())),
            Auth::None => None,
            Auth::Key(k) => Some(("X-Api-Key".into(), k.clone())),
            Auth::AccessToken(t) => Some(("X-Access-Token".into(), t.clone())),
        }
    }

    fn check_request_body(&self) {
        let Body::Json(body) = &self.body else { return };
        if self.invalid_on_purpose {
            return;
        }
        let Some(schema) = &self.op.request_schema else {
            panic!("test bug: {} takes no JSON body", self.op.id);
        };
        if let Err(e) = self.c.spec.validate(schema, body) {
            panic!(
                "test bug: {} request {body} does not match the spec: {e}",
                self.op.id
            );
        }
    }

    /// Sends the request and checks the answer.
    pub async fn send(self) -> Reply {
        self.check_request_body();
        let target = self.target();
        let reply = if matches!(self.body, Body::MissingLength) {
            let mut headers: Vec<(String, String)> = self.auth_header().into_iter().collect();
            headers.extend(self.headers.iter().cloned());
            headers.push(("Connection".into(), "close".into()));
            let r = raw::exchange(self.c.addr, &self.op.method, &target, &headers, b"").await;
            Reply {
                op: self.op.id.clone(),
                status: r.status,
                headers: r.headers,
                body: r.body,
            }
        } else {
            let method = reqwest::Method::from_bytes(self.op.method.as_bytes()).unwrap();
            let mut req = self
                .c
                .http
                .request(method.clone(), format!("{}{target}", self.c.base));
            if let Some((k, v)) = self.auth_header() {
                req = req.header(k, v);
            }
            for (k, v) in &self.headers {
                req = req.header(k, v);
            }
            req = match self.body {
                Body::Empty
                    if method == reqwest::Method::POST || method == reqwest::Method::PUT =>
                {
                    req.header("Content-Length", "0")
                }
                Body::Empty | Body::MissingLength => req,
                Body::Json(v) => req.json(&v),
                Body::Raw(ct, bytes) => req.header("Content-Type", ct).body(bytes),
            };
            let resp = req
                .send()
                .await
                .unwrap_or_else(|e| panic!("{} {target}: {e}", self.op.id));
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp
                .bytes()
                .await
                .unwrap_or_else(|e| panic!("{} {target}: body: {e}", self.op.id))
                .to_vec();
            Reply {
                op: self.op.id.clone(),
                status,
                headers,
                body,
            }
        };
        self.c.check(&reply);
        reply
    }

    /// Sends an Upgrade handshake over a raw socket (the headers given with `header`,
    /// plus the credential) and checks the answer; keeps the socket after a 101.
    pub async fn upgrade(self) -> Upgraded {
        let target = self.target();
        let mut headers: Vec<(String, String)> = self.auth_header().into_iter().collect();
        headers.extend(self.headers.iter().cloned());
        let r = raw::exchange(self.c.addr, &self.op.method, &target, &headers, b"").await;
        let reply = Reply {
            op: self.op.id.clone(),
            status: r.status,
            headers: r.headers,
            body: r.body,
        };
        self.c.check(&reply);
        Upgraded {
            reply,
            socket: r.socket,
            early: r.early,
        }
    }
}
