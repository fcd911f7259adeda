//! The HTTP routes: `/status`, `/metrics` and the dashboard at `/`.

use std::future::Future;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Json};
use axum::routing::get;

use super::dashboard::DASHBOARD_HTML;
use super::registry::Telemetry;

impl Telemetry {
    /// The telemetry routes, ready to serve on `runtime.status_addr`:
    ///
    /// - `GET /status`: the [`StatusReport`](super::StatusReport) as JSON;
    /// - `GET /metrics`: Prometheus text format (version 0.0.4);
    /// - `GET /`: a self-contained HTML dashboard that polls `/status` every second.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(dashboard))
            .route("/status", get(status))
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
