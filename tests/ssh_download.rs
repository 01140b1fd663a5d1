//! Pipelined SFTP downloads (64 reads outstanding, as OpenSSH's `sftp`) against each guest sshd
//! the emulator offers: a multi-MB file of an odd size arrives byte-identical through every
//! way of reading it, and a file cut short while its reads are in flight ends exactly at its
//! new end, without an error or a hang. The read planning itself (short answers, answers out of
//! order, failures) is tested against a scripted server in `src/ssh/sftp_read_tests.rs`.

mod common;
#[macro_use]
mod ssh_support;

use createos_sandbox::ssh::{SshSession, WriteOptions, READS_IN_FLIGHT, READ_CHUNK};
use tokio::io::AsyncReadExt;

use ssh_support::{guarded, hex_sha256, options, pattern, sandbox, Guest};

/// Neither a multiple of the read size nor of a page.
const ODD_SIZE: usize = 9 * 1024 * 1024 + 4_321;

each_guest!(an_odd_size_download_is_byte_identical);
async fn an_odd_size_download_is_byte_identical(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");
    let data = pattern(ODD_SIZE, 7);
    ssh.write_file(
        "/root/odd.bin",
        std::io::Cursor::new(data.clone()),
        WriteOptions::new(),
    )
    .await
    .unwrap();

    // into a local file, the way `cos pull` over SSH does it
    let local = dir.path().join("odd.bin");
    std::fs::write(
        &local,
        b"the old content stays until the download is complete",
    )
    .unwrap();
    let saved = guarded(
        "save_file_to",
        ssh.save_file_to("/root/odd.bin", &local, None),
    )
    .await
    .unwrap();
    assert_eq!(saved, ODD_SIZE as u64);
    let back = std::fs::read(&local).unwrap();
    assert_eq!(back.len(), ODD_SIZE);
    assert_eq!(hex_sha256(&back), hex_sha256(&data));

    // through the AsyncRead, with reads smaller and larger than a chunk
    for read_size in [1_000usize, 3 * READ_CHUNK as usize + 17] {
        let mut reader = ssh.read_file("/root/odd.bin").await.unwrap();
        assert_eq!(reader.size(), Some(ODD_SIZE as u64));
        let mut back = Vec::with_capacity(ODD_SIZE);
        let mut buf = vec![0u8; read_size];
        loop {
            let n = guarded("a read", reader.read(&mut buf)).await.unwrap();
            if n == 0 {
                break;
            }
            back.extend_from_slice(&buf[..n]);
        }
        assert_eq!(back.len(), ODD_SIZE, "reading {read_size} bytes at a time");
        assert_eq!(
            hex_sha256(&back),
            hex_sha256(&data),
            "reading {read_size} bytes at a time"
        );
    }
    env.shutdown().await;
}

each_guest!(a_file_cut_short_mid_pipeline_ends_at_its_new_end);
async fn a_file_cut_short_mid_pipeline_ends_at_its_new_end(guest: Guest) {
    let env = guest.start().await;
    let sb = sandbox(&env).await;
    let dir = tempfile::tempdir().unwrap();
    let ssh = guarded("connect", SshSession::connect(&sb, options(&dir)))
        .await
        .expect("ssh connect");
    let size = 24 * 1024 * 1024 + 5;
    let data = pattern(size, 11);
    ssh.write_file(
        "/root/shrinks.bin",
        std::io::Cursor::new(data.clone()),
        WriteOptions::new(),
    )
    .await
    .unwrap();

    let mut reader = ssh.read_file("/root/shrinks.bin").await.unwrap();
    assert_eq!(reader.size(), Some(size as u64));
    let mut back = vec![0u8; 1024 * 1024];
    guarded("the first MiB", reader.read_exact(&mut back))
        .await
        .unwrap();
    // The reader has asked for at most its window, plus what it buffers, past the first MiB:
    // well short of the new end, which then falls inside a read still to be answered.
    let cut = 12 * 1024 * 1024 + 777;
    let asked_so_far = back.len() + (READS_IN_FLIGHT + 24) * READ_CHUNK as usize;
    assert!(asked_so_far < cut);
    let truncated = ssh
        .exec(&format!("truncate -s {cut} /root/shrinks.bin"))
        .await
        .unwrap();
    assert!(truncated.success(), "{truncated:?}");
    guarded("the rest", reader.read_to_end(&mut back))
        .await
        .expect("a file cut short is no error");
    assert_eq!(back.len(), cut, "the download ends exactly at the new end");
    assert_eq!(hex_sha256(&back), hex_sha256(&data[..cut]));
    env.shutdown().await;
}
