//! E44–E51: disks, their mounts in sandboxes, credentials hygiene and ownership.

use createos_sandbox::api::disks::{DiskCreate, DiskCredentials, DiskKind, MountStatus};
use createos_sandbox::Error;

use crate::common;

fn minio(name: &str) -> DiskCreate {
    DiskCreate::s3(name, "bucket-1", "http://127.0.0.1:9000")
        .region("us-east-1")
        .use_path_style(true)
        .credentials("AKIA-TEST-ACCESS", "very-secret-key-123")
}

#[tokio::test]
async fn register_read_rotate_delete() {
    let env = common::start().await;
    let request = minio("shared-data");
    let debug = format!("{request:?}");
    assert!(
        !debug.contains("very-secret-key-123") && !debug.contains("AKIA-TEST-ACCESS"),
        "{debug}"
    );

    let disk = env.client.create_disk(request).await.unwrap();
    assert!(disk.id.starts_with("disk_"), "{}", disk.id);
    assert_eq!(disk.name, "shared-data");
    assert_eq!(disk.kind, DiskKind::S3);
    assert_eq!(disk.config.bucket, "bucket-1");
    assert_eq!(disk.config.endpoint, "http://127.0.0.1:9000");
    assert_eq!(disk.config.region.as_deref(), Some("us-east-1"));
    assert_eq!(disk.config.use_path_style, Some(true));
    assert!(disk.created_at.is_some());

    let by_name = env.client.get_disk("shared-data").await.unwrap();
    assert_eq!(by_name, disk);
    let listed = env.client.list_disks().collect_all().await.unwrap();
    assert_eq!(listed, vec![disk.clone()]);

    let rotated = env
        .client
        .update_disk_credentials(&disk.id, DiskCredentials::new("AKIA-NEW", "new-secret"))
        .await
        .unwrap();
    assert_eq!(rotated.id, disk.id);
    assert_eq!(rotated.config, disk.config);

    assert!(env.client.delete_disk("shared-data").await.unwrap().deleted);
    assert!(env
        .client
        .get_disk(&disk.id)
        .await
        .unwrap_err()
        .is_not_found());
    env.shutdown().await;
}

#[tokio::test]
async fn mount_list_and_unmount_in_a_sandbox() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let disk = env.client.create_disk(minio("scratch")).await.unwrap();

    let attached = sandbox
        .attach_disk(&disk.id, "/mnt/scratch", None)
        .await
        .unwrap();
    assert!(attached.ok);
    if let Some(id) = &attached.sandbox_id {
        assert_eq!(id, sandbox.id());
    }
    sandbox
        .attach_disk(&disk.id, "/mnt/logs", Some("logs/"))
        .await
        .unwrap();

    let mounts = sandbox.list_disks().collect_all().await.unwrap();
    assert_eq!(mounts.len(), 2);
    let scratch = mounts
        .iter()
        .find(|m| m.mount_path == "/mnt/scratch")
        .expect("first mount listed");
    assert_eq!(scratch.disk_id, disk.id);
    assert_eq!(scratch.name, "scratch");
    assert_eq!(scratch.kind, DiskKind::S3);
    assert_eq!(scratch.config.bucket, "bucket-1");
    assert!(
        matches!(
            scratch.mount_status,
            MountStatus::Pending | MountStatus::Mounted
        ),
        "{:?}",
        scratch.mount_status
    );
    let logs = mounts
        .iter()
        .find(|m| m.mount_path == "/mnt/logs")
        .expect("second mount listed");
    assert_eq!(logs.sub_path.as_deref(), Some("logs/"));

    // Attached disks cannot be deleted.
    let err = env.client.delete_disk(&disk.id).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    assert_eq!(
        crate::fields(&err).get("disk").map(String::as_str),
        Some("disk is attached to a sandbox")
    );

    assert!(
        sandbox
            .detach_disk(&disk.id, "/mnt/scratch")
            .await
            .unwrap()
            .detached
    );
    let mounts = sandbox.list_disks().collect_all().await.unwrap();
    assert_eq!(
        mounts
            .iter()
            .map(|m| m.mount_path.as_str())
            .collect::<Vec<_>>(),
        vec!["/mnt/logs"]
    );
    assert!(
        sandbox
            .detach_disk(&disk.id, "/mnt/logs")
            .await
            .unwrap()
            .detached
    );
    assert!(sandbox.list_disks().collect_all().await.unwrap().is_empty());
    assert!(env.client.delete_disk(&disk.id).await.unwrap().deleted);
    env.shutdown().await;
}

#[tokio::test]
async fn attach_needs_a_running_sandbox() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let disk = env.client.create_disk(minio("cold")).await.unwrap();
    sandbox.pause_and_wait().await.unwrap();
    let err = sandbox
        .attach_disk(&disk.id, "/mnt/cold", None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    assert_eq!(
        crate::fields(&err).get("sandbox").map(String::as_str),
        Some("sandbox is not running")
    );
    env.shutdown().await;
}

#[tokio::test]
async fn foreign_tenant_and_no_credit() {
    let env = common::start().await;
    let disk = env.client.create_disk(minio("mine")).await.unwrap();
    let (_, other) = env.new_tenant(true).await;
    assert!(other.get_disk(&disk.id).await.unwrap_err().is_not_found());
    assert!(other.get_disk("mine").await.unwrap_err().is_not_found());
    assert!(other
        .delete_disk(&disk.id)
        .await
        .unwrap_err()
        .is_not_found());
    let err = other
        .update_disk_credentials(&disk.id, DiskCredentials::new("a", "b"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(other.list_disks().collect_all().await.unwrap().is_empty());
    // Their sandbox cannot mount our disk.
    let theirs = other
        .create_sandbox(createos_sandbox::CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .unwrap();
    let err = theirs
        .attach_disk(&disk.id, "/mnt/x", None)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    let (_, broke) = env.new_tenant(false).await;
    let err = broke.create_disk(minio("paid")).await.unwrap_err();
    assert!(matches!(err, Error::PaymentRequired(_)), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_sending() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let c = &env.client;
    crate::assert_invalid(&c.create_disk(minio("Bad_Name")).await.unwrap_err(), "name");
    crate::assert_invalid(
        &c.create_disk(DiskCreate::s3("ok", "b", "s3.amazonaws.com").credentials("a", "b"))
            .await
            .unwrap_err(),
        "config.endpoint",
    );
    crate::assert_invalid(
        &c.create_disk(DiskCreate::s3("ok", "", "https://s3").credentials("a", "b"))
            .await
            .unwrap_err(),
        "config.bucket",
    );
    crate::assert_invalid(
        &c.create_disk(DiskCreate::s3("ok", "b", "https://s3"))
            .await
            .unwrap_err(),
        "credentials",
    );
    crate::assert_invalid(
        &c.create_disk(minio("ok").credentials("a", ""))
            .await
            .unwrap_err(),
        "credentials.secret_key",
    );
    crate::assert_invalid(
        &c.update_disk_credentials("ok", DiskCredentials::new("", "x"))
            .await
            .unwrap_err(),
        "credentials.access_key",
    );
    crate::assert_invalid(
        &sandbox
            .attach_disk("disk_1", "mnt/rel", None)
            .await
            .unwrap_err(),
        "mount_path",
    );
    crate::assert_invalid(
        &sandbox
            .attach_disk("disk_1", "/mnt/a", Some("../up"))
            .await
            .unwrap_err(),
        "sub_path",
    );
    crate::assert_invalid(
        &sandbox.detach_disk("disk 1", "/mnt/a").await.unwrap_err(),
        "disk_id",
    );
    crate::assert_invalid(
        &sandbox
            .detach_disk("disk_1", "/mnt/../etc")
            .await
            .unwrap_err(),
        "mount_path",
    );
    for op in [
        "createDisk",
        "updateDiskCredentials",
        "attachDisk",
        "detachDisk",
    ] {
        assert_eq!(env.requests(op).await, 0, "{op} reached the server");
    }
    // The secret never leaks into an error message either.
    let err = c.create_disk(minio("Bad_Name")).await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains("very-secret-key-123"));
    env.shutdown().await;
}
