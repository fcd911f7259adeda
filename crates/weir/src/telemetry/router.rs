//! The HTTP routes: `/status`, `/history`, `/metrics` and the dashboard at `/`.

use std::future::Future;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Json};
use axum::routing::get;

use super::dashboard::DASHBOARD_HTML;
use super::registry::Telemetry;

impl Telemetry {
    /// The telemetry routes, ready to serve on `runtime.status_addr`:
    ///
    /// - `GET /status`: the [`StatusReport`](super::StatusReport) as JSON;
    /// - `GET /history`: the [`HistoryReport`](super::history::HistoryReport) as JSON
    ///   (`?since=UNIX_MS`: only samples taken after it); 404 when no history runs;
    /// - `GET /metrics`: Prometheus text format (version 0.0.4);
    /// - `GET /`: a self-contained HTML dashboard that polls `/status` every second.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(dashboard))
            .route("/status", get(status))
            .route("/history", get(history))
            .route("/metrics", get(metrics))
            .with_state(self.clone())
    }

    /// Serves [`router`](Self::router) on `listener` until `shutdown` completes.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops accepting connections and drops those in progress;
    /// prefer completing `shutdown`, which lets in-flight requests finish.
    ///
    /// # Errors
    ///
    /// The listener's I/O error, should accepting fail for good.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }
}

async fn status(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Json(telemetry.status()),
    )
}

/// `since=UNIX_MS` from a query string; anything else is ignored.
fn since(query: Option<&str>) -> Option<u64> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="))
        .and_then(|v| v.parse().ok())
}

async fn history(
    State(telemetry): State<Telemetry>,
    RawQuery(query): RawQuery,
) -> axum::response::Response {
    match telemetry.history() {
        Some(history) => (
            [(header::CACHE_CONTROL, "no-store")],
            Json(history.report(since(query.as_deref()))),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no history: this daemon does not sample one",
        )
            .into_response(),
    }
}

async fn metrics(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        telemetry.render_metrics(),
    )
}

async fn dashboard() -> Html<&'static str> {
    Html(DASHBOARD_HTML)
}
