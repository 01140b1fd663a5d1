//! Gzip with the deflate work spread over threads, the way pigz does it: the input is cut into
//! fixed-size blocks, each block is deflated on a worker (primed with the last 32 KiB of the
//! block before it, so the ratio stays close to a single stream's), every block but the last
//! ends with a sync flush (byte-aligned, not final) and the last one finishes the stream. The
//! raw deflate pieces, written in order between one gzip header and one trailer (the CRC-32s of
//! the blocks combined), form one ordinary gzip member any `gunzip` reads.
//!
//! Block boundaries depend only on the byte count, so the same input always gives the same
//! output, whatever the thread count or timing. At most `2 × workers` blocks are in flight, so
//! memory stays bounded however large the archive. Nothing is written on drop: only
//! [`ParallelGzip::finish`] writes the end of the stream, so an aborted archive never looks
//! complete.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::Scope;

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// Input bytes per block: big enough that the per-block flush and priming cost nothing
/// measurable, small enough that workers get going early.
const BLOCK: usize = 128 * 1024;
/// Deflate's window: a block is primed with this much of the input before it.
const WINDOW: usize = 32 * 1024;

/// A block handed to a worker.
pub(crate) struct Job {
    input: Vec<u8>,
    dictionary: Vec<u8>,
    last: bool,
    done: SyncSender<io::Result<Deflated>>,
}

/// A worker's answer.
struct Deflated {
    output: Vec<u8>,
    crc: Crc,
}

/// How many deflate workers to start: one per core, capped.
pub(crate) fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
}

/// Start `workers` deflate threads in `scope`; they run until the returned sender is dropped.
pub(crate) fn spawn_workers<'scope>(
    scope: &'scope Scope<'scope, '_>,
    workers: usize,
    level: u32,
) -> SyncSender<Job> {
    let (tx, rx) = mpsc::sync_channel::<Job>(workers.max(1));
    let rx = Arc::new(Mutex::new(rx));
    let level = Compression::new(level.min(9));
    for _ in 0..workers.max(1) {
        let rx = Arc::clone(&rx);
        scope.spawn(move || loop {
            // the lock is held only while taking a job, never while compressing
            let job = match rx.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => return,
            };
            let Ok(job) = job else { return };
            let result = deflate_block(&job.input, &job.dictionary, job.last, level);
            // the writer may have given up (aborted archive): nothing to report to
            let _ = job.done.send(result);
        });
    }
    tx
}

fn deflate_block(
    input: &[u8],
    dictionary: &[u8],
    last: bool,
    level: Compression,
) -> io::Result<Deflated> {
    let mut crc = Crc::new();
    crc.update(input);
    let mut deflate = Compress::new(level, false);
    if !dictionary.is_empty() {
        deflate
            .set_dictionary(dictionary)
            .map_err(io::Error::other)?;
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    // deflate's worst case is a little over the input; stored blocks add 5 bytes per 64 KiB
    let mut output = Vec::with_capacity(input.len() + input.len() / 64 + 64);
    loop {
        let consumed = deflate.total_in() as usize;
        if output.capacity() - output.len() < 64 {
            output.reserve(output.capacity().max(1024));
        }
        let status = deflate
            .compress_vec(&input[consumed..], &mut output, flush)
            .map_err(io::Error::other)?;
        let all_in = deflate.total_in() as usize == input.len();
        let room_left = output.len() < output.capacity();
        match status {
            Status::StreamEnd => break,
            // a sync flush is complete once all input is in and the output did not fill up
            Status::Ok | Status::BufError if !last && all_in && room_left => break,
            Status::Ok | Status::BufError => {}
        }
    }
    Ok(Deflated { output, crc })
}

/// A `Write` that gzips what it is given on the workers of [`spawn_workers`].
pub(crate) struct ParallelGzip<W: Write> {
    out: W,
    jobs: SyncSender<Job>,
    /// At most this many blocks in flight.
    depth: usize,
    block: Vec<u8>,
    /// The tail of the previous block (the next block's dictionary).
    window: Vec<u8>,
    pending: VecDeque<Receiver<io::Result<Deflated>>>,
    crc: Crc,
    level: u32,
    header_written: bool,
}

impl<W: Write> ParallelGzip<W> {
    pub(crate) fn new(out: W, jobs: SyncSender<Job>, workers: usize, level: u32) -> Self {
        ParallelGzip {
            out,
            jobs,
            depth: 2 * workers.max(1),
            block: Vec::with_capacity(BLOCK),
            window: Vec::new(),
            pending: VecDeque::new(),
            crc: Crc::new(),
            level: level.min(9),
            header_written: false,
        }
    }

    fn write_header(&mut self) -> io::Result<()> {
        if self.header_written {
            return Ok(());
        }
        // XFL: 2 = best compression, 4 = fastest (informational only)
        let xfl = match self.level {
            9 => 2,
            0 | 1 => 4,
            _ => 0,
        };
        // magic, deflate, no flags, no mtime (reproducible), XFL, OS unknown
        self.out
            .write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 0xff])?;
        self.header_written = true;
        Ok(())
    }

    /// Hand the current block to a worker (the last one finishes the deflate stream).
    fn submit(&mut self, last: bool) -> io::Result<()> {
        while self.pending.len() >= self.depth {
            self.write_oldest()?;
        }
        let input = std::mem::replace(
            &mut self.block,
            Vec::with_capacity(if last { 0 } else { BLOCK }),
        );
        let dictionary = std::mem::take(&mut self.window);
        if !last {
            let tail = input.len().saturating_sub(WINDOW);
            self.window = input[tail..].to_vec();
        }
        let (done, answer) = mpsc::sync_channel(1);
        self.jobs
            .send(Job {
                input,
                dictionary,
                last,
                done,
            })
            .map_err(|_| io::Error::other("the compression workers stopped"))?;
        self.pending.push_back(answer);
        Ok(())
    }

    /// Wait for the oldest block in flight and write it out.
    fn write_oldest(&mut self) -> io::Result<()> {
        let Some(answer) = self.pending.pop_front() else {
            return Ok(());
        };
        let deflated = answer
            .recv()
            .map_err(|_| io::Error::other("a compression worker stopped"))??;
        self.write_header()?;
        self.out.write_all(&deflated.output)?;
        self.crc.combine(&deflated.crc);
        Ok(())
    }

    /// Write everything still buffered and the gzip trailer; returns the destination.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.submit(true)?;
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        self.write_header()?;
        let (crc, len) = (self.crc.sum(), self.crc.amount());
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        Ok(self.out)
    }
}

impl<W: Write> Write for ParallelGzip<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(BLOCK - self.block.len());
        self.block.extend_from_slice(&data[..n]);
        if self.block.len() == BLOCK {
            self.submit(false)?;
        }
        Ok(n)
    }

    /// Blocks go out when full; a flush does not cut one short (that would make the output
    /// depend on where the caller flushed).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gzip(data: &[u8], level: u32, workers: usize, piece: usize) -> Vec<u8> {
        std::thread::scope(|scope| {
            let jobs = spawn_workers(scope, workers, level);
            let mut gz = ParallelGzip::new(Vec::new(), jobs, workers, level);
            for chunk in data.chunks(piece.max(1)) {
                gz.write_all(chunk).expect("write");
            }
            gz.finish().expect("finish")
        })
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .expect("a valid gzip stream");
        out
    }

    /// Text-like and noise-like bytes, several blocks long and not a multiple of a block.
    fn sample(len: usize) -> Vec<u8> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|i| {
                if (i / 50_000) % 3 == 2 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                } else {
                    b"the quick brown fox jumps over the lazy dog\n"[i % 44]
                }
            })
            .collect()
    }

    #[test]
    fn round_trips_at_every_level_and_size() {
        for len in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 333] {
            let data = sample(len);
            for level in [0, 1, 6, 9] {
                let gz = gzip(&data, level, 3, 7_001);
                assert_eq!(gunzip(&gz), data, "len {len}, level {level}");
            }
        }
    }

    #[test]
    fn output_does_not_depend_on_threads_or_write_sizes() {
        let data = sample(4 * BLOCK + 12_345);
        let one = gzip(&data, 6, 1, 64 * 1024);
        assert_eq!(gzip(&data, 6, 4, 1_000), one);
        assert_eq!(gzip(&data, 6, 2, data.len()), one);
    }

    #[test]
    fn priming_keeps_the_ratio_of_a_single_stream() {
        // 10 KB of noise, repeated: only the dictionary lets a block's start refer back to the
        // block before it
        let unit: Vec<u8> = sample(110_000)[100_000..].to_vec();
        let data: Vec<u8> = unit.iter().copied().cycle().take(8 * BLOCK).collect();
        let parallel = gzip(&data, 6, 2, 64 * 1024).len();
        let mut single = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        single.write_all(&data).expect("write");
        let single = single.finish().expect("finish").len();
        assert!(
            parallel < single * 2,
            "parallel {parallel} bytes vs single stream {single} bytes"
        );
    }

    #[test]
    fn dropping_without_finish_writes_no_trailer() {
        let data = sample(3 * BLOCK);
        let mut sink = Vec::new();
        std::thread::scope(|scope| {
            let jobs = spawn_workers(scope, 2, 6);
            let mut gz = ParallelGzip::new(&mut sink, jobs, 2, 6);
            gz.write_all(&data).expect("write");
            drop(gz);
        });
        let mut out = Vec::new();
        assert!(
            flate2::read::GzDecoder::new(&sink[..])
                .read_to_end(&mut out)
                .is_err(),
            "an unfinished stream"
        );
    }
}
