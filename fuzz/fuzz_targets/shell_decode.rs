//! /shell frame decoder on arbitrary bytes: matches an independent reading, bounded buffer.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::shell_decode(data));
