//! JSend success decoding and error answers: status class, request id, Retry-After, envelope fields.
//! The property lives in `createos_sandbox::fuzzing`, shared with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::jsend(data));
