//! NDJSON decoder over arbitrary read splits: items match a line-by-line reading, the line cap holds.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::ndjson(data));
