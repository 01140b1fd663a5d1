//! Minimal HTTP/1.1 and WebSocket clients over raw tokio sockets, written for these tests
//! (the project's client crate is deliberately not used against the emulator here).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Upper bound for any single step of a test (a hung emulator fails instead of hanging).
pub const STEP: Duration = Duration::from_secs(20);

pub async fn within<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// `data` of a JSend success envelope.
    pub fn data(&self) -> Value {
        let v = self.json();
        assert_eq!(v["status"], "success", "not a success envelope: {v}");
        v["data"].clone()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone)]
pub struct Api {
    pub addr: SocketAddr,
    pub key: String,
}

fn head(
    method: &str,
    path: &str,
    key: &str,
    extra: &[(&str, &str)],
    body_len: Option<usize>,
) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: {key}\r\n");
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(len) = body_len {
        req.push_str(&format!("Content-Length: {len}\r\n"));
    }
    req.push_str("\r\n");
    req
}

/// Response headers as (name, value) pairs.
pub type Headers = Vec<(String, String)>;

/// Splits a response head from what follows: (status, headers, offset of the body);
/// `None` until the blank line arrived.
fn split_head(buf: &[u8]) -> Option<(u16, Headers, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Some((status, headers, end + 4))
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..line_end]).trim(), 16)
            .unwrap_or(0);
        body = &body[line_end + 2..];
        if size == 0 || body.len() < size {
            out.extend_from_slice(&body[..size.min(body.len())]);
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[(size + 2).min(body.len())..];
    }
}

impl Api {
    pub async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let payload = body
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default();
        let mut extra = vec![("Connection", "close")];
        if body.is_some() {
            extra.push(("Content-Type", "application/json"));
        }
        let len = if method == "GET" && body.is_none() {
            None
        } else {
            Some(payload.len())
        };
        let request = head(method, path, &self.key, &extra, len);
        within(&format!("{method} {path}"), async {
            let mut s = TcpStream::connect(self.addr).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            s.write_all(&payload).await.unwrap();
            let mut raw = Vec::new();
            s.read_to_end(&mut raw).await.unwrap();
            let (status, headers, start) = split_head(&raw).expect("response head");
            let chunked = headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
            let body = if chunked {
                dechunk(&raw[start..])
            } else {
                raw[start..].to_vec()
            };
            Reply {
                status,
                headers,
                body,
            }
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, Some(body)).await
    }

    /// Creates a sandbox and returns its id.
    pub async fn sandbox(&self) -> String {
        let r = self
            .post(
                "/v1/sandboxes",
                &serde_json::json!({"shape": "s-1vcpu-1gb"}),
            )
            .await;
        assert_eq!(
            r.status,
            200,
            "create sandbox: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.data()["id"].as_str().unwrap().to_string()
    }

    /// Starts a managed process; returns its details.
    pub async fn process(&self, sandbox: &str, body: Value) -> Value {
        let r = self
            .post(&format!("/v1/sandboxes/{sandbox}/processes"), &body)
            .await;
        assert_eq!(
            r.status,
            200,
            "create process: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.data()
    }

    /// Opens a raw connection and sends a request head plus `after_head` in one write.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        after_head: &[u8],
    ) -> TcpStream {
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        let mut bytes = head(method, path, &self.key, extra, Some(0)).into_bytes();
        bytes.extend_from_slice(after_head);
        s.write_all(&bytes).await.unwrap();
        s
    }

    /// `GET …/connect?after=N` as an event stream.
    pub async fn connect(&self, sandbox: &str, process: &str, after: u64) -> Events {
        let path = format!("/v1/sandboxes/{sandbox}/processes/{process}/connect?after={after}");
        let mut s = TcpStream::connect(self.addr).await.unwrap();
        s.write_all(head("GET", &path, &self.key, &[], None).as_bytes())
            .await
            .unwrap();
        let mut reader = BufReader::new(s);
        let mut raw = Vec::new();
        let (status, headers) = within("connect head", async {
            loop {
                let mut line = Vec::new();
                if reader.read_until(b'\n', &mut line).await.unwrap() == 0 {
                    panic!("connection closed before the response head");
                }
                raw.extend_from_slice(&line);
                if let Some((status, headers, _)) = split_head(&raw) {
                    return (status, headers);
                }
            }
        })
        .await;
        assert_eq!(status, 200, "connect status");
        let ct = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.clone());
        assert_eq!(ct.as_deref(), Some("application/x-ndjson"));
        Events {
            reader,
            pending: Vec::new(),
            ended: false,
            clean_end: false,
        }
    }
}

/// NDJSON events of a chunked response, decoded incrementally.
pub struct Events {
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
    ended: bool,
    /// True when the body ended with the terminating zero-size chunk.
    pub clean_end: bool,
}

impl Events {
    /// The next event; `None` at the end of the body or when the connection broke.
    pub async fn next(&mut self) -> Option<Value> {
        within("next stream event", self.next_inner()).await
    }

    async fn next_inner(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                if line.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                return Some(serde_json::from_slice(&line).expect("event is JSON"));
            }
            if self.ended {
                return None;
            }
            let mut size_line = String::new();
            match self.reader.read_line(&mut size_line).await {
                Ok(0) | Err(_) => {
                    self.ended = true;
                    continue;
                }
                Ok(_) => {}
            }
            let size = usize::from_str_radix(size_line.trim(), 16).unwrap_or(0);
            if size == 0 {
                self.ended = true;
                self.clean_end = size_line.trim() == "0";
                continue;
            }
            let mut chunk = vec![0u8; size + 2];
            match self.reader.read_exact(&mut chunk).await {
                Ok(_) => self.pending.extend_from_slice(&chunk[..size]),
                Err(_) => self.ended = true,
            }
        }
    }

    /// Events up to and including the terminal one (`exit` or `error`), skipping heartbeats.
    pub async fn until_end(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(ev) = self.next().await {
            let ty = ev["type"].as_str().unwrap_or("").to_string();
            if ty == "heartbeat" {
                continue;
            }
            out.push(ev);
            if ty == "exit" || ty == "error" {
                break;
            }
        }
        out
    }
}

/// Reads from `s` into `acc` until `needle` appears (or panics after [`STEP`]).
pub async fn read_until<R: AsyncReadExt + Unpin>(s: &mut R, acc: &mut Vec<u8>, needle: &str) {
    within(&format!("output containing {needle:?}"), async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(acc).contains(needle) {
            let n = s.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "EOF before {needle:?}; got {:?}",
                String::from_utf8_lossy(acc)
            );
            acc.extend_from_slice(&buf[..n]);
        }
    })
    .await
}

/// Reads an HTTP response head from `s`; returns (status, bytes after the head).
pub async fn read_head(s: &mut TcpStream) -> (u16, Headers, Vec<u8>) {
    within("response head", async {
        let mut acc = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some((status, headers, start)) = split_head(&acc) {
                return (status, headers, acc[start..].to_vec());
            }
            let n = s.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "EOF before the response head: {:?}",
                String::from_utf8_lossy(&acc)
            );
            acc.extend_from_slice(&buf[..n]);
        }
    })
    .await
}

/// Client-side WebSocket framing (client frames are masked).
pub mod ws {
    use super::*;

    pub const BINARY: u8 = 0x2;
    pub const TEXT: u8 = 0x1;
    pub const CLOSE: u8 = 0x8;

    pub async fn send(s: &mut TcpStream, opcode: u8, payload: &[u8]) {
        let mask = [0x37u8, 0xfa, 0x21, 0x3d];
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= u16::MAX as usize => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        s.write_all(&frame).await.unwrap();
    }

    /// One server frame: (opcode, payload); `None` on EOF.
    pub async fn recv(s: &mut TcpStream, leftover: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
        within("websocket frame", async {
            let mut buf = [0u8; 8192];
            loop {
                if let Some((frame, used)) = parse(leftover) {
                    leftover.drain(..used);
                    return Some(frame);
                }
                let n = s.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                leftover.extend_from_slice(&buf[..n]);
            }
        })
        .await
    }

    fn parse(b: &[u8]) -> Option<((u8, Vec<u8>), usize)> {
        if b.len() < 2 {
            return None;
        }
        let opcode = b[0] & 0x0f;
        let (len, mut at) = match b[1] & 0x7f {
            126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
            127 => (
                u64::from_be_bytes(b.get(2..10)?.try_into().ok()?) as usize,
                10,
            ),
            n => (n as usize, 2),
        };
        if b[1] & 0x80 != 0 {
            at += 4; // servers never mask, but skip a mask if present
        }
        let payload = b.get(at..at + len)?.to_vec();
        Some(((opcode, payload), at + len))
    }
}
