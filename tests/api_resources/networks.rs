//! E38–E43: private networks, their members, pagination, ownership and credit.

use std::collections::HashSet;

use createos_sandbox::api::sandboxes::SandboxStatus;
use createos_sandbox::Error;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::common;

#[tokio::test]
async fn create_get_list_delete() {
    let env = common::start().await;
    let net = env.client.create_network("backend").await.unwrap();
    assert!(net.id.starts_with("net-"), "{}", net.id);
    assert_eq!(net.name, "backend");
    assert_eq!(net.member_count, Some(0));
    assert!(net.created_at.as_deref().is_some_and(|t| t.ends_with('Z')));

    let by_name = env.client.get_network("backend").await.unwrap();
    assert_eq!(by_name.id, net.id);
    assert_eq!(by_name.members.as_deref(), Some(&[][..]));
    let by_id = env.client.get_network(&net.id).await.unwrap();
    assert_eq!(by_id.name, "backend");

    let listed = env.client.list_networks().collect_all().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, net.id);
    assert_eq!(listed[0].member_count, Some(0));

    assert!(env.client.delete_network(&net.id).await.unwrap().ok);
    let err = env.client.get_network(&net.id).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(
        crate::fields(&err).get("network").map(String::as_str),
        Some("network not found")
    );
    env.shutdown().await;
}

#[tokio::test]
async fn duplicate_name_is_refused() {
    let env = common::start().await;
    env.client.create_network("dup").await.unwrap();
    let err = env.client.create_network("dup").await.unwrap_err();
    assert!(matches!(err.status(), Some(400) | Some(409)), "{err:?}");
    assert!(crate::fields(&err).contains_key("name"), "{err:?}");
    assert_eq!(
        env.client
            .list_networks()
            .collect_all()
            .await
            .unwrap()
            .len(),
        1
    );
    env.shutdown().await;
}

#[tokio::test]
async fn attach_and_detach_members() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    let net = env.client.create_network("mesh").await.unwrap();

    assert!(sandbox.attach_network("mesh").await.unwrap().ok);
    let detail = env.client.get_network(&net.id).await.unwrap();
    let members = detail.members.expect("members in detail");
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].sandbox_id, sandbox.id());
    assert_eq!(members[0].status, SandboxStatus::Running);
    assert_eq!(members[0].name, sandbox.view().name);
    let listed = env.client.list_networks().collect_all().await.unwrap();
    assert_eq!(listed[0].member_count, Some(1));

    // A network with members cannot be deleted.
    let err = env.client.delete_network("mesh").await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict(_) | Error::Validation(_)),
        "{err:?}"
    );
    assert!(crate::fields(&err).contains_key("network"), "{err:?}");

    assert!(sandbox.detach_network(&net.id).await.unwrap().ok);
    let detail = env.client.get_network("mesh").await.unwrap();
    assert_eq!(detail.members.map(|m| m.len()), Some(0));
    assert!(env.client.delete_network("mesh").await.unwrap().ok);

    let err = sandbox.attach_network("mesh").await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    sandbox.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test]
async fn foreign_tenant_sees_nothing() {
    let env = common::start().await;
    let net = env.client.create_network("private").await.unwrap();
    let sandbox = crate::running_sandbox(&env).await;
    let (_, other) = env.new_tenant(true).await;

    assert!(other.get_network(&net.id).await.unwrap_err().is_not_found());
    assert!(other
        .get_network("private")
        .await
        .unwrap_err()
        .is_not_found());
    assert!(other
        .delete_network(&net.id)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(other
        .list_networks()
        .collect_all()
        .await
        .unwrap()
        .is_empty());
    // The other tenant's sandbox handle on our id, and our sandbox on their network.
    let theirs = other.create_network("theirs").await.unwrap();
    let err = sandbox.attach_network(&theirs.id).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = other
        .sandbox(sandbox.id())
        .unwrap()
        .attach_network(&theirs.id)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(
        env.client.get_network(&net.id).await.is_ok(),
        "still there for the owner"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn no_credit_means_402() {
    let env = common::start().await;
    let (_, broke) = env.new_tenant(false).await;
    let err = broke.create_network("paid").await.unwrap_err();
    assert!(matches!(err, Error::PaymentRequired(_)), "{err:?}");
    assert_eq!(err.api().unwrap().code.as_deref(), Some("PAYMENT_REQUIRED"));
    // 402 is never retried and nothing was created.
    assert_eq!(env.requests("createNetwork").await, 1);
    assert!(broke
        .list_networks()
        .collect_all()
        .await
        .unwrap()
        .is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_sending() {
    let env = common::start().await;
    let sandbox = crate::running_sandbox(&env).await;
    for bad in ["", "has space", "-lead", "a/b", &"n".repeat(64)] {
        crate::assert_invalid(&env.client.create_network(bad).await.unwrap_err(), "name");
    }
    crate::assert_invalid(
        &env.client.get_network("../x").await.unwrap_err(),
        "network",
    );
    crate::assert_invalid(&env.client.delete_network("").await.unwrap_err(), "network");
    crate::assert_invalid(&sandbox.attach_network("a b").await.unwrap_err(), "network");
    crate::assert_invalid(&sandbox.detach_network("x/y").await.unwrap_err(), "network");
    for op in [
        "createNetwork",
        "getNetwork",
        "deleteNetwork",
        "attachNetwork",
        "detachNetwork",
    ] {
        assert_eq!(env.requests(op).await, 0, "{op} reached the server");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn listing_pages_through_every_network_once() {
    let env = common::start().await;
    // More than one page of the client's pager (500 per page, the server's clamp).
    const N: usize = 523;
    let created: Vec<String> = futures::stream::iter(0..N)
        .map(|i| {
            let client = env.client.clone();
            async move {
                client
                    .create_network(&format!("pg-{i:04}"))
                    .await
                    .map(|n| n.id)
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await
        .unwrap();
    env.reset_stats().await;

    let listed = env.client.list_networks().collect_all().await.unwrap();
    assert_eq!(listed.len(), N);
    let ids: HashSet<_> = listed.iter().map(|n| n.id.clone()).collect();
    assert_eq!(ids.len(), N, "no network listed twice");
    assert_eq!(ids, created.into_iter().collect::<HashSet<_>>());
    assert_eq!(env.requests("listNetworks").await, 2, "two pages");

    // The emulator clamps limit to 500 and defaults it to 50.
    let http = reqwest::Client::new();
    let page = |query: &'static str| {
        let req = http
            .get(format!("{}/v1/networks{query}", env.base_url()))
            .header("X-Api-Key", env.mock.api_key());
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let big = page("?limit=1000&offset=0").await;
    assert_eq!(big["data"]["pagination"]["limit"], 500);
    assert_eq!(big["data"]["pagination"]["count"], 500);
    assert_eq!(big["data"]["pagination"]["total"], N);
    assert_eq!(big["data"]["data"].as_array().unwrap().len(), 500);
    let default = page("").await;
    assert_eq!(default["data"]["pagination"]["limit"], 50);
    assert_eq!(default["data"]["data"].as_array().unwrap().len(), 50);
    let tail = page("?limit=500&offset=500").await;
    assert_eq!(tail["data"]["pagination"]["count"], N - 500);
    env.shutdown().await;
}
