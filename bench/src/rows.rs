//! What the sections produce and the report reads: one result type per section, its rows, and
//! how they serialise. Below every section and the report: it imports no section, only the
//! codec list (`codecs`) and the timings (`measure`).

use serde::{Serialize, Serializer};

use l3::Profile;

use crate::codecs::Codec;
use crate::measure::Stats;

/// A profile as its name ("fast", "compact").
pub fn profile_name<S: Serializer>(p: &Profile, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

/// Per-profile values as an object keyed by the profile's name.
pub fn profile_map<S: Serializer, T: Serialize>(
    v: &[(Profile, T)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(p, t)| (p.name(), t)))
}

// The codec comparison (`comparison`).

/// Results of one codec on one image.
#[derive(Clone, Debug)]
pub struct Cell {
    pub size: u64,
    pub enc: Option<Stats>,
    pub dec: Stats,
    pub lossless: bool,
}

/// One codec's results on the run's images.
pub struct CodecResult {
    pub codec: Codec,
    pub cells: Vec<Option<Cell>>, // one per image; None = unsupported
}

/// The codec section: every codec and the memcpy reference rows on every image.
pub struct CodecRun {
    pub results: Vec<CodecResult>,
    pub memcpy_1: Stats,
    pub memcpy_n: Stats,
    /// Each image's one-thread memcpy (the per-class table's ceiling).
    pub memcpy_1_each: Vec<Stats>,
}

// The data-preparation pipeline (`pipeline`).

/// One pipeline row: a way from files on disk to normalised f32 CHW tensors.
pub struct PipelineRow {
    pub name: String,
    /// Err: the row could not be measured (e.g. the GPU decoder does not take this profile).
    pub stats: std::result::Result<Stats, String>,
    pub images: usize,
    pub pixels: u64,
    pub disk_bytes: u64,
}

// The dataset section (`dataset`, with `loader` for its loader rows).

/// One timed operation over the whole dataset.
#[derive(Serialize)]
pub struct DatasetRow {
    /// "pack", "write", "read".
    pub kind: &'static str,
    pub name: String,
    /// "page cache" (files just written / read), "cold" (after dropping the page cache) or
    /// "-" (writes).
    pub cache: &'static str,
    pub images: usize,
    /// Bytes of source pixels the operation covers.
    pub raw_bytes: u64,
    /// Bytes written to / read from the files.
    pub file_bytes: u64,
    pub time: Stats,
    /// Whether the operation decodes (or, for writes, encodes) the pixels.
    pub codec: bool,
    /// A PNG row: the reference of the l3 rows of its kind, cache state and `codec`.
    pub png_reference: bool,
}

/// The section's results.
#[derive(Serialize)]
pub struct DatasetReport {
    /// The scratch folder and its file system.
    pub scratch: String,
    /// rayon threads.
    pub threads: usize,
    pub records_per_shard: usize,
    pub shards: usize,
    pub records: usize,
    /// Sum of the shard files' sizes.
    pub shard_bytes: u64,
    /// Sum of the records' level bytes (the L3 files).
    pub payload_bytes: u64,
    /// (shard bytes - payload bytes) / payload bytes: header, index and trailer.
    pub shard_overhead: f64,
    /// Bytes `read_prefix(0)` reads over all shards, and that over the payload bytes.
    pub prefix_read_bytes: u64,
    pub prefix_read_vs_ideal: f64,
    /// Computed, not measured: a tar of the same records (512-byte header per member, members
    /// padded to 512 bytes, 1024-byte end) and its overhead over the payload.
    pub tar_bytes_computed: u64,
    pub tar_overhead_computed: f64,
    /// tar bytes / shard bytes.
    pub tar_vs_shard: f64,
    /// Sum of the PNG files' sizes.
    pub png_bytes: u64,
    /// Whether cold reads were measured, and how (or why not).
    pub cold: String,
    pub rows: Vec<DatasetRow>,
    /// The same images packed progressively, read level by level.
    pub progressive: ProgressiveReport,
    /// One epoch to augmented f32 NCHW batches: l3's loader and a PNG loader.
    pub loader: Vec<LoaderRow>,
}

/// The run's images packed with `dataset::PROGRESSIVE_LEVELS` levels (`l3 pack --levels 3`
/// defaults: interlace, flat fallback above 1.25x).
#[derive(Serialize)]
pub struct ProgressiveReport {
    pub levels: u8,
    /// Records stored interlaced, and flat (the fallback).
    pub interlaced: usize,
    pub flat: usize,
    /// Payload bytes of the progressive shards, of the one-level shards, and their ratio.
    pub payload_bytes: u64,
    pub flat_payload_bytes: u64,
    pub vs_flat: f64,
    /// Packing them (encode both forms + verify through every level, write shards).
    pub pack: Stats,
    pub rows: Vec<LevelRow>,
}

/// Reading every shard's prefix up to one level.
#[derive(Serialize)]
pub struct LevelRow {
    pub level: u8,
    /// Level k is 1/stride per side.
    pub stride: u32,
    /// Bytes `read_prefix(level)` reads over all shards.
    pub prefix_bytes: u64,
    /// Sum of the records' payloads of levels 0..=level (what the level needs).
    pub ideal_bytes: u64,
    /// Prefix bytes / all payload bytes.
    pub share: f64,
    /// Bytes of decoded pixels at this level.
    pub output_bytes: u64,
    /// read_prefix + CPU decode_prefix (rayon over records), page cache.
    pub read_decode: Stats,
    /// read_prefix only (I/O + CRC), page cache.
    pub read_only: Stats,
    /// read_prefix + CPU decode_prefix after dropping the page cache (None where it cannot be
    /// dropped, as for the one-level cold rows).
    pub read_decode_cold: Option<Stats>,
}

impl DatasetReport {
    /// The PNG row a row is compared with: same kind, cache state and `codec` (none for the
    /// reads without decoding).
    pub fn png_row_for(&self, row: &DatasetRow) -> Option<&DatasetRow> {
        let kind = if row.kind == "pack" {
            "write"
        } else {
            row.kind
        };
        self.rows.iter().find(|r| {
            r.png_reference && r.kind == kind && r.cache == row.cache && r.codec == row.codec
        })
    }
}

/// One loader row: one epoch from storage to augmented f32 NCHW batches.
#[derive(Serialize)]
pub struct LoaderRow {
    pub name: String,
    pub images: usize,
    /// Wall time of one epoch.
    pub time: Stats,
    /// Process CPU seconds (user + system) of the last timed epoch, if readable.
    pub cpu_seconds: Option<f64>,
    /// The PNG row (the reference).
    pub png_reference: bool,
}

impl LoaderRow {
    /// Batch size of every loader row.
    pub const BATCH: u32 = 16;
}

// The scaling run (`scaling`).

/// One l3 profile at one size (the png figures are shared by the size's rows).
#[derive(Serialize)]
pub struct ScalingRow {
    #[serde(serialize_with = "profile_name")]
    pub profile: Profile,
    pub width: u32,
    pub height: u32,
    pub raw_bytes: u64,
    #[serde(rename = "l3_bytes")]
    pub l3_size: u64,
    #[serde(rename = "l3_encode_all")]
    pub l3_enc: Stats,
    #[serde(rename = "l3_decode_1")]
    pub l3_dec_1: Stats,
    #[serde(rename = "l3_decode_all")]
    pub l3_dec_n: Stats,
    #[serde(rename = "png_decode")]
    pub png_dec: Stats,
    /// One-thread decodes that each start with the file and the output out of the caches
    /// (`measure_cold`): the same cache state at every size.
    #[serde(rename = "l3_decode_1_cold")]
    pub l3_dec_1_cold: Stats,
    #[serde(rename = "png_decode_cold")]
    pub png_dec_cold: Stats,
    /// Peak resident memory a parallel `l3::decode::decode` added over what was resident
    /// before it (the encoded file included), in bytes: the output plus the decoder's own
    /// buffers. None where the kernel does not offer a peak reset (`/proc/self/clear_refs`).
    pub decode_peak_added_bytes: Option<u64>,
}

// The wgpu section (`gpu`, with `steady` for its steady-state rows).

/// One row of the wgpu table: a time and the bytes and pixels its rates refer to.
#[derive(Serialize)]
pub struct GpuRow {
    pub name: String,
    /// Bytes the GB/s figure refers to.
    pub bytes: u64,
    /// Pixels the MP/s figure refers to (0: none).
    pub pixels: u64,
    #[serde(rename = "time")]
    pub stats: Option<Stats>,
    pub note: String,
}

impl GpuRow {
    /// A row without a figure: what ran instead (skipped, unavailable, failed).
    pub fn note_only(name: impl Into<String>, note: impl Into<String>) -> Self {
        GpuRow {
            name: name.into(),
            bytes: 0,
            pixels: 0,
            stats: None,
            note: note.into(),
        }
    }
}

/// The wgpu section's results.
#[derive(Serialize)]
pub struct GpuReport {
    pub adapter: String,
    /// Whether the GPU decoder's output was bit-exact, per profile; None where it did not run.
    #[serde(serialize_with = "profile_map")]
    pub lossless: Vec<(Profile, Option<bool>)>,
    pub rows: Vec<GpuRow>,
}

impl GpuReport {
    /// "fast yes, compact -" for the report's headline.
    pub fn lossless_summary(&self) -> String {
        self.lossless
            .iter()
            .map(|(p, l)| {
                let l = match l {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                };
                format!("{} {l}", p.name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
