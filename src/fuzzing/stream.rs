//! `ndjson`: the NDJSON decoder fed the same bytes in different read splits.
//!
//! Input: `[limit][seed: u16][stream bytes…]`. `limit` with its top bit set keeps the default
//! line cap ([`MAX_LINE`], never reached by a fuzz input); otherwise the cap is 1–48 bytes.
//!
//! Properties, for every split:
//! - the items (and the error, if any) are those of an independent line-by-line reading of the
//!   whole input — unless the cap stops the stream first, in which case the items so far are a
//!   prefix of it and the line being buffered is really longer than the cap;
//! - no line within the cap is ever refused;
//! - whenever the decoder asks for more bytes, it holds at most `cap` of them (bounded memory);
//! - errors are [`Error::Decode`] labelled with the endpoint.

use bytes::BytesMut;
use serde_json::Value;
use tokio_util::codec::Decoder;

use super::{read_plans, show, Input, ENDPOINT};
use crate::error::Error;
use crate::stream::{NdjsonDecoder, MAX_LINE};

/// How a decoding run ended.
#[derive(Debug, PartialEq)]
enum End {
    Clean,
    /// A line was not valid JSON.
    BadLine,
    /// A line grew past the cap; the offset is where that line starts.
    TooLong {
        line_start: usize,
    },
}

/// Check the `ndjson` properties on one input (panics on a violation).
pub fn ndjson(data: &[u8]) {
    let mut input = Input::new(data);
    let limit = input.byte();
    let seed = input.u16();
    let text = input.rest();
    let cap = if limit & 0x80 != 0 {
        MAX_LINE
    } else {
        1 + usize::from(limit) % 48
    };

    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    let expected = reference(&lines);
    let longest = lines.iter().map(|l| l.len()).max().unwrap_or(0);

    for plan in read_plans(seed, text.len()) {
        let (items, end) = decode(text, cap, &plan);
        let context = || format!("cap {cap}, reads {plan:?}, stream {}", show(text));
        match end {
            End::TooLong { line_start } => {
                assert!(
                    longest > cap,
                    "a line within the cap was refused ({})",
                    context()
                );
                assert!(
                    line_start == 0 || text[line_start - 1] == b'\n',
                    "the refused line does not start at a line boundary ({})",
                    context()
                );
                let index = text[..line_start].iter().filter(|b| **b == b'\n').count();
                assert!(
                    lines[index].len() > cap,
                    "line {index} was refused but fits the cap ({})",
                    context()
                );
                let before = reference(&lines[..index]);
                assert_eq!(
                    before.1,
                    End::Clean,
                    "an earlier bad line went unreported ({})",
                    context()
                );
                assert_eq!(
                    items,
                    before.0,
                    "items before the refused line differ ({})",
                    context()
                );
            }
            end => {
                assert_eq!(
                    end,
                    expected.1,
                    "the stream ended differently ({})",
                    context()
                );
                assert_eq!(
                    items,
                    expected.0,
                    "decoded items differ from a line-by-line reading ({})",
                    context()
                );
            }
        }
    }
}

/// Feed `text` in reads of the given sizes, the way `FramedRead` drives a decoder.
fn decode(text: &[u8], cap: usize, plan: &[usize]) -> (Vec<Value>, End) {
    let mut decoder = NdjsonDecoder::<Value>::new(ENDPOINT).with_max_line(cap);
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    let mut fed = 0;
    for len in plan {
        buf.extend_from_slice(&text[fed..fed + len]);
        fed += len;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => {
                    assert!(
                        buf.len() <= cap,
                        "the decoder asked for more input while holding {} bytes over a {cap}-byte cap",
                        buf.len()
                    );
                    break;
                }
                Err(e) => return (items, classify(e, fed - buf.len())),
            }
        }
    }
    loop {
        match decoder.decode_eof(&mut buf) {
            Ok(Some(item)) => items.push(item),
            Ok(None) => break,
            Err(e) => return (items, classify(e, fed - buf.len())),
        }
    }
    assert!(
        buf.is_empty(),
        "{} bytes left undecoded at the end of the stream",
        buf.len()
    );
    (items, End::Clean)
}

fn classify(error: Error, offset: usize) -> End {
    match error {
        Error::Decode { endpoint, message } => {
            assert_eq!(
                endpoint, ENDPOINT,
                "decode error without the endpoint label"
            );
            if message.contains("longer than") {
                End::TooLong { line_start: offset }
            } else {
                End::BadLine
            }
        }
        other => panic!("the NDJSON decoder failed with an unexpected error: {other:?}"),
    }
}

/// The documented reading of complete lines (the last element is what follows the last
/// newline, read at the end of the stream): items up to the first bad line.
fn reference(lines: &[&[u8]]) -> (Vec<Value>, End) {
    let mut items = Vec::new();
    for line in lines {
        if let Some(json) = payload(line) {
            match serde_json::from_slice(json) {
                Ok(item) => items.push(item),
                Err(_) => return (items, End::BadLine),
            }
        }
    }
    (items, End::Clean)
}

/// The JSON text of one line, or `None` for blank lines, `:` comments and empty `data:` lines.
fn payload(line: &[u8]) -> Option<&[u8]> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t');
    let end = line
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1);
    let line = &line[..end];
    let start = line.iter().position(|b| !is_space(b)).unwrap_or(line.len());
    let line = &line[start..];
    if line.is_empty() || line[0] == b':' {
        return None;
    }
    match line.strip_prefix(b"data:") {
        Some(rest) => {
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            (!rest.is_empty()).then_some(rest)
        }
        None => Some(line),
    }
}
