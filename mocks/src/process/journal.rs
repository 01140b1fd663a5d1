//! Output journal of one managed process: every chunk read from stdout, stderr or the PTY
//! gets the next sequence number (one sequence space per process, starting at 1), and the
//! oldest chunks are evicted once the retained bytes exceed the configured budget.

use std::collections::VecDeque;

use bytes::Bytes;

use super::arena::Arena;

/// Which output a chunk came from (the `stream` field of a `data` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
    Pty,
}

impl OutputStream {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
            OutputStream::Pty => "pty",
        }
    }
}

/// One retained piece of output.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub seq: u64,
    pub stream: OutputStream,
    /// Byte offset of the chunk's first byte in the process's whole output.
    pub offset: u64,
    pub data: Bytes,
}

/// The retained window, as reported in `ProcessDetails.output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub oldest_seq: u64,
    pub newest_seq: u64,
    pub bytes: u64,
    /// Bytes ever written (this project's extension of the output window).
    pub total_bytes: u64,
}

/// What a reader asking for output after some sequence gets.
#[derive(Debug)]
pub enum Replay {
    /// Chunks with `seq > after` (possibly empty when nothing new was written yet).
    Chunks(Vec<Chunk>),
    /// Some output after `after` was already evicted; resume from `oldest_available`, whose
    /// first byte is at `oldest_offset` (so a reader knows exactly how many bytes it lost).
    Expired {
        oldest_available: u64,
        oldest_offset: u64,
    },
}

/// Bounded chunk buffer. A chunk is never larger than the budget (callers read at most
/// `max_chunk()` bytes at a time), so the newest chunk always survives eviction.
#[derive(Debug)]
pub struct Journal {
    chunks: VecDeque<Chunk>,
    /// Where chunk bytes are kept (out of forked children).
    arena: Arena,
    retained_bytes: usize,
    budget: usize,
    last_seq: u64,
    /// Bytes ever written (the offset of the next chunk).
    total_bytes: u64,
}

/// Upper bound of one read from a process's output.
const READ_SIZE: usize = 64 * 1024;

impl Journal {
    /// A journal keeping at most `budget` bytes (at least 1).
    pub fn new(budget: usize) -> Self {
        Journal {
            chunks: VecDeque::new(),
            arena: Arena::default(),
            retained_bytes: 0,
            budget: budget.max(1),
            last_seq: 0,
            total_bytes: 0,
        }
    }

    /// Largest chunk the journal accepts: one read's worth, never above the budget.
    pub fn max_chunk(&self) -> usize {
        READ_SIZE.min(self.budget)
    }

    /// Appends output and returns its sequence number; data larger than `max_chunk()` is
    /// split over several chunks.
    pub fn push(&mut self, stream: OutputStream, data: &[u8]) -> u64 {
        let max = self.max_chunk();
        for piece in data.chunks(max) {
            let piece = self.arena.copy(piece);
            self.last_seq += 1;
            self.retained_bytes += piece.len();
            let offset = self.total_bytes;
            self.total_bytes += piece.len() as u64;
            self.chunks.push_back(Chunk {
                seq: self.last_seq,
                stream,
                offset,
                data: piece,
            });
        }
        while self.retained_bytes > self.budget && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.retained_bytes -= old.data.len();
            }
        }
        self.last_seq
    }

    /// Sequence of the newest chunk ever written (0 before any output).
    pub fn newest_seq(&self) -> u64 {
        self.last_seq
    }

    /// Bounds of the retained window; `0/0/0` before any output.
    pub fn window(&self) -> Window {
        let oldest_seq = self.chunks.front().map(|c| c.seq).unwrap_or(self.last_seq);
        Window {
            oldest_seq,
            newest_seq: self.last_seq,
            bytes: self.retained_bytes as u64,
            total_bytes: self.total_bytes,
        }
    }

    /// Chunks after `after`, at most `limit_bytes` of payload (always at least one chunk
    /// when any is available), or `Expired` when part of `(after, oldest)` was evicted.
    pub fn after(&self, after: u64, limit_bytes: usize) -> Replay {
        let Some(front) = self.chunks.front() else {
            return Replay::Chunks(Vec::new());
        };
        if after + 1 < front.seq {
            return Replay::Expired {
                oldest_available: front.seq,
                oldest_offset: front.offset,
            };
        }
        // Sequence numbers are contiguous in the deque, so the start index is arithmetic.
        let start = (after + 1 - front.seq) as usize;
        let mut out = Vec::new();
        let mut taken = 0usize;
        for chunk in self.chunks.iter().skip(start) {
            if !out.is_empty() && taken + chunk.data.len() > limit_bytes {
                break;
            }
            taken += chunk.data.len();
            out.push(chunk.clone());
        }
        Replay::Chunks(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(r: Replay) -> Vec<u64> {
        match r {
            Replay::Chunks(c) => c.iter().map(|c| c.seq).collect(),
            Replay::Expired {
                oldest_available, ..
            } => vec![1000 + oldest_available],
        }
    }

    #[test]
    fn sequences_start_at_one_and_replay_after() {
        let mut j = Journal::new(1024);
        assert_eq!(
            j.window(),
            Window {
                oldest_seq: 0,
                newest_seq: 0,
                bytes: 0,
                total_bytes: 0
            }
        );
        assert_eq!(j.push(OutputStream::Stdout, b"ab"), 1);
        assert_eq!(j.push(OutputStream::Stderr, b"cd"), 2);
        assert_eq!(seqs(j.after(0, usize::MAX)), vec![1, 2]);
        assert_eq!(seqs(j.after(1, usize::MAX)), vec![2]);
        assert!(seqs(j.after(2, usize::MAX)).is_empty());
        assert!(seqs(j.after(7, usize::MAX)).is_empty());
        assert_eq!(
            j.window(),
            Window {
                oldest_seq: 1,
                newest_seq: 2,
                bytes: 4,
                total_bytes: 4
            }
        );
    }

    #[test]
    fn eviction_keeps_budget_and_reports_expiry() {
        let mut j = Journal::new(10);
        for _ in 0..5 {
            j.push(OutputStream::Stdout, b"xxxx");
        }
        let w = j.window();
        assert_eq!(
            w,
            Window {
                oldest_seq: 4,
                newest_seq: 5,
                bytes: 8,
                total_bytes: 20
            }
        );
        assert!(matches!(
            j.after(0, usize::MAX),
            Replay::Expired {
                oldest_available: 4,
                oldest_offset: 12
            }
        ));
        assert!(matches!(
            j.after(2, usize::MAX),
            Replay::Expired {
                oldest_available: 4,
                oldest_offset: 12
            }
        ));
        assert_eq!(seqs(j.after(3, usize::MAX)), vec![4, 5]);
        assert_eq!(seqs(j.after(4, usize::MAX)), vec![5]);
    }

    #[test]
    fn oversized_pushes_are_split_and_limit_applies() {
        let mut j = Journal::new(4);
        let last = j.push(OutputStream::Pty, b"0123456789");
        assert_eq!(last, 3);
        assert_eq!(
            j.window(),
            Window {
                oldest_seq: 3,
                newest_seq: 3,
                bytes: 2,
                total_bytes: 10
            }
        );
        let mut j = Journal::new(100);
        for _ in 0..4 {
            j.push(OutputStream::Stdout, b"12345");
        }
        assert_eq!(seqs(j.after(0, 11)), vec![1, 2]);
        assert_eq!(seqs(j.after(0, 1)), vec![1]);
    }
}
