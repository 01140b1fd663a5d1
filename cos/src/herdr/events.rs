//! Herdr's pane events, which the manifest subscribes to with `[[events]]`: pane ids are
//! `<workspace>:p<n>`, so a pane moved to another workspace gets a new id (`pane.moved`, with
//! `previous_pane_id`) and its mapping is re-keyed; a closed pane (`pane.closed`) loses its
//! mapping, and the sandbox it kept is named (it keeps running, and pauses itself when idle).
//! Herdr passes the event as `HERDR_PLUGIN_EVENT_JSON`: `{"event":"pane_moved","data":{…}}`.

use serde_json::Value;

use super::error::{HerdrError, HerdrResult};
use super::state::{PaneEntry, StateStore};

/// An event this plugin acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaneEvent {
    /// `pane.moved`: the pane `from` is now `to`.
    Moved {
        /// `previous_pane_id`.
        from: String,
        /// `pane.pane_id`.
        to: String,
    },
    /// `pane.closed`.
    Closed {
        /// `pane_id`.
        pane: String,
    },
}

impl PaneEvent {
    /// Parse Herdr's event envelope. `None` for events this plugin does not act on.
    pub fn parse(json: &str) -> HerdrResult<Option<PaneEvent>> {
        let v: Value = serde_json::from_str(json.trim()).map_err(|e| {
            HerdrError::invalid("HERDR_PLUGIN_EVENT_JSON", format!("is not JSON: {e}"))
        })?;
        let text = |v: &Value, what: &str| {
            v.as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    HerdrError::invalid("HERDR_PLUGIN_EVENT_JSON", format!("has no {what}"))
                })
        };
        let data = &v["data"];
        Ok(match v["event"].as_str().unwrap_or_default() {
            "pane_moved" | "pane.moved" => Some(PaneEvent::Moved {
                from: text(&data["previous_pane_id"], "data.previous_pane_id")?,
                to: text(&data["pane"]["pane_id"], "data.pane.pane_id")?,
            }),
            "pane_closed" | "pane.closed" => Some(PaneEvent::Closed {
                pane: text(&data["pane_id"], "data.pane_id")?,
            }),
            _ => None,
        })
    }
}

/// What [`apply`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventOutcome {
    /// The mapping that moved to the new pane id.
    pub moved: Option<PaneEntry>,
    /// Mappings dropped: the closed pane's, or a stale one the moved pane's new id replaced.
    pub dropped: Vec<PaneEntry>,
    /// Whether a start in progress was re-keyed.
    pub pending_moved: bool,
}

/// Apply `event` to the state, under its lock.
pub async fn apply(store: &StateStore, event: &PaneEvent) -> HerdrResult<EventOutcome> {
    store
        .update(|state| {
            let mut out = EventOutcome::default();
            match event {
                PaneEvent::Moved { from, to } => {
                    if from == to {
                        return Ok(out);
                    }
                    if let Some(entry) = state.panes.remove(from) {
                        if let Some(stale) = state.panes.insert(to.clone(), entry.clone()) {
                            out.dropped.push(stale);
                        }
                        out.moved = Some(entry);
                    }
                    if let Some(p) = state.pending.remove(from) {
                        state.pending.insert(to.clone(), p);
                        out.pending_moved = true;
                    }
                    for p in state.pending.values_mut() {
                        if p.pane.as_deref() == Some(from.as_str()) {
                            p.pane = Some(to.clone());
                            out.pending_moved = true;
                        }
                    }
                }
                PaneEvent::Closed { pane } => {
                    out.dropped.extend(state.panes.remove(pane));
                }
            }
            Ok(out)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herdr::state::PendingStart;

    fn entry(id: &str) -> PaneEntry {
        PaneEntry {
            box_name: format!("hd-{id}"),
            box_id: id.into(),
            agent: "shell".into(),
            bin: "bash".into(),
            process_id: "proc".into(),
            local: "/l".into(),
            remote: "/workspace".into(),
            delete_armed_at: None,
        }
    }

    #[test]
    fn herdrs_envelopes_parse() {
        let moved = r#"{"event":"pane_moved","data":{"type":"pane_moved","previous_pane_id":"w1:p2","previous_workspace_id":"w1","previous_tab_id":"w1:t1","pane":{"pane_id":"w2:p1","terminal_id":"t","workspace_id":"w2","tab_id":"w2:t1","focused":true,"agent_status":"idle","revision":3}}}"#;
        assert_eq!(
            PaneEvent::parse(moved).unwrap(),
            Some(PaneEvent::Moved {
                from: "w1:p2".into(),
                to: "w2:p1".into()
            })
        );
        let closed = r#"{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p2","workspace_id":"w1"}}"#;
        assert_eq!(
            PaneEvent::parse(closed).unwrap(),
            Some(PaneEvent::Closed {
                pane: "w1:p2".into()
            })
        );
        assert_eq!(
            PaneEvent::parse(r#"{"event":"tab_focused","data":{}}"#).unwrap(),
            None
        );
        assert!(PaneEvent::parse(r#"{"event":"pane_moved","data":{}}"#).is_err());
        assert!(PaneEvent::parse("{").is_err());
    }

    #[tokio::test]
    async fn moves_re_key_and_closes_drop() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        store
            .update(|s| {
                s.panes.insert("w1:p2".into(), entry("sb-a"));
                s.pending.insert(
                    "w1:p1".into(),
                    PendingStart {
                        created_at: 1,
                        refreshed_at: None,
                        pane: Some("w1:p3".into()),
                        box_name: "b".into(),
                    },
                );
                Ok(())
            })
            .await
            .unwrap();
        let out = apply(
            &store,
            &PaneEvent::Moved {
                from: "w1:p2".into(),
                to: "w2:p1".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(out.moved.unwrap().box_id, "sb-a");
        let state = store.read().await.unwrap();
        assert!(!state.panes.contains_key("w1:p2"));
        assert_eq!(state.panes["w2:p1"].box_id, "sb-a");
        // A start whose panes move follows them.
        apply(
            &store,
            &PaneEvent::Moved {
                from: "w1:p1".into(),
                to: "w3:p1".into(),
            },
        )
        .await
        .unwrap();
        let out = apply(
            &store,
            &PaneEvent::Moved {
                from: "w1:p3".into(),
                to: "w3:p2".into(),
            },
        )
        .await
        .unwrap();
        assert!(out.pending_moved);
        let state = store.read().await.unwrap();
        assert_eq!(state.pending["w3:p1"].pane.as_deref(), Some("w3:p2"));
        // Closing drops the mapping and says which sandbox it was.
        let out = apply(
            &store,
            &PaneEvent::Closed {
                pane: "w2:p1".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(out.dropped, [entry("sb-a")]);
        assert!(store.read().await.unwrap().panes.is_empty());
        let out = apply(
            &store,
            &PaneEvent::Closed {
                pane: "w9:p9".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(out, EventOutcome::default());
    }
}
