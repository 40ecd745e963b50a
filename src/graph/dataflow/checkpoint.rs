//! Checkpoints of the iterative algorithms: every K iterations each worker writes its share of
//! the state (score vectors and the scalars needed to take the next stop decision) to its own
//! file, atomically (`crate::durable`). A restarted job finds the latest iteration that every
//! worker has saved and resumes there; a checkpoint of another job (other input, options or
//! worker count) is ignored: its fingerprint, in the file name and the header, differs. The last two checkpoints of
//! each worker are kept, so a crash between two workers' writes still leaves a common one.
//!
//! Format: `RANKDCK1`, then little-endian u64 fields: fingerprint, iteration, finished (0/1),
//! vector count, each vector's length and f64 bit patterns, scalar count and scalars; then the
//! SHA-256 of everything before it.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"RANKDCK1";

/// Added to the iteration of a finished algorithm's result, so that it has its own file beside
/// the periodic checkpoint of the same iteration.
pub(crate) const FINAL: usize = 1_000_000_000;

/// Saved state of one algorithm at one worker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    pub iteration: usize,
    /// The algorithm ran to its end; the vectors are its result.
    pub finished: bool,
    pub vectors: Vec<Vec<f64>>,
    pub scalars: Vec<f64>,
}

/// One worker's checkpoint directory.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoints {
    pub dir: PathBuf,
    pub every: usize,
    pub fingerprint: u64,
    pub index: usize,
    pub peers: usize,
}

impl Checkpoints {
    /// File names carry the job's fingerprint: another job's files in the same directory are
    /// neither read nor counted when the oldest checkpoints are pruned.
    fn prefix(&self, algorithm: &str) -> String {
        format!(
            "{algorithm}.{:016x}.w{}of{}.",
            self.fingerprint, self.index, self.peers
        )
    }

    fn path(&self, algorithm: &str, iteration: usize) -> PathBuf {
        self.dir
            .join(format!("{}{iteration:08}.ckpt", self.prefix(algorithm)))
    }

    /// Whether iteration `iteration` is one to save.
    pub fn due(&self, iteration: usize) -> bool {
        self.every > 0 && iteration.is_multiple_of(self.every)
    }

    /// Writes `state` and removes this worker's older checkpoints of `algorithm` but one.
    pub fn save(&self, algorithm: &str, state: &State) -> anyhow::Result<()> {
        let mut body = Vec::new();
        body.extend_from_slice(MAGIC);
        for x in [
            self.fingerprint,
            state.iteration as u64,
            state.finished as u64,
            state.vectors.len() as u64,
        ] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        for v in &state.vectors {
            body.extend_from_slice(&(v.len() as u64).to_le_bytes());
            v.iter()
                .for_each(|x| body.extend_from_slice(&x.to_bits().to_le_bytes()));
        }
        body.extend_from_slice(&(state.scalars.len() as u64).to_le_bytes());
        state
            .scalars
            .iter()
            .for_each(|x| body.extend_from_slice(&x.to_bits().to_le_bytes()));
        let digest = Sha256::digest(&body);
        body.extend_from_slice(&digest);
        std::fs::create_dir_all(&self.dir)?;
        crate::durable::write_atomic(&self.path(algorithm, state.iteration), &body)?;
        let mut saved = self.iterations(algorithm);
        saved.sort_unstable();
        if saved.len() > 2 {
            for &old in &saved[..saved.len() - 2] {
                let _ = std::fs::remove_file(self.path(algorithm, old));
            }
        }
        Ok(())
    }

    /// The iterations of `algorithm` this worker has files for (not yet validated).
    pub fn iterations(&self, algorithm: &str) -> Vec<usize> {
        let prefix = self.prefix(algorithm);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix(&prefix)?
                    .strip_suffix(".ckpt")?
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// The valid states of `algorithm` this worker has: files of this job with intact
    /// checksums (a torn or foreign file is skipped).
    pub fn available(&self, algorithm: &str) -> Vec<State> {
        self.iterations(algorithm)
            .into_iter()
            .filter_map(|i| read(&self.path(algorithm, i), self.fingerprint))
            .collect()
    }
}

fn read(path: &Path, fingerprint: u64) -> Option<State> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() < MAGIC.len() + 32 || &bytes[..8] != MAGIC {
        return None;
    }
    let (body, digest) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != digest {
        return None;
    }
    let mut words = body[8..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
    let mut next = || words.next();
    if next()? != fingerprint {
        return None;
    }
    let iteration = next()? as usize;
    let finished = next()? == 1;
    let count = next()? as usize;
    let mut vectors = Vec::with_capacity(count.min(16));
    for _ in 0..count {
        let len = next()? as usize;
        let mut v = Vec::with_capacity(len.min(1 << 24));
        for _ in 0..len {
            v.push(f64::from_bits(next()?));
        }
        vectors.push(v);
    }
    let len = next()? as usize;
    let mut scalars = Vec::with_capacity(len.min(64));
    for _ in 0..len {
        scalars.push(f64::from_bits(next()?));
    }
    Some(State {
        iteration,
        finished,
        vectors,
        scalars,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_keeps_two_and_skips_torn_or_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpoints {
            dir: dir.path().to_path_buf(),
            every: 5,
            fingerprint: 42,
            index: 1,
            peers: 2,
        };
        assert!(c.due(10) && !c.due(7));
        for i in [5, 10, 15] {
            let s = State {
                iteration: i,
                finished: i == 15,
                vectors: vec![vec![i as f64, 0.1], vec![]],
                scalars: vec![f64::INFINITY],
            };
            c.save("pagerank", &s).unwrap();
        }
        let mut got = c.available("pagerank");
        got.sort_by_key(|s| s.iteration);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].vectors, vec![vec![15.0, 0.1], vec![]]);
        assert!(got[1].finished && !got[0].finished);
        assert_eq!(got[0].scalars, vec![f64::INFINITY]);
        // A torn file and another job's file are not states of this job.
        let path = c.path("pagerank", 15);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(c.available("pagerank").len(), 1);
        let other = Checkpoints {
            fingerprint: 7,
            ..c.clone()
        };
        assert!(other.available("pagerank").is_empty());
        // Another job's saves neither hide nor prune this job's files.
        for i in [100, 200, 300] {
            let s = State {
                iteration: i,
                finished: false,
                vectors: vec![],
                scalars: vec![],
            };
            other.save("pagerank", &s).unwrap();
        }
        assert_eq!(c.available("pagerank").len(), 1);
        assert_eq!(other.iterations("pagerank").len(), 2);
        assert!(c.available("hits").is_empty());
    }
}
