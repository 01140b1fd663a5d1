//! The read pipeline against a scripted SFTP server on an in-memory stream: short reads in the
//! middle of the pipeline, answers out of order, files that shrink or grow under the reader, a
//! failing read, and how many requests a known size costs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh_sftp::client::RawSftpSession;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;

/// What the scripted server serves.
#[derive(Clone)]
struct Script {
    content: Vec<u8>,
    /// Longest answer to one read (shorter answers mid-file, like a server's read limit).
    max_read: usize,
    /// Answer every other read after the one that follows it.
    swap_pairs: bool,
    /// A read that covers this offset fails.
    fail_at: Option<u64>,
}

impl Script {
    fn new(content: Vec<u8>) -> Script {
        Script {
            content,
            max_read: usize::MAX,
            swap_pairs: false,
            fail_at: None,
        }
    }
}

/// Deterministic pseudo-random bytes.
fn pattern(len: usize) -> Vec<u8> {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s);
}

fn packet(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 5);
    put_u32(&mut out, body.len() as u32 + 1);
    out.push(kind);
    out.extend_from_slice(body);
    out
}

fn status(id: u32, code: u32, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    put_u32(&mut body, id);
    put_u32(&mut body, code);
    put_str(&mut body, message.as_bytes());
    put_str(&mut body, b"");
    packet(101, &body)
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn u32(&mut self) -> u32 {
        let (head, rest) = self.0.split_at(4);
        self.0 = rest;
        u32::from_be_bytes(head.try_into().unwrap())
    }

    fn u64(&mut self) -> u64 {
        let (head, rest) = self.0.split_at(8);
        self.0 = rest;
        u64::from_be_bytes(head.try_into().unwrap())
    }

    fn string(&mut self) -> Vec<u8> {
        let len = self.u32() as usize;
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        head.to_vec()
    }
}

/// Serve SFTP v3 on `stream`: INIT, READ and CLOSE, logging every read `(offset, len)`.
async fn serve(mut stream: DuplexStream, script: Script, reads: Arc<Mutex<Vec<(u64, u32)>>>) {
    let mut held: Option<Vec<u8>> = None;
    loop {
        // a held answer goes out after the next one, or when nothing more comes for a while
        let next = if held.is_some() {
            match tokio::time::timeout(Duration::from_millis(20), stream.read_u32()).await {
                Ok(next) => next,
                Err(_) => {
                    let answer = held.take().unwrap();
                    stream.write_all(&answer).await.unwrap();
                    continue;
                }
            }
        } else {
            stream.read_u32().await
        };
        let Ok(len) = next else { return };
        let mut body = vec![0u8; len as usize];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let kind = body[0];
        let mut r = Cursor(&body[1..]);
        let answer = match kind {
            1 => {
                let mut version = Vec::new();
                put_u32(&mut version, 3);
                packet(2, &version)
            }
            5 => {
                let id = r.u32();
                let _handle = r.string();
                let offset = r.u64();
                let asked = r.u32();
                reads.lock().unwrap().push((offset, asked));
                let end = offset.saturating_add(u64::from(asked));
                if script.fail_at.is_some_and(|at| (offset..end).contains(&at)) {
                    status(id, 4, "scripted failure")
                } else if offset >= script.content.len() as u64 {
                    status(id, 1, "EOF")
                } else {
                    let start = offset as usize;
                    let stop =
                        (start + (asked as usize).min(script.max_read)).min(script.content.len());
                    let mut data = Vec::new();
                    put_u32(&mut data, id);
                    put_str(&mut data, &script.content[start..stop]);
                    let answer = packet(103, &data);
                    if script.swap_pairs {
                        match held.take() {
                            Some(first) => {
                                stream.write_all(&answer).await.unwrap();
                                first
                            }
                            None => {
                                held = Some(answer);
                                continue;
                            }
                        }
                    } else {
                        answer
                    }
                }
            }
            4 => status(Cursor(&body[1..]).u32(), 0, "OK"),
            _ => status(r.u32(), 8, "unsupported"),
        };
        if let Some(first) = held.take() {
            stream.write_all(&first).await.unwrap();
        }
        if stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}

/// Everything the pipeline delivers for `script` when told the file holds `announced` bytes,
/// and the reads the server saw.
async fn download(
    script: Script,
    announced: Option<u64>,
) -> (Result<Vec<u8>, io::Error>, Vec<(u64, u32)>) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let reads = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(serve(server, script, Arc::clone(&reads)));
    let raw = RawSftpSession::new(client);
    raw.init().await.expect("the scripted server answers INIT");
    let sftp = Arc::new(SftpChannel::for_tests(raw));
    let (tx, mut rx) = mpsc::channel(4);
    tokio::spawn(pump_reads(
        sftp,
        "h".to_string(),
        "/scripted".to_string(),
        announced,
        tx,
    ));
    let mut out = Vec::new();
    let result = loop {
        match tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the pipeline never stalls")
        {
            Some(Ok(Some(chunk))) => out.extend_from_slice(&chunk),
            Some(Ok(None)) => break Ok(out),
            Some(Err(e)) => break Err(e),
            None => panic!("the read task ended without a last message"),
        }
    };
    let reads = reads.lock().unwrap().clone();
    (result, reads)
}

/// An odd size, a few MiB: never a multiple of the chunk or of the server's limit.
const ODD: usize = 3 * 1024 * 1024 + 12_345;

#[tokio::test]
async fn known_size_reads_every_byte_and_costs_one_request_past_the_end() {
    let content = pattern(ODD);
    let (got, reads) = download(Script::new(content.clone()), Some(ODD as u64)).await;
    assert!(
        got.unwrap() == content,
        "the download differs from the file"
    );
    let chunks = ODD.div_ceil(READ_CHUNK as usize);
    assert_eq!(
        reads.len(),
        chunks + 1,
        "one request per chunk and one at the end: {reads:?}"
    );
    let last = reads[chunks - 1];
    assert_eq!(
        last,
        (
            ((chunks - 1) * READ_CHUNK as usize) as u64,
            (ODD % READ_CHUNK as usize) as u32
        )
    );
    assert_eq!(
        reads[chunks].0, ODD as u64,
        "the end is asked for once, at the size"
    );
}

#[tokio::test]
async fn short_reads_mid_pipeline_are_completed_in_order() {
    let content = pattern(ODD);
    let script = Script {
        max_read: 10_007,
        ..Script::new(content.clone())
    };
    let (got, reads) = download(script, Some(ODD as u64)).await;
    assert!(
        got.unwrap() == content,
        "the download differs from the file"
    );
    // the short answers were completed by requests for their rest
    assert!(
        reads.iter().any(|&(at, _)| at % u64::from(READ_CHUNK) != 0),
        "{:?}",
        &reads[..10]
    );
    let mut offsets: Vec<u64> = reads.iter().map(|r| r.0).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), reads.len(), "no offset is asked for twice");
}

#[tokio::test]
async fn answers_out_of_order_are_delivered_in_file_order() {
    let content = pattern(ODD);
    let script = Script {
        swap_pairs: true,
        max_read: 40_001,
        ..Script::new(content.clone())
    };
    let (got, _) = download(script, Some(ODD as u64)).await;
    assert!(
        got.unwrap() == content,
        "the download differs from the file"
    );
}

#[tokio::test]
async fn a_file_that_shrank_ends_at_its_new_end() {
    // announced at open as ODD bytes, it holds fewer when read: the end falls mid-pipeline,
    // inside a request and not on a chunk boundary
    let content = pattern(ODD - 700_001);
    let (got, _) = download(Script::new(content.clone()), Some(ODD as u64)).await;
    assert!(
        got.unwrap() == content,
        "the download differs from the file"
    );
    let script = Script {
        max_read: 30_011,
        swap_pairs: true,
        ..Script::new(content.clone())
    };
    let (got, _) = download(script, Some(ODD as u64)).await;
    assert!(
        got.unwrap() == content,
        "with short reads and reordering too"
    );
}

#[tokio::test]
async fn a_file_that_grew_is_read_to_its_end() {
    let content = pattern(ODD);
    let (got, _) = download(Script::new(content.clone()), Some(100_003)).await;
    assert!(
        got.unwrap() == content,
        "the download differs from the file"
    );
}

#[tokio::test]
async fn unknown_size_and_empty_files() {
    let content = pattern(ODD);
    let (got, reads) = download(Script::new(content.clone()), None).await;
    assert!(got.unwrap() == content);
    assert!(reads.len() > ODD / READ_CHUNK as usize);
    let (got, reads) = download(Script::new(Vec::new()), Some(0)).await;
    assert!(got.unwrap().is_empty());
    assert_eq!(reads, vec![(0, READ_CHUNK)], "an empty file costs one read");
    let (got, _) = download(Script::new(Vec::new()), None).await;
    assert!(got.unwrap().is_empty());
}

#[tokio::test]
async fn a_failed_read_mid_pipeline_is_an_error_not_an_early_end() {
    let content = pattern(ODD);
    let script = Script {
        fail_at: Some(2_000_000),
        max_read: 10_007,
        ..Script::new(content)
    };
    let (got, _) = download(script, Some(ODD as u64)).await;
    let err = got.expect_err("a failed read must not look like the end of the file");
    let ssh = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<SshError>())
        .expect("the typed SFTP error");
    assert!(ssh.to_string().contains("/scripted"), "{ssh}");
}

#[test]
fn plan_covers_the_announced_size_then_stops() {
    let mut plan = Plan::new(Some(150_000));
    let mut issued = Vec::new();
    while let Some(request) = plan.next_request() {
        issued.push(request);
    }
    assert_eq!(
        issued,
        vec![
            (0, READ_CHUNK),
            (65_536, READ_CHUNK),
            (131_072, 18_928),
            (150_000, READ_CHUNK)
        ]
    );
    // data past the announced size: the file grew, reading goes on
    plan.answered(150_000, READ_CHUNK, 10);
    assert_eq!(
        plan.next_request(),
        Some((150_000 + u64::from(READ_CHUNK), READ_CHUNK))
    );
    // a server limit shrinks the chunk; a short answer at the end does not
    let mut plan = Plan::new(None);
    plan.answered(0, READ_CHUNK, 32_768);
    assert_eq!(plan.chunk, 32_768);
    let mut plan = Plan::new(Some(1_000));
    plan.answered(0, 1_000, 1_000);
    assert_eq!(plan.chunk, READ_CHUNK);
    assert_eq!(Plan::new(None).window, INITIAL_WINDOW);
}
