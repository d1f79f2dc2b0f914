//! Each caller's share of the server: how many requests one key (or all callers with
//! no key together) may have under way at once. A key past its share is answered 429
//! at once, its request read no further, so one tenant's slow readers or stalled
//! uploads hold at most its share of the connections, never the rest.
//!
//! A request's share is held until its answer's last byte is sent (`Held`, the body
//! of the answer, carries it), since a slow reader holds its connection that long.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// Who a request is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The holder of the key by this name (or a fellow server's pass in its name).
    Key(String),
    /// Requests without a key: the probes and the ring's id.
    Anonymous,
}

pub struct Shares {
    per_key: usize,
    anonymous: usize,
    under_way: Mutex<HashMap<Caller, usize>>,
}

/// One request's part of its caller's share, given back when dropped.
pub struct Share {
    shares: Arc<Shares>,
    caller: Caller,
}

impl Shares {
    pub fn new(per_key: usize, anonymous: usize) -> Arc<Shares> {
        Arc::new(Shares {
            per_key: per_key.max(1),
            anonymous: anonymous.max(1),
            under_way: Mutex::new(HashMap::new()),
        })
    }

    fn under_way(&self) -> std::sync::MutexGuard<'_, HashMap<Caller, usize>> {
        self.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A part of `caller`'s share, or the refusal that names it and the count.
    pub fn take(self: &Arc<Self>, caller: Caller) -> Result<Share, String> {
        let cap = match caller {
            Caller::Key(_) => self.per_key,
            Caller::Anonymous => self.anonymous,
        };
        let mut under_way = self.under_way();
        let n = under_way.entry(caller.clone()).or_default();
        if *n >= cap {
            return Err(match &caller {
                Caller::Key(k) => format!(
                    "key {k} has {n} requests under way, its share of this server (serve --requests-per-key {cap})"
                ),
                Caller::Anonymous => format!(
                    "{n} requests without a key are under way, their share of this server ({cap})"
                ),
            });
        }
        *n += 1;
        Ok(Share {
            shares: Arc::clone(self),
            caller,
        })
    }

    /// Requests under way for `caller`.
    pub fn count(&self, caller: &Caller) -> usize {
        self.under_way().get(caller).copied().unwrap_or(0)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut under_way = self.shares.under_way();
        if let Some(n) = under_way.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                under_way.remove(&self.caller);
            }
        }
    }
}

/// `response`, its body carrying `guard` until the body's last byte is sent or the
/// body is dropped (the client went away).
pub fn held<G: Send + Sync + Unpin + 'static>(response: Response, guard: G) -> Response {
    response.map(|inner| {
        Body::new(Held {
            inner,
            _guard: guard,
        })
    })
}

struct Held<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> HttpBody for Held<G> {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_past_its_share_is_refused_and_others_are_not() {
        let shares = Shares::new(2, 1);
        let a = Caller::Key("a".into());
        let held: Vec<Share> = (0..2).map(|_| shares.take(a.clone()).unwrap()).collect();
        let e = shares.take(a.clone()).err().unwrap();
        assert!(e.contains("key a has 2 requests under way"), "{e}");
        assert!(shares.take(Caller::Key("b".into())).is_ok());
        let anon = shares.take(Caller::Anonymous).unwrap();
        assert!(shares.take(Caller::Anonymous).is_err());
        drop(anon);
        assert!(shares.take(Caller::Anonymous).is_ok());
        drop(held);
        assert_eq!(shares.count(&a), 0);
    }
}
