//! Tensor records through the loader (feature `dataset`): [`TensorPlan`] (the output arrays
//! of a tensor dataset under [`super::LoaderOptions::tensor`], checked against the manifest
//! before the loader starts), [`read_records`] (a step's cache misses: each record's
//! payloads, CRC-checked, not decoded; a record and its near neighbours in one read),
//! [`TensorPlan::on_cpu`] (decode with [`crate::tensor::decode_array`], then
//! [`TensorAugment::window`] and [`TensorAugment::apply`], one sample per task on the
//! loader's pool, into the batch's [`NamedTensor`]s) and, with the GPU, `TensorPlan::on_gpu`
//! (the same windows cut as one batch by `super::tensor_gpu::window_batch`, read back).
//!
//! A sample's arrays come from its records ([`SampleInput`], [`sample_inputs`]): the one
//! record of its index, or for a windowed dataset (`crate::shard::SampleWindow`) each array
//! from the record `offset` after it, whose payloads the step read (or the cache held) once
//! for every sample of the step that uses it.
//!
//! Every record of a tensor dataset holds the manifest's arrays with the manifest's shapes
//! (checked when the dataset opens, and again here per record), so the arrays of a batch
//! always stack: there is no per-batch common window to find.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::batch::NamedTensor;
use super::decode::{per_sample, Slot};
use super::options::LoaderOptions;
use super::read::{Fetched, Payloads, MAX_COALESCED_READ};
use super::tensor::{Tensor, TensorType};
use super::tensor_augment::{value_f32, TensorAugment, TensorWindow};
use crate::error::invalid_option;
use crate::error::{Error, FormatError, Result};
use crate::shard::{TensorDataset, TensorManifest};
use crate::tensor::{decode_array_window, DType, NdArray};

/// One sample decoded into its slots: the decode time, the window time, its window.
pub(super) type TensorDecoded = Result<(Duration, Duration, Option<TensorWindow>)>;

/// One sample's arrays as read: per array of the sample (the plan's order), the payloads of
/// the record that holds it (shared with every sample reading that record) and the array's
/// index in them.
pub(super) type SampleInput = Vec<(Payloads, usize)>;

/// The inputs of the samples `samples` of a step whose records `records[k]` were read into
/// `payloads[k]` (or failed with `errors[k]`): each sample's arrays from its records
/// ([`crate::shard::TensorManifest::sample_parts`]). A sample whose record failed gets that
/// error (the first such sample the error itself, any other one its message); a sample whose
/// record the step did not read is a manifest error. Without a window each sample is the
/// record of its index, so its error is the record's.
pub(super) fn sample_inputs(
    dataset: &TensorDataset,
    samples: &[u32],
    records: &[u32],
    payloads: Vec<Option<Payloads>>,
    mut errors: Vec<Option<Error>>,
) -> (Vec<Option<SampleInput>>, Vec<Option<Error>>) {
    let at: std::collections::HashMap<u32, usize> =
        records.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    let messages: Vec<Option<String>> = errors
        .iter()
        .map(|e| e.as_ref().map(|e| e.to_string()))
        .collect();
    let manifest = dataset.manifest();
    let mut inputs = Vec::with_capacity(samples.len());
    let mut out_errors = Vec::with_capacity(samples.len());
    for &s in samples {
        let built = (|| -> Result<SampleInput> {
            let parts = manifest.sample_parts(s as u64)?;
            let mut input = Vec::with_capacity(parts.len());
            for p in parts {
                let k = u32::try_from(p.record)
                    .ok()
                    .and_then(|r| at.get(&r).copied())
                    .ok_or_else(|| {
                        Error::Manifest(format!(
                            "sample {s}: record {} was not read for it",
                            p.record
                        ))
                    })?;
                match &payloads[k] {
                    Some(payload) => input.push((payload.clone(), p.array)),
                    None => {
                        return Err(errors[k].take().unwrap_or_else(|| {
                            let m = messages[k].clone().unwrap_or_default();
                            Error::Io(std::io::Error::other(format!("record {}: {m}", p.record)))
                        }))
                    }
                }
            }
            Ok(input)
        })();
        match built {
            Ok(input) => {
                inputs.push(Some(input));
                out_errors.push(None);
            }
            Err(e) => {
                inputs.push(None);
                out_errors.push(Some(e));
            }
        }
    }
    (inputs, out_errors)
}

/// The class of sample `sample`: its first record's.
pub(super) fn class_of(dataset: &TensorDataset, sample: u64) -> Result<Option<u32>> {
    let first = dataset.manifest().sample_records(sample);
    Ok(dataset.entry(*first.first().unwrap_or(&sample))?.class)
}

/// One output array of a tensor dataset's batches.
#[derive(Debug, Clone)]
pub(super) struct PlannedArray {
    /// The array's name in the sample.
    pub name: String,
    /// The stored array it is read from (its name in the records; `name` without a window).
    pub stored: String,
    /// Its stored shape (the manifest's).
    pub shape: Vec<u32>,
    /// Its shape in the batch, without the sample axis.
    pub out_shape: Vec<usize>,
    /// Values per sample.
    pub per: usize,
    /// `(mean, std)` where normalising and the manifest has statistics of the array.
    pub stats: Option<(f64, f64)>,
}

/// The output arrays of a tensor dataset under the loader's options.
#[derive(Debug, Clone)]
pub(super) struct TensorPlan {
    /// The arrays, in the manifest's order.
    pub arrays: Vec<PlannedArray>,
    /// The spatial extent the arrays share (their last axes); empty without windows.
    pub extent: Vec<u32>,
    /// The windows (`None`: whole arrays, f32).
    pub augment: Option<TensorAugment>,
    /// With the GPU path: the windows it cuts.
    #[cfg(feature = "gpu")]
    pub gpu: Option<GpuWindows>,
}

impl TensorPlan {
    /// Checks `options` against a tensor dataset of `n` records and its manifest, and gives
    /// the batches' arrays: the common checks ([`LoaderOptions::validate_common`]); no level;
    /// with the GPU, what `GpuWindows::new` checks; with windows, valid options
    /// ([`TensorAugment::validate`]), every array with at least the spatial axes, the same
    /// last axes in every array, a window that fits them; the batch's arrays within
    /// `decode.limits.max_output_bytes`.
    pub(super) fn new(options: &LoaderOptions, manifest: &TensorManifest, n: u64) -> Result<Self> {
        options.validate_common(n)?;
        if let Some(l) = options.level {
            return Err(invalid_option(
                "level",
                l as u64,
                "a tensor dataset has no levels: leave level unset",
            ));
        }
        let decls = manifest.sample_arrays();
        let stored: Vec<String> = match &manifest.window {
            Some(w) => w.arrays.iter().map(|a| a.array.clone()).collect(),
            None => decls.iter().map(|d| d.name.clone()).collect(),
        };
        let augment = options.tensor.clone();
        let mut extent: Vec<u32> = Vec::new();
        if let Some(a) = &augment {
            a.validate()?;
            let s = a.spatial_axes();
            for d in &decls {
                if d.shape.len() < s {
                    return Err(invalid_option(
                        "tensor spatial axes",
                        s as u64,
                        "every array of the dataset has at least the spatial axes",
                    ));
                }
                let last = &d.shape[d.shape.len() - s..];
                if extent.is_empty() {
                    extent = last.to_vec();
                } else if extent != last {
                    return Err(invalid_option(
                        "tensor spatial axes",
                        s as u64,
                        "the arrays of a record differ in their last (spatial) axes",
                    ));
                }
            }
            // The window's checks depend on the extent alone.
            a.window(0, 0, 0, &extent)?;
        }
        let normalise = augment.as_ref().is_some_and(|a| a.normalise);
        let mut arrays = Vec::with_capacity(decls.len());
        for (d, stored) in decls.iter().zip(stored) {
            let out: Vec<u32> = match &augment {
                Some(a) => a.output_shape(&d.shape, &extent)?,
                None => d.shape.clone(),
            };
            let per = out
                .iter()
                .try_fold(1usize, |p, &x| p.checked_mul(x as usize))
                .unwrap_or(usize::MAX);
            let stats = if normalise {
                manifest.stats.get(&d.name).map(|s| (s.mean, s.std))
            } else {
                None
            };
            arrays.push(PlannedArray {
                name: d.name.clone(),
                stored,
                shape: d.shape.clone(),
                out_shape: out.iter().map(|&x| x as usize).collect(),
                per,
                stats,
            });
        }
        let element = match Self::output_of(&augment) {
            TensorType::F32 => 4u64,
            TensorType::F16 => 2,
        };
        let samples = options.batch_samples(n);
        let bytes = arrays
            .iter()
            .try_fold(0u64, |t, a| {
                (a.per as u64)
                    .checked_mul(samples)
                    .and_then(|v| v.checked_mul(element))
                    .and_then(|v| t.checked_add(v))
            })
            .unwrap_or(u64::MAX);
        options.check_batch_bytes(bytes)?;
        #[cfg(feature = "gpu")]
        let gpu = options
            .gpu
            .is_some()
            .then(|| GpuWindows::new(manifest, &augment, &extent))
            .transpose()?;
        Ok(TensorPlan {
            arrays,
            extent,
            augment,
            #[cfg(feature = "gpu")]
            gpu,
        })
    }

    fn output_of(augment: &Option<TensorAugment>) -> TensorType {
        augment.as_ref().map_or(TensorType::F32, |a| a.output)
    }

    /// The element type of the batch's arrays.
    pub(super) fn output(&self) -> TensorType {
        Self::output_of(&self.augment)
    }

    /// The batch's arrays for `samples` samples, zeroed.
    pub(super) fn zeroed(&self, samples: usize) -> Vec<NamedTensor> {
        self.arrays
            .iter()
            .map(|a| {
                let mut shape = vec![samples];
                shape.extend_from_slice(&a.out_shape);
                NamedTensor {
                    name: a.name.clone(),
                    shape,
                    tensor: Tensor::zeroed(self.output(), samples * a.per),
                }
            })
            .collect()
    }

    /// Decodes and cuts sample `ids[k]` from `payloads[k]` into slot `k` of each of `out`'s
    /// arrays ([`TensorPlan::zeroed`] for `ids.len()` samples), on `pool`, one sample per
    /// task, in place. A sample with an error in `errors[k]` (taken) is that error, and every
    /// sample not started when `stop` is set is [`Error::LoaderThread`]; a failed sample's
    /// slots are left as they were.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_cpu(
        &self,
        pool: &rayon::ThreadPool,
        stop: &AtomicBool,
        dataset: &TensorDataset,
        options: &LoaderOptions,
        (seed, epoch): (u64, u64),
        ids: &[u32],
        payloads: &[Option<SampleInput>],
        errors: &mut [Option<Error>],
        out: &mut [NamedTensor],
    ) -> Vec<TensorDecoded> {
        // Slots per sample: one per array.
        let mut slots: Vec<Vec<Slot<'_>>> = (0..ids.len())
            .map(|_| Vec::with_capacity(out.len()))
            .collect();
        for (a, t) in self.arrays.iter().zip(out.iter_mut()) {
            for (k, slot) in Slot::cut(&mut t.tensor, a.per).enumerate() {
                slots[k].push(slot);
            }
        }
        per_sample(pool, stop, payloads, errors, slots, |k, p, slots| {
            self.decode_one(dataset, options, seed, epoch, ids[k] as u64, p, slots)
        })
    }

    /// One sample: its window drawn, then each array decoded, checked against the plan and
    /// cut into its slot (one array decoded at a time).
    #[allow(clippy::too_many_arguments)]
    fn decode_one(
        &self,
        dataset: &TensorDataset,
        options: &LoaderOptions,
        seed: u64,
        epoch: u64,
        sample: u64,
        input: &SampleInput,
        slots: Vec<Slot<'_>>,
    ) -> TensorDecoded {
        let parts = self.specs(dataset, sample, input)?;
        let window = self
            .augment
            .as_ref()
            .map(|a| a.window(seed, epoch, sample, &self.extent))
            .transpose()?;
        let (mut decode, mut cut) = (Duration::ZERO, Duration::ZERO);
        for ((spec, payload), (a, slot)) in parts.into_iter().zip(self.arrays.iter().zip(slots)) {
            let t0 = Instant::now();
            // Only the window's rows and columns are read (`apply`): where the payload
            // allows, only they are decoded.
            let region = match (&window, options.crop_window_decode) {
                (Some(w), true) => {
                    let n = w.origin.len();
                    let span = |i: usize| w.origin[i]..w.origin[i].saturating_add(w.size[i]);
                    Some((span(n - 2), span(n - 1)))
                }
                _ => None,
            };
            let array = decode_array_window(spec, payload, &options.decode, region)?;
            let t1 = Instant::now();
            slot.fill(|values| match (&self.augment, &window) {
                (Some(aug), Some(w)) => aug.apply(&array, w, a.stats, values),
                _ => whole(&array, values),
            })?;
            decode += t1 - t0;
            cut += t1.elapsed();
        }
        Ok((decode, cut, window))
    }
}

impl TensorPlan {
    /// Each array of sample `sample` as the plan reads it from `input`: its spec (from the
    /// index of the record that holds it) and its payload, checked against the plan (the
    /// stored array's name and shape); a mismatch is a format error.
    fn specs<'a>(
        &self,
        dataset: &'a TensorDataset,
        sample: u64,
        input: &'a SampleInput,
    ) -> Result<Vec<(&'a crate::tensor::ArraySpec, &'a [u8])>> {
        let parts = dataset.manifest().sample_parts(sample)?;
        if parts.len() != self.arrays.len() || input.len() != parts.len() {
            return Err(not_declared(parts.len() as u64));
        }
        parts
            .iter()
            .zip(input)
            .zip(&self.arrays)
            .map(|((part, (payloads, j)), a)| {
                let specs = dataset.arrays_of(part.record)?;
                let spec = specs
                    .get(*j)
                    .map(|(spec, _)| *spec)
                    .filter(|spec| spec.name == a.stored && spec.shape == a.shape)
                    .ok_or_else(|| not_declared(specs.len() as u64))?;
                let payload = payloads
                    .get(*j)
                    .filter(|_| payloads.len() == specs.len())
                    .ok_or_else(|| not_declared(payloads.len() as u64))?;
                Ok((spec, payload.as_slice()))
            })
            .collect()
    }
}

/// The windows the GPU path cuts: the loader's, or for whole arrays (no windows) the whole
/// extent of the last two axes, which gives what the CPU path gives (every value as f32).
#[cfg(feature = "gpu")]
#[derive(Debug, Clone)]
pub(super) struct GpuWindows {
    /// The windows.
    pub augment: TensorAugment,
    /// Their spatial extent.
    pub extent: Vec<u32>,
}

#[cfg(feature = "gpu")]
impl GpuWindows {
    /// The GPU path's windows of a dataset of `manifest` (with `augment` and
    /// its `extent` checked by the caller). Refused: 64-bit arrays (the window kernel reads
    /// 32 bits at most), and whole arrays that do not share their last two axes.
    fn new(
        manifest: &TensorManifest,
        augment: &Option<TensorAugment>,
        extent: &[u32],
    ) -> Result<Self> {
        for d in &manifest.arrays {
            let wide = matches!(
                d.dtype(),
                Some(DType::Float64 | DType::Int64 | DType::UInt64)
            );
            if wide {
                return Err(invalid_option(
                    "tensor dtype",
                    64,
                    "64-bit arrays (float64, int64, uint64) load on the CPU path: leave gpu \
                     unset",
                ));
            }
        }
        if let Some(a) = augment {
            return Ok(GpuWindows {
                augment: a.clone(),
                extent: extent.to_vec(),
            });
        }
        let mut last: Option<&[u32]> = None;
        for d in &manifest.arrays {
            let l = d.shape.len();
            let ok = l >= 2 && last.is_none_or(|x| x == &d.shape[l - 2..]);
            if !ok {
                return Err(invalid_option(
                    "tensor spatial axes",
                    l as u64,
                    "the GPU path takes whole arrays that share their last two axes; set \
                     tensor windows or load on the CPU",
                ));
            }
            last = Some(&d.shape[l - 2..]);
        }
        Ok(GpuWindows {
            augment: TensorAugment {
                spatial: 2,
                ..TensorAugment::default()
            },
            extent: last.unwrap_or_default().to_vec(),
        })
    }
}

#[cfg(feature = "gpu")]
impl TensorPlan {
    /// The GPU path of a batch: samples `ids[k]` with `payloads[k]` (or the error in
    /// `errors[k]`, rejected first by `options.on_error`), each checked against the plan
    /// and given its window (the CPU path's draw), then cut as one batch by
    /// [`super::tensor_gpu::window_batch`] and read back into `out.arrays`, or handed off
    /// by `options.gpu_output` into `out.gpu` (staged, or left on the GPU). A sample the
    /// batch refuses ([`Error::InBatch`]: a payload that does not decode) is rejected by
    /// `on_error` and the batch is redone without it, as the image path does. Returns the
    /// batch time and the read-back time.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_gpu(
        &self,
        gpu: &crate::gpu::GpuDecoder,
        dataset: &TensorDataset,
        options: &LoaderOptions,
        (seed, epoch): (u64, u64),
        ids: &[u32],
        payloads: &[Option<SampleInput>],
        errors: Vec<Option<Error>>,
        out: &mut super::batch::Batch,
    ) -> Result<(Duration, Duration)> {
        use super::batch::reject;
        use super::tensor_gpu::{window_batch, TensorArrayInput, TensorSampleInput};
        let windows = self.gpu.as_ref().expect("planned for the GPU");
        let on_error = options.on_error;
        // Per good sample: its arrays' specs under the sample's names (a windowed dataset's
        // arrays come from several records, and may share a stored name), their payloads and
        // its window; the batch's inputs borrow them.
        let mut prepared = Vec::with_capacity(ids.len());
        for (k, e) in errors.into_iter().enumerate() {
            let sample = ids[k] as u64;
            if let Some(e) = e {
                reject(dataset, on_error, out, sample, e)?;
                continue;
            }
            let p = payloads[k].as_ref().expect("read or cached");
            let checked = (|| -> Result<_> {
                let specs = self.specs(dataset, sample, p)?;
                let w = windows
                    .augment
                    .window(seed, epoch, sample, &windows.extent)?;
                let (named, bytes): (Vec<_>, Vec<_>) = specs
                    .into_iter()
                    .zip(&self.arrays)
                    .map(|((spec, payload), a)| {
                        let spec = crate::tensor::ArraySpec {
                            name: a.name.clone(),
                            ..spec.clone()
                        };
                        (spec, payload)
                    })
                    .unzip();
                Ok((named, bytes, w))
            })();
            match checked {
                Ok(input) => prepared.push((k, input)),
                Err(e) => reject(dataset, on_error, out, sample, e)?,
            }
        }
        let mut live: Vec<(usize, TensorSampleInput<'_>)> = prepared
            .iter()
            .map(|(k, (specs, bytes, w))| {
                let arrays = specs
                    .iter()
                    .zip(bytes)
                    .map(|(spec, &payload)| TensorArrayInput { spec, payload })
                    .collect();
                let input = TensorSampleInput {
                    arrays,
                    window: w.clone(),
                };
                (*k, input)
            })
            .collect();
        let stats = |name: &str| {
            self.arrays
                .iter()
                .find(|a| a.name == name)
                .and_then(|a| a.stats)
        };
        let t0 = Instant::now();
        let batch = loop {
            if live.is_empty() {
                out.arrays = self.zeroed(0);
                return Ok((t0.elapsed(), Duration::ZERO));
            }
            let inputs: Vec<TensorSampleInput<'_>> =
                live.iter().map(|(_, input)| input.clone()).collect();
            match window_batch(gpu, &windows.augment, &inputs, &stats) {
                Ok(b) => break b,
                Err(Error::InBatch { image, error }) if image < live.len() => {
                    let (k, _) = live.remove(image);
                    reject(dataset, on_error, out, ids[k] as u64, *error)?;
                }
                Err(e) => return Err(e),
            }
        };
        let t1 = Instant::now();
        out.gpu_counts = Some(batch.counts);
        if options.gpu_output == super::handoff::GpuOutput::ReadBack {
            let read = batch.read_back()?;
            out.arrays = read
                .into_iter()
                .zip(&batch.arrays)
                .map(|((name, tensor), a)| NamedTensor {
                    name,
                    shape: a.shape.clone(),
                    tensor,
                })
                .collect();
        } else {
            // Staged, or left on the GPU: the consumer takes the arrays from `out.gpu`.
            out.gpu = batch
                .into_hand_off(options.gpu_output)?
                .map(std::sync::Arc::new);
        }
        for (k, input) in live {
            let sample = ids[k] as u64;
            out.samples.push(sample);
            out.classes.push(class_of(dataset, sample)?);
            if self.augment.is_some() {
                out.windows.push(input.window);
            }
        }
        Ok((t1 - t0, t1.elapsed()))
    }
}

/// A record whose arrays are not the manifest's (a shard changed after the dataset opened).
fn not_declared(count: u64) -> Error {
    FormatError::InvalidHeader {
        field: "record arrays",
        offset: 0,
        value: count,
        reason: "the record's arrays are not the manifest's",
    }
    .into()
}

/// `array`'s values as f32, whole, C order.
fn whole(array: &NdArray, out: &mut [f32]) -> Result<()> {
    if out.len() != array.len() {
        return Err(invalid_option(
            "tensor output",
            out.len() as u64,
            "the array's element count",
        ));
    }
    if array.dtype() == DType::Float32 {
        for (o, b) in out.iter_mut().zip(array.bytes().chunks_exact(4)) {
            *o = f32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            *o = value_f32(array, i);
        }
    }
    Ok(())
}

/// Bytes of each record's payloads (what [`read_records`] returns for it, from the index; 0
/// for an entry the index cannot give).
pub(super) fn tensor_record_bytes(dataset: &TensorDataset) -> Vec<u64> {
    (0..dataset.len())
        .map(|i| {
            dataset
                .entry(i)
                .map_or(0, |e| e.arrays.iter().map(|a| a.payload.len).sum())
        })
        .collect()
}

/// The payloads of the records `ids[k]` for `k` in `misses`, each array's CRC-checked, not
/// decoded: per shard, a record's arrays with one positional read and records at most `gap`
/// bytes apart together ([`crate::shard::TensorShardReader::read_records_coalesced`], reads
/// below [`MAX_COALESCED_READ`]), shards in parallel (on the calling thread's rayon pool).
/// Returns `(k, payloads)` per miss and the number of reads.
pub(super) fn read_records(
    dataset: &TensorDataset,
    ids: &[u32],
    misses: &[usize],
    gap: u64,
) -> (Vec<Fetched>, usize) {
    super::read::read_by_shard(dataset, ids, misses, |shard, records| {
        shard.read_records_coalesced(records, gap, MAX_COALESCED_READ)
    })
}
