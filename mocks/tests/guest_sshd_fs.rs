//! The embedded guest sshd's SFTP server and the files API on the sandbox's filesystem:
//! symlinks planted by the guest (and directories swapped for symlinks mid-operation) never
//! lead a write out of the sandbox, and attached disks are mount roots of their own.

mod common;
mod guest_ssh;

use std::sync::Arc;

use common::KEY;
use guest_ssh::{embedded, guarded, key, login, open_sftp, pub_line, sandbox_with_key};
use serde_json::json;
use tokio::io::AsyncWriteExt;

/// The host's `/tmp/<name>` holds one file; the guest's private `/tmp/<name>` is a different
/// directory. Symlinks planted in the guest (absolute, a symlinked parent, `..` climbing out
/// of the sandbox directory in host space) and a directory swapped for a symlink while
/// writes run must never make SFTP or the files API touch the host's copy.
#[tokio::test]
async fn planted_symlinks_never_lead_writes_out_of_the_sandbox() {
    let env = embedded().await;
    let k = key(11);
    let id = sandbox_with_key(&env, &k).await;
    let ssh = login(&env, &id, &k).await;
    let sftp = open_sftp(&ssh).await;
    let name = format!(
        "cos-escape-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let host_dir = std::path::Path::new("/tmp").join(&name);
    std::fs::create_dir(&host_dir).unwrap();
    let victim = host_dir.join("victim");
    std::fs::write(&victim, b"host data").unwrap();
    let guest_dir = format!("/tmp/{name}");
    sftp.create_dir(&guest_dir).await.unwrap();
    sftp.create(&format!("{guest_dir}/victim"))
        .await
        .unwrap()
        .write_all(b"guest data")
        .await
        .unwrap();

    sftp.symlink(&guest_dir, "/root/to-dir").await.unwrap();
    sftp.symlink("/tmp", "/root/to-tmp").await.unwrap();
    sftp.symlink(
        &format!("../../../../../../../../..{guest_dir}"),
        "/root/climb",
    )
    .await
    .unwrap();
    let routes = [
        "/root/to-dir".to_string(),
        format!("/root/to-tmp/{name}"),
        "/root/climb".to_string(),
    ];
    for (i, via) in routes.iter().enumerate() {
        let mut file = sftp.create(&format!("{via}/sftp-{i}")).await.unwrap();
        file.write_all(b"through a link").await.unwrap();
        file.shutdown().await.unwrap();
        sftp.create(&format!("{via}/victim"))
            .await
            .unwrap()
            .write_all(b"overwritten")
            .await
            .unwrap();
        let mut change = russh_sftp::protocol::FileAttributes::empty();
        change.size = Some(2);
        change.permissions = Some(0o600);
        sftp.set_metadata(&format!("{via}/victim"), change)
            .await
            .unwrap();
        let url = env.url(&format!("/v1/sandboxes/{id}/files?path={via}/api-{i}"));
        let r = common::reply(
            env.http
                .put(url)
                .header("X-Api-Key", KEY)
                .body("via the files API")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(r.status, 200, "{via}: {}", r.text);
    }
    // Everything landed in the guest's own directory, as a process there would see it.
    let mut names: Vec<String> = sftp
        .read_dir(&guest_dir)
        .await
        .unwrap()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["api-0", "api-1", "api-2", "sftp-0", "sftp-1", "sftp-2", "victim"]
    );
    let (guest_victim, _, _) = env.sh(&id, &format!("cat {guest_dir}/victim")).await;
    assert_eq!(guest_victim, "ov");

    // The race: `/root/swap` flips between a directory and a symlink whose target names the
    // host's copy in host space (the guest's own copy in guest space) while writes, truncates
    // and chmods go through it. The flipping runs in a host thread on the sandbox's
    // directory, as fast as renameat2 allows, so resolve-then-open code would lose often.
    let root = env
        .mock
        .state()
        .sandboxes
        .get(&id)
        .unwrap()
        .runtime()
        .dir()
        .join("root");
    std::fs::create_dir(root.join("swap")).unwrap();
    std::fs::write(root.join("swap/victim"), b"sandbox data").unwrap();
    std::os::unix::fs::symlink(&guest_dir, root.join("swap-link")).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let exchange = nix::fcntl::RenameFlags::RENAME_EXCHANGE;
                nix::fcntl::renameat2(
                    None,
                    &root.join("swap"),
                    None,
                    &root.join("swap-link"),
                    exchange,
                )
                .unwrap();
                flips += 1;
            }
            flips
        })
    };
    let writes = async {
        for n in 0..150 {
            if let Ok(mut file) = sftp.create(&format!("/root/swap/race-{n}")).await {
                let _ = file.write_all(b"raced").await;
            }
            if let Ok(mut file) = sftp.create("/root/swap/victim").await {
                let _ = file.write_all(b"raced").await;
            }
            let mut change = russh_sftp::protocol::FileAttributes::empty();
            change.permissions = Some(0o600);
            let _ = sftp.set_metadata("/root/swap/victim", change).await;
            let url = env.url(&format!(
                "/v1/sandboxes/{id}/files?path=/root/swap/api-race-{n}"
            ));
            let _ = env
                .http
                .put(url)
                .header("X-Api-Key", KEY)
                .body("raced")
                .send()
                .await;
        }
    };
    guarded("writes racing the flips", writes).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(flipper.join().unwrap() > 0);

    let mut on_host: Vec<String> = std::fs::read_dir(&host_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_host.sort();
    let host_victim = std::fs::read(&victim).unwrap();
    let host_mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&victim).unwrap().permissions());
    std::fs::remove_dir_all(&host_dir).unwrap();
    assert_eq!(
        on_host,
        ["victim"],
        "nothing was created in the host's directory"
    );
    assert_eq!(host_victim, b"host data", "the host's file was not written");
    assert_ne!(host_mode & 0o777, 0o600, "the host's file was not chmod-ed");
    env.mock.shutdown().await;
}

/// An attached disk is a mount root of its own (here outside the private dirs): SFTP and
/// files API writes land on it, and the mount point itself is never removed or renamed.
#[tokio::test]
async fn writes_reach_an_attached_disk_and_its_mount_point_stays() {
    let env = embedded().await;
    let disk = json!({"name": "scratch", "kind": "s3",
        "config": {"bucket": "team-data", "endpoint": "https://s3.example.com", "region": "eu-1"},
        "credentials": {"access_key": "AKIAEXAMPLE", "secret_key": "very-secret-value"}});
    let r = env.post("/v1/disks", disk).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let disk_id = r.data()["id"].as_str().unwrap().to_string();
    let k = key(12);
    let id = env
        .create(json!({"ssh_pubkeys": [pub_line(&k)], "disks": [{"disk_id": disk_id, "mount_path": "/mnt/data"}]}))
        .await;
    let ssh = login(&env, &id, &k).await;
    let sftp = open_sftp(&ssh).await;
    sftp.create("/mnt/data/sftp.txt")
        .await
        .unwrap()
        .write_all(b"over sftp;")
        .await
        .unwrap();
    let url = env.url(&format!(
        "/v1/sandboxes/{id}/files?path=/mnt/data/sub/api.txt"
    ));
    let r = common::reply(
        env.http
            .put(url)
            .header("X-Api-Key", KEY)
            .body("over the api")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (both, _, code) = env
        .sh(&id, "cat /mnt/data/sftp.txt /mnt/data/sub/api.txt")
        .await;
    assert_eq!((both.as_str(), code), ("over sftp;over the api", 0));
    assert!(sftp.rename("/mnt/data", "/mnt/moved").await.is_err());
    sftp.remove_file("/mnt/data/sftp.txt").await.unwrap();
    sftp.remove_file("/mnt/data/sub/api.txt").await.unwrap();
    sftp.remove_dir("/mnt/data/sub").await.unwrap();
    assert!(
        sftp.remove_dir("/mnt/data").await.is_err(),
        "an empty mount point is still not removed"
    );
    let (kept, _, _) = env
        .sh(&id, "test -d /mnt/data && ls -A /mnt/data && echo kept")
        .await;
    assert_eq!(kept, "kept\n");
    env.mock.shutdown().await;
}
