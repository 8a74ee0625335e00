//! The HTTP API: routes, the bearer token, the allowed targets, and the JSON errors.
//!
//! Every handler is control-path work: it parses, checks, reads counters, or hands a plan to
//! a recording thread ([`super::registry`]). Blocking work (opening a volume set, asking a
//! drive for its SMART log) runs on tokio's blocking threads, never on the data path.

use super::{drives, metrics, Service};
use crate::record_args::RecordArgs;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Parser;
use nvrec::device::{Access, Safety};
use nvrec::net::{BpfInstruction, BPF_INSTRUCTIONS_MAX};
use nvrec::source::SourceSpec;
use nvrec_app::{error_text, Class};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long `POST /v1/recordings` waits for the recording to begin (its set formatted or
/// opened, its buffers allocated) before it answers 201 with the state `starting`.
const BEGIN_WAIT: Duration = Duration::from_secs(30);
/// How long a stop or abort waits for the recording to end before answering with the
/// state it is in (`stopping`, `aborting`).
const END_WAIT: Duration = Duration::from_secs(60);

/// A JSON error: `{"error": MESSAGE}` with its status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// An error of a use case, with the status its class stands for.
    fn from_error(error: &anyhow::Error) -> ApiError {
        ApiError::new(http_status(Class::of_error(error)), error_text(error))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The one place that maps outcomes to HTTP statuses: bad arguments 400, refused for
/// safety (in use, holding data) 409, a failure 500; an outcome that ended as asked is
/// 200.
pub fn http_status(class: Class) -> StatusCode {
    match class {
        Class::Usage => StatusCode::BAD_REQUEST,
        Class::Refused => StatusCode::CONFLICT,
        Class::Failed => StatusCode::INTERNAL_SERVER_ERROR,
        Class::Done | Class::Stopped | Class::Aborted | Class::Degraded | Class::Full => {
            StatusCode::OK
        }
    }
}

pub fn router(service: Arc<Service>) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/metrics", get(metrics_text))
        .route("/v1/recordings", post(start_recording).get(list_recordings))
        .route("/v1/recordings/{id}", get(show_recording))
        .route("/v1/recordings/{id}/stop", post(stop_recording))
        .route("/v1/recordings/{id}/abort", post(abort_recording))
        .route("/v1/recordings/{id}/marks", post(take_mark))
        .route(
            "/v1/recordings/{id}/marks/{mark}/release",
            post(release_mark),
        )
        .route("/v1/volumes", get(volumes))
        .route("/v1/drives", get(drives_json))
        .route("/v1/service", get(service_json))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such resource") })
        .layer(middleware::from_fn_with_state(
            Arc::clone(&service),
            require_token,
        ))
        .with_state(service)
}

/// With a token file, every request carries `Authorization: Bearer TOKEN`; a missing or
/// wrong token gets 401 and nothing else happens. The dashboard's page itself holds no data
/// and is served to anyone: its requests for data carry the token given in its address
/// (`/#token=TOKEN`, a fragment, which the browser never sends).
async fn require_token(
    State(service): State<Arc<Service>>,
    request: Request,
    next: Next,
) -> Response {
    let page = request.method() == axum::http::Method::GET && request.uri().path() == "/";
    if let (Some(token), false) = (&service.token, page) {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !given.is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes())) {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: send Authorization: Bearer TOKEN with the token of the service's --token-file",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// Compares without stopping at the first difference, so that the time taken says nothing
/// about how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (index, &byte) in a.iter().enumerate() {
        difference |= (byte ^ b.get(index).copied().unwrap_or(0)) as usize;
    }
    difference == 0
}

async fn dashboard() -> Html<&'static str> {
    Html(include_str!("dashboard.html"))
}

/// The metrics: OpenMetrics for a client that asks for it (Prometheus does), else the
/// classic text format.
async fn metrics_text(
    State(service): State<Arc<Service>>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let text = metrics::encode(&service)
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "encoding the metrics"))?;
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    Ok(if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            metrics::to_classic_text(&text),
        )
            .into_response()
    })
}

/// `nvrec record`'s arguments, parsed from the request as the CLI parses its own.
#[derive(Parser, Debug)]
#[command(name = "nvrec record", no_binary_name = true)]
struct RecordRequest {
    #[command(flatten)]
    args: RecordArgs,
}

/// What a request asks `nvrec record` for: its arguments, and the capture filter given
/// inline (never a file: the service reads none).
#[derive(Debug)]
struct RecordBody {
    argv: Vec<String>,
    filter: Option<Vec<BpfInstruction>>,
}

/// The answer to a `filter_bpf` that is not a program: it quotes nothing, neither the value
/// nor anything from a file of that name (none is read).
const FILTER_IS_INLINE: &str = "filter_bpf is the program itself, never a file (the service \
     reads no files): give the text `tcpdump -ddd EXPR` prints, as a string (\"4\\n40 0 0 12\\n...\"), \
     or its instructions as a list of [code, jt, jf, k] (\"filter_bpf\": [[40, 0, 0, 12], ...])";

/// The capture filter of a request's `filter_bpf`: the text `tcpdump -ddd EXPR` prints, or
/// a list of instructions `[code, jt, jf, k]` (struct sock_filter's fields, in its order and
/// in tcpdump's). Anything else, a path above all, is refused without being opened.
fn inline_filter(value: &Value) -> ApiResult<Option<Vec<BpfInstruction>>> {
    let program = match value {
        Value::Null | Value::Bool(false) => return Ok(None),
        Value::String(text) => {
            // tcpdump's text begins with the instruction count; a path never does.
            let first = text.lines().map(str::trim).find(|line| !line.is_empty());
            if first.is_none_or(|line| line.parse::<u64>().is_err()) {
                return Err(ApiError::bad_request(FILTER_IS_INLINE));
            }
            nvrec::net::parse_bpf_program(text)
                .map_err(|error| ApiError::bad_request(format!("filter_bpf: {error}")))?
        }
        Value::Array(items) => {
            if items.is_empty() || items.len() > BPF_INSTRUCTIONS_MAX {
                return Err(ApiError::bad_request(format!(
                    "filter_bpf: {} instructions; a program has 1 to {BPF_INSTRUCTIONS_MAX}",
                    items.len()
                )));
            }
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    instruction(item).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "filter_bpf: instruction {index} is not [code, jt, jf, k] \
                             (code 0-65535, jt and jf 0-255, k 0-4294967295 or a negative 32-bit number)"
                        ))
                    })
                })
                .collect::<ApiResult<Vec<_>>>()?
        }
        _ => return Err(ApiError::bad_request(FILTER_IS_INLINE)),
    };
    Ok(Some(program))
}

/// One instruction, `[code, jt, jf, k]`; a negative k (tcpdump prints some so) is its two's
/// complement.
fn instruction(item: &Value) -> Option<BpfInstruction> {
    let Value::Array(fields) = item else {
        return None;
    };
    let [code, jt, jf, k] = fields.as_slice() else {
        return None;
    };
    let k = k.as_i64()?;
    Some(BpfInstruction {
        code: u16::try_from(code.as_u64()?).ok()?,
        jt: u8::try_from(jt.as_u64()?).ok()?,
        jf: u8::try_from(jf.as_u64()?).ok()?,
        k: u32::try_from(k)
            .ok()
            .or_else(|| i32::try_from(k).ok().map(|k| k as u32))?,
    })
}

/// Turns a request body (`{"targets": [...], "source": "pattern", "rate": "100M", ...}`)
/// into `nvrec record`'s arguments: each key is an option (`sync_interval` or
/// `sync-interval`), `true` a flag, a list a repeated option; `targets` are the targets;
/// `filter_bpf` is the capture filter itself ([`inline_filter`]), never `--filter-bpf FILE`.
/// Values are passed as `--option=VALUE`, so that no value is ever read as an option, and a
/// key is an option's name only (letters, digits, `-`, `_`), so that no key carries a value.
fn record_argv(body: &[u8]) -> ApiResult<RecordBody> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("the body is not JSON: {error}")))?;
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request(
            "the body is a JSON object of `nvrec record` options, such as \
             {\"targets\": [\"/dev/nvme0n1\"], \"source\": \"pattern\", \"duration\": \"10s\"}",
        ));
    };
    let scalar = |key: &str, value: &Value| -> ApiResult<String> {
        match value {
            Value::String(text) => Ok(text.clone()),
            Value::Number(number) => Ok(number.to_string()),
            _ => Err(ApiError::bad_request(format!(
                "{key}: give a string or a number"
            ))),
        }
    };
    let mut argv = Vec::new();
    let mut targets = Vec::new();
    let mut filter = None;
    for (key, value) in &object {
        let name_like = key.starts_with(|c: char| c.is_ascii_alphanumeric())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_like {
            return Err(ApiError::bad_request(format!(
                "{key:?} is not the name of an option of `nvrec record` (letters, digits, - and _)"
            )));
        }
        if key.replace('_', "-") == "filter-bpf" {
            if filter.is_some() {
                return Err(ApiError::bad_request("filter_bpf is given twice"));
            }
            filter = inline_filter(value)?;
            continue;
        }
        if key == "targets" {
            match value {
                Value::Array(items) => {
                    for item in items {
                        targets.push(scalar(key, item)?);
                    }
                }
                other => targets.push(scalar(key, other)?),
            }
            continue;
        }
        let option = format!("--{}", key.replace('_', "-"));
        match value {
            Value::Bool(true) => argv.push(option),
            Value::Bool(false) | Value::Null => {}
            Value::Array(items) => {
                for item in items {
                    argv.push(format!("{option}={}", scalar(key, item)?));
                }
            }
            other => argv.push(format!("{option}={}", scalar(key, other)?)),
        }
    }
    argv.push("--".into());
    argv.extend(targets);
    Ok(RecordBody { argv, filter })
}

/// clap's message without its usage lines.
fn clap_message(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let text = text.split("\n\nUsage:").next().unwrap_or(&text);
    let text = text
        .split("\n\nFor more information")
        .next()
        .unwrap_or(text);
    let text = text
        .trim()
        .trim_start_matches("error: ")
        .replace("\n\n", "; ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn start_recording(
    State(service): State<Arc<Service>>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if service.is_shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is shutting down",
        ));
    }
    let body = record_argv(&body)?;
    let mut request = RecordRequest::try_parse_from(&body.argv)
        .map_err(|error| ApiError::bad_request(clap_message(&error)))?;
    // The service reads no files: a filter comes inline or not at all.
    if request.args.filter_bpf_file().is_some() {
        return Err(ApiError::bad_request(FILTER_IS_INLINE));
    }
    if let Some(program) = body.filter {
        request.args.set_filter_program(program);
    }
    // Nor does it read an archive in a directory: `--reclaim archived=` takes a store.
    if let Some(url) = request.args.reclaim_archive_url() {
        if !url.starts_with("s3://") {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "the service reads no files: --reclaim archived= takes an object store here \
                 (archived=s3://BUCKET/PREFIX)",
            ));
        }
    }
    // A signal to the service is not a recording's: marks come through its API here.
    if request.args.marks_on_signal() {
        return Err(ApiError::bad_request(
            "mark_on_signal: the service takes marks through POST /v1/recordings/ID/marks",
        ));
    }
    let plan = nvrec_app::record::plan(request.args.request())
        .map_err(|error| ApiError::from_error(&error))?;
    // Only the targets the service was started with, whatever else the request says.
    for target in &plan.targets {
        if !service.allowed.is_allowed(target) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is not a target of this service (it was started with --allow-target {})",
                    target.display(),
                    service.allowed.describe()
                ),
            ));
        }
    }
    match &plan.source_spec {
        SourceSpec::Stdin => {
            return Err(ApiError::bad_request(
                "the service has no stdin to record: give \"source\": pattern, zero, \
                 udp://ADDRESS:PORT, tcp://ADDRESS:PORT or capture:IFACE",
            ))
        }
        SourceSpec::Path(path) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "the service reads no files: --source {} is refused; give pattern, zero or a network source",
                    path.display()
                ),
            ))
        }
        _ => {}
    }
    let recording = service.registry.start(plan).map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("starting the recording thread: {error}"),
        )
    })?;
    // Until it has begun, a refusal (a target in use, holding a set) or a failure is this
    // request's answer. The recording belongs to the service from here on: a client that
    // goes away now cancels this wait, not the recording.
    super::registry::wait_begun(&recording, BEGIN_WAIT).await;
    if let Some(ended) = recording.ended() {
        if recording.counters().is_none() {
            service.registry.forget(recording.id);
            let message = ended.report["error"]
                .as_str()
                .unwrap_or("the recording ended before it began")
                .to_string();
            // Ended before it began: never a success, whatever the class says.
            let status = match http_status(ended.class) {
                StatusCode::OK => StatusCode::INTERNAL_SERVER_ERROR,
                status => status,
            };
            return Err(ApiError::new(status, message));
        }
    }
    Ok((StatusCode::CREATED, Json(recording.json(false))))
}

async fn list_recordings(State(service): State<Arc<Service>>) -> Json<Value> {
    let recordings: Vec<Value> = service
        .registry
        .all()
        .iter()
        .map(|r| r.json(false))
        .collect();
    Json(json!({ "recordings": recordings }))
}

fn find(service: &Service, id: &str) -> ApiResult<Arc<super::registry::Recording>> {
    id.parse::<u64>()
        .ok()
        .and_then(|id| service.registry.get(id))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no recording {id} in this service (GET /v1/recordings lists them)"),
            )
        })
}

async fn show_recording(
    State(service): State<Arc<Service>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(find(&service, &id)?.json(true)))
}

/// Stop: chunks already taken are written, the flush runs (Ctrl-C of `nvrec record`).
async fn stop_recording(
    State(service): State<Arc<Service>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    end_recording(&service, &id, false).await
}

/// Abort: chunks not yet submitted are dropped, in-flight ones complete, the flush runs
/// (SIGTERM of `nvrec record`).
async fn abort_recording(
    State(service): State<Arc<Service>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    end_recording(&service, &id, true).await
}

/// A mark of a running ring recording (format 1.7), as `nvrec mark` takes one: a JSON body
/// with `before` and `after` (durations as the CLI takes them, default 2m and 30s) and
/// `label`. A mark the ring cannot keep is refused (400) with the size it needs.
async fn take_mark(
    State(service): State<Arc<Service>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body: Value = match body.is_empty() {
        true => json!({}),
        false => serde_json::from_slice(&body)
            .map_err(|error| ApiError::bad_request(format!("the body is not JSON: {error}")))?,
    };
    let duration = |field: &str, default: &str| {
        let text = body.get(field).and_then(Value::as_str).unwrap_or(default);
        nvrec::unit::parse_duration(text)
            .map_err(|error| ApiError::bad_request(format!("{field}: {error}")))
    };
    let request = nvrec::recording::marks::MarkRequest {
        before: duration("before", "2m")?,
        after: duration("after", "30s")?,
        label: body
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    ask_mark(
        &service,
        &id,
        nvrec::recording::marks::MarkOrder::Take(request),
    )
    .await
}

/// Releases mark `mark` through the running recording `id`: the ring may write over it.
async fn release_mark(
    State(service): State<Arc<Service>>,
    Path((id, mark)): Path<(String, u32)>,
) -> ApiResult<Json<Value>> {
    ask_mark(
        &service,
        &id,
        nvrec::recording::marks::MarkOrder::Release(mark),
    )
    .await
}

async fn ask_mark(
    service: &Service,
    id: &str,
    order: nvrec::recording::marks::MarkOrder,
) -> ApiResult<Json<Value>> {
    let recording = find(service, id)?;
    if recording.ended().is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("recording {id} has ended: marks are taken while it records"),
        ));
    }
    let desk = Arc::clone(&recording.handle.marks);
    let wait = nvrec_app::marking::ANSWER_WAIT;
    let answer = tokio::task::spawn_blocking(move || desk.ask_and_wait(order, wait))
        .await
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
    match answer {
        Ok(answer) => Ok(Json(serde_json::to_value(&answer).unwrap_or(Value::Null))),
        Err(why) => Err(ApiError::new(
            http_status(Class::of_mark_refusal(&why)),
            why.to_string(),
        )),
    }
}

async fn end_recording(service: &Service, id: &str, abort: bool) -> ApiResult<Json<Value>> {
    let recording = find(service, id)?;
    if recording.ended().is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("recording {id} has already ended ({})", recording.state()),
        ));
    }
    if abort {
        recording.control.request_abort();
    } else {
        recording.control.request_stop();
    }
    super::registry::wait_ended(&recording, END_WAIT).await;
    Ok(Json(recording.json(false)))
}

/// What `nvrec ls --json` shows for the allowed targets, a volume set each (targets that
/// hold no set, or do not exist yet, are listed with what is the matter).
async fn volumes(State(service): State<Arc<Service>>) -> ApiResult<Json<Value>> {
    let targets = service.allowed.paths.clone();
    let value = tokio::task::spawn_blocking(move || volumes_json(&targets))
        .await
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
    Ok(Json(value))
}

fn volumes_json(targets: &[PathBuf]) -> Value {
    // Which set each target belongs to, from its own superblock.
    let mut sets: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut others = Vec::new();
    for target in targets {
        match nvrec::recording::volume::open(
            std::slice::from_ref(target),
            Access::Read,
            Safety::Check,
        ) {
            Ok(set) => sets
                .entry(set.set_uuid.to_string())
                .or_default()
                .push(target.clone()),
            Err(error) => others.push(json!({
                "path": target.display().to_string(),
                "error": error_text(&anyhow::Error::new(error)),
            })),
        }
    }
    let sets: Vec<Value> = sets
        .values()
        .map(|members| {
            let listed = nvrec::recording::volume::open(members, Access::Read, Safety::Check)
                .map_err(anyhow::Error::new)
                .and_then(|set| {
                    let entries = nvrec::recording::reader::listed(&set)?;
                    let damage = nvrec::recording::health::check(&set)?;
                    Ok(nvrec_app::listing::set_json(&set, &entries, &damage))
                });
            listed.unwrap_or_else(|error| {
                json!({
                    "targets": members.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                    "error": error_text(&error),
                })
            })
        })
        .collect();
    json!({ "volume_sets": sets, "not_volumes": others })
}

async fn drives_json(State(service): State<Arc<Service>>) -> Json<Value> {
    Json(json!({ "drives": drives::snapshot(&service.drives) }))
}

async fn service_json(State(service): State<Arc<Service>>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "allowed_targets": service.allowed.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "running": service.registry.running().len(),
        "uptime_s": service.started.elapsed().as_secs_f64(),
        "shutting_down": service.is_shutting_down(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_becomes_record_arguments() {
        let argv = record_argv(
            br#"{"targets": ["/a", "/b"], "source": "pattern", "rate": "100M", "ring": true,
                 "append": false, "sync_interval": 2}"#,
        )
        .unwrap()
        .argv;
        assert_eq!(
            argv,
            [
                "--rate=100M",
                "--ring",
                "--source=pattern",
                "--sync-interval=2",
                "--",
                "/a",
                "/b"
            ]
        );
        let request = RecordRequest::try_parse_from(&argv).unwrap();
        assert_eq!(request.args.targets_for_test().len(), 2);
    }

    #[test]
    fn a_value_is_never_an_option() {
        let argv = record_argv(br#"{"targets": ["--overwrite"], "label": "--overwrite"}"#)
            .unwrap()
            .argv;
        let request = RecordRequest::try_parse_from(&argv).unwrap();
        assert_eq!(
            request.args.targets_for_test(),
            [PathBuf::from("--overwrite")]
        );
    }

    #[test]
    fn unknown_options_get_clap_s_message() {
        let argv = record_argv(br#"{"targets": ["/a"], "colour": "red"}"#)
            .unwrap()
            .argv;
        let error = RecordRequest::try_parse_from(&argv).unwrap_err();
        let message = clap_message(&error);
        assert!(
            message.contains("unexpected argument '--colour"),
            "{message}"
        );
        assert!(!message.contains("Usage"), "{message}");
    }

    #[test]
    fn a_filter_comes_inline_as_text_or_instructions() {
        let text = "4\n128 0 0 0\n37 0 1 1000\n6 0 0 262144\n6 0 0 0\n";
        let from_text = record_argv(
            json!({"targets": ["/a"], "source": "capture:lo", "filter_bpf": text})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        let from_list = record_argv(
            br#"{"targets": ["/a"], "source": "capture:lo",
                 "filter-bpf": [[128, 0, 0, 0], [37, 0, 1, 1000], [6, 0, 0, 262144], [6, 0, 0, 0]]}"#,
        )
        .unwrap();
        let expected = nvrec::net::parse_bpf_program(text).unwrap();
        assert_eq!(from_text.filter.as_deref(), Some(&expected[..]));
        assert_eq!(from_list.filter.as_deref(), Some(&expected[..]));
        // Never an option of the CLI: no --filter-bpf FILE to read.
        assert_eq!(from_text.argv, ["--source=capture:lo", "--", "/a"]);
        assert_eq!(from_list.argv, from_text.argv);
        // A negative k is its two's complement, as in tcpdump's text.
        let negative = inline_filter(&json!([[6, 0, 0, -1]])).unwrap().unwrap();
        assert_eq!(negative[0].k, u32::MAX);
        assert_eq!(inline_filter(&Value::Null).unwrap(), None);
    }

    #[test]
    fn a_filter_that_names_a_file_is_refused_unread() {
        for value in [
            json!("/etc/shadow"),
            json!("f.bpf"),
            json!("./4"),
            json!(""),
            json!(true),
            json!(4),
            json!({"file": "/etc/shadow"}),
        ] {
            let error = inline_filter(&value).unwrap_err();
            assert_eq!(error.status, StatusCode::BAD_REQUEST, "{value}");
            assert_eq!(error.message, FILTER_IS_INLINE, "{value}");
        }
        for value in [
            json!([]),
            json!([[6, 0, 0]]),
            json!([[6, 0, 300, 0]]),
            json!([[70000, 0, 0, 0]]),
            json!([[6, 0, 0, 99999999999u64]]),
            json!([["6", 0, 0, 0]]),
            json!("2\n6 0 0 0"),
        ] {
            let error = inline_filter(&value).unwrap_err();
            assert_eq!(error.status, StatusCode::BAD_REQUEST, "{value}");
            assert!(
                error.message.starts_with("filter_bpf: "),
                "{value}: {}",
                error.message
            );
        }
        // Nor can a key carry the option with a value of its own, or name it twice.
        for body in [
            &br#"{"targets": ["/a"], "filter-bpf=/etc/shadow": true}"#[..],
            br#"{"targets": ["/a"], "filter_bpf": [[6, 0, 0, 0]], "filter-bpf": "1
6 0 0 0"}"#,
            br#"{"targets": ["/a"], "": true}"#,
            br#"{"targets": ["/a"], "-filter-bpf": "/etc/shadow"}"#,
        ] {
            let error = record_argv(body).unwrap_err();
            assert_eq!(error.status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
