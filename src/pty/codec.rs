//! The client → server framing of `/shell` (and of shell-ws messages):
//! `[type: u8][length: u32 big-endian][payload]`, type 0 = data, type 1 = resize
//! (rows u16 BE, cols u16 BE).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Type byte of a data frame.
pub const FRAME_DATA: u8 = 0;
/// Type byte of a resize frame.
pub const FRAME_RESIZE: u8 = 1;
/// Largest payload of one frame; the server ends the session on anything bigger.
pub const MAX_FRAME: usize = 1 << 20;
const HEADER: usize = 5;

/// One client frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShellFrame {
    /// Bytes for the terminal (keystrokes, pasted text).
    Data(Bytes),
    /// New terminal size.
    Resize {
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
    },
}

/// Encoder/decoder of [`ShellFrame`]s. The decoder serves tests and anyone writing the server
/// side: it skips frames of unknown types (as the server must) and refuses payloads above
/// [`MAX_FRAME`] and resize frames whose length is not 4.
#[derive(Clone, Copy, Debug)]
pub struct ShellCodec {
    max_frame: usize,
}

impl Default for ShellCodec {
    fn default() -> Self {
        ShellCodec {
            max_frame: MAX_FRAME,
        }
    }
}

impl ShellCodec {
    /// A codec with a smaller frame limit (at most [`MAX_FRAME`]).
    pub fn with_max_frame(max_frame: usize) -> Self {
        // At least 4: the resize frame it encodes itself carries 4 bytes.
        ShellCodec {
            max_frame: max_frame.clamp(4, MAX_FRAME),
        }
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

impl Encoder<ShellFrame> for ShellCodec {
    type Error = std::io::Error;

    /// Data longer than the frame limit is split over several frames; empty data sends nothing.
    fn encode(&mut self, frame: ShellFrame, dst: &mut BytesMut) -> Result<(), Self::Error> {
        match frame {
            ShellFrame::Data(bytes) => {
                for piece in bytes.chunks(self.max_frame) {
                    dst.reserve(HEADER + piece.len());
                    dst.put_u8(FRAME_DATA);
                    dst.put_u32(piece.len() as u32);
                    dst.put_slice(piece);
                }
            }
            ShellFrame::Resize { rows, cols } => {
                dst.reserve(HEADER + 4);
                dst.put_u8(FRAME_RESIZE);
                dst.put_u32(4);
                dst.put_u16(rows);
                dst.put_u16(cols);
            }
        }
        Ok(())
    }
}

impl Decoder for ShellCodec {
    type Item = ShellFrame;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<ShellFrame>, Self::Error> {
        loop {
            if src.len() < HEADER {
                return Ok(None);
            }
            let kind = src[0];
            let len = u32::from_be_bytes([src[1], src[2], src[3], src[4]]) as usize;
            if len > self.max_frame {
                return Err(invalid(format!(
                    "shell frame of {len} bytes exceeds the {} byte limit",
                    self.max_frame
                )));
            }
            if kind == FRAME_RESIZE && len != 4 {
                return Err(invalid(format!(
                    "resize frame with a {len}-byte payload (expected 4)"
                )));
            }
            if src.len() < HEADER + len {
                src.reserve(HEADER + len - src.len());
                return Ok(None);
            }
            src.advance(HEADER);
            let mut payload = src.split_to(len);
            match kind {
                FRAME_DATA => return Ok(Some(ShellFrame::Data(payload.freeze()))),
                FRAME_RESIZE => {
                    let rows = payload.get_u16();
                    let cols = payload.get_u16();
                    return Ok(Some(ShellFrame::Resize { rows, cols }));
                }
                _ => continue, // unknown type: payload skipped
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<ShellFrame>, Self::Error> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(invalid(format!(
                "connection ended inside a shell frame ({} bytes pending)",
                src.len()
            ))),
        }
    }
}

/// Encode frames into one buffer (a shell-ws message).
pub(crate) fn encode_frames(frames: impl IntoIterator<Item = ShellFrame>) -> Bytes {
    let mut buf = BytesMut::new();
    let mut codec = ShellCodec::default();
    for frame in frames {
        // Encoding into memory cannot fail.
        let _ = codec.encode(frame, &mut buf);
    }
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(frame: ShellFrame) -> BytesMut {
        let mut buf = BytesMut::new();
        ShellCodec::default().encode(frame, &mut buf).unwrap();
        buf
    }

    #[test]
    fn wire_bytes() {
        assert_eq!(
            &encode(ShellFrame::Data(Bytes::from_static(b"ls\n")))[..],
            &[0, 0, 0, 0, 3, b'l', b's', b'\n']
        );
        assert_eq!(
            &encode(ShellFrame::Resize {
                rows: 40,
                cols: 120
            })[..],
            &[1, 0, 0, 0, 4, 0, 40, 0, 120]
        );
        assert!(encode(ShellFrame::Data(Bytes::new())).is_empty());
    }

    #[test]
    fn round_trip_across_partial_reads() {
        let mut wire = encode(ShellFrame::Resize { rows: 24, cols: 80 });
        wire.extend_from_slice(&encode(ShellFrame::Data(Bytes::from_static(b"hello"))));
        let mut codec = ShellCodec::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for byte in wire.iter() {
            buf.put_u8(*byte);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                out.push(frame);
            }
        }
        assert_eq!(
            out,
            vec![
                ShellFrame::Resize { rows: 24, cols: 80 },
                ShellFrame::Data(Bytes::from_static(b"hello"))
            ]
        );
        assert!(codec.decode_eof(&mut buf).unwrap().is_none());
    }

    #[test]
    fn unknown_types_are_skipped() {
        let mut buf = BytesMut::from(&[7u8, 0, 0, 0, 2, 9, 9][..]);
        buf.extend_from_slice(&encode(ShellFrame::Data(Bytes::from_static(b"x"))));
        assert_eq!(
            ShellCodec::default().decode(&mut buf).unwrap(),
            Some(ShellFrame::Data(Bytes::from_static(b"x")))
        );
    }

    #[test]
    fn limits_and_malformed_frames() {
        let mut codec = ShellCodec::with_max_frame(4);
        let mut big = BytesMut::from(&[0u8, 0, 0, 0, 5][..]);
        assert!(codec.decode(&mut big).is_err());
        let mut bad_resize = BytesMut::from(&[1u8, 0, 0, 0, 2, 0, 1][..]);
        assert!(ShellCodec::default().decode(&mut bad_resize).is_err());
        let mut truncated = BytesMut::from(&[0u8, 0, 0, 0, 3, b'a'][..]);
        let mut codec = ShellCodec::default();
        assert!(codec.decode(&mut truncated).unwrap().is_none());
        assert!(codec.decode_eof(&mut truncated).is_err());
    }

    #[test]
    fn large_data_is_split() {
        let mut codec = ShellCodec::with_max_frame(4);
        let mut buf = BytesMut::new();
        codec
            .encode(
                ShellFrame::Data(Bytes::from_static(b"abcdefghij")),
                &mut buf,
            )
            .unwrap();
        let mut frames = Vec::new();
        while let Some(ShellFrame::Data(d)) = codec.decode(&mut buf).unwrap() {
            frames.push(d);
        }
        assert_eq!(
            frames,
            vec![
                Bytes::from_static(b"abcd"),
                Bytes::from_static(b"efgh"),
                Bytes::from_static(b"ij")
            ]
        );
    }
}
