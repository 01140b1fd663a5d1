//! .oauth / .token parsing and resolution: Debug and errors never depend on token values.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::credentials(data));
