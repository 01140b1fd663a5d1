//! Account resources: networks, disks, templates, access tokens, devices, usage.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use createos_sandbox::api::disks::{DiskCreate, DiskCredentials};
use createos_sandbox::api::metrics::TimeseriesQuery;

use super::output::table;
use super::{resolve, Ctx};

#[derive(Debug, Subcommand)]
pub enum NetworkCmd {
    /// List networks.
    Ls,
    /// Create a network.
    Create { name: String },
    /// Show a network and its members.
    Get { network: String },
    /// Delete a network (it must have no members).
    Rm { network: String },
    /// Attach a sandbox to a network.
    Attach { sandbox: String, network: String },
    /// Detach a sandbox from a network.
    Detach { sandbox: String, network: String },
}

pub async fn network(ctx: &Ctx, cmd: NetworkCmd) -> Result<()> {
    let c = &ctx.client;
    match cmd {
        NetworkCmd::Ls => {
            let nets: Vec<_> = c.list_networks().try_collect().await?;
            ctx.out.show(&nets, || {
                table(
                    &["ID", "NAME", "MEMBERS"],
                    nets.iter()
                        .map(|n| {
                            vec![
                                n.id.clone(),
                                n.name.clone(),
                                n.member_count.unwrap_or(0).to_string(),
                            ]
                        })
                        .collect(),
                )
            });
        }
        NetworkCmd::Create { name } => {
            let n = c.create_network(&name).await?;
            ctx.out.show(&n, || format!("{} {}", n.id, n.name));
        }
        NetworkCmd::Get { network } => {
            let n = c.get_network(&network).await?;
            ctx.out.show(&n, || {
                let members = n.members.clone().unwrap_or_default();
                let mut text = format!("{} {}\n", n.id, n.name);
                text.push_str(&table(
                    &["SANDBOX", "NAME", "STATUS", "IP"],
                    members
                        .iter()
                        .map(|m| {
                            vec![
                                m.sandbox_id.clone(),
                                m.name.clone().unwrap_or_default(),
                                m.status.to_string(),
                                m.ip.clone().unwrap_or_default(),
                            ]
                        })
                        .collect(),
                ));
                text
            });
        }
        NetworkCmd::Rm { network } => {
            let ok = c.delete_network(&network).await?;
            ctx.out.show(&ok, || format!("deleted {network}"));
        }
        NetworkCmd::Attach { sandbox, network } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let ok = sb.attach_network(&network).await?;
            ctx.out
                .show(&ok, || format!("{} joined {network}", sb.id()));
        }
        NetworkCmd::Detach { sandbox, network } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let ok = sb.detach_network(&network).await?;
            ctx.out.show(&ok, || format!("{} left {network}", sb.id()));
        }
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum DiskCmd {
    /// List registered disks.
    Ls,
    /// Register an S3 bucket as a disk (keys from --access-key/--secret-key or
    /// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY).
    Create(DiskCreateArgs),
    /// Show a disk.
    Get { disk: String },
    /// Rotate a disk's credentials.
    Rotate(DiskKeys),
    /// Delete a disk (it must not be attached).
    Rm { disk: String },
    /// Mount a disk into a running sandbox.
    Attach {
        sandbox: String,
        disk: String,
        /// Absolute mount path in the sandbox.
        mount_path: String,
        /// Prefix inside the bucket.
        #[arg(long)]
        sub_path: Option<String>,
    },
    /// Unmount a disk from a sandbox.
    Detach {
        sandbox: String,
        disk: String,
        mount_path: String,
    },
    /// Disks mounted in a sandbox.
    Mounts { sandbox: String },
}

#[derive(Debug, Args)]
pub struct DiskKeys {
    /// Disk id or name.
    pub disk: String,
    #[arg(long, env = "AWS_ACCESS_KEY_ID", hide_env_values = true)]
    pub access_key: String,
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_key: String,
}

#[derive(Debug, Args)]
pub struct DiskCreateArgs {
    /// Name (a-z, 0-9, '-').
    pub name: String,
    #[arg(long)]
    pub bucket: String,
    /// S3 endpoint URL.
    #[arg(long)]
    pub endpoint: String,
    #[arg(long)]
    pub region: Option<String>,
    #[arg(long)]
    pub path_style: bool,
    #[arg(long, env = "AWS_ACCESS_KEY_ID", hide_env_values = true)]
    pub access_key: String,
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_key: String,
}

pub async fn disk(ctx: &Ctx, cmd: DiskCmd) -> Result<()> {
    let c = &ctx.client;
    match cmd {
        DiskCmd::Ls => {
            let disks: Vec<_> = c.list_disks().try_collect().await?;
            ctx.out.show(&disks, || {
                table(
                    &["ID", "NAME", "BUCKET", "ENDPOINT"],
                    disks
                        .iter()
                        .map(|d| {
                            vec![
                                d.id.clone(),
                                d.name.clone(),
                                d.config.bucket.clone(),
                                d.config.endpoint.clone(),
                            ]
                        })
                        .collect(),
                )
            });
        }
        DiskCmd::Create(a) => {
            let mut req = DiskCreate::s3(&a.name, &a.bucket, &a.endpoint)
                .credentials(a.access_key, a.secret_key);
            if let Some(r) = a.region {
                req = req.region(r);
            }
            if a.path_style {
                req = req.use_path_style(true);
            }
            let d = c.create_disk(req).await?;
            ctx.out.show(&d, || format!("{} {}", d.id, d.name));
        }
        DiskCmd::Get { disk } => {
            let d = c.get_disk(&disk).await?;
            ctx.out.value(&d);
        }
        DiskCmd::Rotate(k) => {
            let d = c
                .update_disk_credentials(&k.disk, DiskCredentials::new(k.access_key, k.secret_key))
                .await?;
            ctx.out
                .show(&d, || format!("rotated the credentials of {}", d.id));
        }
        DiskCmd::Rm { disk } => {
            let out = c.delete_disk(&disk).await?;
            ctx.out.show(&out, || format!("deleted {disk}"));
        }
        DiskCmd::Attach {
            sandbox,
            disk,
            mount_path,
            sub_path,
        } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let disk_id = c.get_disk(&disk).await?.id;
            let out = sb
                .attach_disk(&disk_id, &mount_path, sub_path.as_deref())
                .await?;
            ctx.out.show(&out, || {
                format!("mounting {disk_id} at {}:{mount_path}", sb.id())
            });
        }
        DiskCmd::Detach {
            sandbox,
            disk,
            mount_path,
        } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let disk_id = c.get_disk(&disk).await?.id;
            let out = sb.detach_disk(&disk_id, &mount_path).await?;
            ctx.out.show(&out, || {
                format!("unmounted {disk_id} from {}:{mount_path}", sb.id())
            });
        }
        DiskCmd::Mounts { sandbox } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let mounts: Vec<_> = sb.list_disks().try_collect().await?;
            ctx.out.show(&mounts, || {
                table(
                    &["DISK", "NAME", "PATH", "STATUS"],
                    mounts
                        .iter()
                        .map(|m| {
                            vec![
                                m.disk_id.clone(),
                                m.name.clone(),
                                m.mount_path.clone(),
                                format!("{:?}", m.mount_status),
                            ]
                        })
                        .collect(),
                )
            });
        }
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum TemplateCmd {
    /// List templates.
    Ls,
    /// Submit a build from a Dockerfile.
    Create {
        name: String,
        /// The Dockerfile.
        #[arg(long, short = 'f')]
        file: PathBuf,
        /// Base image to build on.
        #[arg(long)]
        base: Option<String>,
        /// Follow the build log until it finishes.
        #[arg(long)]
        follow: bool,
    },
    /// Show a template.
    Get {
        template: String,
        /// Include the Dockerfile.
        #[arg(long)]
        dockerfile: bool,
    },
    /// Delete a template.
    Rm { template: String },
    /// Build logs.
    Logs {
        template: String,
        #[arg(long)]
        attempt: Option<u32>,
        /// Stream until the build finishes.
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

pub async fn template(ctx: &Ctx, cmd: TemplateCmd) -> Result<()> {
    let c = &ctx.client;
    match cmd {
        TemplateCmd::Ls => {
            let items: Vec<_> = c.list_templates().try_collect().await?;
            ctx.out.show(&items, || {
                table(
                    &["ID", "NAME", "STATUS", "BASE", "SIZE"],
                    items
                        .iter()
                        .map(|t| {
                            vec![
                                t.id.clone(),
                                t.name.clone(),
                                t.status.to_string(),
                                t.base.clone().unwrap_or_default(),
                                t.ext4_size_bytes.to_string(),
                            ]
                        })
                        .collect(),
                )
            });
        }
        TemplateCmd::Create {
            name,
            file,
            base,
            follow,
        } => {
            let dockerfile = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let t = c
                .create_template(&name, &dockerfile, base.as_deref())
                .await?;
            if follow {
                follow_logs(ctx, &t.id, None).await?;
                let done = c.get_template(&t.id, false).await?;
                ctx.out.show(&done, || {
                    format!("{} {} {}", done.id, done.name, done.status)
                });
            } else {
                ctx.out
                    .show(&t, || format!("{} {} {}", t.id, t.name, t.status));
            }
        }
        TemplateCmd::Get {
            template,
            dockerfile,
        } => {
            let t = c.get_template(&template, dockerfile).await?;
            ctx.out.value(&t);
        }
        TemplateCmd::Rm { template } => {
            let ok = c.delete_template(&template).await?;
            ctx.out.show(&ok, || format!("deleted {template}"));
        }
        TemplateCmd::Logs {
            template,
            attempt,
            follow,
        } => {
            let id = c.get_template(&template, false).await?.id;
            if follow {
                follow_logs(ctx, &id, attempt).await?;
            } else {
                let text = c.template_logs(&id, attempt).await?;
                ctx.out
                    .show(&json!({ "template": id, "logs": text }), || text.clone());
            }
        }
    }
    Ok(())
}

async fn follow_logs(ctx: &Ctx, id: &str, attempt: Option<u32>) -> Result<()> {
    let mut events = Box::pin(ctx.client.follow_template_logs(id, attempt));
    while let Some(event) = events.next().await {
        let event = event?;
        if ctx.out.json {
            println!("{}", serde_json::to_string(&event)?);
        } else if let Some(line) = &event.line {
            eprintln!("{line}");
        }
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Mint the sandbox's access token (printed once).
    Create { sandbox: String },
    /// Show whether a token exists (never the token).
    Get { sandbox: String },
    /// Replace the token (printed once).
    Rotate { sandbox: String },
    /// Revoke the token.
    Revoke { sandbox: String },
}

pub async fn token(ctx: &Ctx, cmd: TokenCmd) -> Result<()> {
    let c = &ctx.client;
    match cmd {
        TokenCmd::Create { sandbox } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let created = sb.create_access_token().await?;
            print_token(ctx, sb.id(), &created);
        }
        TokenCmd::Rotate { sandbox } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let created = sb.rotate_access_token().await?;
            print_token(ctx, sb.id(), &created);
        }
        TokenCmd::Get { sandbox } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let meta = sb.access_token().await?;
            ctx.out.value(&meta);
        }
        TokenCmd::Revoke { sandbox } => {
            let sb = resolve::sandbox(c, &sandbox).await?;
            let meta = sb.revoke_access_token().await?;
            ctx.out
                .show(&meta, || format!("revoked the token of {}", sb.id()));
        }
    }
    Ok(())
}

fn print_token(
    ctx: &Ctx,
    sandbox: &str,
    created: &createos_sandbox::api::tokens::AccessTokenCreated,
) {
    // The one place a token is shown: the user asked for it and cannot get it again.
    let doc = json!({
        "sandbox": sandbox,
        "token": created.expose(),
        "enabled": created.enabled,
        "created_at": created.created_at,
        "rotated_at": created.rotated_at,
    });
    ctx.out.show(&doc, || {
        format!(
            "{}\n(store it now: it is not shown again)",
            created.expose()
        )
    });
}

#[derive(Debug, Subcommand)]
pub enum DeviceCmd {
    /// List devices.
    Ls,
    /// Register a device by its WireGuard public key.
    Register {
        name: String,
        /// Base64 Curve25519 public key.
        #[arg(long)]
        pubkey: String,
        #[arg(long)]
        hostname: Option<String>,
        #[arg(long)]
        os: Option<String>,
    },
    /// Show a device.
    Get { device: String },
    /// Revoke a device.
    Rm { device: String },
    /// Let a device reach a network.
    Attach { device: String, network: String },
    /// Remove a device's network.
    Detach { device: String, network: String },
    /// Networks a device reaches.
    Networks { device: String },
    /// VPN sessions.
    #[command(subcommand)]
    Session(SessionCmd),
}

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Open a session; prints the wg-quick config (add your PrivateKey).
    Open { device: String },
    /// Extend a session.
    Renew { device: String, session: String },
    /// Close a session.
    Close { device: String, session: String },
}

pub async fn device(ctx: &Ctx, cmd: DeviceCmd) -> Result<()> {
    let c = &ctx.client;
    match cmd {
        DeviceCmd::Ls => {
            let devices: Vec<_> = c.list_devices().try_collect().await?;
            ctx.out.show(&devices, || {
                table(
                    &["ID", "NAME", "VPN IP", "HOST"],
                    devices
                        .iter()
                        .map(|d| {
                            vec![
                                d.id.clone(),
                                d.name.clone(),
                                d.client_ip.clone(),
                                d.hostname.clone().unwrap_or_default(),
                            ]
                        })
                        .collect(),
                )
            });
        }
        DeviceCmd::Register {
            name,
            pubkey,
            hostname,
            os,
        } => {
            let d = c
                .register_device(&name, &pubkey, hostname.as_deref(), os.as_deref())
                .await?;
            ctx.out
                .show(&d, || format!("{} {} {}", d.id, d.name, d.client_ip));
        }
        DeviceCmd::Get { device } => ctx.out.value(&c.get_device(&device).await?),
        DeviceCmd::Rm { device } => {
            c.revoke_device(&device).await?;
            ctx.out.show(&json!({ "id": device, "revoked": true }), || {
                format!("revoked {device}")
            });
        }
        DeviceCmd::Attach { device, network } => {
            c.attach_device_network(&device, &network).await?;
            ctx.out.show(
                &json!({ "device": device, "network": network, "attached": true }),
                || format!("{device} can reach {network}"),
            );
        }
        DeviceCmd::Detach { device, network } => {
            c.detach_device_network(&device, &network).await?;
            ctx.out.show(
                &json!({ "device": device, "network": network, "attached": false }),
                || format!("{device} no longer reaches {network}"),
            );
        }
        DeviceCmd::Networks { device } => {
            let nets = c.list_device_networks(&device).await?;
            ctx.out.show(&nets, || {
                table(
                    &["NETWORK", "NAME", "SINCE"],
                    nets.iter()
                        .map(|n| {
                            vec![
                                n.network_id.clone(),
                                n.network_name.clone(),
                                n.attached_at.clone().unwrap_or_default(),
                            ]
                        })
                        .collect(),
                )
            });
        }
        DeviceCmd::Session(SessionCmd::Open { device }) => {
            let s = c.open_device_session(&device).await?;
            ctx.out.show(&s, || {
                format!(
                    "# session {} until {}\n{}",
                    s.session_id, s.expires_at, s.client_config
                )
            });
        }
        DeviceCmd::Session(SessionCmd::Renew { device, session }) => {
            let r = c.renew_device_session(&device, &session).await?;
            ctx.out.show(&r, || {
                format!("renewed until {}", r.expires_at.clone().unwrap_or_default())
            });
        }
        DeviceCmd::Session(SessionCmd::Close { device, session }) => {
            c.close_device_session(&device, &session).await?;
            ctx.out
                .show(&json!({ "session": session, "closed": true }), || {
                    format!("closed {session}")
                });
        }
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Show a time series of this metric (cpu_seconds, sandboxes_running, exec_total).
    #[arg(long)]
    pub series: Option<String>,
    /// Window of the series, in seconds back from now.
    #[arg(long, default_value_t = 3600)]
    pub window: u64,
    /// Step of the series, in seconds.
    #[arg(long, default_value_t = 60)]
    pub step: u32,
}

pub async fn usage(ctx: &Ctx, args: UsageArgs) -> Result<()> {
    match args.series {
        None => ctx.out.value(&ctx.client.usage_metrics().await?),
        Some(metric) => {
            let q = TimeseriesQuery::new()
                .metric(metric.as_str().into())
                .last(std::time::Duration::from_secs(args.window))
                .step_seconds(args.step);
            ctx.out.value(&ctx.client.usage_timeseries(q).await?);
        }
    }
    Ok(())
}
