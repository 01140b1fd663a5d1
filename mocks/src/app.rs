//! The router: assembles every route module's routes with the middlewares. Nothing below
//! imports this module; the shared state lives in [`crate::state`].

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Router;

use crate::envelope::ApiError;
use crate::state::AppState;

/// Every route of the emulator with its middlewares. Faults and stats apply to API
/// routes only, never to `/_mock/*`.
pub fn build_router(state: AppState) -> Router {
    let api: Router<AppState> = Router::new()
        .merge(crate::catalog::routes())
        .merge(crate::sandbox::routes::routes())
        .merge(crate::exec::routes())
        .merge(crate::files::routes())
        .merge(crate::resources::routes::routes())
        .merge(crate::computer::routes::routes())
        .merge(crate::process::routes::routes())
        .merge(crate::oauth::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::middleware::traffic,
        ));
    let control: Router<AppState> = crate::mock_api::routes()
        .merge(crate::guest_sshd::routes::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::mock_api::require_key,
        ));
    api.merge(control)
        .fallback(|| async { ApiError::not_found("route", "no such route").into_response() })
        .method_not_allowed_fallback(|| async {
            ApiError::fail(
                StatusCode::METHOD_NOT_ALLOWED,
                serde_json::json!({"method": "method not allowed"}),
            )
            .into_response()
        })
        .layer(DefaultBodyLimit::max(64 << 20))
        .layer(axum::middleware::from_fn(crate::middleware::request_id))
        .with_state(state)
}
