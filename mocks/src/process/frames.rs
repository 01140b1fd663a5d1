//! The client → server framing of `/shell` (and of binary `/shell-ws` messages):
//! `[type u8][length u32 BE][payload]`, type 0 = input bytes, type 1 = resize with
//! `rows u16 BE, cols u16 BE`. Decoding is incremental because TCP splits frames anywhere.

use bytes::{Buf, Bytes, BytesMut};

/// Largest payload accepted in one frame; anything bigger is a protocol error.
pub const MAX_FRAME_PAYLOAD: usize = 1 << 20;

const HEADER_LEN: usize = 5;
const TYPE_DATA: u8 = 0;
const TYPE_RESIZE: u8 = 1;

/// One decoded client frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientFrame {
    Data(Bytes),
    Resize {
        rows: u16,
        cols: u16,
    },
    /// A frame type this server does not know; skipped for forward compatibility.
    Unknown(u8),
}

/// A frame the client should never send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame payload of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("resize frame must carry 4 bytes, got {0}")]
    BadResize(usize),
}

/// Accumulates bytes and yields complete frames.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: BytesMut,
}

impl FrameDecoder {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// True when no partial frame is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<ClientFrame>, FrameError> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let kind = self.buf[0];
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_FRAME_PAYLOAD {
            return Err(FrameError::TooLarge(len));
        }
        if self.buf.len() < HEADER_LEN + len {
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        let payload = self.buf.split_to(len).freeze();
        Ok(Some(match kind {
            TYPE_DATA => ClientFrame::Data(payload),
            TYPE_RESIZE => {
                if payload.len() != 4 {
                    return Err(FrameError::BadResize(payload.len()));
                }
                ClientFrame::Resize {
                    rows: u16::from_be_bytes([payload[0], payload[1]]),
                    cols: u16::from_be_bytes([payload[2], payload[3]]),
                }
            }
            other => ClientFrame::Unknown(other),
        }))
    }
}

/// Encodes a frame (the client side of the protocol, for tests).
#[cfg(test)]
pub fn encode(frame: &ClientFrame) -> Vec<u8> {
    let (kind, payload): (u8, Vec<u8>) = match frame {
        ClientFrame::Data(b) => (TYPE_DATA, b.to_vec()),
        ClientFrame::Resize { rows, cols } => {
            let mut p = rows.to_be_bytes().to_vec();
            p.extend_from_slice(&cols.to_be_bytes());
            (TYPE_RESIZE, p)
        }
        ClientFrame::Unknown(k) => (*k, Vec::new()),
    };
    let mut out = vec![kind];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_split_and_joined_frames() {
        let mut wire = encode(&ClientFrame::Resize {
            rows: 40,
            cols: 120,
        });
        wire.extend(encode(&ClientFrame::Data(Bytes::from_static(b"ls\n"))));
        wire.extend(encode(&ClientFrame::Unknown(9)));
        let mut d = FrameDecoder::default();
        let mut got = Vec::new();
        for byte in wire {
            d.push(&[byte]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(
            got,
            vec![
                ClientFrame::Resize {
                    rows: 40,
                    cols: 120
                },
                ClientFrame::Data(Bytes::from_static(b"ls\n")),
                ClientFrame::Unknown(9)
            ]
        );
        assert!(d.is_empty());
    }

    #[test]
    fn rejects_bad_frames() {
        let mut d = FrameDecoder::default();
        d.push(&[1, 0, 0, 0, 2, 0, 1]);
        assert_eq!(d.next_frame(), Err(FrameError::BadResize(2)));
        let mut d = FrameDecoder::default();
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::TooLarge(_))));
    }
}
