//! A dataset's shards as the dataset commands open them: the index within a fixed cap, every
//! read within `--max-input-bytes`, each shard checked against the manifest.

use std::path::Path;

use anyhow::{bail, Context, Result};
use l3::shard::{Manifest, ShardInfo, ShardReader};

use crate::limits::limits;

/// Largest index a shard may carry when opened by the tool (far above any real shard's).
pub(crate) const MAX_INDEX_BYTES: u64 = 1 << 30;

/// Opens shard `s` of the dataset in `dir` (index only, reads bounded by `--max-input-bytes`)
/// and checks it against the manifest `m` ([`ShardInfo::mismatches`]).
pub(crate) fn open_checked(dir: &Path, s: &ShardInfo, m: &Manifest) -> Result<ShardReader> {
    let limits = limits();
    let shard = ShardReader::open_with_limits(&dir.join(&s.file), MAX_INDEX_BYTES, &limits)
        .with_context(|| format!("opening {}", s.file))?;
    let problems = s.mismatches(&shard, m.levels, m.classes.len());
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(shard)
}
