//! `sandbox_disk_*`: S3-backed disks. Credentials are never tool arguments: the call names
//! two environment variables of the server process, whose values are read here.

use std::sync::Arc;

use super::{named, to_json, ToolOutput};
use crate::tools::args::Args;
use crate::tools::runtime::Runtime;
use crate::tools::ToolError;
use createos_sandbox::api::disks::DiskCreate;
use createos_sandbox::guest::Resident;

/// `^[A-Z_][A-Z0-9_]*$`.
fn env_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The value of server environment variable `name` (argument `field`); the value never
/// appears in an error.
fn secret_from_env(
    field: &str,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ToolError> {
    if !env_name_ok(name) {
        return Err(ToolError::InvalidArgs(format!(
            "{field} must be an environment variable name like S3_ACCESS_KEY, got {name:?}"
        )));
    }
    env(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        ToolError::InvalidArgs(format!("{field}: the environment variable {name} is not set for the tool server; set it there and restart it"))
    })
}

pub(super) async fn create(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let env = |k: &str| std::env::var(k).ok();
    let access = secret_from_env("access_key_env", args.str("access_key_env")?, &env)?;
    let secret = secret_from_env("secret_key_env", args.str("secret_key_env")?, &env)?;
    let mut request = DiskCreate::s3(
        args.str("name")?,
        args.str("bucket")?,
        args.str("endpoint")?,
    )
    .credentials(access, secret);
    if let Some(region) = args.opt_str("region") {
        request = request.region(region);
    }
    if let Some(on) = args.opt_bool("path_style") {
        request = request.use_path_style(on);
    }
    Ok(ToolOutput::json(to_json(
        rt.client().create_disk(request).await?,
    )?))
}

pub(super) async fn list(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().list_disks().collect_all().await?,
    )?))
}

pub(super) async fn show(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().get_disk(args.str("name")?).await?,
    )?))
}

pub(super) async fn delete(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().delete_disk(args.str("name")?).await?,
    )?))
}

/// Attach or detach; a disk name is resolved to its id first (some servers ignore names here).
pub(super) async fn attach(
    rt: &Arc<Runtime>,
    args: &Args,
    attach: bool,
) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let disk = rt.client().get_disk(args.str("disk")?).await?;
    let mount = args.str("mount_path")?;
    let answer = if attach {
        to_json(sandbox.attach_disk(&disk.id, mount, None).await?)?
    } else {
        to_json(sandbox.detach_disk(&disk.id, mount).await?)?
    };
    // The resident helper may see the mounts as they were when it started (the emulator gives
    // each process its own view): the next command starts a new one.
    let resident = Resident::of(&sandbox);
    resident.shutdown().await;
    Resident::forget(&sandbox);
    Ok(ToolOutput::json(answer).with("sandboxId", sandbox.id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_named_variables_and_never_leak() {
        let env = |k: &str| (k == "MY_KEY").then(|| "topsecret".to_string());
        assert_eq!(secret_from_env("f", "MY_KEY", &env).unwrap(), "topsecret");
        for bad in ["my_key", "1KEY", "A-B", ""] {
            assert!(secret_from_env("f", bad, &env).is_err(), "{bad}");
        }
        let missing = secret_from_env("f", "OTHER", &env).unwrap_err().to_string();
        assert!(missing.contains("OTHER") && !missing.contains("topsecret"));
    }
}
