//! [`Batcher`]: decodes many files on the GPU with per-file results. The caller pushes files
//! (bytes and a tag of its own); each is validated on the CPU at once (a bad file gets its
//! own error and does not sink a batch), the valid ones are grouped into batches of at most
//! a byte budget of output ([`DEFAULT_BUDGET`] by default; a file larger than the budget
//! forms a batch of its own), each batch is decoded on the GPU and read back, and a
//! batch-level failure (e.g. one image over a device limit) falls back to decoding each of
//! its files alone, so only the faulty one fails.
//!
//! The output, flag and read-back buffers are kept and reused between batches (grown, never
//! shrunk), in two sets, so that batch n + 1 is uploaded and submitted before batch n is
//! waited for and read back: the upload of one batch overlaps the kernels of the other.

use std::collections::VecDeque;

use super::map::map_read;
use super::readback::{read_flags, ImageLayout};
use super::upload::{flags_bytes, readback_buffer, storage_buffer, Submitted, Targets};
use super::GpuDecoder;
use crate::decode::DecodeOptions;
use crate::error::{Error, Result};
use crate::format::{FileLayout, Header};
use crate::layout::OutputLayout;

/// The default output-byte budget of one batch: 256 MiB, large enough to keep a GPU busy,
/// small enough that the read-back stays modest.
pub const DEFAULT_BUDGET: u64 = 256 << 20;

/// One decoded file.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The file's header.
    pub header: Header,
    /// The image in the batcher's [`OutputLayout`] (u16 samples little-endian).
    pub pixels: Vec<u8>,
}

/// Why one file of a [`Batcher`] was not decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Rejected by the CPU-side validation (header, size table, checksum, limits), with the
    /// CPU decoder's error; nothing was submitted for it.
    #[error(transparent)]
    Invalid(Error),
    /// The GPU decoder flagged corrupt stream data ([`super::flags`]).
    #[error("the GPU decoder found corrupt stream data (flags {flags:#x})")]
    Corrupt {
        /// The image's error flags.
        flags: u32,
    },
    /// Decoding the file alone on the GPU failed (e.g. it exceeds a device limit).
    #[error("GPU decode failed: {0}")]
    Gpu(Error),
}

/// The result for one pushed file.
#[derive(Debug)]
pub struct FileResult<T> {
    /// The caller's tag for the file.
    pub tag: T,
    /// The decoded image, or why not.
    pub result: std::result::Result<Decoded, FileError>,
}

/// Counters of a [`Batcher`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatcherStats {
    /// Batches submitted.
    pub batches: u64,
    /// Batches that failed as a whole and were decoded file by file.
    pub fallbacks: u64,
    /// GPU buffers the batcher (re)allocated (output, flags and their read-back copies);
    /// constant once the buffers are large enough.
    pub allocations: u64,
}

/// A file waiting in (or in flight with) a batch.
struct Entry<T> {
    tag: T,
    data: Vec<u8>,
    header: Header,
}

/// A submitted batch not yet read back.
struct InFlight<T> {
    entries: Vec<Entry<T>>,
    /// Where each image is in the output.
    images: Vec<ImageLayout>,
    total_out: u64,
    /// Which buffer set it writes.
    set: usize,
    index: wgpu::SubmissionIndex,
}

/// Decodes pushed files in byte-budgeted GPU batches, with per-file results. See the module
/// documentation.
///
/// ```no_run
/// use l3::gpu::{Batcher, GpuDecoder, OutputLayout};
/// let decoder = GpuDecoder::new_default()?;
/// let mut batcher = Batcher::new(&decoder, OutputLayout::Interleaved);
/// let mut results = Vec::new();
/// for name in ["a.l3", "b.l3"] {
///     results.extend(batcher.push(name, std::fs::read(name)?));
/// }
/// results.extend(batcher.finish());
/// for r in results {
///     match r.result {
///         Ok(d) => println!("{}: {}x{}", r.tag, d.header.width, d.header.height),
///         Err(e) => eprintln!("{}: {e}", r.tag),
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Batcher<'d, T> {
    decoder: &'d GpuDecoder,
    output: OutputLayout,
    budget: u64,
    pending: Vec<Entry<T>>,
    pending_bytes: u64,
    sets: [Option<Targets>; 2],
    in_flight: Option<InFlight<T>>,
    ready: VecDeque<FileResult<T>>,
    stats: BatcherStats,
}

impl<'d, T> Batcher<'d, T> {
    /// A batcher decoding into `output` on `decoder`, whose options
    /// ([`GpuDecoder::set_options`]: limits, checksum) the CPU-side validation uses, with
    /// the [`DEFAULT_BUDGET`].
    pub fn new(decoder: &'d GpuDecoder, output: OutputLayout) -> Self {
        Batcher {
            decoder,
            output,
            budget: DEFAULT_BUDGET,
            pending: Vec::new(),
            pending_bytes: 0,
            sets: [None, None],
            in_flight: None,
            ready: VecDeque::new(),
            stats: BatcherStats::default(),
        }
    }

    /// Sets the output-byte budget of a batch (at least 1).
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes.max(1);
        self
    }

    /// The counters so far.
    pub fn stats(&self) -> BatcherStats {
        self.stats
    }

    /// Adds a file: validates it on the CPU now (an invalid file's result comes back at
    /// once), and submits a batch when the budget is reached. Returns the results that are
    /// ready (of this file or of earlier ones), in no particular order.
    pub fn push(&mut self, tag: T, data: Vec<u8>) -> Vec<FileResult<T>> {
        match crate::decode::parse(&data, self.decoder.options()) {
            Err(e) => self.ready.push_back(FileResult {
                tag,
                result: Err(FileError::Invalid(e)),
            }),
            Ok(layout) => {
                let header = layout.header;
                let bytes = self.output.output_bytes(&header);
                if !self.pending.is_empty() && self.pending_bytes + bytes > self.budget {
                    self.flush();
                }
                self.pending_bytes += bytes;
                self.pending.push(Entry { tag, data, header });
                if self.pending_bytes >= self.budget {
                    self.flush();
                }
            }
        }
        self.ready.drain(..).collect()
    }

    /// Decodes what is left and returns every remaining result.
    pub fn finish(mut self) -> Vec<FileResult<T>> {
        self.flush();
        if let Some(f) = self.in_flight.take() {
            self.complete(f);
        }
        self.ready.drain(..).collect()
    }

    /// Submits the pending files as a batch, then reads back the batch submitted before it
    /// (so that this one's upload and kernels overlap that one's wait and read-back).
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let entries = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let set = self.in_flight.as_ref().map_or(0, |f| 1 - f.set);
        self.stats.batches += 1;
        match self.submit(&entries, set) {
            Ok(s) => {
                let next = InFlight {
                    entries,
                    images: s.images,
                    total_out: s.total_out,
                    set,
                    index: s.index,
                };
                if let Some(previous) = self.in_flight.replace(next) {
                    self.complete(previous);
                }
            }
            Err(_) => {
                if let Some(previous) = self.in_flight.take() {
                    self.complete(previous);
                }
                self.fall_back(entries);
            }
        }
    }

    /// Plans and submits `entries` into buffer set `set`.
    fn submit(&mut self, entries: &[Entry<T>], set: usize) -> Result<Submitted> {
        // Validated on push (checksum included): parse again without the checksum pass.
        let options = DecodeOptions {
            verify_checksum: false,
            ..*self.decoder.options()
        };
        let layouts: Vec<FileLayout> = entries
            .iter()
            .map(|e| crate::decode::parse(&e.data, &options))
            .collect::<Result<_>>()?;
        let plan = self.decoder.plan(&layouts, self.output, &[])?;
        let targets = self.targets(set, plan.total_out, entries.len())?;
        self.decoder
            .submit_planned(&layouts, &plan, self.output, &targets, false)
    }

    /// Buffer set `set`, grown to `out` output bytes and `count` flags if smaller.
    fn targets(&mut self, set: usize, out: u64, count: usize) -> Result<Targets> {
        let d = self.decoder;
        let n_flags = flags_bytes(count);
        let fits = |t: &Targets| t.out.size() >= out && t.errors.size() >= n_flags;
        if let Some(t) = self.sets[set].as_ref().filter(|t| fits(t)) {
            return Ok(t.clone());
        }
        let old = self.sets[set].take();
        // Grown to a power of two (within the device's limit), so that batches of varying
        // sizes settle on one size quickly.
        let max = d.device.limits().max_buffer_size;
        let grown = |have: u64, need: u64| have.max(need.next_power_of_two().min(max).max(need));
        let out_size = grown(old.as_ref().map_or(0, |t| t.out.size()), out);
        let flags_size = grown(old.as_ref().map_or(0, |t| t.errors.size()), n_flags);
        drop(old);
        let t = d.with_error_scopes(|| {
            Ok(Targets {
                out: storage_buffer(&d.device, "l3 batcher output", out_size),
                errors: storage_buffer(&d.device, "l3 batcher flags", flags_size),
                flags_staging: readback_buffer(&d.device, "l3 batcher flags readback", flags_size),
                out_staging: Some(readback_buffer(
                    &d.device,
                    "l3 batcher output readback",
                    out_size,
                )),
            })
        })?;
        self.stats.allocations += 4;
        self.sets[set] = Some(t.clone());
        Ok(t)
    }

    /// Waits for `f`, reads it back and queues its results; falls back to file-by-file on a
    /// failure.
    fn complete(&mut self, f: InFlight<T>) {
        match self.read(&f) {
            Ok(results) => {
                for (e, r) in f.entries.into_iter().zip(results) {
                    self.ready.push_back(FileResult {
                        tag: e.tag,
                        result: r.map(|pixels| Decoded {
                            header: e.header,
                            pixels,
                        }),
                    });
                }
            }
            Err(_) => self.fall_back(f.entries),
        }
    }

    /// Maps `f`'s read-back buffers once its submission is done, and cuts out each image
    /// (or its flags as [`FileError::Corrupt`]).
    fn read(&self, f: &InFlight<T>) -> Result<Vec<std::result::Result<Vec<u8>, FileError>>> {
        let t = self.sets[f.set]
            .as_ref()
            .ok_or_else(|| Error::Gpu("batch buffers missing".into()))?;
        let out_staging = t
            .out_staging
            .as_ref()
            .ok_or_else(|| Error::Gpu("batch read-back buffer missing".into()))?;
        let flags_map = map_read(&t.flags_staging, 0..t.flags_staging.size());
        let out_map = map_read(out_staging, 0..f.total_out);
        // Wait for this batch only: a later one may still be running.
        self.decoder
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(f.index.clone()),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        let mapped = pollster::block_on(async { (flags_map.wait().await, out_map.wait().await) });
        if mapped.0.is_err() || mapped.1.is_err() {
            if mapped.0.is_ok() {
                t.flags_staging.unmap();
            }
            if mapped.1.is_ok() {
                out_staging.unmap();
            }
            return Err(mapped.0.and(mapped.1).unwrap_err());
        }
        let flags = read_flags(&t.flags_staging, f.entries.len())?;
        let results = {
            let view = out_staging
                .get_mapped_range(0..f.total_out)
                .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
            f.images
                .iter()
                .zip(flags)
                .map(|(l, flags)| match flags {
                    0 => Ok(view[l.offset as usize..(l.offset + l.len) as usize].to_vec()),
                    flags => Err(FileError::Corrupt { flags }),
                })
                .collect()
        };
        out_staging.unmap();
        Ok(results)
    }

    /// Decodes each of `entries` alone (after a batch-level failure), so that only the file
    /// at fault fails, with its own error.
    fn fall_back(&mut self, entries: Vec<Entry<T>>) {
        self.stats.fallbacks += 1;
        for e in entries {
            let result = self
                .decoder
                .decode_batch_with_flags(&[e.data.as_slice()], self.output)
                .and_then(|(batch, flags)| Ok((batch.read_back_image(0)?, flags[0])));
            let result = match result {
                Ok((pixels, 0)) => Ok(Decoded {
                    header: e.header,
                    pixels,
                }),
                Ok((_, flags)) => Err(FileError::Corrupt { flags }),
                Err(err) => Err(FileError::Gpu(err)),
            };
            self.ready.push_back(FileResult { tag: e.tag, result });
        }
    }
}
