//! A dataset's shards as the dataset commands open them: the index within a fixed cap, every
//! read within `--max-input-bytes`, each shard checked against the manifest.

use anyhow::{bail, Context, Result};
use l3::shard::{Manifest, ShardInfo, ShardReader};
use l3::store::Store;

use crate::limits::limits;

/// Largest index a shard may carry when opened by the tool (far above any real shard's).
pub(crate) const MAX_INDEX_BYTES: u64 = 1 << 30;

/// Opens shard `s` of the dataset in `store` (index only, reads bounded by
/// `--max-input-bytes`) and checks it against the manifest `m` ([`ShardInfo::mismatches`]).
pub(crate) fn open_checked(store: &Store, s: &ShardInfo, m: &Manifest) -> Result<ShardReader> {
    let limits = limits();
    let shard = ShardReader::open_in(store, &s.file, MAX_INDEX_BYTES, &limits)
        .with_context(|| format!("opening {}", s.file))?;
    let problems = s.mismatches(&shard, m.levels, m.classes.len());
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(shard)
}

/// The dataset at `location` (a folder or an object-store URL, `s3://bucket/prefix`, ...).
pub(crate) fn open_store(location: &str) -> Result<Store> {
    Store::open(location).with_context(|| format!("opening {location}"))
}
