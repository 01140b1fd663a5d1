//! The archive writer reads files ahead in batches on several threads: whatever the mix of
//! sizes, the archive must hold every file byte for byte in order, and a failure deep inside
//! must stop the output exactly before the failing entry.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use createos_sandbox::snapshot::{Compression, GitMode, Snapshot, SnapshotOptions};
use tempfile::TempDir;

fn options(tmp: &TempDir) -> SnapshotOptions {
    SnapshotOptions {
        home_dir: Some(tmp.path().join("home")),
        ..SnapshotOptions::default()
    }
    .git(GitMode::Off)
}

/// Deterministic content of `len` bytes, different for every `seed`.
fn content(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed * 7) % 251) as u8)
        .collect()
}

/// Sizes around every boundary the writer cares about: empty, block multiples and one off,
/// and files past the in-memory limit (streamed by the writer instead).
fn size_of(i: usize) -> usize {
    match i % 23 {
        0 => 0,
        1 => 512,
        2 => 511,
        3 => 513,
        4 => 4096,
        5 if i.is_multiple_of(3) => 256 * 1024 + 1,
        5 => 256 * 1024,
        6 if i.is_multiple_of(5) => 600_000,
        _ => (i * 97) % 3000,
    }
}

/// A project of `files` files spread over directories; the expected contents by name.
fn project(root: &Path, files: usize) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut expected = BTreeMap::new();
    for i in 0..files {
        let rel = PathBuf::from(format!("d{:02}/f{i:04}.bin", i % 17));
        let body = content(i, size_of(i));
        std::fs::create_dir_all(root.join(&rel).parent().expect("parent")).expect("dirs");
        std::fs::write(root.join(&rel), &body).expect("file");
        expected.insert(rel, body);
    }
    expected
}

/// The regular files of a (possibly unfinished) archive, in order, with their contents.
fn files_in(archive: &[u8]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut reader = tar::Archive::new(archive);
    let mut out = Vec::new();
    for entry in reader.entries().expect("entries") {
        let mut entry = entry.expect("a whole entry");
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().expect("path").into_owned();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).expect("body");
        out.push((path, body));
    }
    out
}

#[test]
fn every_size_arrives_whole_and_in_order_across_batches() {
    let tmp = TempDir::new().expect("tmp");
    let root = tmp.path().join("p");
    let expected = project(&root, 700);
    let snapshot = Snapshot::scan(&root, &options(&tmp)).expect("scan");

    let mut plain = Vec::new();
    snapshot.write_tar(&mut plain).expect("tar");
    assert_eq!(plain.len() as u64, snapshot.exact_size());
    assert!(
        plain.ends_with(&[0u8; 1024]),
        "the end-of-archive blocks close it"
    );
    let got = files_in(&plain);
    let want: Vec<(PathBuf, Vec<u8>)> = expected.into_iter().collect();
    assert_eq!(got.len(), want.len());
    for ((got_name, got_body), (want_name, want_body)) in got.iter().zip(&want) {
        assert_eq!(got_name, want_name);
        assert!(got_body == want_body, "{} differs", got_name.display());
    }

    // the same entries through gzip
    let mut gz = Vec::new();
    snapshot
        .write_archive(&mut gz, Compression::gzip())
        .expect("tar.gz");
    let mut unzipped = Vec::new();
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_end(&mut unzipped)
        .expect("gunzip");
    assert!(unzipped == plain, "the gzip stream holds the same tar");
}

#[test]
fn a_failure_deep_inside_stops_right_before_the_failing_entry() {
    let tmp = TempDir::new().expect("tmp");
    let root = tmp.path().join("p");
    let expected = project(&root, 700);
    let snapshot = Snapshot::scan(&root, &options(&tmp)).expect("scan");

    // a non-empty small file well past the first batches shrinks after the scan
    let (victim, body) = expected
        .iter()
        .skip(expected.len() * 2 / 3)
        .find(|(_, body)| body.len() > 1 && body.len() < 4000)
        .expect("a small file");
    std::fs::write(root.join(victim), &body[..body.len() / 2]).expect("shrink");

    for compression in [Compression::None, Compression::gzip()] {
        let mut out = Vec::new();
        let err = snapshot
            .write_archive(&mut out, compression)
            .expect_err("the archive must fail");
        let text = err.to_string();
        assert!(
            text.contains(&victim.display().to_string()),
            "{compression:?}: {text}"
        );
        if compression == Compression::None {
            // everything before the victim, whole; nothing of it or after, and no end blocks
            let before: Vec<&PathBuf> =
                expected.keys().take_while(|name| *name != victim).collect();
            let got = files_in(&out);
            let got_names: Vec<&PathBuf> = got.iter().map(|(name, _)| name).collect();
            assert_eq!(got_names, before);
            for (name, body) in &got {
                assert!(body == &expected[name], "{} differs", name.display());
            }
            assert!(
                !out.ends_with(&[0u8; 1024]),
                "an aborted archive must not look finished"
            );
        }
    }
}
