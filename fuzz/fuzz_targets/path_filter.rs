//! Snapshot name filter: nothing unsafe (.., absolute, NUL) or credential-shaped is archived.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::path_filter(data));
