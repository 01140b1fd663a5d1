//! Resource APIs of the client (catalog, networks, disks, templates, access tokens, metrics,
//! devices) against the emulator over real sockets. Each test starts its own emulator, asserts the
//! answer's fields, and checks that input refused client-side never reaches the server.

mod common;

#[path = "api_resources/catalog.rs"]
mod catalog;
#[path = "api_resources/devices.rs"]
mod devices;
#[path = "api_resources/disks.rs"]
mod disks;
#[path = "api_resources/metrics.rs"]
mod metrics;
#[path = "api_resources/networks.rs"]
mod networks;
#[path = "api_resources/templates.rs"]
mod templates;
#[path = "api_resources/tokens.rs"]
mod tokens;

use base64::Engine;
use createos_sandbox::{CreateSandbox, Error, Sandbox};

/// A running sandbox of the env's main tenant.
pub async fn running_sandbox(env: &common::Env) -> Sandbox {
    env.client
        .create_sandbox(CreateSandbox::new("s-1vcpu-1gb"))
        .await
        .expect("sandbox created")
}

/// A fresh WireGuard-shaped public key (base64 of 32 random bytes).
pub fn wg_pubkey() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The field→message map of an API error (empty for other errors).
pub fn fields(err: &Error) -> std::collections::BTreeMap<String, String> {
    err.api().map(|a| a.fields.clone()).unwrap_or_default()
}

/// Assert that `err` was raised client-side for `field`.
#[track_caller]
pub fn assert_invalid(err: &Error, field: &str) {
    match err {
        Error::InvalidInput { field: f, .. } => assert_eq!(f, field, "{err}"),
        other => panic!("expected InvalidInput({field}), got {other:?}"),
    }
}
