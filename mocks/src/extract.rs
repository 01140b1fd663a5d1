//! Request extractors over the shared state: the authenticated [`Caller`] of a route,
//! resolved once per request from the credential headers.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::{authenticate, Caller};
use crate::envelope::ApiError;
use crate::state::AppState;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let caller = authenticate(&state.tenants, parts)?;
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
