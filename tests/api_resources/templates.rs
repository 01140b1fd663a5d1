//! E52–E56: template builds, their logs (text and followed NDJSON) and waiting for them.

use std::time::Duration;

use createos_sandbox::api::templates::{TemplateStatus, MAX_DOCKERFILE};
use createos_sandbox::Error;
use futures::StreamExt;

use crate::common;

const DOCKERFILE: &str = "FROM nodeops/sandbox:debian\nRUN echo hello-from-build\n";

#[tokio::test]
async fn build_follow_logs_and_read_back() {
    let env = common::start().await;
    let tpl = env
        .client
        .create_template("py-tools", DOCKERFILE, None)
        .await
        .unwrap();
    assert!(tpl.id.starts_with("tpl_"), "{}", tpl.id);
    assert_eq!(tpl.name, "py-tools");
    assert!(
        matches!(
            tpl.status,
            TemplateStatus::Pending | TemplateStatus::Building
        ),
        "{:?}",
        tpl.status
    );
    assert_eq!(tpl.built_at, None);

    let events: Vec<_> = env
        .client
        .follow_template_logs(&tpl.id, None)
        .collect()
        .await;
    let events: Vec<_> = events.into_iter().collect::<Result<_, _>>().unwrap();
    let last = events.last().expect("at least the terminal frame");
    assert!(last.is_final);
    assert_eq!(last.status, Some(TemplateStatus::Ready));
    assert_eq!(
        events.iter().filter(|e| e.is_final).count(),
        1,
        "the stream ends after the terminal frame"
    );
    let lines: Vec<&str> = events.iter().filter_map(|e| e.line.as_deref()).collect();
    assert!(!lines.is_empty());
    assert!(events
        .iter()
        .filter(|e| !e.is_final)
        .all(|e| e.attempt.is_some() && e.ts.is_some()));

    let text = env.client.template_logs(&tpl.id, None).await.unwrap();
    for line in &lines {
        assert!(
            text.contains(line),
            "{line:?} missing from the text log:\n{text}"
        );
    }
    let first_attempt = env.client.template_logs(&tpl.id, Some(1)).await.unwrap();
    assert!(!first_attempt.is_empty());

    let done = env.client.get_template(&tpl.id, true).await.unwrap();
    assert_eq!(done.status, TemplateStatus::Ready);
    assert_eq!(done.dockerfile.as_deref(), Some(DOCKERFILE));
    assert!(done.ext4_size_bytes > 0);
    assert!(done.built_at.is_some());
    let without = env.client.get_template("py-tools", false).await.unwrap();
    assert_eq!(without.id, tpl.id);
    assert_eq!(without.dockerfile, None);

    let listed = env.client.list_templates().collect_all().await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        vec![tpl.id.as_str()]
    );

    assert!(env.client.delete_template(&tpl.id).await.unwrap().ok);
    assert!(env
        .client
        .get_template(&tpl.id, false)
        .await
        .unwrap_err()
        .is_not_found());
    env.shutdown().await;
}

#[tokio::test]
async fn wait_for_template_returns_the_finished_build() {
    let env = common::start().await;
    let tpl = env
        .client
        .create_template("waited", DOCKERFILE, Some("debian:13"))
        .await
        .unwrap();
    let done = env
        .client
        .wait_for_template(&tpl.id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(done.id, tpl.id);
    assert_eq!(done.status, TemplateStatus::Ready);
    assert_eq!(done.base.as_deref(), Some("debian:13"));
    // Already finished: answers at once, with one request.
    env.reset_stats().await;
    env.client.wait_for_template("waited", None).await.unwrap();
    assert_eq!(env.requests("getTemplate").await, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn a_failing_build_ends_with_failed() {
    let env = common::start().await;
    // The emulator syntax-checks RUN lines; an unterminated quote fails the build.
    let tpl = env
        .client
        .create_template(
            "broken",
            "FROM nodeops/sandbox:alpine\nRUN echo 'unterminated\n",
            None,
        )
        .await
        .unwrap();
    let done = env
        .client
        .wait_for_template(&tpl.id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(done.status, TemplateStatus::Failed);
    assert_eq!(done.built_at, None);
    let events: Vec<_> = env
        .client
        .follow_template_logs(&tpl.id, None)
        .collect()
        .await;
    let last = events.last().unwrap().as_ref().unwrap();
    assert!(last.is_final);
    assert_eq!(last.status, Some(TemplateStatus::Failed));
    assert!(events
        .iter()
        .any(|e| e.as_ref().unwrap().level.as_deref() == Some("error")));
    let text = env.client.template_logs(&tpl.id, None).await.unwrap();
    assert!(text.contains("failed"), "{text}");
    env.shutdown().await;
}

#[tokio::test]
async fn server_build_rules_are_validation_errors() {
    let env = common::start().await;
    let c = &env.client;
    for dockerfile in [
        "FROM nodeops/sandbox:debian\nCOPY . /app\n",
        "FROM evil/image:latest\n",
        "RUN echo no from\n",
    ] {
        let err = c
            .create_template("rules", dockerfile, None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Validation(_)),
            "{dockerfile:?}: {err:?}"
        );
        assert!(!crate::fields(&err).is_empty());
    }
    assert!(c.list_templates().collect_all().await.unwrap().is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn foreign_tenant_and_no_credit() {
    let env = common::start().await;
    let tpl = env
        .client
        .create_template("mine", DOCKERFILE, None)
        .await
        .unwrap();
    let (_, other) = env.new_tenant(true).await;
    assert!(other
        .get_template(&tpl.id, true)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(other
        .get_template("mine", false)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(other
        .template_logs(&tpl.id, None)
        .await
        .unwrap_err()
        .is_not_found());
    let followed: Vec<_> = other.follow_template_logs(&tpl.id, None).collect().await;
    assert_eq!(followed.len(), 1);
    assert!(followed[0].as_ref().unwrap_err().is_not_found());
    assert!(other
        .delete_template(&tpl.id)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(other
        .list_templates()
        .collect_all()
        .await
        .unwrap()
        .is_empty());

    let (_, broke) = env.new_tenant(false).await;
    let err = broke
        .create_template("paid", DOCKERFILE, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PaymentRequired(_)), "{err:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_sending() {
    let env = common::start().await;
    let c = &env.client;
    crate::assert_invalid(
        &c.create_template("Upper", DOCKERFILE, None)
            .await
            .unwrap_err(),
        "name",
    );
    crate::assert_invalid(
        &c.create_template("-dash", DOCKERFILE, None)
            .await
            .unwrap_err(),
        "name",
    );
    crate::assert_invalid(
        &c.create_template("empty", " \n\t", None).await.unwrap_err(),
        "dockerfile",
    );
    let huge = format!(
        "FROM nodeops/sandbox:debian\n{}",
        "#".repeat(MAX_DOCKERFILE)
    );
    crate::assert_invalid(
        &c.create_template("huge", &huge, None).await.unwrap_err(),
        "dockerfile",
    );
    crate::assert_invalid(
        &c.create_template("base", DOCKERFILE, Some(""))
            .await
            .unwrap_err(),
        "base",
    );
    crate::assert_invalid(&c.get_template("a/b", false).await.unwrap_err(), "template");
    crate::assert_invalid(&c.template_logs("", None).await.unwrap_err(), "template");
    let followed: Vec<_> = c.follow_template_logs("a b", None).collect().await;
    assert_eq!(followed.len(), 1);
    crate::assert_invalid(followed[0].as_ref().unwrap_err(), "template");
    for op in ["createTemplate", "getTemplate", "getTemplateLogs"] {
        assert_eq!(env.requests(op).await, 0, "{op} reached the server");
    }
    env.shutdown().await;
}
