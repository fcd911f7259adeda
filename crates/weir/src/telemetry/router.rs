//! The HTTP routes: `/status`, `/history`, `/metrics` and the dashboard at `/`.

use std::future::Future;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Json};
use axum::routing::{get, post};
use hyper_util::service::TowerToHyperService;

use super::dashboard::DASHBOARD_HTML;
use super::registry::Telemetry;
use crate::serve::{CONNECTION_MEMORY_BYTES, Limits, PeerAddr, Server};

impl Telemetry {
    /// The telemetry routes, ready to serve on `runtime.status_addr`:
    ///
    /// - `GET /status`: the [`StatusReport`](super::StatusReport) as JSON;
    /// - `GET /history`: the [`HistoryReport`](super::history::HistoryReport) as JSON
    ///   (`?since=UNIX_MS`: only samples taken after it); 404 when no history runs;
    /// - `GET /metrics`: Prometheus text format (version 0.0.4);
    /// - `GET /`: a self-contained HTML dashboard that polls `/status` every second;
    /// - `POST /reload`: reloads the configuration file (`weir reload`), only from a
    ///   loopback address; 200 with what changed, 422 with the errors of a file that
    ///   was not applied, 403 from another address, 503 when nothing can reload.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(dashboard))
            .route("/reload", post(reload))
            .route("/status", get(status))
            .route("/history", get(history))
            .route("/metrics", get(metrics))
            .with_state(self.clone())
    }

    /// Serves [`router`](Self::router) on `listener` within `limits` (a connection
    /// cap, a header and idle timeout: [`crate::serve`]) until `shutdown` completes;
    /// in-flight requests are then answered. Its open connections are reported as the
    /// queue `status.connections`.
    ///
    /// # Cancel safety
    ///
    /// Not meant to be cancelled (its connections would be left running); complete
    /// `shutdown` instead.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        limits: Limits,
        shutdown: impl Future<Output = ()>,
    ) {
        let server = Server::new("status server", "runtime.status_max_connections", limits);
        let connections = server.connections();
        self.register_queue(
            "status.connections",
            Some(connections.max()),
            Some(connections.max().saturating_mul(CONNECTION_MEMORY_BYTES)),
            move || connections.flow_stats(),
        );
        server
            .serve(listener, TowerToHyperService::new(self.router()), shutdown)
            .await;
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

async fn reload(
    State(telemetry): State<Telemetry>,
    peer: Option<axum::Extension<PeerAddr>>,
) -> axum::response::Response {
    match peer {
        Some(axum::Extension(PeerAddr(peer))) if peer.ip().to_canonical().is_loopback() => {}
        _ => {
            return (
                StatusCode::FORBIDDEN,
                "POST /reload is accepted only from a loopback address; on this host run \
                 `weir reload` or send SIGHUP\n",
            )
                .into_response();
        }
    }
    let Some(hook) = telemetry.reload_hook() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "this server cannot reload a configuration\n",
        )
            .into_response();
    };
    let (applied, body) = hook().await;
    let code = if applied {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    (code, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

async fn dashboard() -> Html<&'static str> {
    Html(DASHBOARD_HTML)
}
