//! Feature logging: judged windows as SVMlight/LETOR rows
//! (`label qid:N 1:v 2:v ... # query-id doc-id`, N the window's 1-based position since
//! LightGBM and RankLib want numeric qids), readable by `crate::corpus::letor`, LightGBM,
//! RankLib and XGBoost. Feature i is column i − 1 of the feature set; a header comment names
//! every column so the file documents itself.

use std::io::Write;

use crate::features::FeatureSet;
use crate::training::Window;

pub fn write_svmlight(
    out: &mut impl Write,
    set: &FeatureSet,
    windows: &[Window],
) -> std::io::Result<()> {
    writeln!(out, "# {}", crate::features::FEATURE_SET_VERSION)?;
    for (i, name) in set.names().iter().enumerate() {
        writeln!(out, "# feature {}: {name}", i + 1)?;
    }
    for (n, w) in windows.iter().enumerate() {
        for (row, label) in w.labels.iter().enumerate() {
            write!(out, "{label} qid:{}", n + 1)?;
            for (i, v) in w.features.row(row).iter().enumerate() {
                if *v != 0.0 {
                    write!(out, " {}:{v}", i + 1)?;
                }
            }
            writeln!(out, " # {} {}", w.qid, w.ids[row])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureMatrix;

    #[test]
    fn round_trips_through_the_letor_reader() {
        let set = FeatureSet::current();
        let d = set.len();
        let window = |qid: &str, rows: usize, seed: f32| {
            let values: Vec<f32> = (0..rows * d)
                .map(|i| {
                    if i % 3 == 0 {
                        0.0
                    } else {
                        seed + i as f32 * 0.25
                    }
                })
                .collect();
            Window {
                qid: qid.to_string(),
                features: FeatureMatrix {
                    rows,
                    cols: d,
                    values,
                },
                ids: (0..rows).map(|i| format!("{qid}-doc{i}")).collect(),
                labels: (0..rows as i32).map(|i| i % 3).collect(),
            }
        };
        let windows = [window("q7", 3, 1.0), window("q9", 2, -5.5)];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svm");
        let mut bytes = Vec::new();
        write_svmlight(&mut bytes, set, &windows).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let read = crate::corpus::letor::read(&path, None).unwrap();
        assert_eq!(read.queries.len(), 2);
        for (w, q) in windows.iter().zip(&read.queries) {
            assert_eq!(q.rows.len(), w.labels.len());
            for (i, row) in q.rows.iter().enumerate() {
                assert_eq!(row.label, w.labels[i]);
                let dense = row.dense(d);
                for (a, b) in dense.iter().zip(w.features.row(i)) {
                    assert_eq!(*a as f32, *b);
                }
                assert_eq!(
                    row.comment.as_deref(),
                    Some(format!("{} {}", w.qid, w.ids[i]).as_str())
                );
            }
        }
    }
}
