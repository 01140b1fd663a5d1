//! Shared by the examples: run a piece of work in a fresh sandbox and destroy the sandbox
//! afterwards whatever happens — success, error, panic or Ctrl-C.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use createos_sandbox::{Client, CreateSandbox, Sandbox};
use futures::FutureExt;

/// Error type of the examples.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Create a sandbox from `request`, run `work` with it, then destroy it.
pub async fn with_sandbox<F, Fut>(
    client: &Client,
    request: CreateSandbox,
    work: F,
) -> Result<(), BoxError>
where
    F: FnOnce(Sandbox) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let sandbox = client.create_sandbox(request).await?;
    println!("created sandbox {}", sandbox.id());
    let outcome = tokio::select! {
        finished = AssertUnwindSafe(work(sandbox.clone())).catch_unwind() => match finished {
            Ok(result) => result,
            Err(_) => Err("the example panicked".into()),
        },
        _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
    };
    match sandbox.destroy().await {
        Ok(gone) => println!("destroyed sandbox {} ({})", gone.id, gone.status),
        Err(err) => eprintln!("could not destroy sandbox {}: {err}", sandbox.id()),
    }
    outcome
}
