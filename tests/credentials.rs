//! Credential precedence, `.oauth` refresh (in-process and across processes) and redaction,
//! against a temporary home directory and a token endpoint served on 127.0.0.1.
//! The process environment is never read or changed: every Resolver gets its own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use createos_sandbox::auth::{CredentialKind, CredentialSource, Credentials, Resolver, Secret};
use createos_sandbox::error::Error;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CLIENT_ID: &str = "test-client-id";
const CHILD_HOME_VAR: &str = "CREATEOS_AUTH_TEST_CHILD_HOME";
const CHILD_SERVER_VAR: &str = "CREATEOS_AUTH_TEST_CHILD_SERVER";
const CHILD_TEST: &str = "cross_process_child_role";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

// ---------- fixtures ----------

fn home_with(oauth: Option<&str>, token: Option<&str>) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".createos");
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(text) = oauth {
        std::fs::write(dir.join(".oauth"), text).unwrap();
    }
    if let Some(text) = token {
        std::fs::write(dir.join(".token"), text).unwrap();
    }
    home
}

fn session(access: &str, refresh: &str, expires_at: i64, endpoint: &str) -> String {
    json!({"access_token": access, "refresh_token": refresh, "expires_at": expires_at,
           "token_endpoint": endpoint, "user_note": {"keep": true}})
    .to_string()
}

fn resolver(home: &Path, vars: &[(&str, &str)]) -> Resolver {
    let mut env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.entry("CREATEOS_OAUTH_CLIENT_ID".into())
        .or_insert_with(|| CLIENT_ID.into());
    Resolver::new()
        .home(home.to_path_buf())
        .env(move |name| env.get(name).cloned())
}

fn read_oauth(home: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.join(".createos/.oauth")).unwrap()).unwrap()
}

async fn header(creds: &Credentials) -> (String, String) {
    let (name, value) = creds.header(&reqwest::Client::new()).await.unwrap();
    assert!(
        value.is_sensitive(),
        "credential headers must be marked sensitive"
    );
    (name.as_str().to_owned(), value.to_str().unwrap().to_owned())
}

// ---------- a token endpoint on 127.0.0.1 ----------

#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Grant { rotate: bool },
    Refuse,
    Huge,
}

struct TokenServer {
    url: String,
    requests: Arc<AtomicUsize>,
    /// (valid refresh token, generation) — an old refresh token is refused once rotated.
    state: Arc<Mutex<(String, u32)>>,
}

impl TokenServer {
    async fn start(first_refresh_token: &str, answer: Answer, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(Mutex::new((first_refresh_token.to_owned(), 0)));
        let (count, shared) = (requests.clone(), state.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (count, shared) = (count.clone(), shared.clone());
                tokio::spawn(serve_one(stream, count, shared, answer, delay));
            }
        });
        TokenServer {
            url,
            requests,
            state,
        }
    }
    fn endpoint(&self) -> String {
        format!("{}/oauth2/token", self.url)
    }
    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn serve_one(
    mut stream: tokio::net::TcpStream,
    count: Arc<AtomicUsize>,
    state: Arc<Mutex<(String, u32)>>,
    answer: Answer,
    delay: Duration,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    count.fetch_add(1, Ordering::SeqCst);
    let form: HashMap<String, String> = url::form_urlencoded::parse(&buf[head_end..])
        .into_owned()
        .collect();
    tokio::time::sleep(delay).await;
    let (status, body) = {
        let mut state = state.lock().unwrap();
        let well_formed = head.starts_with("post /oauth2/token ")
            && head.contains("content-type: application/x-www-form-urlencoded")
            && form.get("grant_type").map(String::as_str) == Some("refresh_token")
            && form.get("client_id").map(String::as_str) == Some(CLIENT_ID);
        let known = form.get("refresh_token") == Some(&state.0);
        match answer {
            Answer::Huge => (200, "x".repeat(2 << 20)),
            Answer::Grant { rotate } if well_formed && known => {
                state.1 += 1;
                let access = format!("at-{}", state.1);
                let mut grant =
                    json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600});
                if rotate {
                    state.0 = format!("rt-{}", state.1);
                    grant["refresh_token"] = json!(state.0);
                }
                (200, grant.to_string())
            }
            _ => (
                400,
                json!({"error": "invalid_grant", "error_description": "refresh token not valid"})
                    .to_string(),
            ),
        }
    };
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

// ---------- precedence ----------

#[test]
fn explicit_key_beats_env_and_files() {
    let home = home_with(
        Some(&session("at", "rt", now() + 3600, "")),
        Some("file-key"),
    );
    let creds = resolver(home.path(), &[("CREATEOS_API_KEY", "env-key")])
        .explicit_key(Some("flag-key".into()))
        .resolve()
        .unwrap();
    assert_eq!(creds.kind(), CredentialKind::ApiKey);
    assert_eq!(creds.source(), &CredentialSource::Explicit);
    let (name, value) = tokio_test_block(header(&creds));
    assert_eq!((name.as_str(), value.as_str()), ("x-api-key", "flag-key"));
}

#[test]
fn env_keys_follow_the_cli_order_then_the_sdk_name() {
    let home = home_with(
        Some(&session("at", "rt", now() + 3600, "")),
        Some("file-key"),
    );
    let all = [
        ("CREATEOS_API_KEY", "a"),
        ("CREATEOS_PLAN_API_KEY", "b"),
        ("CREATEOS_PROJECT_API_KEY", "c"),
        ("CREATEOS_SANDBOX_API_KEY", "d"),
    ];
    for skip in 0..all.len() {
        // Earlier names empty or whitespace: the first non-empty one wins.
        let vars: Vec<(&str, &str)> = all
            .iter()
            .enumerate()
            .map(|(i, (k, v))| (*k, if i < skip { "  " } else { *v }))
            .collect();
        let creds = resolver(home.path(), &vars)
            .explicit_key(Some(String::new()))
            .resolve()
            .unwrap();
        assert_eq!(
            creds.source(),
            &CredentialSource::Env(all[skip].0.to_owned())
        );
        assert_eq!(tokio_test_block(header(&creds)).1, all[skip].1);
    }
}

#[test]
fn sandbox_api_key_used_when_cli_names_absent() {
    let home = home_with(None, Some("file-key"));
    let creds = resolver(home.path(), &[("CREATEOS_SANDBOX_API_KEY", "sdk-key\n")])
        .resolve()
        .unwrap();
    assert_eq!(
        creds.source(),
        &CredentialSource::Env("CREATEOS_SANDBOX_API_KEY".into())
    );
    assert_eq!(
        tokio_test_block(header(&creds)),
        ("x-api-key".into(), "sdk-key".into())
    );
}

#[test]
fn oauth_beats_token_and_is_sent_as_access_token() {
    let home = home_with(
        Some(&session("jwt-live", "rt", now() + 3600, "")),
        Some("file-key"),
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    assert_eq!(creds.kind(), CredentialKind::AccessToken);
    assert_eq!(
        creds.source(),
        &CredentialSource::OAuthFile(home.path().join(".createos/.oauth"))
    );
    assert_eq!(
        tokio_test_block(header(&creds)),
        ("x-access-token".into(), "jwt-live".into())
    );
}

#[test]
fn token_file_is_trimmed_and_sent_as_api_key() {
    let home = home_with(None, Some("  skp_file-key \n"));
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    assert_eq!(
        creds.source(),
        &CredentialSource::TokenFile(home.path().join(".createos/.token"))
    );
    assert_eq!(
        tokio_test_block(header(&creds)),
        ("x-api-key".into(), "skp_file-key".into())
    );
}

#[test]
fn corrupt_oauth_is_an_error_naming_the_file() {
    for corrupt in [
        "{\"access_token\": \"secret-part",
        "[1,2]",
        "{\"access_token\": 5}",
    ] {
        let home = home_with(Some(corrupt), Some("file-key"));
        let err = resolver(home.path(), &[]).resolve().unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Credentials { .. }), "{err:?}");
        assert!(text.contains(".createos/.oauth"), "{text}");
        assert!(!text.contains("secret-part"), "{text}");
    }
}

#[test]
fn nothing_found_is_not_signed_in_with_the_login_hint() {
    let home = home_with(None, Some(" \n"));
    let err = resolver(home.path(), &[("CREATEOS_API_KEY", "")])
        .resolve()
        .unwrap_err();
    let Error::NotSignedIn(message) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(message, "run `createos login` or set CREATEOS_API_KEY");
}

fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

// ---------- refresh ----------

#[tokio::test]
async fn expired_session_is_refreshed_and_written_back() {
    let server = TokenServer::start("rt-0", Answer::Grant { rotate: true }, Duration::ZERO).await;
    let home = home_with(
        Some(&session("at-old", "rt-0", now() - 5, &server.endpoint())),
        None,
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    assert_eq!(
        header(&creds).await,
        ("x-access-token".into(), "at-1".into())
    );
    assert_eq!(
        header(&creds).await.1,
        "at-1",
        "a fresh token is not refreshed again"
    );
    assert_eq!(server.requests(), 1);

    let saved = read_oauth(home.path());
    assert_eq!(saved["access_token"], "at-1");
    assert_eq!(
        saved["refresh_token"], "rt-1",
        "a rotated refresh token is stored"
    );
    assert_eq!(saved["token_endpoint"], server.endpoint().as_str());
    assert_eq!(
        saved["user_note"],
        json!({"keep": true}),
        "unknown keys survive the rewrite"
    );
    let expires_at = saved["expires_at"]
        .as_i64()
        .expect("unix seconds as an integer");
    assert!(expires_at > now() + 3000 && expires_at <= now() + 3600);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join(".createos/.oauth"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let leftovers: Vec<_> = std::fs::read_dir(home.path().join(".createos"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn refresh_token_is_kept_when_none_is_returned_and_issuer_fallback_is_used() {
    let server =
        TokenServer::start("rt-keep", Answer::Grant { rotate: false }, Duration::ZERO).await;
    let home = home_with(Some(&session("at-old", "rt-keep", 0, "")), None);
    let creds = resolver(home.path(), &[])
        .issuer(server.url.clone())
        .resolve()
        .unwrap();
    assert_eq!(header(&creds).await.1, "at-1");
    let saved = read_oauth(home.path());
    assert_eq!(saved["refresh_token"], "rt-keep");
    assert_eq!(
        saved["token_endpoint"], "",
        "the saved endpoint is not invented"
    );
}

#[tokio::test]
async fn concurrent_callers_share_one_refresh() {
    let server = TokenServer::start(
        "rt-0",
        Answer::Grant { rotate: true },
        Duration::from_millis(100),
    )
    .await;
    let home = home_with(
        Some(&session("at-old", "rt-0", now() - 5, &server.endpoint())),
        None,
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    let calls = (0..8).map(|_| {
        let creds = creds.clone();
        tokio::spawn(async move { header(&creds).await.1 })
    });
    for token in futures::future::join_all(calls).await {
        assert_eq!(token.unwrap(), "at-1");
    }
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn refused_refresh_is_a_credentials_error_without_secrets() {
    let server = TokenServer::start("rt-other", Answer::Refuse, Duration::ZERO).await;
    let home = home_with(
        Some(&session(
            "at-old-secret",
            "rt-secret",
            now() - 5,
            &server.endpoint(),
        )),
        None,
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    let err = creds.header(&reqwest::Client::new()).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, Error::Credentials { .. }), "{err:?}");
    assert!(
        text.contains("your session has expired and could not be refreshed"),
        "{text}"
    );
    assert!(
        text.contains("invalid_grant") && text.contains("run `createos login`"),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
}

#[tokio::test]
async fn oversized_answer_and_plain_http_endpoints_are_refused() {
    let server = TokenServer::start("rt", Answer::Huge, Duration::ZERO).await;
    let home = home_with(Some(&session("at", "rt", 0, &server.endpoint())), None);
    let err = resolver(home.path(), &[])
        .resolve()
        .unwrap()
        .header(&reqwest::Client::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("larger than 1 MiB"), "{err}");

    let home = home_with(
        Some(&session("at", "rt", 0, "http://example.com/oauth2/token")),
        None,
    );
    let err = resolver(home.path(), &[])
        .resolve()
        .unwrap()
        .header(&reqwest::Client::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not https"), "{err}");
}

#[tokio::test]
async fn unauthorized_renews_once_per_rejected_token() {
    let server = TokenServer::start("rt-0", Answer::Grant { rotate: true }, Duration::ZERO).await;
    let home = home_with(
        Some(&session(
            "at-live",
            "rt-0",
            now() + 3600,
            &server.endpoint(),
        )),
        None,
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    let http = reqwest::Client::new();
    let (_, rejected) = creds.header(&http).await.unwrap();
    assert!(creds
        .refresh_after_unauthorized(&http, &rejected)
        .await
        .unwrap());
    assert_eq!(header(&creds).await.1, "at-1");
    // A second 401 carrying the old value: the new token is already in use, no second refresh.
    assert!(creds
        .refresh_after_unauthorized(&http, &rejected)
        .await
        .unwrap());
    assert_eq!(server.requests(), 1);
    // The new token rejected too: the file still holds it, so one more refresh.
    let (_, second) = creds.header(&http).await.unwrap();
    assert!(creds
        .refresh_after_unauthorized(&http, &second)
        .await
        .unwrap());
    assert_eq!(
        (server.requests(), header(&creds).await.1),
        (2, "at-2".into())
    );
    assert_eq!(read_oauth(home.path())["refresh_token"], "rt-2");
}

#[tokio::test]
async fn unauthorized_adopts_a_session_renewed_by_another_process() {
    let server = TokenServer::start("rt-0", Answer::Grant { rotate: true }, Duration::ZERO).await;
    let home = home_with(
        Some(&session(
            "at-live",
            "rt-0",
            now() + 3600,
            &server.endpoint(),
        )),
        None,
    );
    let creds = resolver(home.path(), &[]).resolve().unwrap();
    let http = reqwest::Client::new();
    let (_, rejected) = creds.header(&http).await.unwrap();
    // Another process renewed the session meanwhile.
    let renewed = session("at-from-cli", "rt-9", now() + 3600, &server.endpoint());
    std::fs::write(home.path().join(".createos/.oauth"), renewed).unwrap();
    assert!(creds
        .refresh_after_unauthorized(&http, &rejected)
        .await
        .unwrap());
    assert_eq!(header(&creds).await.1, "at-from-cli");
    assert_eq!(server.requests(), 0);
}

#[tokio::test]
async fn static_credentials_cannot_be_renewed() {
    let http = reqwest::Client::new();
    for (creds, name) in [
        (Credentials::api_key("k"), "x-api-key"),
        (Credentials::access_token("t"), "x-access-token"),
    ] {
        let (header_name, value) = creds.header(&http).await.unwrap();
        assert_eq!(header_name.as_str(), name);
        assert!(value.is_sensitive());
        assert!(!creds
            .refresh_after_unauthorized(&http, &value)
            .await
            .unwrap());
    }
    let err = Credentials::api_key("bad\nkey")
        .header(&http)
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("bad"), "{err}");
}

#[test]
fn debug_and_display_never_show_secrets() {
    let secret = Secret::new("s3cr3t-value");
    assert_eq!(format!("{secret:?} {secret}"), "<redacted> <redacted>");
    assert_eq!(secret.expose(), "s3cr3t-value");
    let home = home_with(
        Some(&session(
            "s3cr3t-access",
            "s3cr3t-refresh",
            now() + 3600,
            "",
        )),
        None,
    );
    let shown = [
        format!("{:?}", Credentials::api_key("s3cr3t-key")),
        format!("{:?}", Credentials::access_token("s3cr3t-token")),
        format!("{:?}", resolver(home.path(), &[]).resolve().unwrap()),
        format!(
            "{:?}",
            resolver(home.path(), &[]).explicit_key(Some("s3cr3t-flag".into()))
        ),
    ];
    for text in shown {
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("kind") || text.contains("Resolver"), "{text}");
    }
}

// ---------- across processes ----------

/// Parent role: 8 concurrent refreshes of one expired session, 4 here and 4 in a copy of this
/// test binary, must reach the token endpoint once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_process_refresh_happens_once() {
    let server = TokenServer::start(
        "rt-0",
        Answer::Grant { rotate: true },
        Duration::from_millis(300),
    )
    .await;
    let home = home_with(Some(&session("at-old", "rt-0", now() - 5, "")), None);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_HOME_VAR, home.path())
        .env(CHILD_SERVER_VAR, &server.url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&home.path().join("child-ready")).await;
    std::fs::write(home.path().join("go"), b"").unwrap();
    let ours = four_concurrent_headers(home.path(), &server.url).await;
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    // libtest prints `test <name> ... ` before the child's own output on the same line.
    let theirs = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD_TOKEN=").map(|(_, token)| token.trim()))
        .unwrap_or_else(|| panic!("no token line from the child: {stdout}"));
    assert_eq!(
        server.requests(),
        1,
        "exactly one refresh across both processes"
    );
    assert_eq!(ours, theirs);
    assert_eq!(ours, "at-1");
    assert_eq!(read_oauth(home.path())["access_token"], "at-1");
    assert_eq!(server.state.lock().unwrap().0, "rt-1");
}

/// Child role of [`cross_process_refresh_happens_once`]; does nothing unless started by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_process_child_role() {
    let (Ok(home), Ok(server)) = (
        std::env::var(CHILD_HOME_VAR),
        std::env::var(CHILD_SERVER_VAR),
    ) else {
        return;
    };
    let home = PathBuf::from(home);
    std::fs::write(home.join("child-ready"), b"").unwrap();
    wait_for_file(&home.join("go")).await;
    let token = four_concurrent_headers(&home, &server).await;
    println!("CHILD_TOKEN={token}");
}

async fn four_concurrent_headers(home: &Path, issuer: &str) -> String {
    let creds = resolver(home, &[])
        .issuer(issuer.to_owned())
        .resolve()
        .unwrap();
    let calls = (0..4).map(|_| {
        let creds = creds.clone();
        tokio::spawn(async move { header(&creds).await.1 })
    });
    let tokens: Vec<String> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(tokens.windows(2).all(|w| w[0] == w[1]), "{tokens:?}");
    tokens.into_iter().next().unwrap()
}

async fn wait_for_file(path: &Path) {
    for _ in 0..6000 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", path.display());
}
