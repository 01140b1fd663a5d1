//! Properties checked by the fuzz targets in `fuzz/` and, bounded, by `tests/fuzz_corpus.rs`.
//!
//! Each function takes arbitrary bytes, reads a test case out of them (a few header bytes choose
//! limits and how the input is split into reads; the rest is the payload), runs the code under
//! test and **panics when a property is violated** — that panic is the finding libFuzzer reports.
//! For any input that the code handles correctly they return normally, so a panic always means
//! a bug (in the library, or in the property). Not part of the supported API: compiled only
//! with the `fuzzing` feature (the fuzz targets and the library's tests turn it on).
//!
//! | target             | code under test                                  |
//! |--------------------|--------------------------------------------------|
//! | `ndjson`           | [`crate::stream::NdjsonDecoder`], any read split |
//! | `shell_decode`     | [`crate::pty::ShellCodec`] decoding any bytes    |
//! | `shell_round_trip` | [`crate::pty::ShellCodec`] encode → decode       |
//! | `jsend`            | `transport::jsend::{decode_success, error_from_answer}` |
//! | `credentials`      | `.oauth` / `.token` parsing and [`crate::auth::Resolver`] |
//! | `path_filter`      | the snapshot's unsafe-name, exclude and deny-list filters |
//! | `unpack`           | [`crate::transfer::extract`] on hostile archives  |

mod credentials;
mod jsend;
mod path_filter;
mod shell;
mod stream;
mod unpack;

pub use credentials::credentials;
pub use jsend::jsend;
pub use path_filter::path_filter;
pub use shell::{shell_decode, shell_round_trip};
pub use stream::ndjson;
pub use unpack::unpack;

/// A property function: panics when the input shows a violation.
pub type Property = fn(&[u8]);

/// Every target: its name (the file `fuzz/fuzz_targets/<name>.rs` and the seed corpus
/// `fuzz/corpus/<name>/`) and its property function.
pub const TARGETS: &[(&str, Property)] = &[
    ("ndjson", ndjson),
    ("shell_decode", shell_decode),
    ("shell_round_trip", shell_round_trip),
    ("jsend", jsend),
    ("credentials", credentials),
    ("path_filter", path_filter),
    ("unpack", unpack),
];

/// Endpoint label given to the code under test, so errors can be checked to carry it.
const ENDPOINT: &str = "FUZZ /fuzz";

/// A cursor over the fuzz input; reading past the end yields zeros / empty slices, so every
/// input is a valid test case.
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        taken
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn rest(self) -> &'a [u8] {
        self.data
    }
}

/// xorshift32: deterministic read splits from a seed taken from the input.
struct XorShift(u32);

impl XorShift {
    fn new(seed: u16) -> Self {
        XorShift(u32::from(seed) << 8 | 0x9e)
    }

    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
}

/// Ways to cut `len` bytes into successive reads: all at once, one byte at a time (for short
/// inputs) and pseudo-random chunk sizes drawn from `seed`. Every plan sums to `len`.
fn read_plans(seed: u16, len: usize) -> Vec<Vec<usize>> {
    let mut plans = vec![vec![len]];
    if len <= 512 {
        plans.push(vec![1; len]);
    }
    let mut rng = XorShift::new(seed);
    let mut random = Vec::new();
    let mut left = len;
    while left > 0 {
        let pick = rng.next();
        let size = match pick % 8 {
            0 => 1 + (pick >> 8) as usize % 256,
            1 => left,
            _ => 1 + (pick >> 8) as usize % 9,
        };
        let size = size.min(left);
        random.push(size);
        left -= size;
    }
    plans.push(random);
    plans
}

/// Input bytes for a failure message: printable ASCII kept, everything else escaped.
fn show(bytes: &[u8]) -> String {
    const LIMIT: usize = 300;
    let mut out: String = bytes
        .iter()
        .take(LIMIT)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    if bytes.len() > LIMIT {
        out.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_plans_cover_the_input_exactly() {
        for len in [0, 1, 7, 513, 4000] {
            for plan in read_plans(0xbeef, len) {
                assert_eq!(plan.iter().sum::<usize>(), len);
                assert!(plan.iter().all(|n| *n > 0) || len == 0);
            }
        }
    }

    #[test]
    fn input_reads_past_the_end_as_zeros() {
        let mut input = Input::new(&[1, 2, 3]);
        assert_eq!(input.u16(), 0x0102);
        assert_eq!(input.u16(), 0x0300);
        assert_eq!(input.bytes(4), &[] as &[u8]);
        assert!(input.is_empty());
    }
}
