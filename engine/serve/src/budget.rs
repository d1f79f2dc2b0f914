//! What requests may hold in memory at once, across all connections: bodies read whole
//! (operations' requests) and run answers waiting to be sent. Each is counted in MiB
//! against a budget, taken before the bytes are read or fetched and given back when
//! they are dropped; a request that cannot get its share within `WAIT` is answered 503.
//! So no number of stalled uploads or slow readers grows the server past the budgets.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// MiB of request bodies read whole, for all requests together.
pub const BODIES_MIB: u32 = 128;
/// MiB of run answers being sent, for all requests together.
pub const RUNS_MIB: u32 = 384;
/// How long a request waits for its share before it is told to come back.
pub const WAIT: Duration = Duration::from_secs(30);

fn bodies() -> &'static Arc<Semaphore> {
    static S: OnceLock<Arc<Semaphore>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Semaphore::new(BODIES_MIB as usize)))
}

fn runs() -> &'static Arc<Semaphore> {
    static S: OnceLock<Arc<Semaphore>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Semaphore::new(RUNS_MIB as usize)))
}

/// A share of a budget, given back when dropped.
pub struct Share(Vec<OwnedSemaphorePermit>);

impl Share {
    pub fn none() -> Share {
        Share(Vec::new())
    }

    fn mib(&self) -> u64 {
        self.0.iter().map(|p| p.num_permits() as u64).sum()
    }

    /// Grows this share of the bodies' budget to cover `bytes`; false if it could not
    /// within `WAIT`.
    pub async fn cover_body(&mut self, bytes: u64) -> bool {
        self.cover(bodies(), bytes).await
    }

    async fn cover(&mut self, budget: &Arc<Semaphore>, bytes: u64) -> bool {
        let want = bytes.div_ceil(1 << 20);
        let have = self.mib();
        if want <= have {
            return true;
        }
        let more = (want - have).min(u32::MAX as u64) as u32;
        match tokio::time::timeout(WAIT, Arc::clone(budget).acquire_many_owned(more)).await {
            Ok(Ok(p)) => {
                self.0.push(p);
                true
            }
            _ => false,
        }
    }
}

/// A share of the runs' budget for an answer of `bytes`; `None` if it could not be had
/// within `WAIT`.
pub async fn for_run(bytes: u64) -> Option<Share> {
    let mut s = Share::none();
    s.cover(runs(), bytes).await.then_some(s)
}
