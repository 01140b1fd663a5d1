//! Stream a command's output as it is produced.
//!
//! ```text
//! CREATEOS_SANDBOX_BASE_URL=… CREATEOS_API_KEY=… cargo run --example streaming_exec
//! ```

mod support;

use std::time::Duration;

use createos_sandbox::api::exec::{ExecEvent, ExecRequest};
use createos_sandbox::{Client, CreateSandbox};
use futures::StreamExt;
use support::{with_sandbox, BoxError};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let client = Client::from_env()?;
    with_sandbox(
        &client,
        CreateSandbox::new("s-1vcpu-1gb"),
        |sandbox| async move {
            let script =
                "for i in 1 2 3; do echo tick $i; sleep 0.2; done; echo finished >&2; exit 2";
            let request = ExecRequest::shell(script).timeout(Duration::from_secs(60));
            let mut events = sandbox.exec_stream(request).await?;
            if events.fell_back() {
                println!("(this server does not stream exec; showing the buffered result)");
            }
            while let Some(event) = events.next().await {
                match event? {
                    ExecEvent::Stdout(text) => print!("stdout | {text}"),
                    ExecEvent::Stderr(text) => print!("stderr | {text}"),
                    ExecEvent::Error(message) => println!("error  | {message}"),
                    ExecEvent::Exit(code) => println!("exit code {code}"),
                }
            }

            // The same, collected into one result.
            let out = sandbox
                .exec_stream(ExecRequest::shell("echo $((1 + 2 + 3 + 4 + 5))"))
                .await?
                .collect_output()
                .await?;
            println!("collected: {:?} exit {}", out.stdout.trim(), out.exit_code);
            Ok(())
        },
    )
    .await
}
