//! Properties of the crate as a building block: cheap `Send + Sync` clients, `Send` futures,
//! credentials that never leave the base URL's origin and never show in `Debug`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use createos_sandbox::{Client, CreateSandbox, Error, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn assert_send<T: Send>(_: &T) {}
fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

#[test]
fn client_and_handles_are_send_sync_and_futures_are_send() {
    assert_send_sync_clone::<Client>();
    assert_send_sync_clone::<createos_sandbox::Sandbox>();
    let client = Client::builder()
        .base_url("http://127.0.0.1:9")
        .api_key("k")
        .build()
        .unwrap();
    let sb = client.sandbox("sb-1").unwrap();
    // Futures are never polled here: this only has to type-check.
    assert_send(&client.whoami());
    assert_send(&client.create_sandbox(CreateSandbox::new("s-1vcpu-1gb")));
    assert_send(&client.get_sandbox("sb-1"));
    assert_send(&sb.exec("true", Vec::<String>::new()));
    assert_send(&sb.pause_and_wait());
    assert_send(&sb.destroy());
    assert_send(&client.list_sandboxes(Default::default()));
}

#[test]
fn debug_output_never_shows_the_key() {
    let client = Client::builder()
        .base_url("http://127.0.0.1:9")
        .api_key("skp_supersecret")
        .build()
        .unwrap();
    let text = format!("{client:?} {:?}", client.credentials());
    assert!(!text.contains("supersecret"), "{text}");
}

/// A one-shot HTTP server answering every request with `reply`, counting connections.
async fn server(reply: String) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, hits)
}

#[tokio::test]
async fn redirects_to_another_origin_are_not_followed() {
    let body = r#"{"status":"success","data":{"user_id":"evil","stats":{}}}"#;
    let (elsewhere, elsewhere_hits) =
        server(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())).await;
    let (origin, _) = server(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{elsewhere}/v1/whoami\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    ))
    .await;
    let client = Client::builder()
        .base_url(format!("http://{origin}"))
        .api_key("skp_secret")
        .retry(RetryPolicy::none())
        .env(|_| None)
        .build()
        .unwrap();
    let err = client.whoami().await.unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err:?}");
    assert!(err.to_string().contains("redirect"), "{err}");
    assert_eq!(
        elsewhere_hits.load(Ordering::SeqCst),
        0,
        "the credential followed the redirect"
    );
}
