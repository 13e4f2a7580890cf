//! Kafka Connect's REST API (3.x/4.x paths, JSON shapes, status codes and error bodies) over the
//! worker's connectors, on axum. Errors are `{"error_code": N, "message": "..."}`. Values of
//! password-type keys are shown as `[hidden]` in every response.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Json;
use serde_json::{json, Map, Value};

use super::{State as ConnectorState, Target, Worker, WorkerError};
use crate::config::providers::is_reference_only;
use crate::config::security::is_secret;
use crate::config::POSTGRES_CONNECTOR_CLASS;

/// The Connect version the API speaks (Debezium 3.6's runtime).
pub const CONNECT_VERSION: &str = "4.3.0";
use crate::config::DEBEZIUM_VERSION;

type Shared = Arc<Worker>;

impl IntoResponse for WorkerError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(json!({"error_code": self.status, "message": self.message}))).into_response()
    }
}

fn error(status: u16, message: impl Into<String>) -> WorkerError {
    WorkerError { status, message: message.into() }
}

/// A JSON request body, refused as Connect refuses it: 415 without a JSON content type, and a body
/// that is not JSON as a 400 in Connect's error shape (Connect itself answers 500 there).
struct JsonBody(Value);

impl<S: Send + Sync> axum::extract::FromRequest<S> for JsonBody {
    type Rejection = WorkerError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::rejection::JsonRejection;
        match Json::<Value>::from_request(req, state).await {
            Ok(Json(v)) => Ok(JsonBody(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(error(415, "HTTP 415 Unsupported Media Type")),
            Err(e) => Err(error(400, e.body_text())),
        }
    }
}

/// Connect refuses a config without `connector.class` before anything else.
fn require_class(config: &BTreeMap<String, String>) -> Result<(), WorkerError> {
    match config.get("connector.class") {
        Some(c) if !c.trim().is_empty() => Ok(()),
        _ => Err(error(400, "Connector config contains no connector type")),
    }
}

/// The API; with `auth`, every route needs a listed user (Connect's basic auth extension).
pub fn router(worker: Shared, auth: Option<super::auth::BasicAuth>) -> axum::Router {
    guarded(routes(worker), auth)
}

fn guarded(routes: axum::Router, auth: Option<super::auth::BasicAuth>) -> axum::Router {
    match auth {
        Some(auth) => routes.layer(axum::middleware::from_fn_with_state(auth, super::auth::require)),
        None => routes,
    }
}

/// The API behind a switch: until `app` holds the worker's routes (the worker has started),
/// `/health` answers 503 `starting` at once, and any other call waits for them, as a call to Connect
/// waits for its herder, for up to `wait`, then 503 (see [`starting`]). With `auth`, every request
/// needs a listed user, a waiting one too.
pub fn front(
    app: tokio::sync::watch::Receiver<Option<axum::Router>>,
    auth: Option<super::auth::BasicAuth>,
    wait: std::time::Duration,
) -> axum::Router {
    let switch = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let mut app = app.clone();
        async move {
            use tower::ServiceExt;
            let current = app.borrow().clone();
            let routes = match current {
                Some(routes) => Some(routes),
                None if req.uri().path() == "/health" => None,
                None => match tokio::time::timeout(wait, app.wait_for(Option::is_some)).await {
                    Ok(Ok(ready)) => ready.clone(),
                    _ => None,
                },
            };
            match routes {
                Some(routes) => match routes.oneshot(req).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
                None => starting(req.uri().path()),
            }
        }
    });
    guarded(switch, auth)
}

/// The worker's routes, without authentication (see [`front`]).
pub fn routes(worker: Shared) -> axum::Router {
    let admin = worker.admin_endpoints();
    let routes = axum::Router::new()
        .route("/", get(root))
        .route("/connectors", get(list).post(create))
        .route("/connectors/{name}", get(info).delete(delete))
        .route("/connectors/{name}/config", get(config).put(put_config).patch(patch_config))
        .route("/connectors/{name}/status", get(status))
        .route("/connectors/{name}/tasks", get(tasks))
        .route("/connectors/{name}/topics", get(topics))
        .route("/connectors/{name}/topics/reset", put(reset_topics))
        .route("/connectors/{name}/tasks/{task}/status", get(task_status))
        .route("/connectors/{name}/tasks/{task}/restart", post(restart_task))
        .route("/connectors/{name}/restart", post(restart))
        .route("/connectors/{name}/pause", put(pause))
        .route("/connectors/{name}/resume", put(resume))
        .route("/connectors/{name}/stop", put(stop))
        .route("/connectors/{name}/offsets", get(offsets).patch(alter_offsets).delete(reset_offsets))
        .route("/connector-plugins", get(plugins))
        .route("/metrics", get(metrics))
        .route("/connector-plugins/{class}/config", get(plugin_config))
        .route("/connector-plugins/{class}/config/validate", put(validate))
        .route("/health", get(health));
    // As Connect: `admin.listeners` set (to nothing, or to a listener of its own, which pgoutbox
    // does not serve) takes the admin endpoints off the REST listener.
    let routes = match admin {
        true => {
            routes.route("/admin/loggers", get(loggers)).route("/admin/loggers/{logger}", get(logger).put(set_logger))
        }
        false => routes,
    };
    routes
        .fallback(|| async { error(404, "HTTP 404 Not Found") })
        // Connect answers a method a resource does not have in its error shape too.
        .method_not_allowed_fallback(|| async { error(405, "HTTP 405 Method Not Allowed") })
        .with_state(worker)
}

/// Connect's `ServerInfo`: the Connect version whose API this is, and the Kafka cluster's id; with
/// pgoutbox's own version and commit beside them.
async fn root(State(w): State<Shared>) -> Json<Value> {
    Json(json!({
        "version": CONNECT_VERSION,
        "commit": crate::COMMIT,
        "kafka_cluster_id": w.kafka_cluster_id().await,
        "pgoutbox_version": env!("CARGO_PKG_VERSION"),
    }))
}

/// `GET /health` (KIP-1017): served by this router only once the worker has started (joined its
/// cluster, read its config topic, loaded its connectors); before that, `starting` answers.
async fn health() -> Json<Value> {
    Json(json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}))
}

/// What a route answers while the worker starts: `/health` 503 `starting`, as Connect's; any other
/// call that waited [`front`]'s time for the start, 503 in Connect's error shape.
pub fn starting(path: &str) -> Response {
    if path == "/health" {
        let body = json!({"status": "starting", "message": "Worker is still starting up."});
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    error(503, "The worker is still starting up (joining its cluster and reading its connectors); try again shortly")
        .into_response()
}

/// `GET /admin/loggers`: every logger with a level of its own, and the root (KIP-495).
async fn loggers() -> Json<Value> {
    let all = crate::logging::levels().all();
    Json(Value::Object(all.into_iter().map(|(n, l)| (n, logger_json(&l))).collect()))
}

fn logger_json(l: &crate::logging::LoggerLevel) -> Value {
    json!({"level": l.level, "last_modified": l.last_modified})
}

async fn logger(Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    match crate::logging::levels().level(&name) {
        Some(l) => Ok(Json(logger_json(&l))),
        None => Err(error(404, format!("Logger {name} not found."))),
    }
}

/// `PUT /admin/loggers/{logger}`: `{"level": "DEBUG"}` for this worker (200 with the loggers set),
/// or with `?scope=cluster` for every worker of the cluster (204), as Connect 3.7+ (KIP-976).
async fn set_logger(
    State(w): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
    JsonBody(body): JsonBody,
) -> Result<Response, WorkerError> {
    let level = body
        .get("level")
        .and_then(Value::as_str)
        .ok_or_else(|| error(400, "Desired 'level' parameter was not specified in request."))?;
    let Some(level) = crate::logging::parse_level(level) else {
        // Connect's status; its message repeats the value, this one names what is expected.
        return Err(error(404, crate::logging::INVALID_LEVEL));
    };
    let scope = query_param(&q, "scope").map(str::to_ascii_lowercase);
    if scope.as_deref() == Some("cluster") {
        w.set_cluster_logger_level(&name, level).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if scope.as_deref().is_some_and(|s| s != "worker") {
        tracing::warn!(
            "an /admin/loggers request named a scope other than worker or cluster; it applies to this worker"
        );
    }
    let affected = crate::logging::levels().set_level(&name, level).map_err(|m| error(500, m))?;
    Ok(Json(json!(affected)).into_response())
}

/// A configuration as the API shows it: secrets hidden (Connect shows them in clear, KAFKA-5117),
/// provider references shown as written (they say where a secret is, not what it is).
fn shown(config: &BTreeMap<String, String>) -> Value {
    Value::Object(config.iter().map(|(k, v)| (k.clone(), Value::String(masked(k, v)))).collect())
}

fn masked(key: &str, value: &str) -> String {
    if is_secret(key) && !is_reference_only(value) {
        super::HIDDEN.to_string()
    } else {
        value.to_string()
    }
}

fn info_of(w: &Worker, name: &str) -> Result<Value, WorkerError> {
    let config = w.config(name)?;
    Ok(json!({"name": name, "config": shown(&config), "tasks": [{"connector": name, "task": 0}], "type": "source"}))
}

fn status_of(w: &Worker, name: &str) -> Result<Value, WorkerError> {
    let (state, worker_id) = w.status(name)?;
    // The plugin's version in each status, as Connect 4.x reports it.
    let mut connector = json!({"state": state.name(), "worker_id": worker_id, "version": DEBEZIUM_VERSION});
    let mut task = json!({"id": 0, "state": state.name(), "worker_id": worker_id, "version": DEBEZIUM_VERSION});
    if let ConnectorState::Failed(trace) = &state {
        task["trace"] = Value::String(trace.clone());
        connector["state"] = Value::String("RUNNING".into());
    }
    if state == ConnectorState::Stopped {
        return Ok(json!({"name": name, "connector": connector, "tasks": [], "type": "source"}));
    }
    Ok(json!({"name": name, "connector": connector, "tasks": [task], "type": "source"}))
}

async fn list(State(w): State<Shared>, Query(q): Query<Vec<(String, String)>>) -> Result<Json<Value>, WorkerError> {
    let expand: Vec<String> = q.into_iter().filter(|(k, _)| k == "expand").map(|(_, v)| v).collect();
    let names = w.names();
    if expand.is_empty() {
        return Ok(Json(json!(names)));
    }
    let mut out = Map::new();
    for name in names {
        let mut entry = Map::new();
        if expand.iter().any(|e| e == "status") {
            entry.insert("status".into(), status_of(&w, &name)?);
        }
        if expand.iter().any(|e| e == "info") {
            entry.insert("info".into(), info_of(&w, &name)?);
        }
        out.insert(name, Value::Object(entry));
    }
    Ok(Json(Value::Object(out)))
}

/// A JSON object of string-able values, as Connect accepts a config.
fn config_map(v: &Value) -> Result<BTreeMap<String, String>, WorkerError> {
    let obj = v.as_object().ok_or_else(|| error(400, "the connector configuration must be a JSON object"))?;
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            _ => return Err(error(400, format!("the value of `{k}` must be a string, number or boolean"))),
        };
        out.insert(k.clone(), s);
    }
    Ok(out)
}

async fn create(
    State(w): State<Shared>,
    headers: axum::http::HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, WorkerError> {
    let config = config_map(body.get("config").ok_or_else(|| error(400, "the request has no `config`"))?)?;
    let name = match body.get("name").and_then(Value::as_str).or_else(|| config.get("name").map(String::as_str)) {
        Some(n) if !n.trim().is_empty() => n.trim().to_string(),
        _ => return Err(error(400, "Connector name is required")),
    };
    if let Some(n) = config.get("name") {
        if *n != name {
            return Err(error(
                400,
                format!("Connector name configuration ({n}) doesn't match connector name in the URL ({name})"),
            ));
        }
    }
    require_class(&config)?;
    let initial = match body.get("initial_state") {
        None | Some(Value::Null) => Target::Running,
        Some(Value::String(s)) => match s.to_ascii_uppercase().as_str() {
            "RUNNING" => Target::Running,
            "PAUSED" => Target::Paused,
            "STOPPED" => Target::Stopped,
            _ => return Err(error(400, "`initial_state` must be RUNNING, PAUSED or STOPPED")),
        },
        Some(_) => return Err(error(400, "`initial_state` must be RUNNING, PAUSED or STOPPED")),
    };
    w.create(&name, config, initial).await?;
    // As Connect: a new connector has no tasks yet when the create is answered.
    let mut created = info_of(&w, &name)?;
    created["tasks"] = json!([]);
    Ok(created_at(&w, &headers, &name, created))
}

/// 201 with `Location`, the new connector's URL, absolute as Connect's (JAX-RS resolves it against
/// the request's base URI).
fn created_at(w: &Worker, headers: &axum::http::HeaderMap, name: &str, body: Value) -> Response {
    let path = format!("/connectors/{}", encode_segment(name));
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok());
    let location = match host {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()) => {
            format!("{}://{h}{path}", if w.https() { "https" } else { "http" })
        }
        _ => path,
    };
    (StatusCode::CREATED, [(axum::http::header::LOCATION, location)], Json(body)).into_response()
}

/// A path segment, percent-encoded (RFC 3986 unreserved characters kept).
fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

async fn info(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    Ok(Json(info_of(&w, &name)?))
}

async fn config(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    Ok(Json(shown(&w.config(&name)?)))
}

async fn put_config(
    State(w): State<Shared>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, WorkerError> {
    let config = config_map(&body)?;
    require_class(&config)?;
    if let Some(n) = config.get("name") {
        if *n != name {
            return Err(error(
                400,
                format!("Connector name configuration ({n}) doesn't match connector name in the URL ({name})"),
            ));
        }
    }
    let created = w.put(&name, config, true).await?;
    let info = info_of(&w, &name)?;
    if created {
        return Ok(created_at(&w, &headers, &name, info));
    }
    Ok((StatusCode::OK, Json(info)).into_response())
}

/// PATCH: the given keys replace the current ones; a null value removes a key.
async fn patch_config(
    State(w): State<Shared>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, WorkerError> {
    let obj = body.as_object().ok_or_else(|| error(400, "the patch must be a JSON object"))?;
    let mut changes = Vec::new();
    for (k, v) in obj {
        match v {
            Value::Null => changes.push((k.clone(), None)),
            other => changes.extend(config_map(&json!({ k: other }))?.into_iter().map(|(k, v)| (k, Some(v)))),
        }
    }
    w.patch(&name, &changes).await?;
    Ok(Json(info_of(&w, &name)?))
}

/// Connect's wording for a name it does not know, per route.
fn unknown(e: WorkerError, message: String) -> WorkerError {
    if e.status == 404 {
        error(404, message)
    } else {
        e
    }
}

async fn status(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    Ok(Json(status_of(&w, &name).map_err(|e| unknown(e, format!("No status found for connector {name}")))?))
}

/// The task's configuration: the connector's, plus `task.class` as Debezium's connector adds it.
async fn tasks(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    let config = w.config(&name)?;
    let mut shown = shown(&config);
    shown["task.class"] = json!("io.debezium.connector.postgresql.PostgresConnectorTask");
    Ok(Json(json!([{"id": {"connector": name, "task": 0}, "config": shown}])))
}

/// `GET /connectors/{name}/topics` (KIP-558): the topics the connector has produced to since its
/// last reset, whichever worker runs it.
async fn topics(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    let topics = w.active_topics(&name)?;
    Ok(Json(json!({ name: {"topics": topics} })))
}

/// `PUT /connectors/{name}/topics/reset`: 202; the list starts again from the next records.
async fn reset_topics(State(w): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, WorkerError> {
    w.reset_active_topics(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

fn task_zero(task: &str, name: &str) -> Result<(), WorkerError> {
    if task == "0" {
        Ok(())
    } else {
        Err(error(404, format!("Task {name}-{task} not found")))
    }
}

async fn task_status(
    State(w): State<Shared>,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, WorkerError> {
    task_zero(&task, &name)?;
    let status = status_of(&w, &name)?;
    status["tasks"]
        .get(0)
        .cloned()
        .map(Json)
        .ok_or_else(|| error(404, format!("No status found for task {name}-{task}")))
}

async fn restart_task(
    State(w): State<Shared>,
    Path((name, task)): Path<(String, String)>,
) -> Result<StatusCode, WorkerError> {
    task_zero(&task, &name)?;
    w.restart(&name, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

struct RestartQuery {
    include_tasks: bool,
    only_failed: bool,
}

impl RestartQuery {
    fn from(q: &[(String, String)]) -> RestartQuery {
        let flag = |name: &str| query_param(q, name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        RestartQuery { include_tasks: flag("includeTasks"), only_failed: flag("onlyFailed") }
    }
}

/// A query parameter's value (the last, when it is given more than once). A boolean is read as
/// JAX-RS reads one: `true` or `false` in any case, anything else the default, never a rejection.
fn query_param<'a>(q: &'a [(String, String)], name: &str) -> Option<&'a str> {
    q.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `POST /connectors/{name}/restart`: 204 for a plain restart; with `includeTasks` or
/// `onlyFailed`, 202 with the status, as Connect 3.x answers.
async fn restart(
    State(w): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Response, WorkerError> {
    let q = RestartQuery::from(&q);
    // The states before the restart, for the answer that reports them (a plain restart has none).
    let before = if q.include_tasks || q.only_failed { Some(status_of(&w, &name)?) } else { None };
    w.restart(&name, q.only_failed).await?;
    if let Some(mut status) = before {
        // As Connect: what the restart covers is reported RESTARTING.
        let restarting = |s: &Value| !q.only_failed || s["state"] == "FAILED";
        if restarting(&status["connector"]) {
            status["connector"]["state"] = json!("RESTARTING");
        }
        if q.include_tasks {
            for t in status["tasks"].as_array_mut().into_iter().flatten() {
                if restarting(t) {
                    t["state"] = json!("RESTARTING");
                    t.as_object_mut().map(|o| o.remove("trace"));
                }
            }
        }
        return Ok((StatusCode::ACCEPTED, Json(status)).into_response());
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn pause(State(w): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, WorkerError> {
    w.set_target(&name, Target::Paused).await.map_err(|e| unknown(e, format!("Unknown connector {name}")))?;
    Ok(StatusCode::ACCEPTED)
}

async fn resume(State(w): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, WorkerError> {
    w.set_target(&name, Target::Running).await.map_err(|e| unknown(e, format!("Unknown connector {name}")))?;
    Ok(StatusCode::ACCEPTED)
}

async fn stop(State(w): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, WorkerError> {
    w.set_target(&name, Target::Stopped).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete(State(w): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, WorkerError> {
    w.delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /connectors/{name}/offsets`: Debezium's PostgreSQL offset at the slot's live position.
async fn offsets(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    let config = w.config(&name)?;
    let _turn = w.heavy_turn().await?;
    let cfg = w.effective(&config).map_err(|e| error(400, e.to_string()))?;
    super::offsets::show(&cfg).await.map(Json).map_err(refused)
}

fn refused(r: super::offsets::Refused) -> WorkerError {
    error(r.0, r.1)
}

/// Connect's rule for altering or resetting offsets: the connector is stopped first.
fn must_be_stopped(w: &Worker, name: &str) -> Result<(), WorkerError> {
    if w.state(name)? != ConnectorState::Stopped {
        return Err(error(400, format!("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")));
    }
    Ok(())
}

/// `PATCH /connectors/{name}/offsets`: moves the slot forward (see `worker::offsets`).
async fn alter_offsets(
    State(w): State<Shared>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, WorkerError> {
    let config = w.config(&name)?;
    must_be_stopped(&w, &name)?;
    let _turn = w.heavy_turn().await?;
    let cfg = w.effective(&config).map_err(|e| error(400, e.to_string()))?;
    super::offsets::alter(&cfg, &body).await.map(Json).map_err(refused)
}

/// `DELETE /connectors/{name}/offsets`: drops the slot so the next start begins again.
async fn reset_offsets(State(w): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, WorkerError> {
    let config = w.config(&name)?;
    must_be_stopped(&w, &name)?;
    let _turn = w.heavy_turn().await?;
    let cfg = w.effective(&config).map_err(|e| error(400, e.to_string()))?;
    super::offsets::reset(&cfg).await.map(Json).map_err(refused)
}

/// Every connector's pgoutbox and Debezium metrics, for Prometheus.
async fn metrics(State(w): State<Shared>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok());
    let (format, content_type) = crate::exposition::negotiate(accept);
    ([(axum::http::header::CONTENT_TYPE, content_type)], w.metrics_text(format)).into_response()
}

/// Every plugin pgoutbox implements besides the connector: transforms, predicates, converters and
/// header converters, as (class, Connect's plugin type, the version of the release whose behaviour
/// it matches: Kafka's for Kafka's, Debezium's for Debezium's).
fn other_plugins() -> Vec<(String, &'static str, &'static str)> {
    use crate::connect::converter::{BINARY_DATA_CONVERTER, JSON_CONVERTER, SIMPLE_HEADER_CONVERTER, STRING_CONVERTER};
    use crate::connect::transforms::{predicates, KAFKA_TRANSFORMS, KAFKA_TRANSFORMS_PACKAGE};
    let mut out = Vec::new();
    for t in KAFKA_TRANSFORMS {
        out.push((format!("{KAFKA_TRANSFORMS_PACKAGE}{t}"), "transformation", CONNECT_VERSION));
    }
    for t in [
        crate::outbox::EVENT_ROUTER_CLASS,
        crate::debezium::transforms::HEADER_TO_VALUE,
        crate::debezium::transforms::PARTITION_ROUTING,
        crate::debezium::transforms::TIMEZONE_CONVERTER,
        crate::debezium::transforms::ENFORCE_RECORD_SIZE,
        crate::debezium::message::DECODE_CONTENT_CLASS,
    ] {
        out.push((t.to_string(), "transformation", DEBEZIUM_VERSION));
    }
    for p in predicates::CLASSES {
        out.push((p.to_string(), "predicate", CONNECT_VERSION));
    }
    for (c, v) in [
        (JSON_CONVERTER, CONNECT_VERSION),
        (STRING_CONVERTER, CONNECT_VERSION),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", CONNECT_VERSION),
        (BINARY_DATA_CONVERTER, DEBEZIUM_VERSION),
        ("io.debezium.converters.ByteArrayConverter", DEBEZIUM_VERSION),
        // The registry converters report no version (Connect lists them without one).
        (crate::connect::registry::CONFLUENT_AVRO, UNDEFINED_VERSION),
        (crate::connect::registry::CONFLUENT_PROTOBUF, UNDEFINED_VERSION),
        (crate::connect::registry::APICURIO_AVRO, UNDEFINED_VERSION),
    ] {
        out.push((c.to_string(), "converter", v));
    }
    for c in [SIMPLE_HEADER_CONVERTER, JSON_CONVERTER, STRING_CONVERTER] {
        out.push((c.to_string(), "header_converter", CONNECT_VERSION));
    }
    out
}

/// A plugin without a version: Connect's `PluginDesc.UNDEFINED_VERSION`, left out of its listing.
const UNDEFINED_VERSION: &str = "undefined";

/// `GET /connector-plugins[?connectorsOnly=false]`: the connector, or (KIP-769) every plugin
/// pgoutbox implements.
async fn plugins(Query(q): Query<Vec<(String, String)>>) -> Json<Value> {
    let connector = json!({"class": POSTGRES_CONNECTOR_CLASS, "type": "source", "version": DEBEZIUM_VERSION});
    // As JAX-RS reads the boolean (default true): only `false`, in any case, lists them all.
    let all = query_param(&q, "connectorsOnly").is_some_and(|v| v.eq_ignore_ascii_case("false"));
    let mut out = vec![connector];
    if all {
        out.extend(other_plugins().into_iter().map(|(class, kind, version)| match version {
            UNDEFINED_VERSION => json!({"class": class, "type": kind}),
            _ => json!({"class": class, "type": kind, "version": version}),
        }));
    }
    Json(Value::Array(out))
}

/// The connector's class as the path names it (its full name, or the simple name Connect also
/// accepts), or Connect's 404 for a plugin pgoutbox does not provide.
fn connector_plugin(class: &str) -> Result<(), WorkerError> {
    let short = class.rsplit('.').next().unwrap_or(class);
    if class == POSTGRES_CONNECTOR_CLASS || short == "PostgresConnector" || class == "Postgres" {
        return Ok(());
    }
    Err(error(404, format!("Unknown plugin {class}.")))
}

use crate::config::version_matches;

fn version_error(spec: &str) -> WorkerError {
    let range = if spec.starts_with(['[', '(']) { spec.to_string() } else { format!("[{spec},{spec}]") };
    error(
        400,
        format!("Plugin {POSTGRES_CONNECTOR_CLASS} not found that matches the version range {range}, available versions: [{DEBEZIUM_VERSION}]"),
    )
}

/// `GET /connector-plugins/{class}/config[?version=]`: the connector's ConfigDef.
async fn plugin_config(
    Path(class): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, WorkerError> {
    connector_plugin(&class)?;
    if let Some(spec) = query_param(&q, "version").filter(|s| !s.trim().is_empty()) {
        if !version_matches(spec, DEBEZIUM_VERSION) {
            return Err(version_error(spec));
        }
    }
    Ok(Json(Value::Array(configdef::definitions())))
}

/// `PUT /connector-plugins/{class}/config/validate`: Connect's ConfigInfos over the connector's whole
/// ConfigDef, with type errors and the error pgoutbox would start with on the key it names.
async fn validate(
    State(w): State<Shared>,
    Path(class): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, WorkerError> {
    let short = class.rsplit('.').next().unwrap_or(&class);
    if class != POSTGRES_CONNECTOR_CLASS && short != "PostgresConnector" {
        return Err(error(
            400,
            format!("Unknown connector class: {class} (pgoutbox provides {POSTGRES_CONNECTOR_CLASS})"),
        ));
    }
    let config = config_map(&body)?;
    // Parsing checks the Kafka client settings by building clients: on a blocking thread, and
    // bounded in number.
    // The turn is held by the blocking work itself: a caller that hangs up does not free it.
    let turn = w.heavy_turn().await?;
    let checked = {
        let (w, config) = (w.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            w.effective(&config).err().map(|e| (error_key(&e), e.to_string()))
        })
    };
    let problem = checked.await.map_err(|_| error(500, "the validation stopped unexpectedly"))?;
    let versions = [
        ("connector.plugin.version", DEBEZIUM_VERSION),
        ("key.converter.plugin.version", CONNECT_VERSION),
        ("value.converter.plugin.version", CONNECT_VERSION),
        ("header.converter.plugin.version", CONNECT_VERSION),
    ];
    use crate::connect::converter::{JSON_CONVERTER, SIMPLE_HEADER_CONVERTER};
    let converter = |key: &str, default: &str| w.worker_prop(key).unwrap_or(default).to_string();
    let defaults = [
        ("key.converter".to_string(), converter("key.converter", JSON_CONVERTER)),
        ("value.converter".to_string(), converter("value.converter", JSON_CONVERTER)),
        ("header.converter".to_string(), converter("header.converter", SIMPLE_HEADER_CONVERTER)),
    ];
    let defaults: Vec<(&str, &str)> = defaults.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let others = other_plugins();
    let plugins: Vec<(&str, &str, &str)> = others.iter().map(|(c, k, v)| (c.as_str(), *k, *v)).collect();
    let worker = configdef::Worker { plugin_versions: &versions, converter_defaults: &defaults, plugins: &plugins };
    Ok(Json(configdef::validate(&config, problem, masked, &worker)))
}

fn error_key(e: &crate::config::ConfigError) -> Option<String> {
    match e {
        crate::config::ConfigError::Invalid { key, .. } | crate::config::ConfigError::Missing { key, .. } => {
            Some(key.clone())
        }
        _ => None,
    }
}

mod configdef;
#[cfg(test)]
mod tests;
