//! A minimal HTTP/1.1 exchange over a raw socket, for what reqwest cannot send: a POST
//! without `Content-Length`, and Upgrade handshakes whose socket is kept afterwards.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const STEP: Duration = Duration::from_secs(20);

/// A response read off a raw socket; `socket` is kept after a 101.
pub struct RawResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// Bytes that followed the 101 head (they belong to the upgraded stream).
    pub early: Vec<u8>,
    pub socket: Option<TcpStream>,
}

/// Sends `method target` with exactly `headers` (plus `Host`) and `body`, then reads the
/// answer: the head, then the body by Content-Length, chunked coding, or until EOF.
pub async fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> RawResponse {
    tokio::time::timeout(STEP, exchange_inner(addr, method, target, headers, body))
        .await
        .unwrap_or_else(|_| panic!("raw {method} {target} timed out"))
}

async fn exchange_inner(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> RawResponse {
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await.expect("write head");
    socket.write_all(body).await.expect("write body");

    let mut buf = Vec::new();
    let (status, headers, body_start) = loop {
        if let Some(parsed) = parse_head(&buf) {
            break parsed;
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.expect("read head");
        assert!(
            n > 0,
            "connection closed before a response head: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let rest = buf.split_off(body_start);
    if status == 101 {
        return RawResponse {
            status,
            headers,
            body: Vec::new(),
            early: rest,
            socket: Some(socket),
        };
    }
    let body = read_body(&mut socket, &headers, rest).await;
    RawResponse {
        status,
        headers,
        body,
        early: Vec::new(),
        socket: None,
    }
}

fn parse_head(buf: &[u8]) -> Option<(u16, HeaderMap, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.trim().as_bytes()),
            HeaderValue::from_str(v.trim()),
        ) {
            headers.append(name, value);
        }
    }
    Some((status, headers, end + 4))
}

async fn read_body(socket: &mut TcpStream, headers: &HeaderMap, mut have: Vec<u8>) -> Vec<u8> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while have.len() < len {
            let mut chunk = vec![0u8; len - have.len()];
            let n = socket.read(&mut chunk).await.expect("read body");
            assert!(n > 0, "body shorter than its Content-Length");
            have.extend_from_slice(&chunk[..n]);
        }
        have.truncate(len);
        return have;
    }
    let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
    loop {
        if chunked {
            if let Some(decoded) = dechunk(&have) {
                return decoded;
            }
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return if chunked {
                dechunk(&have).unwrap_or(have)
            } else {
                have
            };
        }
        have.extend_from_slice(&chunk[..n]);
    }
}

/// The payload of a complete chunked body, `None` while incomplete.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if data.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}
