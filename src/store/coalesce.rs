//! Coalesced ranged reads: the one path by which shard readers (image levels, tensor records)
//! fetch many byte spans of a [`Blob`] with few reads. Spans are sorted; spans at most
//! `max_gap` bytes apart go into one read while it stays within `max_read` bytes (a span larger
//! than that is read alone); the reads run on rayon's pool (concurrent requests on an object
//! store, positional reads on a file). Each span's bytes go to the caller's `cut`, which checks
//! and keeps them.

use rayon::prelude::*;

use super::Blob;
use crate::error::Result;

/// One span to read: bytes `start..end` of the blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: u64,
    /// One past the last byte (`>= start`).
    pub end: u64,
}

/// The runs of `order` (span indices sorted by start) read together: a span joins the run
/// while its gap from the run's furthest end is at most `max_gap` and the run stays within
/// `max_read` bytes.
fn runs(
    spans: &[Span],
    order: &[usize],
    max_gap: u64,
    max_read: u64,
) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut run_end = 0;
    for k in 0..=order.len() {
        let split = k == order.len()
            || k > start && {
                let s = spans[order[k]];
                s.start.saturating_sub(run_end) > max_gap
                    || s.end.max(run_end) - spans[order[start]].start > max_read
            };
        if split && k > start {
            runs.push(start..k);
            start = k;
        }
        if let Some(&i) = order.get(k) {
            let end = spans[i].end;
            run_end = if k == start { end } else { run_end.max(end) };
        }
    }
    runs
}

impl Blob {
    /// Reads every span of `spans` with few reads (see the module head) and gives each span's
    /// bytes to `cut(index in spans, bytes)`. Returns one result per span, in order (an I/O
    /// error fails every span of its read; `cut`'s error only its span), and the number of
    /// reads made. The caller has checked every span lies inside the blob and that no run can
    /// exceed what it may allocate (`max_read`).
    pub fn read_coalesced<T: Send>(
        &self,
        spans: &[Span],
        max_gap: u64,
        max_read: u64,
        cut: impl Fn(usize, &[u8]) -> Result<T> + Sync,
    ) -> (Vec<Result<T>>, usize) {
        let mut order: Vec<usize> = (0..spans.len()).collect();
        order.sort_unstable_by_key(|&i| (spans[i], i));
        let runs = runs(spans, &order, max_gap, max_read);
        let read: Vec<Vec<(usize, Result<T>)>> = runs
            .par_iter()
            .map(|run| {
                let members = &order[run.clone()];
                let first = spans[members[0]].start;
                let end = members.iter().map(|&i| spans[i].end).max().unwrap_or(first);
                match self.read_at(first, (end - first) as usize) {
                    Ok(bytes) => members
                        .iter()
                        .map(|&i| {
                            let s = spans[i];
                            let at = (s.start - first) as usize;
                            (i, cut(i, &bytes[at..at + (s.end - s.start) as usize]))
                        })
                        .collect(),
                    Err(e) => members
                        .iter()
                        .map(|&i| (i, Err(std::io::Error::new(e.kind(), e.to_string()).into())))
                        .collect(),
                }
            })
            .collect();
        let mut results: Vec<Option<Result<T>>> = (0..spans.len()).map(|_| None).collect();
        for (i, r) in read.into_iter().flatten() {
            results[i] = Some(r);
        }
        let results = results
            .into_iter()
            .map(|r| r.expect("every span is in one run"))
            .collect();
        (results, runs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64) -> Span {
        Span { start, end }
    }

    #[test]
    fn runs_join_near_spans_within_the_read_limit() {
        let spans = [
            span(0, 10),
            span(12, 20),
            span(100, 110),
            span(105, 130),
            span(131, 300),
        ];
        let order: Vec<usize> = (0..spans.len()).collect();
        // Gaps of 2, 80, none (an overlap), 1; reads of at most 150 bytes.
        assert_eq!(runs(&spans, &order, 4, 150), vec![0..2, 2..4, 4..5]);
        assert_eq!(runs(&spans, &order, 4, 200), vec![0..2, 2..5]);
        assert_eq!(runs(&spans, &order, 100, 1000), vec![0..5]);
        assert_eq!(runs(&spans, &order, 0, 1000), vec![0..1, 1..2, 2..4, 4..5]);
        // A span larger than the limit is a run of its own.
        assert_eq!(runs(&spans, &order, 100, 50), vec![0..2, 2..4, 4..5]);
        assert!(runs(&spans, &[], 4, 200).is_empty());
    }

    #[test]
    fn every_span_gets_its_bytes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob");
        let data: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
        std::fs::write(&path, &data).unwrap();
        let blob = Blob::open_file(&path).unwrap();
        let spans = [
            span(3000, 3100),
            span(0, 7),
            span(10, 10),
            span(5, 40),
            span(3999, 4000),
        ];
        let (got, reads) = blob.read_coalesced(&spans, 16, 1 << 20, |i, b| Ok((i, b.to_vec())));
        assert_eq!(reads, 3);
        for (i, r) in got.into_iter().enumerate() {
            let (j, b) = r.unwrap();
            assert_eq!(j, i);
            let s = spans[i];
            assert_eq!(b, &data[s.start as usize..s.end as usize]);
        }
        // A read past the end fails every span of its run, and only those.
        let spans = [span(0, 4), span(3990, 4010)];
        let (got, reads) = blob.read_coalesced(&spans, 0, 1 << 20, |_, b| Ok(b.len()));
        assert_eq!(reads, 2);
        assert_eq!(got[0].as_ref().unwrap(), &4);
        assert!(got[1].is_err());
    }
}
