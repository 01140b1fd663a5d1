//! `shell_decode` and `shell_round_trip`: the `/shell` client frame codec
//! (`[type: u8][length: u32 BE][payload]`; 0 = data, 1 = resize with rows/cols u16 BE).
//!
//! Both take `[limit][seed: u16][…]`: `limit` with its top bit set keeps the default frame limit
//! ([`MAX_FRAME`]), otherwise the limit is 4–35 bytes; `seed` draws the read splits.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::{read_plans, show, Input};
use crate::pty::{ShellCodec, ShellFrame, FRAME_DATA, FRAME_RESIZE, MAX_FRAME};

const HEADER: usize = 5;

/// How a decoding run ended.
#[derive(Debug, PartialEq)]
enum End {
    Clean,
    /// A header announced a payload above the limit.
    TooBig,
    /// A resize frame whose payload is not 4 bytes.
    BadResize,
    /// The stream ended inside a frame.
    Truncated,
}

fn codec_and_limit(limit: u8) -> (ShellCodec, usize) {
    if limit & 0x80 != 0 {
        (ShellCodec::default(), MAX_FRAME)
    } else {
        // From 4 up: below the 4-byte resize payload a codec refuses the resize frames it
        // encodes itself.
        let max = 4 + usize::from(limit) % 32;
        (ShellCodec::with_max_frame(max), max)
    }
}

/// Decode arbitrary bytes. Properties, for every read split: the frames and the way the stream
/// ends are those of an independent reading of the format (unknown types skipped, oversized
/// and malformed frames refused before their payload is awaited); the buffer never grows by
/// more than one frame's worth, so a length field cannot make the decoder reserve gigabytes.
pub fn shell_decode(data: &[u8]) {
    let mut input = Input::new(data);
    let (codec, max) = codec_and_limit(input.byte());
    let seed = input.u16();
    let wire = input.rest();
    let expected = reference(wire, max);
    for plan in read_plans(seed, wire.len()) {
        let got = decode(codec, wire, &plan, max);
        assert_eq!(
            got,
            expected,
            "limit {max}, reads {plan:?}, wire {}",
            show(wire)
        );
    }
}

/// Encode arbitrary frames, then decode them. The frame list comes from a little program: an
/// even op byte is a data frame of the next `n` bytes (`n` from the next byte, times 7 when the
/// op's bit 1 is set), an odd one a resize with the next two u16s. Properties: the wire length
/// is exactly one header per non-empty piece plus the payloads, and decoding it under any read
/// split gives back the frames — data longer than the limit as consecutive pieces of at most
/// the limit, empty data as nothing.
pub fn shell_round_trip(data: &[u8]) {
    let mut input = Input::new(data);
    let (mut codec, max) = codec_and_limit(input.byte());
    let seed = input.u16();
    let mut frames = Vec::new();
    while !input.is_empty() {
        let op = input.byte();
        if op & 1 == 0 {
            let n = usize::from(input.byte()) * if op & 2 != 0 { 7 } else { 1 };
            frames.push(ShellFrame::Data(Bytes::copy_from_slice(input.bytes(n))));
        } else {
            frames.push(ShellFrame::Resize {
                rows: input.u16(),
                cols: input.u16(),
            });
        }
    }

    let mut wire = BytesMut::new();
    let mut expected = Vec::new();
    let mut expected_len = 0;
    for frame in &frames {
        codec
            .encode(frame.clone(), &mut wire)
            .expect("encoding into memory cannot fail");
        match frame {
            ShellFrame::Data(bytes) => {
                for piece in bytes.chunks(max) {
                    expected.push(ShellFrame::Data(Bytes::copy_from_slice(piece)));
                    expected_len += HEADER + piece.len();
                }
            }
            resize @ ShellFrame::Resize { .. } => {
                expected.push(resize.clone());
                expected_len += HEADER + 4;
            }
        }
    }
    assert_eq!(
        wire.len(),
        expected_len,
        "encoded length for frames {frames:?} (limit {max})"
    );
    for plan in read_plans(seed, wire.len()) {
        let got = decode(codec, &wire, &plan, max);
        assert_eq!(
            got,
            (expected.clone(), End::Clean),
            "round trip of {frames:?} (limit {max}, reads {plan:?})"
        );
    }
}

/// Feed `wire` in reads of the given sizes, the way `FramedRead` drives a decoder.
fn decode(
    mut codec: ShellCodec,
    wire: &[u8],
    plan: &[usize],
    max: usize,
) -> (Vec<ShellFrame>, End) {
    // Generous: what the test itself fed plus twice a largest frame (growth may double).
    let capacity_bound = 4 * (HEADER + max + wire.len()) + 4096;
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut fed = 0;
    for len in plan {
        buf.extend_from_slice(&wire[fed..fed + len]);
        fed += len;
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => {
                    assert!(
                        buf.capacity() <= capacity_bound,
                        "the decoder reserved {} bytes for a {}-byte stream (limit {max})",
                        buf.capacity(),
                        wire.len()
                    );
                    break;
                }
                Err(e) => return (frames, classify(&e)),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, End::Clean),
            Err(e) => return (frames, classify(&e)),
        }
    }
}

fn classify(error: &std::io::Error) -> End {
    assert_eq!(
        error.kind(),
        std::io::ErrorKind::InvalidData,
        "unexpected error kind: {error}"
    );
    let text = error.to_string();
    if text.contains("exceeds") {
        End::TooBig
    } else if text.contains("resize frame") {
        End::BadResize
    } else if text.contains("ended inside") {
        End::Truncated
    } else {
        panic!("unexpected shell codec error: {text}")
    }
}

/// The format read frame by frame from a complete buffer.
fn reference(mut wire: &[u8], max: usize) -> (Vec<ShellFrame>, End) {
    let mut frames = Vec::new();
    loop {
        if wire.is_empty() {
            return (frames, End::Clean);
        }
        if wire.len() < HEADER {
            return (frames, End::Truncated);
        }
        let kind = wire[0];
        let len = u32::from_be_bytes([wire[1], wire[2], wire[3], wire[4]]) as usize;
        if len > max {
            return (frames, End::TooBig);
        }
        if kind == FRAME_RESIZE && len != 4 {
            return (frames, End::BadResize);
        }
        if wire.len() < HEADER + len {
            return (frames, End::Truncated);
        }
        let payload = &wire[HEADER..HEADER + len];
        match kind {
            FRAME_DATA => frames.push(ShellFrame::Data(Bytes::copy_from_slice(payload))),
            FRAME_RESIZE => frames.push(ShellFrame::Resize {
                rows: u16::from_be_bytes([payload[0], payload[1]]),
                cols: u16::from_be_bytes([payload[2], payload[3]]),
            }),
            _ => {}
        }
        wire = &wire[HEADER + len..];
    }
}
