//! The confined unpacker: nothing a hostile archive holds lands outside the destination, in a
//! protected path, or through a link. The property lives in `createos_sandbox::fuzzing`, shared
//! with `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| createos_sandbox::fuzzing::unpack(data));
