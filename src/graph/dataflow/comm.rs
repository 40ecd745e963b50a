//! The collective operations the graph algorithms are written in, over one timely dataflow per
//! worker: a *round* sends records, advances the inputs to the next timestamp and steps the
//! worker until the probe shows that every record of the round has been delivered everywhere.
//!
//! Three channels, all `Vec` containers (bincode on the wire):
//! - `pairs`: `(node, value)` records routed to the node's owner (`node % peers`) — the
//!   per-iteration contributions, already combined per destination by the sender;
//! - `broadcast`: `(worker, values)` delivered to every worker, reduced in worker order so that
//!   every worker computes the same sums bit for bit and takes the same decisions (stop or go
//!   on, which seeds to trust);
//! - `gather`: `(node, value)` records routed to worker 0, which assembles the results.
//!
//! A driver loop around a fixed dataflow (rather than one `iterate` scope per algorithm) keeps
//! each algorithm a plain loop with the same update as the in-process CSR engine, which is what
//! makes the results agree with it to rounding.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Exchange, Input, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;

type Pairs = Vec<(u32, f64)>;
type Shouts = Vec<(u32, Vec<f64>)>;
/// Received records by the round (timestamp) they were sent in: a faster worker's records of
/// the next round can arrive before this worker has seen the current one complete.
type Inbox<C> = Rc<RefCell<BTreeMap<u64, C>>>;

/// The timestamp of a batch (rounds are totally ordered: a stamp has one time).
fn time_of(stamp: &timely::progress::Stamp<u64>) -> u64 {
    stamp.elements().first().copied().unwrap_or(0)
}

/// One worker's end of the collectives.
pub(crate) struct Comm<'w> {
    worker: &'w mut Worker,
    pairs: InputHandle<u64, CapacityContainerBuilder<Pairs>>,
    gather: InputHandle<u64, CapacityContainerBuilder<Pairs>>,
    shout: InputHandle<u64, CapacityContainerBuilder<Shouts>>,
    got_pairs: Inbox<Pairs>,
    got_gather: Inbox<Pairs>,
    got_shouts: Inbox<Shouts>,
    probe: ProbeHandle<u64>,
    round: u64,
    pub index: usize,
    pub peers: usize,
    /// Workers per process: worker w runs in process `w / threads`.
    threads: usize,
    /// Pair records this worker sent to workers of other processes.
    pub remote_records: u64,
}

impl<'w> Comm<'w> {
    pub fn new(worker: &'w mut Worker, threads: usize) -> Self {
        let index = worker.index();
        let peers = worker.peers();
        let mut pairs: InputHandle<u64, CapacityContainerBuilder<Pairs>> = InputHandle::new();
        let mut gather: InputHandle<u64, CapacityContainerBuilder<Pairs>> = InputHandle::new();
        let mut shout: InputHandle<u64, CapacityContainerBuilder<Shouts>> = InputHandle::new();
        let got_pairs: Inbox<Pairs> = Rc::default();
        let got_gather: Inbox<Pairs> = Rc::default();
        let got_shouts: Inbox<Shouts> = Rc::default();
        let probe = ProbeHandle::new();
        let (p, g, s) = (got_pairs.clone(), got_gather.clone(), got_shouts.clone());
        worker.dataflow::<u64, _, _>(|scope| {
            scope
                .input_from(&mut pairs)
                .exchange(move |x: &(u32, f64)| u64::from(x.0) % peers as u64)
                .inspect_core(file_into(p))
                .probe_with(&probe);
            scope
                .input_from(&mut gather)
                .exchange(|_: &(u32, f64)| 0)
                .inspect_core(file_into(g))
                .probe_with(&probe);
            scope
                .input_from(&mut shout)
                .broadcast()
                .inspect_core(file_into(s))
                .probe_with(&probe);
        });
        Comm {
            worker,
            pairs,
            gather,
            shout,
            got_pairs,
            got_gather,
            got_shouts,
            probe,
            round: 0,
            index,
            peers,
            threads: threads.max(1),
            remote_records: 0,
        }
    }

    /// The worker that owns `node`.
    pub fn owner(&self, node: u32) -> usize {
        node as usize % self.peers
    }

    /// Rounds run so far.
    pub fn rounds(&self) -> u64 {
        self.round
    }

    /// Completes a round: everything sent so far is delivered when this returns.
    fn round(&mut self) {
        self.round += 1;
        self.pairs.advance_to(self.round);
        self.gather.advance_to(self.round);
        self.shout.advance_to(self.round);
        let (probe, round) = (&self.probe, self.round);
        // Park (up to 1 ms; woken as soon as records arrive) instead of spinning: with more
        // workers than cores, a spinning worker takes the core a peer needs to finish its
        // part of the round.
        self.worker
            .step_or_park_while(Some(std::time::Duration::from_millis(1)), || {
                probe.less_than(&round)
            });
    }

    /// One round: `out` goes to the owners of its nodes, `shout` to every worker. Returns the
    /// pairs this worker received and every worker's shout, in worker order.
    pub fn exchange(&mut self, out: &mut Pairs, shout: Vec<f64>) -> (Pairs, Vec<Vec<f64>>) {
        let my_process = self.index / self.threads;
        for &(node, value) in out.iter() {
            if self.owner(node) / self.threads != my_process {
                self.remote_records += 1;
            }
            self.pairs.send((node, value));
        }
        out.clear();
        self.shout.send((self.index as u32, shout));
        self.round();
        let time = self.round - 1;
        let pairs = take(&self.got_pairs, time);
        let mut shouts = take(&self.got_shouts, time);
        shouts.sort_unstable_by_key(|(w, _)| *w);
        assert_eq!(shouts.len(), self.peers, "one shout per worker and round");
        (pairs, shouts.into_iter().map(|(_, v)| v).collect())
    }

    /// Element-wise sums of every worker's `values`, added in worker order (the same on every
    /// worker).
    pub fn all_sum(&mut self, values: Vec<f64>) -> Vec<f64> {
        let (_, shouts) = self.exchange(&mut Vec::new(), values);
        sum_in_order(&shouts)
    }

    /// Every worker's `values`, in worker order.
    pub fn all_gather(&mut self, values: Vec<f64>) -> Vec<Vec<f64>> {
        self.exchange(&mut Vec::new(), values).1
    }

    /// Sends `(node, value)` records to worker 0; returns them there (empty elsewhere).
    pub fn gather(&mut self, records: impl Iterator<Item = (u32, f64)>) -> Pairs {
        for r in records {
            self.gather.send(r);
        }
        self.round();
        take(&self.got_gather, self.round - 1)
    }
}

/// An `inspect_core` callback filing each batch's records in `inbox` under its round.
#[allow(clippy::type_complexity)] // the callback type `inspect_core` asks for
fn file_into<D: Clone + 'static>(
    inbox: Inbox<Vec<D>>,
) -> impl FnMut(Result<(&timely::progress::Stamp<u64>, &Vec<D>), &[u64]>) + 'static {
    move |event| {
        if let Ok((stamp, data)) = event {
            let mut inbox = inbox.borrow_mut();
            inbox
                .entry(time_of(stamp))
                .or_default()
                .extend_from_slice(&data[..]);
        }
    }
}

/// The records of round `time` (none if nothing arrived).
fn take<C: Default>(inbox: &Inbox<C>, time: u64) -> C {
    inbox.borrow_mut().remove(&time).unwrap_or_default()
}

/// Element-wise sums of equally long vectors, in the given order.
pub(crate) fn sum_in_order(parts: &[Vec<f64>]) -> Vec<f64> {
    let len = parts.first().map_or(0, Vec::len);
    let mut out = vec![0.0; len];
    for part in parts {
        for (o, x) in out.iter_mut().zip(part) {
            *o += x;
        }
    }
    out
}
