//! /shell frames encoded then decoded under arbitrary read splits come back unchanged.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::shell_round_trip(data));
