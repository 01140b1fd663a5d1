//! List routes as a `Stream` of items.
//!
//! Pages are requested with `limit=500` (the server's clamp) and the offset advances by the number
//! of items actually returned, so a server that clamps lower still yields every row. Besides the
//! current `{"data": […], "pagination": {…}}` shape, the legacy `{"<name>s": […]}` wrappers and bare
//! arrays are accepted; anything else fails loudly instead of silently yielding nothing.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{self, Stream, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Call, Transport};
use crate::error::{Error, Result};

/// Largest page the server serves.
pub const MAX_PAGE: u32 = 500;

/// Legacy wrapper keys still accepted around a list.
const LEGACY_KEYS: &[&str] = &[
    "templates",
    "disks",
    "shapes",
    "sandboxes",
    "networks",
    "devices",
    "hosts",
    "items",
];

/// `pagination` of a list answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageInfo {
    /// Rows matching in all.
    pub total: Option<u64>,
    /// Effective page size.
    pub limit: Option<u64>,
    /// Offset echoed back.
    pub offset: Option<u64>,
    /// Rows in this page.
    pub count: Option<u64>,
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct Page<T> {
    /// The rows.
    pub items: Vec<T>,
    /// Paging metadata (absent with legacy shapes).
    pub info: Option<PageInfo>,
}

/// Split a list answer's `data` into items and paging metadata.
pub fn extract_page<T: DeserializeOwned>(endpoint: &str, data: Value) -> Result<Page<T>> {
    let (items, info) = match data {
        Value::Array(items) => (items, None),
        Value::Object(mut map) => {
            if let Some(Value::Array(items)) = map.remove("data") {
                let info = match map.remove("pagination") {
                    Some(p) => Some(
                        serde_json::from_value::<PageInfo>(p)
                            .map_err(|e| Error::decode(endpoint, format!("bad pagination: {e}")))?,
                    ),
                    None => None,
                };
                (items, info)
            } else if let Some(key) = LEGACY_KEYS
                .iter()
                .find(|k| matches!(map.get(**k), Some(Value::Array(_))))
            {
                match map.remove(*key) {
                    Some(Value::Array(items)) => (items, None),
                    _ => unreachable!("checked above"),
                }
            } else {
                let keys: Vec<_> = map.keys().cloned().collect();
                return Err(Error::decode(
                    endpoint,
                    format!("unrecognised list shape with keys {keys:?}"),
                ));
            }
        }
        Value::Null => (Vec::new(), None),
        other => {
            return Err(Error::decode(
                endpoint,
                format!("unrecognised list shape: {other}"),
            ))
        }
    };
    let items = items
        .into_iter()
        .map(|v| {
            serde_json::from_value(v)
                .map_err(|e| Error::decode(endpoint, format!("bad list item: {e}")))
        })
        .collect::<Result<Vec<T>>>()?;
    Ok(Page { items, info })
}

/// Rows of a list route, fetched page by page as the stream is polled.
pub struct Paginated<T> {
    inner: Pin<Box<dyn Stream<Item = Result<T>> + Send>>,
}

impl<T> std::fmt::Debug for Paginated<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Paginated")
    }
}

struct Cursor<T> {
    transport: Arc<Transport>,
    build: Arc<dyn Fn() -> Call + Send + Sync>,
    offset: u64,
    buffered: VecDeque<T>,
    done: bool,
    page_size: u32,
}

impl<T: DeserializeOwned + Send + 'static> Paginated<T> {
    /// Page through a list route; `build` makes the call (endpoint, path params, filters) for each page.
    pub(crate) fn new(
        transport: Arc<Transport>,
        build: impl Fn() -> Call + Send + Sync + 'static,
    ) -> Self {
        Self::with_page_size(transport, build, MAX_PAGE)
    }

    pub(crate) fn with_page_size(
        transport: Arc<Transport>,
        build: impl Fn() -> Call + Send + Sync + 'static,
        page_size: u32,
    ) -> Self {
        let cursor = Cursor {
            transport,
            build: Arc::new(build),
            offset: 0,
            buffered: VecDeque::new(),
            done: false,
            page_size: page_size.clamp(1, MAX_PAGE),
        };
        let inner = stream::try_unfold(cursor, |mut c| async move {
            loop {
                if let Some(item) = c.buffered.pop_front() {
                    return Ok(Some((item, c)));
                }
                if c.done {
                    return Ok(None);
                }
                let call = (c.build)()
                    .query("limit", c.page_size)
                    .query("offset", c.offset);
                let label = call.endpoint.label();
                let data: Value = c.transport.json(call).await?;
                let page = extract_page::<T>(&label, data)?;
                let got = page.items.len() as u64;
                c.offset += got;
                let total = page.info.and_then(|i| i.total);
                c.done = match total {
                    _ if got == 0 => true,
                    Some(total) => c.offset >= total,
                    None => true,
                };
                c.buffered.extend(page.items);
            }
        });
        Paginated {
            inner: Box::pin(inner),
        }
    }

    /// Every row, in order.
    pub async fn collect_all(self) -> Result<Vec<T>> {
        self.try_collect().await
    }

    /// At most `n` rows.
    pub async fn collect_n(self, n: usize) -> Result<Vec<T>> {
        self.take(n).try_collect().await
    }
}

impl<T> Stream for Paginated<T> {
    type Item = Result<T>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_accepted() {
        let p: Page<u32> = extract_page("x", json!({"data": [1, 2], "pagination": {"total": 5, "limit": 2, "offset": 0, "count": 2}})).unwrap();
        assert_eq!(p.items, vec![1, 2]);
        assert_eq!(p.info.unwrap().total, Some(5));
        let p: Page<u32> = extract_page("x", json!({"templates": [3]})).unwrap();
        assert_eq!(p.items, vec![3]);
        let p: Page<u32> = extract_page("x", json!([4, 5])).unwrap();
        assert_eq!(p.items, vec![4, 5]);
        assert!(extract_page::<u32>("x", json!({"weird": [1]})).is_err());
        assert!(extract_page::<u32>("x", json!("nope")).is_err());
    }
}
