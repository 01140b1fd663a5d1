//! The fuzz properties as a bounded, deterministic test: every seed of `fuzz/corpus/<target>/`
//! goes through its property function (`createos_sandbox::fuzzing`), then a fixed-seed mutation
//! loop derives a few thousand more inputs from those seeds. The same functions are the
//! libFuzzer targets in `fuzz/`; this test keeps them honest in every `cargo test`.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use createos_sandbox::fuzzing::{Property, TARGETS};

/// Mutated inputs per target.
const ITERATIONS: usize = 2500;
/// Longest mutated input.
const MAX_INPUT: usize = 2048;

/// Byte strings that steer mutations towards the interesting parts of each format.
const DICTIONARY: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"/",
    b"..",
    b"../",
    b"./",
    b"\0",
    b"*",
    b"**/",
    b"!",
    b"data: ",
    b": keepalive",
    b"{}",
    b"[]",
    b"null",
    b"\"\"",
    b"{\"status\":\"success\",\"data\":",
    b"{\"status\":\"fail\",\"data\":{\"code\":\"X\",\"f\":1}}",
    b"{\"status\":\"error\",\"message\":\"m\",\"code\":\"C\"}",
    b"\"access_token\":\"",
    b"\"refresh_token\":",
    b"\"expires_at\":",
    b".env",
    b".ssh/",
    b".git",
    b"id_rsa",
    b".pem",
    b".git/hooks/post-commit",
    b"ustar",
    b"\x00\x00\x00\x04",
    b"\xff\xff\xff\xff",
    b"\x01\x00\x00\x00\x04",
    b"1e300",
    b"-1",
    b"18446744073709551616",
];

/// xorshift64*: a fixed sequence, so a failure reproduces on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join("corpus")
        .join(target)
}

/// The seed files of a target, sorted by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()));
    let mut seeds: Vec<(String, Vec<u8>)> = entries
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_name()
                    .expect("file name")
                    .to_string_lossy()
                    .into_owned(),
                bytes,
            )
        })
        .collect();
    seeds.sort();
    seeds
}

/// One random edit of `input`.
fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[(String, Vec<u8>)]) {
    let at = rng.below(input.len() + 1);
    match rng.below(8) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = [
                0, 1, 0x7f, 0x80, 0xff, b'\n', b'/', b'.', b'"', b'{', b'}', b':', b'\\',
            ][rng.below(13)];
        }
        2 => {
            let word = DICTIONARY[rng.below(DICTIONARY.len())];
            input.splice(at..at, word.iter().copied());
        }
        3 if !input.is_empty() => {
            let start = rng.below(input.len());
            let end = (start + 1 + rng.below(16)).min(input.len());
            input.drain(start..end);
        }
        4 if !input.is_empty() => {
            let start = rng.below(input.len());
            let end = start + 1 + rng.below((input.len() - start).min(32));
            let copy = input[start..end].to_vec();
            input.splice(at..at, copy);
        }
        5 => {
            let (_, other) = &seeds[rng.below(seeds.len())];
            let from = rng.below(other.len() + 1);
            input.truncate(at);
            input.extend_from_slice(&other[from..]);
        }
        6 => {
            let n = 1 + rng.below(8);
            let random: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            input.splice(at..at, random);
        }
        _ => input.truncate(at),
    }
    input.truncate(MAX_INPUT);
}

fn escaped(input: &[u8]) -> String {
    input
        .iter()
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}

/// Run `property` on `input`; on a violation, fail naming the input so it can be saved into
/// the corpus and replayed with `cargo fuzz run <target> <file>`.
fn check(target: &str, label: &str, property: Property, input: &[u8]) {
    if panic::catch_unwind(AssertUnwindSafe(|| property(input))).is_err() {
        panic!(
            "fuzz property `{target}` failed on {label}: b\"{}\"",
            escaped(input)
        );
    }
}

fn exercise(target: &str) {
    let property = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no property function for {target}"))
        .1;
    let seeds = seeds(target);
    assert!(!seeds.is_empty(), "the seed corpus of {target} is empty");
    for (name, bytes) in &seeds {
        check(target, &format!("seed {name}"), property, bytes);
    }
    let mut rng = Rng(0x5eed_f00d_0000_0000
        ^ ((target.len() as u64) << 32)
        ^ u64::from(target.as_bytes()[0]));
    for i in 0..ITERATIONS {
        let (name, base) = &seeds[rng.below(seeds.len())];
        let mut input = base.clone();
        for _ in 0..1 + rng.below(4) {
            mutate_once(&mut rng, &mut input, &seeds);
        }
        check(
            target,
            &format!("mutation {i} of seed {name}"),
            property,
            &input,
        );
    }
}

#[test]
fn ndjson_decoder() {
    exercise("ndjson");
}

#[test]
fn shell_codec_decodes_any_bytes() {
    exercise("shell_decode");
}

#[test]
fn shell_codec_round_trips() {
    exercise("shell_round_trip");
}

#[test]
fn jsend_decoding() {
    exercise("jsend");
}

#[test]
fn credential_files() {
    exercise("credentials");
}

#[test]
fn snapshot_path_filter() {
    exercise("path_filter");
}

#[test]
fn confined_unpacker() {
    exercise("unpack");
}

/// Every property has its libFuzzer target and a seed corpus, and nothing else is in `fuzz/`.
#[test]
fn every_target_has_a_fuzz_binary_and_seeds() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        let source = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("fuzzing::{name}(")),
            "{} does not call fuzzing::{name}",
            source.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        assert!(corpus_dir(name).is_dir(), "no seed corpus for {name}");
    }
    let targets: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .map(|e| {
            e.expect("entry")
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    for target in &targets {
        assert!(
            TARGETS.iter().any(|(name, _)| name == target),
            "fuzz target {target} has no property function"
        );
    }
}
