//! Which job runs next, so that no namespace's jobs delay another's.
//!
//! An agent runs at most `Limits::running` jobs at once, at most
//! `running_per_namespace` of one namespace and `running_per_key` started by one key
//! (a server's keys; a machine's own jobs have none). The next job to start is taken
//! round-robin over the namespaces with jobs queued, oldest first within each: a
//! namespace with 300 jobs queued and one whose jobs never finish still gets only its
//! share, and another namespace's job starts as soon as any slot is free. A running job
//! that only waits out retries gives its slot up (`sealvol_source::pace`); when it asks
//! for it back it goes before any queued job, since it has already started.
//!
//! `Board` is the bookkeeping alone, with no threads and no clock, so every rule here is
//! tested deterministically; the agent's dispatcher (`mod.rs`) acts on its answers.

use std::collections::{BTreeMap, BTreeSet};

use crate::jobs::JobSpec;
use sealvol_core::error::{Error, ErrorKind, Result};

/// How many jobs an agent runs and keeps queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Jobs running at once, every namespace together.
    pub running: usize,
    pub running_per_namespace: usize,
    pub running_per_key: usize,
    /// Jobs one namespace may have queued; past it a submission is refused (429).
    pub queued_per_namespace: usize,
    /// Jobs one key may have queued.
    pub queued_per_key: usize,
}

impl Limits {
    /// A machine's own agent: one job at a time (they share one machine's network and
    /// disk), and as many queued as its user asks for.
    pub const MACHINE: Limits = Limits {
        running: 1,
        running_per_namespace: 1,
        running_per_key: 1,
        queued_per_namespace: usize::MAX,
        queued_per_key: usize::MAX,
    };

    /// A shared server's: a few jobs at once, no namespace or key taking more than half,
    /// and queues long enough for a release's worth of models, short enough that one
    /// key cannot bury the others' jobs.
    pub const SERVER: Limits = Limits {
        running: 4,
        running_per_namespace: 2,
        running_per_key: 2,
        queued_per_namespace: 64,
        queued_per_key: 32,
    };

    /// Every bound at least 1: a zero would queue jobs that never run.
    pub fn check(&self) -> Result<()> {
        for (name, n) in [
            ("--jobs", self.running),
            ("--jobs-per-namespace", self.running_per_namespace),
            ("--jobs-per-key", self.running_per_key),
            ("--queue-per-namespace", self.queued_per_namespace),
            ("--queue-per-key", self.queued_per_key),
        ] {
            if n == 0 {
                return Err(Error::usage(format!("{name} 0 would run no job"))
                    .hint("give at least 1; `--no-jobs` turns jobs off"));
            }
        }
        Ok(())
    }

    /// Refuses a new job of `owner` when its namespace or key already has as many
    /// queued as it may. `queued`: the owners of the jobs queued now.
    pub fn admit<'a>(
        &self,
        owner: &Owner,
        queued: impl Iterator<Item = &'a Owner> + Clone,
    ) -> Result<()> {
        let in_ns = queued
            .clone()
            .filter(|o| o.namespace == owner.namespace)
            .count();
        if in_ns >= self.queued_per_namespace {
            return Err(full(format!(
                "namespace {} already has {in_ns} job(s) queued, its cap (serve --queue-per-namespace {})",
                owner.namespace, self.queued_per_namespace
            )));
        }
        if let Some(key) = &owner.key {
            let by_key = queued.filter(|o| o.key.as_ref() == Some(key)).count();
            if by_key >= self.queued_per_key {
                return Err(full(format!(
                    "key {key} already has {by_key} job(s) queued, its cap (serve --queue-per-key {})",
                    self.queued_per_key
                )));
            }
        }
        Ok(())
    }
}

fn full(message: String) -> Error {
    Error::new(ErrorKind::Busy, message)
        .hint("submit it again once some have run; `sealvol jobs ls` lists them, `sealvol jobs cancel ID` drops one")
}

/// Whose a job is, for the bounds: its namespace, and the key that started it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Owner {
    pub namespace: String,
    pub key: Option<String>,
}

impl Owner {
    pub fn of(spec: &JobSpec) -> Owner {
        Owner {
            namespace: spec
                .volume
                .split_once('/')
                .map_or(spec.volume.as_str(), |(ns, _)| ns)
                .to_string(),
            key: spec.started_by.clone(),
        }
    }
}

/// What the dispatcher does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Give a slot back to a started job that asks for it.
    Resume(u64),
    /// Start a queued job.
    Start(u64),
}

/// The jobs this agent has started and where each stands.
#[derive(Debug, Default)]
pub struct Board {
    /// Jobs that hold a slot.
    holding: BTreeMap<u64, Owner>,
    /// Started jobs that gave their slot up while they wait out retries.
    paused: BTreeMap<u64, Owner>,
    /// Of those, the ones asking for a slot again, in the order they asked.
    asking: Vec<u64>,
    /// Slots granted and not yet noticed by their job.
    granted: BTreeSet<u64>,
    /// The namespace the last job started in: the next start looks past it.
    turn: Option<String>,
}

impl Board {
    /// What to do next, given the jobs queued now (oldest first), or nothing.
    pub fn next(&self, queued: &[(u64, Owner)], limits: &Limits) -> Option<Pick> {
        if let Some(&id) = self
            .asking
            .iter()
            .find(|id| self.paused.get(id).is_some_and(|o| self.fits(o, limits)))
        {
            return Some(Pick::Resume(id));
        }
        let waiting: Vec<&(u64, Owner)> = queued
            .iter()
            .filter(|(id, _)| !self.holding.contains_key(id) && !self.paused.contains_key(id))
            .collect();
        let namespaces: BTreeSet<&str> =
            waiting.iter().map(|(_, o)| o.namespace.as_str()).collect();
        // Round-robin: the namespaces after the last one served, then from the start.
        let (after, upto): (Vec<&str>, Vec<&str>) = namespaces
            .into_iter()
            .partition(|ns| self.turn.as_deref().is_none_or(|t| *ns > t));
        after.into_iter().chain(upto).find_map(|ns| {
            waiting
                .iter()
                .find(|(_, o)| o.namespace == ns && self.fits(o, limits))
                .map(|(id, _)| Pick::Start(*id))
        })
    }

    /// Whether a job of `owner` may hold a slot now.
    fn fits(&self, owner: &Owner, limits: &Limits) -> bool {
        let held = self.holding.values();
        held.len() < limits.running
            && held
                .clone()
                .filter(|o| o.namespace == owner.namespace)
                .count()
                < limits.running_per_namespace
            && owner.key.as_ref().is_none_or(|k| {
                held.filter(|o| o.key.as_ref() == Some(k)).count() < limits.running_per_key
            })
    }

    /// Job `id` starts, holding a slot.
    pub fn start(&mut self, id: u64, owner: Owner) {
        self.turn = Some(owner.namespace.clone());
        self.holding.insert(id, owner);
    }

    /// Job `id` gives its slot up (it only waits out retries).
    pub fn give_up(&mut self, id: u64) {
        if let Some(o) = self.holding.remove(&id) {
            self.paused.insert(id, o);
        }
    }

    /// Job `id`, having given its slot up, asks for one again.
    pub fn ask_back(&mut self, id: u64) {
        if self.paused.contains_key(&id) && !self.asking.contains(&id) {
            self.asking.push(id);
        }
    }

    /// Gives job `id` a slot again (`Pick::Resume`).
    pub fn grant(&mut self, id: u64) {
        if let Some(o) = self.paused.remove(&id) {
            self.asking.retain(|a| *a != id);
            self.holding.insert(id, o);
            self.granted.insert(id);
        }
    }

    /// Whether job `id` was granted its slot back (once).
    pub fn take_grant(&mut self, id: u64) -> bool {
        self.granted.remove(&id)
    }

    /// Job `id` ended (or never started): its slot is free.
    pub fn end(&mut self, id: u64) {
        self.holding.remove(&id);
        self.paused.remove(&id);
        self.asking.retain(|a| *a != id);
        self.granted.remove(&id);
    }

    /// Jobs of namespace `ns` started and not ended (holding a slot or not).
    pub fn started_in(&self, ns: &str) -> usize {
        self.holding
            .values()
            .chain(self.paused.values())
            .filter(|o| o.namespace == ns)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(ns: &str, key: &str) -> Owner {
        Owner {
            namespace: ns.into(),
            key: Some(key.into()),
        }
    }

    /// Starts what the board picks until it picks nothing; returns the started ids.
    fn fill(board: &mut Board, queued: &mut Vec<(u64, Owner)>, limits: &Limits) -> Vec<u64> {
        let mut started = Vec::new();
        while let Some(pick) = board.next(queued, limits) {
            match pick {
                Pick::Start(id) => {
                    let i = queued.iter().position(|(q, _)| *q == id).unwrap();
                    let (_, o) = queued.remove(i);
                    board.start(id, o);
                    started.push(id);
                }
                Pick::Resume(id) => board.grant(id),
            }
        }
        started
    }

    #[test]
    fn a_namespace_with_many_jobs_takes_only_its_share_and_another_starts_at_once() {
        let limits = Limits::SERVER;
        let mut board = Board::default();
        let mut queued: Vec<(u64, Owner)> =
            (1..=300).map(|id| (id, owner("team-a", "a"))).collect();
        queued.push((301, owner("team-b", "b")));
        let started = fill(&mut board, &mut queued, &limits);
        assert_eq!(
            started,
            vec![1, 301, 2],
            "team-b's job is second, not 301st"
        );
        // team-a's two never finish; team-b's next job still starts.
        queued.push((302, owner("team-b", "b")));
        assert_eq!(fill(&mut board, &mut queued, &limits), vec![302]);
        assert_eq!(board.next(&queued, &limits), None, "global bound of 4");
    }

    #[test]
    fn namespaces_take_turns() {
        let limits = Limits {
            running: 1,
            ..Limits::SERVER
        };
        let mut board = Board::default();
        let mut queued: Vec<(u64, Owner)> = vec![
            (1, owner("a", "ka")),
            (2, owner("a", "ka")),
            (3, owner("a", "ka")),
            (4, owner("b", "kb")),
            (5, owner("c", "kc")),
        ];
        let mut order = Vec::new();
        while !queued.is_empty() {
            let got = fill(&mut board, &mut queued, &limits);
            assert_eq!(got.len(), 1);
            order.push(got[0]);
            board.end(got[0]);
        }
        assert_eq!(order, vec![1, 4, 5, 2, 3]);
    }

    #[test]
    fn one_key_over_many_namespaces_is_bound_by_its_key() {
        let limits = Limits::SERVER;
        let mut board = Board::default();
        let mut queued: Vec<(u64, Owner)> = (1..=6)
            .map(|id| (id, owner(&format!("ns{id}"), "admin")))
            .collect();
        assert_eq!(fill(&mut board, &mut queued, &limits).len(), 2);
    }

    #[test]
    fn a_job_waiting_out_retries_frees_its_slot_and_comes_back_first() {
        let limits = Limits {
            running: 1,
            ..Limits::SERVER
        };
        let mut board = Board::default();
        let mut queued = vec![(1, owner("a", "ka")), (2, owner("b", "kb"))];
        assert_eq!(fill(&mut board, &mut queued, &limits), vec![1]);
        board.give_up(1);
        assert_eq!(fill(&mut board, &mut queued, &limits), vec![2]);
        board.ask_back(1);
        queued.push((3, owner("c", "kc")));
        assert_eq!(board.next(&queued, &limits), None, "all slots held");
        board.end(2);
        assert_eq!(board.next(&queued, &limits), Some(Pick::Resume(1)));
        board.grant(1);
        assert!(board.take_grant(1) && !board.take_grant(1));
        assert_eq!(board.next(&queued, &limits), None);
    }

    #[test]
    fn queue_caps_name_the_cap_and_the_count() {
        let limits = Limits::SERVER;
        let a = owner("team-a", "a");
        let many = vec![a.clone(); 32];
        let e = limits.admit(&a, many.iter()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(
            e.message().contains("key a already has 32 job(s) queued"),
            "{e}"
        );
        assert!(e.message().contains("--queue-per-key 32"), "{e}");
        // Another key of the same namespace: the namespace's cap is further.
        assert!(limits.admit(&owner("team-a", "a2"), many.iter()).is_ok());
        let spread: Vec<Owner> = (0..64).map(|i| owner("team-a", &format!("k{i}"))).collect();
        let e = limits
            .admit(&owner("team-a", "new"), spread.iter())
            .unwrap_err();
        assert!(
            e.message().contains("namespace team-a already has 64"),
            "{e}"
        );
        assert!(limits.admit(&owner("team-b", "b"), spread.iter()).is_ok());
    }

    #[test]
    fn a_zero_bound_is_refused() {
        let zero = Limits {
            running_per_key: 0,
            ..Limits::SERVER
        };
        assert!(
            zero.check()
                .unwrap_err()
                .message()
                .contains("--jobs-per-key 0")
        );
    }
}
