//! Disks (E44–E51): S3-compatible buckets registered once and mounted into sandboxes.
//!
//! Credentials are write-only on the server and redacted in this crate's `Debug` output.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::api::endpoints as ep;
use crate::api::open_enum;
use crate::api::sandboxes::Sandbox;
use crate::auth::Secret;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::pagination::Paginated;
use crate::transport::Call;
use crate::validate;

open_enum! {
    /// Storage backend of a disk.
    #[derive(Default)]
    DiskKind {
        /// An S3-compatible bucket.
        #[default]
        S3 = "s3",
    }
}

open_enum! {
    /// State of one mount of a disk in a sandbox.
    #[derive(Default)]
    MountStatus {
        /// Being mounted.
        #[default]
        Pending = "pending",
        /// Usable.
        Mounted = "mounted",
        /// Mount failed; see `mount_error`.
        Error = "error",
        /// Being detached.
        Unmounting = "unmounting",
    }
}

/// Where the bucket lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskConfig {
    /// Bucket name.
    #[serde(default)]
    pub bucket: String,
    /// S3 endpoint URL (`https://…`).
    #[serde(default)]
    pub endpoint: String,
    /// Bucket region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket`) instead of virtual-host style.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_path_style: Option<bool>,
}

/// S3 access key pair. Write-only: sent on create and rotation, never returned, and printed as
/// `<redacted>` by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct DiskCredentials {
    #[serde(serialize_with = "expose_secret")]
    access_key: Secret,
    #[serde(serialize_with = "expose_secret")]
    secret_key: Secret,
}

impl DiskCredentials {
    /// A key pair.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        DiskCredentials {
            access_key: Secret::new(access_key),
            secret_key: Secret::new(secret_key),
        }
    }

    /// The access key id.
    pub fn access_key(&self) -> &Secret {
        &self.access_key
    }

    /// The secret key.
    pub fn secret_key(&self) -> &Secret {
        &self.secret_key
    }

    fn validate(&self) -> Result<()> {
        if self.access_key.expose().trim().is_empty() {
            return Err(Error::invalid(
                "credentials.access_key",
                "must not be empty",
            ));
        }
        if self.secret_key.expose().trim().is_empty() {
            return Err(Error::invalid(
                "credentials.secret_key",
                "must not be empty",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for DiskCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiskCredentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &self.secret_key)
            .finish()
    }
}

fn expose_secret<S: Serializer>(secret: &Secret, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
}

/// A registered disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskView {
    /// `disk_…` id.
    pub id: String,
    /// Name, unique per account.
    #[serde(default)]
    pub name: String,
    /// Backend.
    #[serde(default)]
    pub kind: DiskKind,
    /// Bucket location (never the credentials).
    #[serde(default)]
    pub config: DiskConfig,
    /// RFC 3339 creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// One mount of a disk in a sandbox (E49). The same disk may be mounted at several paths.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxDisk {
    /// Disk id.
    pub disk_id: String,
    /// Disk name.
    #[serde(default)]
    pub name: String,
    /// Backend.
    #[serde(default)]
    pub kind: DiskKind,
    /// Bucket location.
    #[serde(default)]
    pub config: DiskConfig,
    /// Absolute path in the guest.
    #[serde(default)]
    pub mount_path: String,
    /// Prefix inside the bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    /// Mount state.
    #[serde(default)]
    pub mount_status: MountStatus,
    /// Why the mount failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_error: Option<String>,
}

/// Acknowledgement of an attach (E50). Servers answer `{"ok": true}`, `{"id": "<sandbox>"}` or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DiskAttached {
    /// The mount was accepted (poll [`Sandbox::list_disks`] for `mount_status`).
    pub ok: bool,
    /// The sandbox id, when the server echoes it.
    pub sandbox_id: Option<String>,
}

impl<'de> Deserialize<'de> for DiskAttached {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            ok: Option<bool>,
            #[serde(default)]
            id: Option<String>,
        }
        let wire = Wire::deserialize(d)?;
        if wire.ok.is_none() && wire.id.is_none() {
            return Err(serde::de::Error::custom(
                "attach answer has neither `ok` nor `id`",
            ));
        }
        Ok(DiskAttached {
            ok: wire.ok.unwrap_or(true),
            sandbox_id: wire.id,
        })
    }
}

/// Answer of a disk delete (E48).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskDeleted {
    /// True once deleted.
    #[serde(default)]
    pub deleted: bool,
}

/// Answer of a detach (E51).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskDetached {
    /// True once detached.
    #[serde(default)]
    pub detached: bool,
}

/// A disk to register (E45). The server checks access to the bucket before accepting it.
///
/// ```
/// use createos_sandbox::api::disks::DiskCreate;
/// let req = DiskCreate::s3("shared-data", "my-bucket", "https://s3.eu-west-1.amazonaws.com")
///     .region("eu-west-1")
///     .credentials("AKIAEXAMPLE", "s3cr3t");
/// assert!(req.validate().is_ok());
/// let shown = format!("{req:?}");
/// assert!(!shown.contains("s3cr3t") && !shown.contains("AKIAEXAMPLE"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiskCreate {
    /// Name: `^[a-z0-9][a-z0-9-]{0,62}$`, unique per account.
    pub name: String,
    /// Backend (`s3`).
    pub kind: DiskKind,
    /// Bucket location.
    pub config: DiskConfig,
    /// Key pair; required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<DiskCredentials>,
}

impl DiskCreate {
    /// An S3 bucket at `endpoint`.
    pub fn s3(
        name: impl Into<String>,
        bucket: impl Into<String>,
        endpoint: impl Into<String>,
    ) -> Self {
        DiskCreate {
            name: name.into(),
            kind: DiskKind::S3,
            config: DiskConfig {
                bucket: bucket.into(),
                endpoint: endpoint.into(),
                region: None,
                use_path_style: None,
            },
            credentials: None,
        }
    }

    /// Bucket region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.config.region = Some(region.into());
        self
    }

    /// Path-style addressing (MinIO and most self-hosted S3 need it).
    pub fn use_path_style(mut self, on: bool) -> Self {
        self.config.use_path_style = Some(on);
        self
    }

    /// The access key pair.
    pub fn credentials(
        mut self,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> Self {
        self.credentials = Some(DiskCredentials::new(access_key, secret_key));
        self
    }

    /// Everything checkable without asking the server.
    pub fn validate(&self) -> Result<()> {
        validate::resource_name("name", &self.name)?;
        if self.kind != DiskKind::S3 {
            return Err(Error::invalid(
                "kind",
                format!(
                    "{:?} is not supported; the only kind is \"s3\"",
                    self.kind.as_str()
                ),
            ));
        }
        if self.config.bucket.trim().is_empty() {
            return Err(Error::invalid("config.bucket", "must not be empty"));
        }
        validate_endpoint(&self.config.endpoint)?;
        if let Some(region) = &self.config.region {
            if region.trim().is_empty()
                || region.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Error::invalid(
                    "config.region",
                    format!("{region:?} is not a region name"),
                ));
            }
        }
        match &self.credentials {
            Some(c) => c.validate(),
            None => Err(Error::invalid(
                "credentials",
                "an access key and secret key are required",
            )),
        }
    }
}

/// An S3 endpoint: an absolute `http` or `https` URL with a host and no credentials in it.
fn validate_endpoint(endpoint: &str) -> Result<()> {
    let bad = |why: String| Err(Error::invalid("config.endpoint", why));
    let url = match url::Url::parse(endpoint) {
        Ok(u) => u,
        Err(e) => return bad(format!("{endpoint:?} is not a URL: {e}")),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return bad(format!("{endpoint:?} must be an http:// or https:// URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return bad(format!("{endpoint:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("must not embed credentials; pass them with `credentials`".to_string());
    }
    Ok(())
}

/// A bucket prefix: relative, no `..` segment, no NUL.
fn validate_sub_path(sub_path: &str) -> Result<()> {
    if sub_path.contains('\0') {
        return Err(Error::invalid("sub_path", "contains a NUL byte"));
    }
    if sub_path.split('/').any(|seg| seg == "..") {
        return Err(Error::invalid(
            "sub_path",
            format!("{sub_path:?} contains a '..' segment"),
        ));
    }
    Ok(())
}

impl Client {
    /// Every registered disk (E44).
    pub fn list_disks(&self) -> Paginated<DiskView> {
        Paginated::new(self.transport.clone(), || Call::new(&ep::LIST_DISKS))
    }

    /// Register a bucket as a disk (E45). Costs credit (402 without); a bucket the server cannot
    /// reach with the credentials is refused (400).
    ///
    /// ```no_run
    /// # async fn demo(client: createos_sandbox::Client) -> createos_sandbox::Result<()> {
    /// use createos_sandbox::api::disks::DiskCreate;
    /// let disk = client
    ///     .create_disk(DiskCreate::s3("shared", "bucket", "https://minio.example:9000").use_path_style(true).credentials("ak", "sk"))
    ///     .await?;
    /// let sandbox = client.get_sandbox("sb-01J…").await?;
    /// sandbox.attach_disk(&disk.id, "/mnt/shared", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_disk(&self, request: DiskCreate) -> Result<DiskView> {
        request.validate()?;
        let call = Call::new(&ep::CREATE_DISK).json(&request)?;
        self.transport.json(call).await
    }

    /// A disk by id or name (E46).
    pub async fn get_disk(&self, id_or_name: &str) -> Result<DiskView> {
        validate::id("disk", id_or_name)?;
        self.transport
            .json(Call::new(&ep::GET_DISK).param(id_or_name))
            .await
    }

    /// Replace the credentials of a disk (E47).
    pub async fn update_disk_credentials(
        &self,
        id_or_name: &str,
        credentials: DiskCredentials,
    ) -> Result<DiskView> {
        validate::id("disk", id_or_name)?;
        credentials.validate()?;
        let call = Call::new(&ep::UPDATE_DISK_CREDENTIALS)
            .param(id_or_name)
            .json(&serde_json::json!({ "credentials": credentials }))?;
        self.transport.json(call).await
    }

    /// Delete a disk (E48); refused (409) while it is mounted anywhere. The bucket is untouched.
    pub async fn delete_disk(&self, id_or_name: &str) -> Result<DiskDeleted> {
        validate::id("disk", id_or_name)?;
        self.transport
            .json(Call::new(&ep::DELETE_DISK).param(id_or_name))
            .await
    }
}

impl Sandbox {
    /// Disks mounted in this sandbox (E49).
    pub fn list_disks(&self) -> Paginated<SandboxDisk> {
        let id = self.id().to_string();
        Paginated::new(self.client.transport.clone(), move || {
            Call::new(&ep::LIST_SANDBOX_DISKS).param(id.clone())
        })
    }

    /// Mount a disk (by id) at an absolute path, optionally only a prefix of the bucket (E50).
    /// The sandbox must be running. The mount completes in the background: poll
    /// [`Self::list_disks`] for `mount_status`.
    pub async fn attach_disk(
        &self,
        disk_id: &str,
        mount_path: &str,
        sub_path: Option<&str>,
    ) -> Result<DiskAttached> {
        validate::id("disk_id", disk_id)?;
        validate::guest_path("mount_path", mount_path)?;
        if let Some(sub) = sub_path {
            validate_sub_path(sub)?;
        }
        let mut body = serde_json::json!({ "disk_id": disk_id, "mount_path": mount_path });
        if let Some(sub) = sub_path {
            body["sub_path"] = sub.into();
        }
        let call = Call::new(&ep::ATTACH_DISK).param(self.id()).json(&body)?;
        self.client.transport.json(call).await
    }

    /// Unmount the disk `disk_id` (an id, not a name) from `mount_path` (E51).
    pub async fn detach_disk(&self, disk_id: &str, mount_path: &str) -> Result<DiskDetached> {
        validate::id("disk_id", disk_id)?;
        validate::guest_path("mount_path", mount_path)?;
        let call = Call::new(&ep::DETACH_DISK)
            .param(self.id())
            .param(disk_id)
            .query("mount_path", mount_path);
        self.client.transport.json(call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> DiskCreate {
        DiskCreate::s3("data-1", "bucket", "https://s3.example.com")
            .credentials("AKIAEXAMPLE", "s3cr3t-value")
    }

    #[test]
    fn create_validation() {
        assert!(good().validate().is_ok());
        let mut bad_name = good();
        bad_name.name = "Data".into();
        assert!(bad_name.validate().is_err());
        assert!(
            DiskCreate::s3("d", "b", "https://x").validate().is_err(),
            "credentials required"
        );
        for endpoint in ["s3.example.com", "ftp://x", "https://user:pw@x", "http://"] {
            let mut r = good();
            r.config.endpoint = endpoint.into();
            assert!(r.validate().is_err(), "{endpoint}");
        }
        let mut empty_bucket = good();
        empty_bucket.config.bucket = " ".into();
        assert!(empty_bucket.validate().is_err());
        assert!(good().credentials("", "x").validate().is_err());
    }

    #[test]
    fn credentials_never_in_debug_but_on_the_wire() {
        let req = good();
        let debug = format!("{req:?}");
        assert!(
            !debug.contains("s3cr3t-value") && !debug.contains("AKIAEXAMPLE"),
            "{debug}"
        );
        let wire = serde_json::to_value(&req).unwrap();
        assert_eq!(wire["credentials"]["secret_key"], "s3cr3t-value");
        assert_eq!(wire["kind"], "s3");
        assert!(wire["config"].get("region").is_none());
    }

    #[test]
    fn attach_answer_shapes() {
        let a: DiskAttached = serde_json::from_str(r#"{"ok":true}"#).unwrap();
        assert!(a.ok && a.sandbox_id.is_none());
        let a: DiskAttached = serde_json::from_str(r#"{"id":"sb-1"}"#).unwrap();
        assert!(a.ok);
        assert_eq!(a.sandbox_id.as_deref(), Some("sb-1"));
        assert!(serde_json::from_str::<DiskAttached>(r#"{}"#).is_err());
    }
}
