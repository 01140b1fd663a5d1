//! `cos whoami`, `cos shapes`, `cos images`.

use anyhow::Result;
use futures::TryStreamExt;

use super::output::table;
use super::Ctx;

pub async fn whoami(ctx: &Ctx) -> Result<()> {
    let me = ctx.client.whoami().await?;
    ctx.out.show(&me, || {
        format!(
            "user      {}\nrunning   {}\npaused    {}\nother     {}\ntotal     {}\nendpoint  {}",
            me.user_id,
            me.stats.running,
            me.stats.paused,
            me.stats.other,
            me.stats.total,
            ctx.client.base_url()
        )
    });
    Ok(())
}

pub async fn shapes(ctx: &Ctx) -> Result<()> {
    let shapes: Vec<_> = ctx.client.list_shapes().try_collect().await?;
    ctx.out.show(&shapes, || {
        table(
            &["SHAPE", "VCPU", "MEMORY", "DISK"],
            shapes
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        s.vcpu.to_string(),
                        format!("{} MiB", s.mem_mib),
                        format!("{} MiB", s.default_disk_mib),
                    ]
                })
                .collect(),
        )
    });
    Ok(())
}

pub async fn images(ctx: &Ctx) -> Result<()> {
    let catalog = ctx.client.rootfs().await?;
    ctx.out.show(&catalog, || {
        let rows = catalog
            .rootfs
            .iter()
            .map(|name| {
                let entry = catalog.entry(name);
                let mut note = entry
                    .and_then(|e| e.description.clone())
                    .unwrap_or_default();
                if entry.is_some_and(|e| e.deprecated) {
                    let succ = entry.and_then(|e| e.successor.clone()).unwrap_or_default();
                    note = format!(
                        "deprecated{}{}",
                        if succ.is_empty() { "" } else { ", use " },
                        succ
                    );
                }
                let default = if *name == catalog.default { "*" } else { "" };
                vec![name.clone(), default.to_string(), note]
            })
            .collect();
        table(&["IMAGE", "DEFAULT", "NOTES"], rows)
    });
    Ok(())
}

/// The shape catalog, to refuse an unknown shape before anything is created.
pub async fn check_shape(ctx: &Ctx, shape: &str) -> Result<()> {
    createos_sandbox::validate::shape("shape", shape)?;
    let shapes: Vec<_> = ctx.client.list_shapes().try_collect().await?;
    if shapes.iter().any(|s| s.id == shape) {
        return Ok(());
    }
    let known: Vec<_> = shapes.iter().map(|s| s.id.as_str()).collect();
    Err(createos_sandbox::Error::invalid(
        "shape",
        format!("unknown shape {shape:?}; available: {}", known.join(", ")),
    )
    .into())
}
