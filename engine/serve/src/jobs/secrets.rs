//! The secrets of the server's jobs, one shelf per namespace
//! (`sealvol_source::secrets::Shelf::namespace`):
//!
//! - `GET /v1/secrets`: `{"secrets": [{"namespace", "name", "bytes", "updated"}, …]}`,
//!   of the namespaces the key sees; never a value;
//! - `PUT /v1/secrets/{ns}/{name}`: the body is the value (at most 64 KiB), for keys
//!   that write in `ns`; stored 0600, never logged, never sent back by any route;
//! - `DELETE /v1/secrets/{ns}/{name}`.
//!
//! A job uses the secret of its volume's namespace by that name, so a key cannot reach
//! another namespace's credentials by naming them.

#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::refs::Name;
use sealvol_source::secrets::Shelf;

use super::routes::blocking;
use super::{Desk, may_not};
use crate::keys::Grant;
use crate::reply::Reply;
use crate::reply::{failed, json};
use sealvol_wire::jobs::Listed;

/// The largest secret value: a token, a key pair, a service account's JSON.
pub const MAX_SECRET: usize = 64 << 10;

fn shelf_for(desk: &Desk, grant: &Grant, ns: &str, what: &str) -> Result<Shelf> {
    let ns = Name::parse("namespace", ns)?;
    if !grant.writes(ns.as_str()) {
        return Err(may_not(grant, ns.as_str(), what));
    }
    Ok(Shelf::namespace(&desk.state, &ns))
}

pub async fn list(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
) -> Response {
    let Some(desk) = desk else {
        return json(&serde_json::json!({ "secrets": [] }));
    };
    let listed = blocking(move || {
        let mut out = Vec::new();
        for ns in Shelf::namespaces(&desk.state)? {
            if !grant.sees(ns.as_str()) {
                continue;
            }
            for s in Shelf::namespace(&desk.state, &ns).list()? {
                out.push(Listed {
                    namespace: ns.to_string(),
                    name: s.name,
                    bytes: s.bytes,
                    updated: s.updated,
                });
            }
        }
        Ok(out)
    })
    .await;
    match listed {
        Ok(l) => json(&serde_json::json!({ "secrets": l })),
        Err(r) => r,
    }
}

pub async fn put(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path((ns, name)): Path<(String, String)>,
    body: Body,
) -> Reply {
    let Some(desk) = desk else {
        return Err(failed(Error::new(
            ErrorKind::Unavailable,
            "this server runs no jobs, so it keeps no secrets",
        )));
    };
    let shelf = match shelf_for(&desk, &grant, &ns, "store secrets") {
        Ok(s) => s,
        Err(e) => return Err(failed(e)),
    };
    let value = crate::reply::read_body(body, MAX_SECRET).await?;
    let value = value.bytes.to_vec();
    let who = grant.name.clone();
    Ok(
        match blocking(move || shelf.set(&name, &value).map(|()| name)).await {
            Ok(name) => {
                tracing::info!("secret {name} of namespace {ns} stored by key {who}");
                StatusCode::NO_CONTENT.into_response()
            }
            Err(r) => r,
        },
    )
}

pub async fn remove(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let Some(desk) = desk else {
        return failed(Error::not_found("this server keeps no secrets"));
    };
    let shelf = match shelf_for(&desk, &grant, &ns, "remove secrets") {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    match blocking(move || shelf.remove(&name)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}
