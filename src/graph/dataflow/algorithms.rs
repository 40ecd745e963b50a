//! The link-analysis algorithms as rounds of [`Comm`] collectives over a worker's
//! [`Partition`]. Each is the same update as its in-process CSR counterpart
//! (`crate::graph::{pagerank, hits, salsa}`), so the two agree to rounding: contributions are
//! combined per destination by the sender and summed at the owner, and global sums are added
//! in worker order, so only the order of additions differs. The CSR engine's rank-stability
//! tracking (`top_order_last_changed`) needs the global order every iteration and is not
//! computed here.

use std::collections::BTreeMap;

use super::checkpoint::{Checkpoints, State, FINAL};
use super::comm::{sum_in_order, Comm};
use super::partition::{Adjacency, Partition};
use crate::graph::convergence::{Convergence, IterationReport};
use crate::graph::hits::l1;
use crate::graph::pagerank::error_bound;
use crate::graph::{check_damping, GraphError, Result};

/// Which way links are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Forward,
    Reverse,
}

/// Cost of one algorithm at one worker.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AlgorithmStats {
    pub name: String,
    pub iterations: usize,
    /// Collective rounds (exchanges) run, resumed ones excluded.
    pub rounds: u64,
    pub seconds: f64,
    /// `(node, value)` records sent to workers of other processes.
    pub remote_records: u64,
    /// Resumed from a checkpoint at this iteration.
    pub resumed_at: Option<usize>,
}

/// One worker's view of a running job.
pub(crate) struct Job<'a, 'w> {
    pub comm: Comm<'w>,
    pub part: &'a Partition,
    pub checkpoints: Option<Checkpoints>,
    pub stats: Vec<AlgorithmStats>,
}

impl Job<'_, '_> {
    fn adjacency(&self, direction: Direction) -> &Adjacency {
        match direction {
            Direction::Forward => &self.part.fwd,
            Direction::Reverse => &self.part.rev,
        }
    }

    /// Starts the bookkeeping of `name`.
    fn begin(&mut self, name: &str) -> (std::time::Instant, u64, u64) {
        self.stats.push(AlgorithmStats {
            name: name.to_owned(),
            ..AlgorithmStats::default()
        });
        (
            std::time::Instant::now(),
            self.comm.rounds(),
            self.comm.remote_records,
        )
    }

    fn end(&mut self, start: (std::time::Instant, u64, u64), iterations: usize) {
        let s = self.stats.last_mut().expect("begun");
        s.iterations = iterations;
        s.seconds = start.0.elapsed().as_secs_f64();
        s.rounds = self.comm.rounds() - start.1;
        s.remote_records = self.comm.remote_records - start.2;
    }

    /// The state every worker has saved for `name` at the latest common iteration, agreed in
    /// one round (no round without checkpoints: every worker has the same configuration).
    fn resume(&mut self, name: &str) -> Option<State> {
        let checkpoints = self.checkpoints.as_ref()?;
        let mine = checkpoints.available(name);
        let flat: Vec<f64> = mine
            .iter()
            .flat_map(|s| [s.iteration as f64, s.finished as u8 as f64])
            .collect();
        let all = self.comm.all_gather(flat);
        let has = |list: &Vec<f64>, it: usize| -> Option<bool> {
            list.chunks_exact(2)
                .find(|c| c[0] as usize == it)
                .map(|c| c[1] == 1.0)
        };
        let best = mine
            .iter()
            .map(|s| s.iteration)
            .filter(|&it| all.iter().all(|l| has(l, it).is_some()))
            .max()?;
        let finished = all.iter().all(|l| has(l, best) == Some(true));
        let mut state = mine.into_iter().find(|s| s.iteration == best)?;
        if state.finished && !finished {
            return None;
        }
        state.finished = finished;
        self.stats.last_mut().expect("begun").resumed_at = Some(best);
        Some(state)
    }

    /// Saves `state` if checkpoints are on and `force` or the iteration is due; a failure at
    /// any worker fails the job at every worker (one round).
    fn checkpoint(
        &mut self,
        name: &str,
        iteration: usize,
        force: bool,
        state: impl FnOnce() -> State,
    ) -> Result<()> {
        let Some(checkpoints) = self.checkpoints.clone() else {
            return Ok(());
        };
        if !(force || checkpoints.due(iteration)) {
            return Ok(());
        }
        let state = state();
        let mine = checkpoints.save(name, &state).err();
        let failed = self.comm.all_sum(vec![mine.is_some() as u8 as f64])[0];
        if failed > 0.0 {
            let message = match mine {
                Some(e) => format!(
                    "cannot write the checkpoint of {name} in {}: {e:#}",
                    checkpoints.dir.display()
                ),
                None => format!("another worker could not write its checkpoint of {name}"),
            };
            // The disk or the directory failed, not the user's input.
            return Err(GraphError::Job(message));
        }
        Ok(())
    }
}

fn report_scalars(r: &IterationReport) -> Vec<f64> {
    vec![r.iterations as f64, r.converged as u8 as f64, r.residual]
}

fn report_of(scalars: &[f64]) -> IterationReport {
    IterationReport {
        iterations: scalars.first().copied().unwrap_or(0.0) as usize,
        converged: scalars.get(1) == Some(&1.0),
        residual: scalars.get(2).copied().unwrap_or(f64::INFINITY),
        ..IterationReport::default()
    }
}

/// PageRank along `direction` with the teleport distribution `teleport` (this worker's
/// entries, summing to 1 over all workers; `None` is uniform): SPEC §2.1 with the stopping
/// rule of SPEC §2 on the error bound, as `crate::graph::pagerank::pagerank`. One round per
/// iteration: the contributions of `x_t` travel with the dangling mass of `x_t` and the change
/// that produced it, so the stop decision for `x_t` costs no extra round.
pub(crate) fn pagerank(
    job: &mut Job,
    name: &str,
    direction: Direction,
    damping: f64,
    teleport: Option<&[f64]>,
    conv: &Convergence,
) -> Result<(Vec<f64>, IterationReport)> {
    check_damping(damping)?;
    conv.check()?;
    let start = job.begin(name);
    let part = job.part;
    let (n, nl) = (part.n, part.n_local());
    if n == 0 {
        job.end(start, 0);
        return Ok((Vec::new(), IterationReport::default()));
    }
    let alpha = damping;
    // The teleport vector (TrustRank's seeds) is part of what a checkpoint means.
    let key = match teleport {
        None => name.to_owned(),
        Some(t) => {
            use std::hash::Hasher;
            let mut h = siphasher::sip::SipHasher13::new_with_keys(0, 0);
            t.iter().for_each(|x| h.write_u64(x.to_bits()));
            format!("{name}-{:016x}", h.finish())
        }
    };
    let adjacency = job.adjacency(direction);
    let inv: Vec<f64> = (0..nl)
        .map(|k| match adjacency.degree(k) {
            0 => 0.0,
            d => 1.0 / d as f64,
        })
        .collect();
    let uniform = 1.0 / n as f64;
    let mut x = vec![uniform; nl];
    let mut iteration = 0;
    let mut change = f64::INFINITY;
    let mut report = IterationReport::default();
    if let Some(state) = job.resume(&key) {
        if state.finished {
            job.end(start, report_of(&state.scalars).iterations);
            let mut vectors = state.vectors;
            return Ok((vectors.swap_remove(0), report_of(&state.scalars)));
        }
        iteration = state.iteration;
        x = state.vectors.into_iter().next().unwrap_or(x);
        change = state.scalars.first().copied().unwrap_or(f64::INFINITY);
    }
    let (mut acc, mut out, mut next) = (Vec::new(), Vec::new(), vec![0.0; nl]);
    loop {
        let adjacency = job.adjacency(direction);
        if iteration < conv.max_iter {
            adjacency.push_sum(|k| x[k] * inv[k], &mut acc, &mut out);
        }
        let dangling: f64 = (0..nl).filter(|&k| inv[k] == 0.0).map(|k| x[k]).sum();
        let (pairs, shouts) = job.comm.exchange(&mut out, vec![dangling, change]);
        let sums = sum_in_order(&shouts);
        if iteration > 0 {
            report.iterations = iteration;
            report.residual = error_bound(alpha, sums[1]);
            if report.residual < conv.tol_per_node * n as f64 {
                report.converged = true;
                break;
            }
        }
        if iteration >= conv.max_iter {
            break;
        }
        let dangling_mass = sums[0];
        next.iter_mut().for_each(|v| *v = 0.0);
        for (t, v) in pairs {
            next[part.local(t)] += v;
        }
        change = 0.0;
        for k in 0..nl {
            let vk = teleport.map_or(uniform, |t| t[k]);
            let value = vk * (1.0 - alpha + alpha * dangling_mass) + alpha * next[k];
            change += (value - x[k]).abs();
            next[k] = value;
        }
        std::mem::swap(&mut x, &mut next);
        iteration += 1;
        job.checkpoint(&key, iteration, false, || State {
            iteration,
            finished: false,
            vectors: vec![x.clone()],
            scalars: vec![change],
        })?;
    }
    job.checkpoint(&key, iteration + FINAL, true, || State {
        iteration: iteration + FINAL,
        finished: true,
        vectors: vec![x.clone()],
        scalars: report_scalars(&report),
    })?;
    job.end(start, report.iterations);
    Ok((x, report))
}

/// Global HITS (SPEC §2.2) as `crate::graph::hits::hits`: authorities from hubs along
/// out-links, hubs from authorities along in-links, each normalised to sum 1, stopping on the
/// L1 change of both. Three rounds per iteration (authority contributions, hub contributions
/// with the authority sum, the hub sum); the change of an iterate travels with the next
/// iteration's first round.
pub(crate) fn hits(
    job: &mut Job,
    edges: usize,
    conv: &Convergence,
) -> Result<(Vec<f64>, Vec<f64>, IterationReport)> {
    conv.check()?;
    let start = job.begin("hits");
    let part = job.part;
    let (n, nl) = (part.n, part.n_local());
    let mut report = IterationReport::default();
    if n == 0 || edges == 0 {
        job.end(start, 0);
        let uniform = vec![if n == 0 { 0.0 } else { 1.0 / n as f64 }; nl];
        report.converged = n > 0;
        return Ok((uniform.clone(), uniform, report));
    }
    let uniform = 1.0 / n as f64;
    let (mut hub, mut authority) = (vec![uniform; nl], vec![uniform; nl]);
    let mut iteration = 0;
    let mut change = f64::INFINITY;
    if let Some(state) = job.resume("hits") {
        let mut v = state.vectors.into_iter();
        let (h, a) = (v.next().unwrap_or_default(), v.next().unwrap_or_default());
        if state.finished {
            job.end(start, report_of(&state.scalars).iterations);
            return Ok((h, a, report_of(&state.scalars)));
        }
        (hub, authority, iteration) = (h, a, state.iteration);
        change = state.scalars.first().copied().unwrap_or(f64::INFINITY);
    }
    let (mut acc, mut out) = (Vec::new(), Vec::new());
    let (mut next_a, mut next_h) = (vec![0.0; nl], vec![0.0; nl]);
    loop {
        if iteration < conv.max_iter {
            part.fwd.push_sum(|k| hub[k], &mut acc, &mut out);
        }
        let (pairs, shouts) = job.comm.exchange(&mut out, vec![change]);
        if iteration > 0 {
            report.iterations = iteration;
            report.residual = sum_in_order(&shouts)[0];
            if report.residual < conv.tol_per_node * n as f64 {
                report.converged = true;
                break;
            }
        }
        if iteration >= conv.max_iter {
            break;
        }
        next_a.iter_mut().for_each(|v| *v = 0.0);
        for (t, v) in pairs {
            next_a[part.local(t)] += v;
        }
        part.rev.push_sum(|k| next_a[k], &mut acc, &mut out);
        let local_a: f64 = next_a.iter().sum();
        let (pairs, shouts) = job.comm.exchange(&mut out, vec![local_a]);
        let total_a = sum_in_order(&shouts)[0];
        next_h.iter_mut().for_each(|v| *v = 0.0);
        for (t, v) in pairs {
            next_h[part.local(t)] += v;
        }
        if total_a > 0.0 {
            next_a.iter_mut().for_each(|v| *v /= total_a);
            next_h.iter_mut().for_each(|v| *v /= total_a);
        }
        let total_h = job.comm.all_sum(vec![next_h.iter().sum()])[0];
        if total_h > 0.0 {
            next_h.iter_mut().for_each(|v| *v /= total_h);
        }
        change = l1(&next_a, &authority) + l1(&next_h, &hub);
        std::mem::swap(&mut authority, &mut next_a);
        std::mem::swap(&mut hub, &mut next_h);
        iteration += 1;
        job.checkpoint("hits", iteration, false, || State {
            iteration,
            finished: false,
            vectors: vec![hub.clone(), authority.clone()],
            scalars: vec![change],
        })?;
    }
    job.checkpoint("hits", iteration + FINAL, true, || State {
        iteration: iteration + FINAL,
        finished: true,
        vectors: vec![hub.clone(), authority.clone()],
        scalars: report_scalars(&report),
    })?;
    job.end(start, report.iterations);
    Ok((hub, authority, report))
}

/// SALSA's closed form (SPEC §2.3, `crate::graph::salsa::salsa`) with the connected
/// components of the bipartite hub/authority graph found by label propagation: the hub copy
/// of `u` starts with label `u`, the authority copy of `v` with `N + v`, and every copy takes
/// the smallest label among its neighbours until no label changes (two rounds per pass, one
/// along out-links and one along in-links; passes ≈ the components' diameter). Component
/// sizes are then summed over workers and each score is the CSR engine's expression on the
/// same integers, so the scores agree bit for bit. Labels travel as f64, exact below 2^53.
pub(crate) fn salsa(job: &mut Job, edges: usize) -> Result<(Vec<f64>, Vec<f64>, IterationReport)> {
    let start = job.begin("salsa");
    let part = job.part;
    let (n, nl) = (part.n, part.n_local());
    if n == 0 || edges == 0 {
        job.end(start, 0);
        let uniform = vec![if n == 0 { 0.0 } else { 1.0 / n as f64 }; nl];
        return Ok((uniform.clone(), uniform, IterationReport::default()));
    }
    let none = f64::INFINITY;
    let mut hub_label: Vec<f64> = (0..nl)
        .map(|k| {
            if part.fwd.degree(k) > 0 {
                part.global(k) as f64
            } else {
                none
            }
        })
        .collect();
    let mut auth_label: Vec<f64> = (0..nl)
        .map(|k| {
            if part.rev.degree(k) > 0 {
                (n + part.global(k) as usize) as f64
            } else {
                none
            }
        })
        .collect();
    let mut iteration = 0;
    let mut changed = f64::INFINITY;
    let mut done = false;
    if let Some(state) = job.resume("salsa") {
        let mut v = state.vectors.into_iter();
        hub_label = v.next().unwrap_or(hub_label);
        auth_label = v.next().unwrap_or(auth_label);
        done = state.finished;
        iteration = state.iteration - if done { FINAL } else { 0 };
        changed = state.scalars.first().copied().unwrap_or(f64::INFINITY);
    }
    let (mut acc, mut out) = (Vec::new(), Vec::new());
    #[allow(clippy::while_immutable_condition)]
    while !done {
        // Leaves by `break` once a pass changes no label anywhere.
        part.fwd.push_min(|k| hub_label[k], &mut acc, &mut out);
        let (pairs, shouts) = job.comm.exchange(&mut out, vec![changed]);
        if iteration > 0 && sum_in_order(&shouts)[0] == 0.0 {
            break;
        }
        changed = 0.0;
        for (t, label) in pairs {
            let k = part.local(t);
            if label < auth_label[k] {
                auth_label[k] = label;
                changed += 1.0;
            }
        }
        part.rev.push_min(|k| auth_label[k], &mut acc, &mut out);
        let (pairs, _) = job.comm.exchange(&mut out, Vec::new());
        for (s, label) in pairs {
            let k = part.local(s);
            if label < hub_label[k] {
                hub_label[k] = label;
                changed += 1.0;
            }
        }
        iteration += 1;
        job.checkpoint("salsa", iteration, false, || State {
            iteration,
            finished: false,
            vectors: vec![hub_label.clone(), auth_label.clone()],
            scalars: vec![changed],
        })?;
    }
    if !done {
        job.checkpoint("salsa", iteration + FINAL, true, || State {
            iteration: iteration + FINAL,
            finished: true,
            vectors: vec![hub_label.clone(), auth_label.clone()],
            scalars: vec![0.0],
        })?;
    }
    // Per component label: hub copies, authority copies, edges.
    let mut local: BTreeMap<u64, [u64; 3]> = BTreeMap::new();
    for k in 0..nl {
        let (outdeg, indeg) = (part.fwd.degree(k), part.rev.degree(k));
        if outdeg > 0 {
            let c = local.entry(hub_label[k] as u64).or_default();
            c[0] += 1;
            c[2] += outdeg as u64;
        }
        if indeg > 0 {
            local.entry(auth_label[k] as u64).or_default()[1] += 1;
        }
    }
    let flat: Vec<f64> = local
        .iter()
        .flat_map(|(&l, c)| [l as f64, c[0] as f64, c[1] as f64, c[2] as f64])
        .collect();
    let mut components: BTreeMap<u64, [u64; 3]> = BTreeMap::new();
    for list in job.comm.all_gather(flat) {
        for c in list.chunks_exact(4) {
            let e = components.entry(c[0] as u64).or_default();
            (0..3).for_each(|i| e[i] += c[i + 1] as u64);
        }
    }
    let h_total: u64 = components.values().map(|c| c[0]).sum();
    let a_total: u64 = components.values().map(|c| c[1]).sum();
    let mut hub = vec![0.0; nl];
    let mut authority = vec![0.0; nl];
    for k in 0..nl {
        let (outdeg, indeg) = (part.fwd.degree(k), part.rev.degree(k));
        if outdeg > 0 {
            let c = components[&(hub_label[k] as u64)];
            hub[k] = c[0] as f64 / h_total as f64 * outdeg as f64 / c[2] as f64;
        }
        if indeg > 0 {
            let c = components[&(auth_label[k] as u64)];
            authority[k] = c[1] as f64 / a_total as f64 * indeg as f64 / c[2] as f64;
        }
    }
    job.end(start, iteration);
    let report = IterationReport {
        iterations: iteration,
        converged: true,
        ..IterationReport::default()
    };
    Ok((hub, authority, report))
}

/// The `l` nodes with the highest `local` scores over all workers, best first, ties by id
/// (the order of `crate::graph::convergence::top_k`). One round.
pub(crate) fn top_k(job: &mut Job, local: &[f64], l: usize) -> Vec<u32> {
    let part = job.part;
    let better = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut mine: Vec<(u32, f64)> = local
        .iter()
        .enumerate()
        .map(|(k, &s)| (part.global(k), s))
        .collect();
    mine.sort_unstable_by(better);
    mine.truncate(l);
    let flat = mine.iter().flat_map(|&(u, s)| [u as f64, s]).collect();
    let mut all: Vec<(u32, f64)> = job
        .comm
        .all_gather(flat)
        .iter()
        .flat_map(|v| {
            v.chunks_exact(2)
                .map(|c| (c[0] as u32, c[1]))
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort_unstable_by(better);
    all.truncate(l);
    all.into_iter().map(|(u, _)| u).collect()
}
