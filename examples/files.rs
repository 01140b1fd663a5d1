//! Upload and download files: text, a local file streamed from disk with progress, and a
//! download saved atomically to disk.
//!
//! ```text
//! CREATEOS_SANDBOX_BASE_URL=… CREATEOS_API_KEY=… cargo run --example files
//! ```

mod support;

use createos_sandbox::api::exec::ExecRequest;
use createos_sandbox::api::files::{UploadBody, UploadOptions};
use createos_sandbox::{Client, CreateSandbox};
use support::{with_sandbox, BoxError};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let client = Client::from_env()?;
    let workdir = tempfile::tempdir()?;
    with_sandbox(
        &client,
        CreateSandbox::new("s-1vcpu-1gb"),
        |sandbox| async move {
            // Small text files.
            sandbox.write("/root/hello.txt", "hello, sandbox\n").await?;
            let text = sandbox.read_to_string("/root/hello.txt").await?;
            println!("read back: {:?}", text.trim());

            // A local file, streamed from disk (never loaded whole), with progress.
            let local = workdir.path().join("payload.bin");
            let payload: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
            std::fs::write(&local, &payload)?;
            let options = UploadOptions::new().progress(|done, total| {
                if Some(done) == total {
                    println!("upload progress: {done}/{} bytes", total.unwrap_or(0));
                }
            });
            let up = sandbox
                .upload_with("/root/data/payload.bin", UploadBody::file(&local), options)
                .await?;
            println!("uploaded {} bytes to {}", up.bytes, up.path);

            // Work on it in the sandbox.
            let out = sandbox
                .exec_with(ExecRequest::shell("wc -c < \"$HOME/data/payload.bin\""))
                .await?;
            println!("size seen by the sandbox: {}", out.stdout.trim());

            // Download into a local file; it appears only once complete.
            let target = workdir.path().join("copy.bin");
            let written = sandbox
                .download("/root/data/payload.bin")
                .await?
                .save_to(&target)
                .await?;
            let same = std::fs::read(&target)? == payload;
            println!("downloaded {written} bytes, identical: {same}");
            if !same {
                return Err("downloaded content differs".into());
            }
            Ok(())
        },
    )
    .await
}
