//! Create a sandbox, run a few commands in it, destroy it.
//!
//! ```text
//! CREATEOS_API_KEY=skp_… cargo run --example create_exec_destroy
//! # or against the local emulator:
//! CREATEOS_SANDBOX_BASE_URL=http://127.0.0.1:PORT CREATEOS_API_KEY=KEY cargo run --example create_exec_destroy
//! ```

mod support;

use createos_sandbox::api::exec::ExecRequest;
use createos_sandbox::{Client, CreateSandbox};
use support::{with_sandbox, BoxError};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let client = Client::from_env()?;
    println!("control plane: {}", client.base_url());
    let request = CreateSandbox::new("s-1vcpu-1gb").env("GREETING", "hello from the sandbox");
    with_sandbox(&client, request, |sandbox| async move {
        // A program with arguments: no shell is involved.
        let out = sandbox.exec("uname", ["-s"]).await?;
        println!(
            "uname -s -> {} (exit {}, {:.1} ms)",
            out.stdout.trim(),
            out.exit_code,
            out.exec_ms
        );

        // Variables declared at create reach every command.
        let out = sandbox.exec("printenv", ["GREETING"]).await?;
        println!("GREETING -> {}", out.stdout.trim());

        // Shell syntax needs a shell; a failing command is still a successful call.
        let out = sandbox
            .exec_with(ExecRequest::shell(
                "echo to-stdout; echo to-stderr >&2; exit 3",
            ))
            .await?;
        println!(
            "script -> stdout {:?}, stderr {:?}, exit {}",
            out.stdout.trim(),
            out.stderr.trim(),
            out.exit_code
        );
        if out.exit_code != 3 {
            return Err(format!("unexpected exit code {}", out.exit_code).into());
        }
        Ok(())
    })
    .await
}
