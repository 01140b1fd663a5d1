//! E98–E107: devices, their network links and VPN sessions.

use createos_sandbox::Error;

use crate::common;

#[tokio::test]
async fn register_list_get_revoke() {
    let env = common::start().await;
    let key = crate::wg_pubkey();
    let device = env
        .client
        .register_device("laptop", &key, Some("my-laptop"), Some("linux"))
        .await
        .unwrap();
    assert!(!device.id.is_empty());
    assert_eq!(device.name, "laptop");
    assert_eq!(device.pubkey, key);
    assert_eq!(device.hostname.as_deref(), Some("my-laptop"));
    assert_eq!(device.os.as_deref(), Some("linux"));
    let ip: std::net::Ipv4Addr = device.client_ip.parse().expect("an IPv4 VPN address");
    let [a, b, ..] = ip.octets();
    assert!(
        a == 100 && (64..128).contains(&b),
        "{ip} is outside 100.64.0.0/10"
    );
    assert!(device.created_at.is_some());

    let second = env
        .client
        .register_device("desktop", &crate::wg_pubkey(), None, None)
        .await
        .unwrap();
    assert_ne!(
        second.client_ip, device.client_ip,
        "each device its own address"
    );
    assert_eq!(second.hostname, None);

    assert_eq!(env.client.get_device(&device.id).await.unwrap(), device);
    let listed = env.client.list_devices().collect_all().await.unwrap();
    assert_eq!(
        listed.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        vec![device.id.as_str(), second.id.as_str()]
    );

    env.client.revoke_device(&device.id).await.unwrap();
    let err = env.client.get_device(&device.id).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(
        crate::fields(&err).get("device").map(String::as_str),
        Some("device not found")
    );
    assert_eq!(
        env.client.list_devices().collect_all().await.unwrap().len(),
        1
    );
    env.shutdown().await;
}

#[tokio::test]
async fn network_links() {
    let env = common::start().await;
    let device = env
        .client
        .register_device("ci", &crate::wg_pubkey(), None, None)
        .await
        .unwrap();
    let net = env.client.create_network("vpn-net").await.unwrap();
    assert!(env
        .client
        .list_device_networks(&device.id)
        .await
        .unwrap()
        .is_empty());

    env.client
        .attach_device_network(&device.id, "vpn-net")
        .await
        .unwrap();
    let links = env.client.list_device_networks(&device.id).await.unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].network_id, net.id);
    assert_eq!(links[0].network_name, "vpn-net");
    assert!(links[0].attached_at.is_some());

    let err = env
        .client
        .attach_device_network(&device.id, "no-such-net")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    env.client
        .detach_device_network(&device.id, &net.id)
        .await
        .unwrap();
    assert!(env
        .client
        .list_device_networks(&device.id)
        .await
        .unwrap()
        .is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn sessions_open_renew_close() {
    let env = common::start().await;
    let device = env
        .client
        .register_device("roamer", &crate::wg_pubkey(), None, None)
        .await
        .unwrap();
    env.client.create_network("roam").await.unwrap();
    env.client
        .attach_device_network(&device.id, "roam")
        .await
        .unwrap();

    let session = env.client.open_device_session(&device.id).await.unwrap();
    assert!(!session.session_id.is_empty());
    assert_eq!(session.device_id, device.id);
    assert!(!session.relay_host_id.is_empty());
    assert!(session.expires_at.ends_with('Z'));
    assert!(
        session.client_config.contains("[Interface]") && session.client_config.contains("[Peer]")
    );
    assert!(
        !session.client_config.contains("PrivateKey"),
        "the server never holds the private key"
    );
    assert!(session.client_config.contains(&device.client_ip));

    let conf = session.config_with_private_key("cHJpdmF0ZS1rZXktZm9yLXRlc3RzLW9ubHktMzJieXQ=");
    let interface = conf.split("[Peer]").next().unwrap();
    assert!(
        interface.contains("PrivateKey = cHJpdmF0ZS1rZXktZm9yLXRlc3RzLW9ubHktMzJieXQ="),
        "{conf}"
    );
    assert_eq!(conf.matches("PrivateKey").count(), 1);

    let renewed = env
        .client
        .renew_device_session(&device.id, &session.session_id)
        .await
        .unwrap();
    if let Some(expires) = renewed.expires_at {
        assert!(
            expires >= session.expires_at,
            "{expires} < {}",
            session.expires_at
        );
    }

    env.client
        .close_device_session(&device.id, &session.session_id)
        .await
        .unwrap();
    let err = env
        .client
        .renew_device_session(&device.id, &session.session_id)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "a closed session is gone: {err:?}");

    // Revoking a device removes its sessions too.
    let again = env.client.open_device_session(&device.id).await.unwrap();
    env.client.revoke_device(&device.id).await.unwrap();
    let err = env
        .client
        .renew_device_session(&device.id, &again.session_id)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn foreign_tenant_gets_not_found() {
    let env = common::start().await;
    let device = env
        .client
        .register_device("mine", &crate::wg_pubkey(), None, None)
        .await
        .unwrap();
    let session = env.client.open_device_session(&device.id).await.unwrap();
    let (_, other) = env.new_tenant(true).await;
    let c = &other;
    let errors: Vec<Error> = vec![
        c.get_device(&device.id).await.unwrap_err(),
        c.revoke_device(&device.id).await.unwrap_err(),
        c.list_device_networks(&device.id).await.unwrap_err(),
        c.open_device_session(&device.id).await.unwrap_err(),
        c.renew_device_session(&device.id, &session.session_id)
            .await
            .unwrap_err(),
        c.close_device_session(&device.id, &session.session_id)
            .await
            .unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_not_found(), "{err:?}");
    }
    assert!(c.list_devices().collect_all().await.unwrap().is_empty());
    // Our device cannot be linked to their network, nor theirs to ours.
    c.create_network("theirs").await.unwrap();
    let err = env
        .client
        .attach_device_network(&device.id, "theirs")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(env.client.get_device(&device.id).await.is_ok());
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_sending() {
    let env = common::start().await;
    let c = &env.client;
    let key = crate::wg_pubkey();
    crate::assert_invalid(
        &c.register_device("x", "not-base64!", None, None)
            .await
            .unwrap_err(),
        "pubkey",
    );
    crate::assert_invalid(
        &c.register_device("x", "AAAA", None, None)
            .await
            .unwrap_err(),
        "pubkey",
    );
    crate::assert_invalid(
        &c.register_device("", &key, None, None).await.unwrap_err(),
        "name",
    );
    crate::assert_invalid(
        &c.register_device("x", &key, Some("bad\nhost"), None)
            .await
            .unwrap_err(),
        "hostname",
    );
    crate::assert_invalid(&c.get_device("a/b").await.unwrap_err(), "device_id");
    crate::assert_invalid(
        &c.attach_device_network("dev_1", "").await.unwrap_err(),
        "network",
    );
    crate::assert_invalid(
        &c.renew_device_session("dev_1", "s 1").await.unwrap_err(),
        "session_id",
    );
    for op in [
        "registerDevice",
        "getDevice",
        "attachDeviceNetwork",
        "renewDeviceSession",
    ] {
        assert_eq!(env.requests(op).await, 0, "{op} reached the server");
    }
    env.shutdown().await;
}
